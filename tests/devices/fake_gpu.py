"""A simulated GPU for testing GPU timing on a machine without one.

``FakeGpu(n)`` stands in for CuPy: ``fake.xp`` is an array module whose functions compute with
NumPy at once but also *launch a kernel* on the current stream of the current device, and
``fake.xp.cuda`` has the part of ``cupy.cuda`` the profiler and the executor use (``Device``,
``Stream``, ``Event``, ``get_current_stream``, ``get_elapsed_time``). Work is asynchronous as on
a real GPU: a launch returns at once, a stream runs its kernels one after another on the host's
clock (``time.perf_counter_ns``), and waiting (``synchronize``) sleeps until the work is done.
Every launch is logged with its device and stream, and CUDA's rules are enforced: events of two
devices cannot be compared, and an event must have run before its time is read.
"""
import sys
import threading
import time
import types

import numpy as np

from labkit.devices.device import Device


def _now():
    return time.perf_counter_ns()


def _sleep_until(t):
    left = t - _now()
    if left > 0:
        time.sleep(left / 1e9)


class FakeStream:
    def __init__(self, gpu, device, ptr):
        self.gpu, self.device, self.ptr = gpu, device, ptr
        self.ready_at = 0          # host time (ns) at which its queued work is done

    def synchronize(self):
        _sleep_until(self.ready_at)

    @property
    def done(self):
        return _now() >= self.ready_at

    def wait_event(self, event):
        if event.time is not None:
            self.ready_at = max(self.ready_at, event.time)

    def __enter__(self):
        self._saved = self.gpu._local.__dict__.get("stream")
        self.gpu._local.stream = self
        return self

    def __exit__(self, *exc):
        self.gpu._local.stream = self._saved

    def __repr__(self):
        return f"<fake stream {self.ptr} of device {self.device}>"


class FakeEvent:
    def __init__(self, gpu):
        self.gpu = gpu
        self.device = self.time = None

    def record(self, stream=None):
        stream = stream or self.gpu.current_stream()
        if stream.device != self.gpu.current_device():
            raise RuntimeError("cudaErrorInvalidResourceHandle: event recorded on a stream of "
                               "another device than the current one")
        self.device = stream.device
        self.time = max(_now(), stream.ready_at)

    def synchronize(self):
        _sleep_until(self.time)

    @property
    def done(self):
        return _now() >= self.time


class FakeDeviceContext:
    def __init__(self, gpu, index):
        self.gpu, self.id = gpu, index

    def __enter__(self):
        self._saved = self.gpu.current_device()
        self.gpu._local.device = self.id
        return self

    def __exit__(self, *exc):
        self.gpu._local.device = self._saved

    def use(self):
        self.gpu._local.device = self.id

    def synchronize(self):
        _sleep_until(max(s.ready_at for s in self.gpu.streams if s.device == self.id))


class FakeGpu:
    """A simulated machine with ``n`` GPUs; ``kernel_ns``: how long each kernel runs."""

    def __init__(self, n=1, kernel_ns=200_000):
        self.kernel_ns = kernel_ns
        self.launches = []        # (kernel name, device, stream ptr, start ns, end ns)
        self.streams = [FakeStream(self, d, 0) for d in range(n)]
        self._local = threading.local()
        self._lock = threading.Lock()
        stream_class = _StreamClass(self)
        runtime = types.SimpleNamespace(
            getDeviceCount=lambda: n,
            getDeviceProperties=lambda i: {"name": f"Simulated GPU {i}".encode()})
        cuda = types.SimpleNamespace(
            Device=lambda index=None: FakeDeviceContext(
                self, self.current_device() if index is None else index),
            Event=lambda *a, **k: FakeEvent(self),
            Stream=stream_class,
            get_current_stream=self.current_stream,
            get_elapsed_time=self.elapsed_ms,
            runtime=runtime)
        self.xp = _FakeXp(self, cuda)
        self.devices = [_device(i, self.xp) for i in range(n)]

    def current_device(self):
        return getattr(self._local, "device", 0)

    def current_stream(self):
        s = getattr(self._local, "stream", None)
        if s is not None and s.device == self.current_device():
            return s
        return self.streams[self.current_device()]

    def new_stream(self, non_blocking=False):
        s = FakeStream(self, self.current_device(), len(self.streams) + 100)
        self.streams.append(s)
        return s

    def launch(self, name, duration_ns=None):
        """Queue a kernel of ``duration_ns`` on the current stream (returns at once)."""
        s = self.current_stream()
        with self._lock:
            start = max(_now(), s.ready_at)
            s.ready_at = start + (self.kernel_ns if duration_ns is None else duration_ns)
            self.launches.append((name, s.device, s.ptr, start, s.ready_at))

    def elapsed_ms(self, a, b):
        if a.device != b.device:
            raise RuntimeError("cudaErrorInvalidResourceHandle: elapsed time between events "
                               f"of devices {a.device} and {b.device}")
        for e in (a, b):
            if e.time is None or not e.done:
                raise RuntimeError("cudaErrorNotReady: event not recorded or not yet run")
        return (b.time - a.time) / 1e6


class _StreamClass:
    """``cuda.Stream``: makes a stream; ``.null`` is the current device's default stream."""

    def __init__(self, gpu):
        self.gpu = gpu

    def __call__(self, non_blocking=False, priority=0):
        return self.gpu.new_stream(non_blocking)

    @property
    def null(self):
        return self.gpu.streams[self.gpu.current_device()]


def installed(gpu, monkeypatch):
    """Make ``gpu`` labkit's CUDA backend for one test: ``lk.device("cuda:1")`` and ``lk.cuda``
    then reach the simulated GPUs (the devices made are forgotten afterwards)."""
    from labkit.devices import backends
    device_module = sys.modules["labkit.devices.device"]   # lk.devices.device is the function
    monkeypatch.setattr(backends, "_cupy", gpu.xp)
    monkeypatch.setattr(device_module, "_devices", dict(device_module._devices))


def _device(index, xp):
    """A labkit Device on the simulated GPU ``index`` (made directly: no CuPy here)."""
    d = object.__new__(Device)
    d.type, d.index, d.name, d.xp, d.array_type = "gpu", index, f"gpu:{index}", xp, np.ndarray
    return d


class _FakeXp:
    """NumPy, with each function call also launched as a kernel on the simulated GPU."""

    def __init__(self, gpu, cuda):
        self._gpu, self.cuda, self.ndarray = gpu, cuda, np.ndarray

    def __getattr__(self, name):
        value = getattr(np, name)
        if not callable(value) or isinstance(value, type):
            return value

        def kernel(*args, **kwargs):
            self._gpu.launch(name)
            return value(*args, **kwargs)
        return kernel
