"""Executing a ready graph: a ``Plan`` compiles the nodes that some fetches need into flat code
and runs it. Plans are made by ``labkit.graph.compile``, which places, optimises and partitions
a graph first; nothing here changes a graph.

A plan is generated as one straight-line Python function (``v3 = k3(v1, v2)`` ...) with every
kernel, literal and attribute bound in advance: at run time there is no per-node dictionary
lookup, no shape inference and no dispatch, and each intermediate is released (``del``) right
after its last use. Plans are cached per (fetches, feeds) and may run from several threads at
once: all state lives in the function's locals.

Ops whose declaration gives a form that writes into a given array (``Op.into``: the elementwise
ufuncs, ``relu``, ``matmul``, fused kernels; ``node.direct_call``) are bound to it
directly, skipping their kernel wrapper. When the
graph carries a buffer plan for exactly these fetches (``graph.buffer_plan``, made by the
buffer-reuse pass), results are written with ``out=`` into the buffers of a *workspace*: one set
of arrays per concurrently running call, taken from the plan's pool at the start of a run and
given back at its end, so steady-state runs allocate only their outputs. A value fetched twice,
and a fetched constant, is handed out as a copy, so that no two results share memory.

A graph that spans devices arrives placed and partitioned (a Send/Recv pair on each edge
between devices); each device's nodes become a straight-line function of their own, run on
that device's worker thread, and the parts pass values through Send/Recv pairs that meet in the
plan's rendezvous, keyed by the run's step. A single-device plan keeps the one straight-line
function, run by the calling thread.

Under ``lk.profile()`` a plan runs an instrumented copy of its code (compiled on first use):
a timestamp after each op node (and, on a GPU, a CUDA event on the device's stream), turned
into one profiler event per op after the run. An op's time runs from the stamp before it to its
own, so the events of a run add up to the run. With no profile open, the only cost is one test
of an empty list per call.

>>> import labkit as lk
>>> lk.devices.configure(cpus=2)
>>> @lk.function
... def f(x):
...     with lk.device("cpu:1"):
...         y = x.exp()
...     return (y * x).sum()
>>> round(f(lk.ones(3)).item(), 4)
8.1548
>>> f.traces[0].plan.stats()["devices"], f.traces[0].plan.stats()["send_recv"]
(['cpu:0', 'cpu:1'], 2)
>>> lk.devices.configure(cpus=1)
"""
import functools
import itertools
import weakref

import numpy as np

from ..devices import get_device
from ..devices.memory import register_cached_bytes
from ..devices.workers import current_device, run_parts
from ..errors import DTypeError, GraphError, describe
from ..profiler import active_profile
from ..profiler.events import OpEvent, lane_name, now_ns, shapes_text
from ..profiler.gpu_time import GpuSpan
from ..profiler.profile import _active as _profiles
from ..tensor.tensor import Tensor
from .node import CAPTURE, CONSTANT, PLACEHOLDER, Node, direct_call
from .rendezvous import Rendezvous, recv, recv_value, send, send_value


def needed_nodes(graph, fetch_nodes, fed, include_stateful):
    """The nodes that must run to compute ``fetch_nodes`` given the ``fed`` placeholders."""
    need = set()
    stack = list(fetch_nodes)
    if include_stateful:
        stack += [n for n in graph.nodes if n.stateful]
    while stack:
        n = stack.pop()
        if n.index in need:
            continue
        need.add(n.index)
        if n.index in fed:
            continue
        stack.extend(a for a in n.inputs if isinstance(a, Node) and a.index not in need)
    return [n for n in graph.nodes if n.index in need]


