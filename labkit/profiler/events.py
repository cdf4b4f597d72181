"""What the profiler records: one ``OpEvent`` per op run, eager or inside a graph."""
import threading
import time


class OpEvent:
    """One op run: op, node name, device, lane (thread or stream), start/end, bytes, step."""

    __slots__ = ("op", "name", "device", "lane", "start_ns", "end_ns", "bytes_in", "bytes_out",
                 "step", "source", "gpu_events")

    def __init__(self, op, name, device, lane, start_ns, end_ns, bytes_in, bytes_out, step,
                 source, gpu_events=None):
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
                "source": self.source}

    def __repr__(self):
        return (f"<OpEvent {self.op} {self.name!r} on {self.device} ({self.lane}) step "
                f"{self.step}: {self.duration_ns / 1e3:.1f} us>")


def now_ns():
    return time.perf_counter_ns()


def lane_name():
    t = threading.current_thread()
    return "main" if t is threading.main_thread() else t.name
