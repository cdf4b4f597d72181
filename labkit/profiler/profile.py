"""``lk.profile()``: record every op run (eager or in a graph) with its device, lane and timing.

>>> import labkit as lk
>>> with lk.profile() as prof:
...     for _ in range(2):
...         y = (lk.ones(4, 4) @ lk.ones(4, 4)).sum()
...         prof.step()
>>> [e.op for e in prof.steps[0]]
['matmul', 'sum']
"""
import json
import os
import tempfile
import threading

from .. import display
from .events import OpEvent, lane_name, now_ns
from .gpu_time import GpuClocks

_active = []                 # the profiles currently recording (innermost last)
_activation_hooks = []       # (start, stop) callables registered by the layers that emit events
_lock = threading.Lock()


def register_hooks(start, stop):
    """Let a higher layer start/stop emitting when a profile opens/closes (called at import)."""
    _activation_hooks.append((start, stop))


def active_profile():
    """The innermost recording profile, or None."""
    return _active[-1] if _active else None


class Profile:
    """The record of a ``with lk.profile() as prof:`` block.

    ``prof.events``: every OpEvent; ``prof.step()`` marks a step boundary (``lk.function`` calls
    mark one each); ``prof.steps``: the events of each step; ``prof.summary()``: top ops by total
    time per device; ``prof.export_chrome_trace(path)``: a file Perfetto and chrome://tracing open.
    ``record_shapes`` / ``with_stack``: whether events carry their shapes / the user's line.
    ``prof.flows``: ``(from event, to event)`` pairs for messages between lanes that are not
    send/recv ops (a parameter-server worker's push and the server's apply that used it); a
    timeline draws them as arrows, as it does each send and its recv.

    A GPU op's event is at the time it ran on its device, on a lane named for its CUDA stream
    (``'stream 0'`` is the default stream), not at the time the host launched it: see
    ``labkit.profiler.gpu_time``. Its times are read from the GPU when the block ends.
    """

    def __init__(self, record_shapes=False, with_stack=False):
        self.record_shapes = bool(record_shapes)
        self.with_stack = bool(with_stack)
        self.events = []
        self.flows = []
        self.step_number = 0
        self.step_marks = []      # (step, time_ns) at each boundary
        self.start_ns = None
        self.end_ns = None
        self._hook_state = []
        self._marked_at = 0       # len(events) at the last step mark
        self.gpu = GpuClocks()    # anchors of GPU times to the host clock, stream lanes

    # ---- recording --------------------------------------------------------------------------
    def __enter__(self):
        self.start_ns = now_ns()
        with _lock:
            _active.append(self)
        self._hook_state = [start() for start, _ in _activation_hooks]
        return self

    def __exit__(self, *exc):
        for (_, stop), state in zip(reversed(_activation_hooks), reversed(self._hook_state)):
            stop(state)
        with _lock:
            _active.remove(self)
        self.end_ns = now_ns()
        for e in self.events:     # read GPU times now, while the CUDA events are at hand
            if e.gpu_span is not None:
                e.resolve()
        return False

    def record(self, op, name, device, start_ns, end_ns, bytes_in=0, bytes_out=0,
               source="eager", lane=None, gpu_span=None, shapes=None, where=None):
        self.events.append(OpEvent(op, name, device, lane or lane_name(), start_ns, end_ns,
                                   bytes_in, bytes_out, self.step_number, source, gpu_span,
                                   shapes, where))

    def step(self):
        """Mark the end of a step: later events belong to the next one.

        Each call of an ``lk.function`` marks one; a mark with no event since the previous
        one is dropped, so calling ``prof.step()`` after such a call makes no empty step."""
        if len(self.events) == self._marked_at:
            return
        self._marked_at = len(self.events)
        self.step_marks.append((self.step_number, now_ns()))
        self.step_number += 1

    # ---- reading ------------------------------------------------------------------------------
    @property
    def steps(self):
        """A list with the events of each step (the last, unfinished step included if any)."""
        last = max((e.step for e in self.events), default=0)   # events may be stamped later
        out = [[] for _ in range(max(self.step_number, last) + 1)]
        for e in self.events:
            out[e.step].append(e)
        if not out[-1]:
            out.pop()
        return out

    def devices(self):
        return sorted({e.device for e in self.events})

    def summary(self, top=10):
        """A text table: per device, the ops with the most total time (count, total, mean)."""
        rows = {}
        for e in self.events:
            r = rows.setdefault((e.device, e.op), [0, 0])
            r[0] += 1
            r[1] += e.duration_ns
        lines = []
        for device in self.devices():
            mine = sorted(((op, c, t) for (d, op), (c, t) in rows.items() if d == device),
                          key=lambda r: -r[2])
            total = sum(t for _, _, t in mine) or 1
            lines.append(f"{device}: {len(mine)} op kinds, {total / 1e6:.3f} ms in ops")
            lines.append(f"  {'op':<20}{'calls':>8}{'total ms':>12}{'mean us':>10}{'share':>8}")
            for op, c, t in mine[:top]:
                lines.append(f"  {op:<20}{c:>8}{t / 1e6:>12.3f}{t / c / 1e3:>10.1f}"
                             f"{100 * t / total:>7.1f}%")
        return "\n".join(lines)

    def __repr__(self):
        where = ", ".join(self.devices()) or "no device"
        return f"<Profile: {len(self.events)} op events on {where}, {len(self.steps)} step(s)>"

    def _repr_mimebundle_(self, include=None, exclude=None):
        """Notebook display: ``lk.viz.timeline(self)``, the timeline explorer in a live
        notebook and its SVG elsewhere (``labkit.display``: this layer does not import viz)."""
        picture = display.drawing("profile", self)
        return None if picture is None else picture._repr_mimebundle_(include, exclude)

    def to_chrome_trace(self):
        """The trace as a dict in the Trace Event Format (one process track per device)."""
        from .chrome import chrome_trace
        return chrome_trace(self)

    def export_chrome_trace(self, path):
        """Write the trace as JSON for Perfetto / chrome://tracing (atomically)."""
        data = json.dumps(self.to_chrome_trace())
        folder = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".trace-", dir=folder)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return path


def profile(record_shapes=False, with_stack=False):
    """Start recording every op run in this block (eager ops and graph nodes).

    As in PyTorch's profiler, ``record_shapes=True`` also records each op's input and output
    dtypes and shapes (``event.shape``), and ``with_stack=True`` the line of your code that ran
    it (``event.line``); the timeline explorer shows both when you click a bar. Each costs a
    little time per eager op (``benchmarks/workloads/w9_profiler_overhead.py`` measures it),
    so both are off by default (a captured graph's ops know theirs from tracing: for them
    neither costs anything at run time).

    >>> import labkit as lk
    >>> with lk.profile(record_shapes=True) as prof:
    ...     y = lk.ones(8, 4) + lk.ones(4)
    >>> prof.events[-1].shape
    'float32[8, 4], float32[4] -> float32[8, 4]'
    """
    return Profile(record_shapes, with_stack)