class Plan:
    """A compiled schedule for one (fetches, feeds) pair of a ready graph (made by
    ``labkit.graph.compile``: placed, optimised and partitioned as it needs).

    A plan whose nodes are all on one device is one straight-line function run by the calling
    thread. In a plan that spans devices (a partitioned graph: a Send/Recv pair on each edge
    between devices) each device's nodes become a straight-line function of their own, run on
    that device's worker thread (``labkit.devices.workers``), and the parts meet in a
    rendezvous keyed by the run's step.

    While an ``lk.profile()`` is open, a run uses an instrumented variant of the same code
    (compiled on first use) that records one event per op node; otherwise nothing is added.
    """

    def __init__(self, graph, fetch_nodes, feed_nodes, include_stateful=False):
        self.graph = graph
        self.fetch_nodes = list(fetch_nodes)
        self.feed_nodes = list(feed_nodes)
        fed = {n.index for n in self.feed_nodes}
        self.nodes = needed_nodes(graph, self.fetch_nodes, fed, include_stateful)
        for n in self.nodes:
            if n.kind == PLACEHOLDER and n.index not in fed:
                raise GraphError(
                    f"placeholder '{n.name}' ({n.dtype.name}{list(n.shape)}) must be fed: the "
                    f"fetches depend on it. Pass it in feeds: g.run(fetches, {{{n.name}: value}})")
        bp = getattr(graph, "buffer_plan", None)
        self.buffer_plan = bp if bp is not None and bp.matches(
            n.index for n in self.fetch_nodes) else None
        self._pool = []        # workspaces (lists of buffers) not in use by a running call
        self._made = 0
        self._fed = fed
        self.devices = []
        for n in self.nodes:
            if n.device is not None and all(d.name != n.device.name for d in self.devices):
                self.devices.append(n.device)
        self._profiled = None
        if len(self.devices) <= 1:
            self.parts = None
            self.fn, self.source, _ = self._compile(fed)
        else:
            self._rendezvous = Rendezvous()
            self._steps = itertools.count()
            self._serial = None
            self.parts = [self._compile_part(d, fed, profile=False) for d in self.devices]
            self.source = "\n".join(p.source for p in self.parts)
            self.fn = self._run_parts
        _live_plans.add(self)

    def _new_workspace(self):
        self._made += 1
        out = []
        for shape, dtype, device in self.buffer_plan.buffers:
            with device.activate():
                out.append(device.xp.empty(shape, dtype.np))
        return out

    def stats(self):
        """{'ops': op nodes run, 'into_buffers': how many write into reused buffers,
        'buffers': buffers per workspace, 'workspace_bytes', 'workspaces': made so far,
        'devices': the devices it runs on, 'send_recv': Send/Recv pairs}."""
        bp = self.buffer_plan
        ops = sum(1 for n in self.nodes if n.kind == "op")
        into = sum(1 for n in self.nodes if bp is not None and n.index in bp.slot_of)
        return {"ops": ops, "into_buffers": into,
                "buffers": len(bp.buffers) if bp else 0,
                "workspace_bytes": bp.nbytes() if bp else 0,
                "workspaces": self._made,
                "devices": [d.name for d in self.devices],
                "send_recv": sum(1 for n in self.nodes if n.kind == "op" and n.op is send)}

    def workspace_bytes(self):
        """{device name: bytes} held by the workspaces this plan has made (in use or pooled)."""
        out = {}
        if self.buffer_plan is None:
            return out
        for shape, dtype, device in self.buffer_plan.buffers:
            size = dtype.np.itemsize
            for s in shape:
                size *= s
            out[device.name] = out.get(device.name, 0) + size * self._made
        return out

    # ---- code generation ------------------------------------------------------------------
    def _slots(self):
        bp = self.buffer_plan
        if bp is None or not bp.buffers:
            return {}
        run_nodes = {n.index for n in self.nodes}
        return {i: s for i, s in bp.slot_of.items() if i in run_nodes}

    def _compile(self, fed, profile=False):
        """The single-device plan: one straight-line function (``profile``: instrumented), run
        with its device current when that is a GPU."""
        ns = {"_np_asarray": np.asarray}
        lines = []
        slot_of = self._slots()
        if slot_of:
            ns["_pool"] = self._pool
            ns["_new_ws"] = self._new_workspace
            names = ", ".join(f"b{k}" for k in range(len(self.buffer_plan.buffers)))
            lines += ["try:", "    _ws = _pool.pop()", "except IndexError:",
                      "    _ws = _new_ws()", f"{names}, = _ws"]
        feed_pos = {n.index: i for i, n in enumerate(self.feed_nodes)}
        args = [f"f{i}" for i in range(len(self.feed_nodes))]
        gen = _CodeGen(ns, lines, slot_of, profile, self.devices[0] if self.devices else None)
        gen.prologue()
        gen.body(self.nodes, self.fetch_nodes, {i: f"f{p}" for i, p in feed_pos.items()})
        if "_pool" in ns:
            lines.append("_pool.append(_ws)")
        lines.append(f"return {_outs(self.fetch_nodes)}")
        if profile:
            args = ["_T"] + args
        src = f"def plan({', '.join(args)}):\n" + "\n".join("    " + ln for ln in lines) + "\n"
        exec(compile(src, f"<labkit plan of graph {self.graph.name!r}>", "exec"), ns)
        fn = ns["plan"]
        if self.devices and self.devices[0].type == "gpu":
            fn = _on_device(self.devices[0], fn)
        return fn, src, gen.timed

    def _compile_part(self, device, fed, profile, serial=False):
        """The nodes on ``device`` as one straight-line function ``part(_step, _f, _ws)``
        (``serial``: every node of the plan, in order, for a run nested in a device worker)."""
        ns = {"_np_asarray": np.asarray, "_rv": self._rendezvous}
        lines = []
        mine = self.nodes if serial else [
            n for n in self.nodes if n.device is not None and n.device.name == device.name]
        slot_of = {i: s for i, s in self._slots().items()
                   if any(n.index == i for n in mine)}
        for s in sorted(set(slot_of.values())):
            lines.append(f"b{s} = _ws[{s}]")
        feed_pos = {n.index: i for i, n in enumerate(self.feed_nodes)}
        fetches = self.fetch_nodes if serial else [
            n for n in self.fetch_nodes if n.device.name == device.name]
        gen = _CodeGen(ns, lines, slot_of, profile, device)
        gen.prologue()
        gen.body(mine, fetches, {i: f"_f[{p}]" for i, p in feed_pos.items()})
        if device.type == "gpu" and not serial:    # the caller may read the results now
            ns["_sync"] = device.xp.cuda.get_current_stream
            lines.append("_sync().synchronize()")
        outs = ", ".join(f"v{n.index}" for n in fetches)
        lines.append(f"return ({outs}{',' if len(fetches) == 1 else ''})")
        args = "_step, _f, _ws" + (", _T" if profile else "")
        src = f"def part({args}):\n" + "\n".join("    " + ln for ln in lines) + "\n"
        exec(compile(src, f"<labkit plan of graph {self.graph.name!r} on {device.name}>",
                     "exec"), ns)
        return _Part(device, ns["part"], src, fetches, gen.timed)

    # ---- running ------------------------------------------------------------------------------
    def __call__(self, *feed_arrays):
        if _profiles:
            return self._run_profiled(feed_arrays)
        return self.fn(*feed_arrays)

    def _run_parts(self, *feeds):
        return self._execute(self.parts, feeds, None)

    def _execute(self, parts, feeds, stamps):
        step = next(self._steps)
        rv = self._rendezvous
        if current_device() is not None:
            # run from a device worker (a control-flow node's sub-graph inside a multi-device
            # plan): the other workers may be waiting for this one, so run every part here, in
            # the plan's order (each send comes before its recv)
            if self._serial is None:
                self._serial = self._compile_part(current_device(), self._fed, False, True)
            parts, stamps = [self._serial], None
        ws = None
        if self.buffer_plan is not None and self.buffer_plan.buffers:
            try:
                ws = self._pool.pop()
            except IndexError:
                ws = self._new_workspace()
        extra = ((),) * len(parts) if stamps is None else [(t,) for t in stamps]
        try:
            if stamps is None and len(parts) == 1:
                results = [parts[0].fn(step, feeds, ws)]
            else:
                results = run_parts([(p.device, p.fn, (step, feeds, ws) + x)
                                     for p, x in zip(parts, extra)],
                                    on_error=lambda exc: rv.abort(step, exc))
        except BaseException:
            rv.finish(step)
            raise
        if ws is not None:
            self._pool.append(ws)
        values = {}
        for p, res in zip(parts, results):
            for n, v in zip(p.fetches, res):
                values[n.index] = v
        out, handed = [], set()
        for n in self.fetch_nodes:     # results never share memory with each other
            v = values[n.index]
            if n.index in handed or n.kind == CONSTANT:
                v = v.copy()
            handed.add(n.index)
            out.append(v)
        return tuple(out)

    def _run_profiled(self, feed_arrays):
        prof = active_profile()
        if prof is None:             # the profile closed meanwhile (another thread's)
            return self.fn(*feed_arrays)
        if self._profiled is None:
            with self.graph._lock:
                if self._profiled is None:
                    if self.parts is None:
                        fn, src, timed = self._compile(self._fed, profile=True)
                        self._profiled = [_Part(self.devices[0] if self.devices else None, fn,
                                                src, self.fetch_nodes, timed)]
                    else:
                        self._profiled = [self._compile_part(d, self._fed, profile=True)
                                          for d in self.devices]
        if self.parts is None:
            part = self._profiled[0]
            stamps = _Stamps(part.device, prof)
            out = part.fn(stamps, *feed_arrays)
            _record(prof, part, stamps, self.graph.name)
            return out
        stamps = [_Stamps(p.device, prof) for p in self._profiled]
        out = self._execute(self._profiled, feed_arrays, stamps)
        for part, st in zip(self._profiled, stamps):
            _record(prof, part, st, self.graph.name)
        return out


