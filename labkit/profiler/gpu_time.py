"""GPU op times on the host clock, from CUDA events on the op's own device and stream.

A GPU op runs later than the host launches it, and on its own stream: the host's clock says
when it was *launched*, only the GPU knows when it *ran*. So a GPU op is timed by two CUDA events
recorded on its stream around its launch, and its start and end are placed on the host clock
through an *anchor*: once per step and device the profiler records one more event, on a stream
of its own that has nothing else to do (so the event runs at once, without waiting for the
user's work or holding it up), waits for it and notes the host time. An op's start is then the
anchor's host time plus the GPU time from the anchor's event to the op's start event (CUDA
measures time between two events of one device, on any streams, with about 0.5 µs resolution).
The anchor's host time is the middle of its record-and-wait (some microseconds on a real GPU),
which bounds how far the GPU lanes may sit from the host lanes; within a device the ops keep
their true order and gaps.

Events are read when the profile closes (or when an event's time is first asked for earlier):
reading waits for the GPU, which recording never does.
"""
import threading

from .events import now_ns


class Anchor:
    """A CUDA event of one device and the host time (ns) it ran at."""

    __slots__ = ("event", "host_ns", "cuda")

    def __init__(self, event, host_ns, cuda):
        self.event, self.host_ns, self.cuda = event, host_ns, cuda

    def time_of(self, event):
        """Host-clock time (ns) at which ``event`` (recorded after this anchor, on the same
        device) ran on the GPU."""
        event.synchronize()
        ms = self.cuda.get_elapsed_time(self.event, event)
        return self.host_ns + int(round(ms * 1e6))


def make_anchor(device, stream):
    """Record an event on ``stream`` (idle, of ``device``), wait for it and note when it ran."""
    cuda = device.xp.cuda
    with device.activate():
        event = cuda.Event()
        before = now_ns()
        event.record(stream)
        event.synchronize()
        after = now_ns()
    return Anchor(event, (before + after) // 2, cuda)


class GpuSpan:
    """The two CUDA events around one GPU op and the anchor that puts them on the host clock."""

    __slots__ = ("anchor", "start", "end")

    def __init__(self, anchor, start, end):
        self.anchor, self.start, self.end = anchor, start, end

    def times(self):
        """(start_ns, end_ns) on the host clock; waits for the op to finish on the GPU."""
        return self.anchor.time_of(self.start), self.anchor.time_of(self.end)


class GpuClocks:
    """A profile's anchors (one per device per step) and its stream lanes (``'stream 0'`` is
    a device's default stream; other streams are numbered per device in the order seen)."""

    def __init__(self):
        self._anchors = {}       # device name -> (step, Anchor)
        self._clock_streams = {}  # device name -> the stream anchors are recorded on
        self._lanes = {}         # (device name, stream handle) -> lane name
        self._lock = threading.Lock()

    def __getstate__(self):        # a profile sent between processes keeps its lane names
        return {"_lanes": dict(self._lanes)}

    def __setstate__(self, state):
        self.__init__()
        self._lanes.update(state["_lanes"])

    def anchor(self, device, step):
        """The anchor of ``device`` for ``step``, made on its first GPU op of the step."""
        got = self._anchors.get(device.name)
        if got is not None and got[0] == step:
            return got[1]
        with self._lock:
            got = self._anchors.get(device.name)
            if got is None or got[0] != step:
                stream = self._clock_streams.get(device.name)
                if stream is None:
                    with device.activate():
                        stream = device.xp.cuda.Stream(non_blocking=True)
                    self._clock_streams[device.name] = stream
                got = (step, make_anchor(device, stream))
                self._anchors[device.name] = got
        return got[1]

    def lane(self, device, stream):
        """The lane name of ``stream`` (a CUDA stream object with a ``ptr`` handle) on
        ``device``."""
        key = (device.name, stream.ptr)
        name = self._lanes.get(key)
        if name is None:
            with self._lock:
                name = self._lanes.get(key)
                if name is None:
                    if stream.ptr == 0:
                        name = "stream 0"
                    else:
                        used = sum(1 for (d, p) in self._lanes if d == device.name and p != 0)
                        name = f"stream {used + 1}"
                    self._lanes[key] = name
        return name
