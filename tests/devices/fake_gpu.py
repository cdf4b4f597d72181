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
import contextlib
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

    def use(self):
        """Make this the current stream of the calling thread (CuPy's ``Stream.use``)."""
        self.gpu._local.stream = self
        return self

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
            set_allocator=lambda allocator=None: None,
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
    d.type, d.index, d.name, d.xp, d.array_type = "gpu", index, f"gpu:{index}", xp, FakeArray
    return d


class FakeArray(np.ndarray):
    """An array on the simulated GPU: NumPy's, a type of its own as CuPy's is, with CuPy's
    ``get()`` (a copy on the host), ``set(host)`` (the host array's values copied in) and
    ``device`` (``.id``: the simulated GPU it lives on)."""

    def __array_finalize__(self, obj):
        self._device_id = getattr(obj, "_device_id", 0)

    @property
    def device(self):
        return types.SimpleNamespace(id=self._device_id)

    def get(self, stream=None, order="C", out=None):
        host = np.array(self, order=order).view(np.ndarray)
        if out is None:
            return host
        out[...] = host
        return out

    def set(self, host, stream=None):
        if np.shape(host) != self.shape:
            raise ValueError(f"Shape mismatch. Old shape: {self.shape}, new shape: "
                             f"{np.shape(host)}")        # as CuPy's ndarray.set
        self.view(np.ndarray)[...] = host


def _on_gpu(value, device=None):
    """A function's result as CuPy gives it: arrays as FakeArray (on ``device``, else where
    their inputs were), scalars as 0-d arrays."""
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if isinstance(value, np.ndarray):
        if type(value) is not FakeArray:
            value = value.view(FakeArray)
            if device is not None:
                value._device_id = device
        return value
    if isinstance(value, (tuple, list)):
        return type(value)(_on_gpu(v, device) for v in value)
    return value


class _FakeMemoryPool:
    """CuPy's default memory pool, as the simulated GPU has one: nothing counted."""

    def used_bytes(self):
        return 0

    def total_bytes(self):
        return 0

    def free_all_blocks(self):
        pass


class _FakeXp:
    """NumPy, with each function call also launched as a kernel on the simulated GPU, and its
    arrays of their own type (``asarray`` / ``array`` of a host array copy it over)."""

    def __init__(self, gpu, cuda):
        self._gpu, self.cuda, self.ndarray = gpu, cuda, FakeArray
        self._pool = _FakeMemoryPool()

    def get_default_memory_pool(self):
        return self._pool

    def __getattr__(self, name):
        value = getattr(np, name)
        if isinstance(value, np.ufunc):
            return _FakeUfunc(self._gpu, name, value)
        if not callable(value) or isinstance(value, type):
            return value

        def kernel(*args, **kwargs):
            self._gpu.launch(name)
            if name in ("asarray", "array", "ascontiguousarray") and args and \
                    type(args[0]) is not FakeArray:
                out = np.array(*args, **kwargs).view(FakeArray)      # host -> device: a copy
                out._device_id = self._gpu.current_device()
                return out
            return _on_gpu(value(*args, **kwargs), self._gpu.current_device())
        return kernel


class _FakeUfunc:
    """A NumPy ufunc launched on the simulated GPU, its methods (``reduce``, ``accumulate``,
    ``at``...) too."""

    def __init__(self, gpu, name, ufunc):
        self._gpu, self._name, self._ufunc = gpu, name, ufunc

    def __call__(self, *args, **kwargs):
        self._gpu.launch(self._name)
        return _on_gpu(self._ufunc(*args, **kwargs), self._gpu.current_device())

    def __getattr__(self, attr):
        value = getattr(self._ufunc, attr)
        if not callable(value):
            return value

        def method(*args, **kwargs):
            self._gpu.launch(f"{self._name}.{attr}")
            return _on_gpu(value(*args, **kwargs), self._gpu.current_device())
        return method


@contextlib.contextmanager
def fusion_off():
    """Graph fusion switched off inside (a fused GPU kernel is CuPy's ``ElementwiseKernel``,
    which the simulated GPU does not have), and put back as it was after."""
    import labkit as lk
    was_off = "fusion" in lk.config.disabled_passes()
    lk.config.disable_pass("fusion")
    try:
        yield
    finally:
        if not was_off:
            lk.config.enable_pass("fusion")


def fake_cupyx():
    """A stand-in for the ``cupyx`` package (``scatter_add`` / ``scatter_max`` / ``scatter_min``
    and ``cupyx.scipy.special``) over NumPy and SciPy, for the simulated GPU."""
    import scipy.special

    cupyx = types.ModuleType("cupyx")
    cupyx.scatter_add = lambda a, index, b: np.add.at(a, index, b)
    cupyx.scatter_max = lambda a, index, b: np.maximum.at(a, index, b)
    cupyx.scatter_min = lambda a, index, b: np.minimum.at(a, index, b)
    cupyx_scipy = types.ModuleType("cupyx.scipy")
    special = types.ModuleType("cupyx.scipy.special")
    for name in dir(scipy.special):
        fn = getattr(scipy.special, name)
        if callable(fn) and not name.startswith("_"):
            setattr(special, name, (lambda f: lambda *a, **k: _on_gpu(f(*a, **k)))(fn))
    cupyx.scipy, cupyx_scipy.special = cupyx_scipy, special
    return {"cupyx": cupyx, "cupyx.scipy": cupyx_scipy, "cupyx.scipy.special": special}