_live_plans = weakref.WeakSet()    # for memory_stats: the executor's workspaces per device


def workspace_bytes(device_name):
    """Bytes of executor workspaces (reused buffers) on ``device_name``, over every live plan."""
    total = 0
    for plan in list(_live_plans):
        total += plan.workspace_bytes().get(device_name, 0)
    return total


register_cached_bytes(workspace_bytes)     # lk.devices.memory_stats reports them


class _Part:
    """One device's compiled share of a plan."""

    __slots__ = ("device", "fn", "source", "fetches", "timed")

    def __init__(self, device, fn, source, fetches, timed):
        self.device, self.fn, self.source, self.fetches = device, fn, source, fetches
        self.timed = timed       # [(op, node name, bytes in, bytes out, shapes text, source)]

    def __repr__(self):
        return f"<plan part on {self.device}: {len(self.timed)} ops>"


def _on_device(device, fn):
    """``fn`` run with ``device`` as the current CUDA device (its kernels launch there)."""
    def run(*args):
        with device.activate():
            return fn(*args)
    return run


class _Stamps(list):
    """Timestamps (ns) of one profiled part run: before its first op and after each op; on a
    GPU also CUDA events recorded on the part's stream at the same points, the stream, and the
    profile's anchor that puts the events on the host clock (``labkit.profiler.gpu_time``)."""

    __slots__ = ("events", "lane", "device", "stream", "anchor")

    def __init__(self, device, prof):
        super().__init__()
        self.device = device
        self.lane = self.stream = self.anchor = None
        self.events = None
        if device is not None and device.type == "gpu":
            self.events = []
            self.anchor = prof.gpu.anchor(device, prof.step_number)


