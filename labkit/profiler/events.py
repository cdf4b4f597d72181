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

    __slots__ = ("op", "name", "device", "lane", "start_ns", "end_ns", "bytes_in", "bytes_out",
                 "step", "source", "gpu_events", "shapes", "where")

    def __init__(self, op, name, device, lane, start_ns, end_ns, bytes_in, bytes_out, step,
                 source, gpu_events=None, shapes=None, where=None):
        self.op = op
        self.name = name
        self.device = device
        self.lane = lane
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.bytes_in = bytes_in
        self.bytes_out = bytes_out
        self.step = step
        self.source = source          # "eager" or the graph's name
        self.gpu_events = gpu_events  # (start, end) CUDA events; resolved on first read
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

    @property
    def duration_ns(self):
        if self.gpu_events is not None:
            start, end = self.gpu_events
            end.synchronize()
            from ..devices import cupy_module
            ms = cupy_module().cuda.get_elapsed_time(start, end)
            self.end_ns = self.start_ns + int(ms * 1e6)
            self.gpu_events = None
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
