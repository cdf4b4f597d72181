"""What the profiler records: one ``OpEvent`` per op run, eager or inside a graph."""
import threading
import time

from ..errors import source_text


class OpEvent:
    """One op run: op, node name, device, lane (thread or stream), start/end, bytes, step;
    with ``lk.profile(record_shapes=True)`` its inputs' and outputs' dtypes and shapes
    (``.shape``), with ``with_stack=True`` the user's line that ran it (``.line``).

    Both are kept raw while recording (shapes and dtypes as the arrays give them, the line as
    ``(filename, line)``) and written out as text when read, so recording stays cheap."""

    __slots__ = ("op", "name", "device", "lane", "_start", "_end", "bytes_in", "bytes_out",
                 "step", "source", "gpu_span", "shapes", "where")

    def __init__(self, op, name, device, lane, start_ns, end_ns, bytes_in, bytes_out, step,
                 source, gpu_span=None, shapes=None, where=None):
        self.op = op
        self.name = name
        self.device = device
        self.lane = lane
        self._start = start_ns        # host launch times of a GPU op until its span is read
        self._end = end_ns
        self.bytes_in = bytes_in
        self.bytes_out = bytes_out
        self.step = step
        self.source = source          # "eager" or the graph's name
        self.gpu_span = gpu_span      # a GPU op's CUDA events (gpu_time.GpuSpan) until read
        self.shapes = shapes          # ((shape, dtype) of inputs, of outputs), or its text
        self.where = where            # (filename, line) of the user's code, or its text

    @property
    def shape(self):
        """``'float32[8, 4], float32[4] -> float32[8, 4]'``: the dtypes and shapes of the op's
        tensor inputs and outputs, or None when they were not recorded."""
        if self.shapes is not None and not isinstance(self.shapes, str):
            self.shapes = shapes_text(*self.shapes)
        return self.shapes

    @property
    def line(self):
        """``'train.py:12: y = model(x)'`` (or ``'Cell In[5], line 3: ...'``): the user's
        line that ran the op, or None when it was not recorded."""
        if self.where is not None and not isinstance(self.where, str):
            self.where = source_text(self.where)
        return self.where

    def resolve(self):
        """Put a GPU op at the times it ran on its stream (waits for it); no-op otherwise."""
        if self.gpu_span is not None:
            self._start, self._end = self.gpu_span.times()
            self.gpu_span = None

    @property
    def start_ns(self):
        """When the op started (ns, host clock): on a GPU, when it started on its stream."""
        if self.gpu_span is not None:
            self.resolve()
        return self._start

    @property
    def end_ns(self):
        if self.gpu_span is not None:
            self.resolve()
        return self._end

    @property
    def duration_ns(self):
        return self.end_ns - self.start_ns

    def as_dict(self):
        return {"op": self.op, "name": self.name, "device": self.device, "lane": self.lane,
                "start_ns": self.start_ns, "duration_ns": self.duration_ns,
                "bytes_in": self.bytes_in, "bytes_out": self.bytes_out, "step": self.step,
                "source": self.source, "shape": self.shape, "line": self.line}

    def __repr__(self):
        return (f"<OpEvent {self.op} {self.name!r} on {self.device} ({self.lane}) step "
                f"{self.step}: {self.duration_ns / 1e3:.1f} us>")


def shapes_text(inputs, outputs):
    """``'float32[8, 4], float32[4] -> float32[8, 4]'`` from ``(shape, dtype)`` pairs (any
    dtype with a ``.name``: NumPy's or labkit's)."""
    def one(pairs):
        return ", ".join(f"{dtype.name}{list(shape)}" for shape, dtype in pairs)
    return f"{one(inputs)} -> {one(outputs)}"


def now_ns():
    return time.perf_counter_ns()


def lane_name():
    t = threading.current_thread()
    return "main" if t is threading.main_thread() else t.name