def _outs(fetch_nodes):
    outs, handed = [], set()
    for n in fetch_nodes:   # results never share memory with each other
        copy = n.index in handed or n.kind == CONSTANT
        handed.add(n.index)
        outs.append(f"v{n.index}.copy()" if copy else f"v{n.index}")
    return f"({', '.join(outs)}{',' if len(fetch_nodes) == 1 else ''})"


def _nbytes(node):
    if node.shape is None or node.dtype is None or any(s is None for s in node.shape):
        return 0
    size = node.dtype.np.itemsize
    for s in node.shape:
        size *= s
    return size


class _CodeGen:
    """Emits the straight-line code of a list of nodes (one plan, or one device's part)."""

    def __init__(self, ns, lines, slot_of, profile, device):
        self.ns, self.lines, self.slot_of = ns, lines, slot_of
        self.profile = profile
        self.gpu = profile and device is not None and device.type == "gpu"
        self.timed = []
        if profile:
            ns["_now"] = now_ns
            ns["_lane"] = lane_name
            if self.gpu:
                ns["_Event"] = device.xp.cuda.Event
                ns["_stream"] = device.xp.cuda.get_current_stream

    def _stamp(self):
        self.lines.append("_a(_now())")
        if self.gpu:
            self.lines += ["_e = _Event()", "_e.record()", "_ge(_e)"]

    def prologue(self):
        if self.profile:
            self.lines += ["_T.lane = _lane()", "_a = _T.append"]
            if self.gpu:
                self.lines += ["_ge = _T.events.append", "_T.stream = _stream()"]
            self._stamp()

    def body(self, nodes, fetch_nodes, feed_expr):
        ns, lines, slot_of = self.ns, self.lines, self.slot_of
        last_use = {}
        for n in nodes:
            if n.kind == "op" and n.op is recv or n.index in feed_expr:
                continue             # it reads the rendezvous (or is given), not its inputs
            for a in n.inputs:
                if isinstance(a, Node):
                    last_use[a.index] = n.index
        keep = {n.index for n in fetch_nodes}
        dels = {}
        for idx, last in last_use.items():
            if idx not in keep:
                dels.setdefault(last, []).append(idx)
        for n in nodes:
            v = f"v{n.index}"
            if n.index in feed_expr:            # a placeholder, or a value given (scan_grad)
                lines.append(f"{v} = {feed_expr[n.index]}")
            elif n.kind == CAPTURE:
                ns[f"c{n.index}"] = n.value
                lines.append(f"{v} = c{n.index}._data")
            elif n.kind == CONSTANT:
                ns[f"c{n.index}"] = n.value
                lines.append(f"{v} = c{n.index}")
            elif n.op is send:
                a = n.attrs
                ns[f"k{n.index}"] = functools.partial(send_value, self.ns["_rv"], a["name"])
                ns[f"s{n.index}"] = (get_device(a["src"]), a["copy"])
                lines.append(f"k{n.index}(_step, v{n.inputs[0].index}, *s{n.index})")
                self._timed(n)
            elif n.op is recv:
                a = n.attrs
                ns[f"k{n.index}"] = functools.partial(recv_value, self.ns["_rv"], a["name"])
                ns[f"s{n.index}"] = (get_device(a["src"]), get_device(a["dst"]))
                lines.append(f"{v} = k{n.index}(_step, *s{n.index})")
                self._timed(n)
            else:
                call_args = []
                for j, a in enumerate(n.inputs):
                    if isinstance(a, Node):
                        call_args.append(f"v{a.index}")
                    else:
                        ns[f"l{n.index}_{j}"] = a
                        call_args.append(f"l{n.index}_{j}")
                direct = direct_call(n)
                if direct is not None:
                    ns[f"k{n.index}"] = direct
                else:
                    ns[f"k{n.index}"] = functools.partial(n.op.kernel, n.device.xp, **n.attrs)
                if n.index in slot_of:
                    call_args.append(f"out=b{slot_of[n.index]}")
                lines.append(f"{v} = k{n.index}({', '.join(call_args)})")
                if n.shape == ():   # NumPy gives 0-d results back as scalars
                    xp_name = f"xp{n.index}"
                    ns[xp_name] = n.device.xp.asarray
                    lines.append(f"{v} = {xp_name}({v})")
                self._timed(n)
            for d in dels.get(n.index, ()):
                lines.append(f"del v{d}")

    def _timed(self, n):
        if self.profile:
            self._stamp()
            inputs = [a for a in n.inputs if isinstance(a, Node)]
            self.timed.append((n.op.name, n.name, sum(_nbytes(a) for a in inputs), _nbytes(n),
                               _shapes(inputs, n), n.source))


def _shapes(inputs, node):
    """The text of an op node's input and output dtypes and shapes, for its profiler events
    (None where a shape or dtype is unknown, as for a control-flow node's tuple)."""
    typed = [(a.shape, a.dtype) for a in inputs + [node]]
    if any(shape is None or dtype is None for shape, dtype in typed):
        return None
    return shapes_text(typed[:-1], typed[-1:])


def _record(prof, part, stamps, source):
    """One OpEvent per op of a profiled part run (an op runs from the stamp before to its own);
    with the op's shapes and source line when the profile records them. On a GPU the stamps
    are CUDA events on the part's stream, and the lane is that stream."""
    if prof is None or not stamps:
        return
    device = part.device.name if part.device is not None else "cpu:0"
    lane = stamps.lane or lane_name()
    gpu = stamps.events
    if gpu:
        lane = prof.gpu.lane(part.device, stamps.stream)
    step = prof.step_number
    events = prof.events
    shapes, stack = prof.record_shapes, prof.with_stack
    for i, (op_name, name, b_in, b_out, shape, where) in enumerate(part.timed):
        ge = GpuSpan(stamps.anchor, gpu[i], gpu[i + 1]) if gpu else None
        events.append(OpEvent(op_name, name, device, lane, stamps[i], stamps[i + 1], b_in, b_out,
                              step, source, ge, shape if shapes else None,
                              where if stack else None))


def feed_array(node, value):
    """``value`` as an array for placeholder ``node``; clear errors for wrong shape or dtype."""
    if isinstance(value, Tensor):
        if value._data is None:
            raise GraphError(f"feed for '{node.name}': {value!r} is symbolic; feed a value")
        if value.device is not node.device:
            value = value.to(node.device)
        array = value._data
        if array.dtype != node.dtype.np:
            raise DTypeError(f"feed for placeholder '{node.name}': expected {node.dtype.name}, got "
                             f"{describe(value)}; convert with .to(dtype=lk.{node.dtype.name})")
    else:
        host = np.asarray(value)
        if host.dtype != node.dtype.np:
            if isinstance(value, np.ndarray) or (host.dtype.kind == "f" and
                                                 node.dtype.np.kind in "iub"):
                raise DTypeError(f"feed for placeholder '{node.name}': expected "
                                 f"{node.dtype.name}, got an array of {host.dtype}; convert it "
                                 f"first (e.g. .astype(np.{node.dtype.np}))")
            host = host.astype(node.dtype.np)
        array = host if node.device.type == "cpu" else node.device.xp.asarray(host)
    if tuple(array.shape) != node.shape:
        raise GraphError(f"feed for placeholder '{node.name}': expected shape {node.shape}, got "
                         f"{tuple(array.shape)}")
    return array
