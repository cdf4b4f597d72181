"""``torch.cuda``, answered from labkit's devices (CUDA devices through CuPy): the questions
about GPUs, the current device, streams, events, synchronisation, memory and seeds, in
PyTorch's spellings, so ``device = torch.device("cuda" if torch.cuda.is_available() else "cpu")``,
``torch.cuda.synchronize()`` before reading a clock, or work on a side stream run as they are.

>>> import labkit as lk
>>> lk.cuda.is_available() == (lk.cuda.device_count() > 0)
True

On a GPU machine::

    s = lk.cuda.Stream()
    start, end = lk.cuda.Event(enable_timing=True), lk.cuda.Event(enable_timing=True)
    with lk.cuda.stream(s):              # ops launched here queue on s
        start.record()
        y = x @ x
        end.record()
    lk.cuda.synchronize()
    start.elapsed_time(end)             # milliseconds, as PyTorch's

Ops launch on the current stream of their tensors' device, and ``lk.profile()`` draws each GPU
op on its stream's lane at the time it ran there.

Without a GPU, the questions (``is_available``, ``device_count``) answer and the seeds are
taken; everything that needs a GPU raises a DeviceError saying what is missing.
"""
import contextlib

from ..devices import cupy_module, get_device, gpu_count, memory_stats
from ..devices import reset_peak_memory_stats as _reset_peak
from ..errors import DeviceError
from ..tensor import random as _random

__all__ = ["is_available", "is_bf16_supported", "device_count", "current_device", "set_device", "device",
           "get_device_name", "synchronize", "Stream", "stream", "current_stream",
           "default_stream", "Event", "memory_allocated", "max_memory_allocated",
           "memory_reserved", "reset_peak_memory_stats", "empty_cache", "manual_seed",
           "manual_seed_all", "seed", "seed_all", "initial_seed"]


def is_available():
    """Whether a CUDA device is usable here (CuPy installed and a GPU present); never raises."""
    return gpu_count() > 0


def is_bf16_supported(including_emulation=True):
    """False: labkit's GPU arrays are CuPy's, which have no bfloat16; use float16 on a GPU
    (``lk.autocast('cuda')``'s default). nanoGPT asks this to pick its dtype."""
    return False


def device_count():
    """How many CUDA devices labkit can use (0 without CuPy or a GPU)."""
    return gpu_count()


def _cupy(what):
    """CuPy, or a DeviceError that names the ``lk.cuda`` call needing it."""
    try:
        return cupy_module()
    except DeviceError as exc:
        raise DeviceError(f"lk.cuda.{what}: {exc}") from None


def _cuda(what):
    return _cupy(what).cuda


def _index(what, dev):
    """``(cupy.cuda, index)``: CuPy's CUDA module and the device index of ``dev``: None (the
    current device), an int, 'cuda:1' or a Device."""
    cuda = _cuda(what)
    if dev is None:
        return cuda, cuda.Device().id
    if isinstance(dev, bool) or not isinstance(dev, int):
        d = get_device(dev)
        if d.type != "gpu":
            raise DeviceError(f"lk.cuda.{what}: {d.name} is not a CUDA device; give 'cuda:N', "
                              f"an index, or leave it out for the current one")
        return cuda, d.index
    n = gpu_count()
    if not 0 <= dev < n:
        raise DeviceError(f"lk.cuda.{what}: there is no CUDA device {dev} "
                          f"(CuPy sees {n}: 0..{n - 1})")
    return cuda, dev


def current_device():
    """The index of the current CUDA device (where new GPU arrays and kernels go)."""
    return _index("current_device", None)[1]


def set_device(device):
    """Make ``device`` (an index, ``'cuda:1'`` or a Device) the current CUDA device of this
    thread."""
    cuda, idx = _index("set_device", device)
    cuda.Device(idx).use()


class device:
    """``with lk.cuda.device(1):`` makes CUDA device 1 current inside the block."""

    def __init__(self, device):
        self._ctx = None
        if device is not None:
            cuda, idx = _index("device", device)
            self._ctx = cuda.Device(idx)

    def __enter__(self):
        if self._ctx is not None:
            self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
        return False


def get_device_name(device=None):
    """The GPU's product name, e.g. ``'NVIDIA H100 80GB HBM3'``."""
    cuda, idx = _index("get_device_name", device)
    name = cuda.runtime.getDeviceProperties(idx)["name"]
    return name.decode() if isinstance(name, bytes) else name


def synchronize(device=None):
    """Wait until every stream of ``device`` (default: the current one) has finished its work:
    do this before reading a host clock around GPU work."""
    cuda, idx = _index("synchronize", device)
    cuda.Device(idx).synchronize()


class Stream:
    """A CUDA stream (``torch.cuda.Stream``): a queue of GPU work that runs in order, beside
    other streams' work. Ops launched inside ``with lk.cuda.stream(s):`` queue on ``s``.

    ``device``: where it lives (default: the current CUDA device). Like PyTorch's, a new stream
    does not wait for the default stream: order them with ``wait_stream`` / ``wait_event``.
    """

    def __init__(self, device=None, priority=0):
        cuda, self._idx = _index("Stream", device)
        with cuda.Device(self._idx):
            if priority:
                self._s = cuda.Stream(non_blocking=True, priority=priority)
            else:
                self._s = cuda.Stream(non_blocking=True)

    @classmethod
    def _wrap(cls, raw, idx):
        s = cls.__new__(cls)
        s._s, s._idx = raw, idx
        return s

    @property
    def device(self):
        return get_device(f"gpu:{self._idx}")

    @property
    def cuda_stream(self):
        """The raw ``cudaStream_t`` handle, as an int (0 for the legacy default stream)."""
        return self._s.ptr

    def synchronize(self):
        """Wait until all work queued on this stream has finished."""
        self._s.synchronize()

    def query(self):
        """Whether all work queued on this stream has finished (never waits)."""
        return bool(self._s.done)

    def wait_event(self, event):
        """Make later work on this stream wait for ``event`` (recorded elsewhere)."""
        event.wait(self)

    def wait_stream(self, stream):
        """Make later work on this stream wait for everything queued on ``stream`` so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        """Record ``event`` (a new one if None) at this point of the stream; returns it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and (self._idx, self._s.ptr) == (other._idx,
                                                                         other._s.ptr)

    def __hash__(self):
        return hash((self._idx, self._s.ptr))

    def __repr__(self):
        return f"<lk.cuda.Stream device=cuda:{self._idx} cuda_stream={self._s.ptr:#x}>"


@contextlib.contextmanager
def stream(stream):
    """``with lk.cuda.stream(s):`` queues the ops launched inside on ``s`` (and makes its
    device current); ``stream(None)`` changes nothing."""
    if stream is None:
        yield
        return
    cuda = _cuda("stream")
    with cuda.Device(stream._idx), stream._s:
        yield


def current_stream(device=None):
    """The stream that GPU ops launched now on ``device`` queue on."""
    cuda, idx = _index("current_stream", device)
    with cuda.Device(idx):
        return Stream._wrap(cuda.get_current_stream(), idx)


def default_stream(device=None):
    """``device``'s default stream."""
    cuda, idx = _index("default_stream", device)
    return Stream._wrap(cuda.Stream.null, idx)


class Event:
    """A CUDA event (``torch.cuda.Event``): a marker in a stream, to wait for or to time.

    ``enable_timing=True`` lets ``start.elapsed_time(end)`` measure the GPU time between two
    events (in milliseconds); ``blocking=True`` makes ``synchronize`` sleep instead of spin.
    """

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        _cuda("Event")
        self.enable_timing, self.blocking, self.interprocess = (
            bool(enable_timing), bool(blocking), bool(interprocess))
        self._e = self._idx = None      # made when first recorded, on the stream's device

    def record(self, stream=None):
        """Record the event at this point of ``stream`` (default: the current stream)."""
        stream = current_stream() if stream is None else stream
        cuda = _cuda("Event.record")
        with cuda.Device(stream._idx):
            if self._e is None or self._idx != stream._idx:
                self._e = cuda.Event(block=self.blocking, disable_timing=not self.enable_timing,
                                     interprocess=self.interprocess)
                self._idx = stream._idx
            self._e.record(stream._s)

    def wait(self, stream=None):
        """Make later work on ``stream`` (default: the current one) wait for this event."""
        stream = current_stream() if stream is None else stream
        if self._e is not None:        # an event never recorded is complete, as in CUDA
            stream._s.wait_event(self._e)

    def query(self):
        """Whether the work before the event has finished (never waits)."""
        return self._e is None or bool(self._e.done)

    def synchronize(self):
        """Wait until the work before the event has finished."""
        if self._e is not None:
            self._e.synchronize()

    def elapsed_time(self, end_event):
        """Milliseconds of GPU time from this event to ``end_event`` (both recorded, both
        made with ``enable_timing=True``, on one device); waits for ``end_event``."""
        for name, e in (("this event", self), ("end_event", end_event)):
            if not e.enable_timing:
                raise DeviceError(f"lk.cuda.Event.elapsed_time: {name} was made without "
                                  f"timing; make both with lk.cuda.Event(enable_timing=True)")
            if e._e is None:
                raise DeviceError(f"lk.cuda.Event.elapsed_time: {name} was never recorded; "
                                  f"call .record() on both events first")
        if self._idx != end_event._idx:
            raise DeviceError(f"lk.cuda.Event.elapsed_time: the events were recorded on "
                              f"different devices (cuda:{self._idx}, cuda:{end_event._idx}); "
                              f"GPU time is measured between events of one device")
        end_event.synchronize()
        return float(_cuda("Event.elapsed_time").get_elapsed_time(self._e, end_event._e))

    def __repr__(self):
        where = "not recorded" if self._e is None else f"cuda:{self._idx}"
        return f"<lk.cuda.Event {where}{', timing' if self.enable_timing else ''}>"


def _gpu_stats(what, device, key):
    return memory_stats(f"gpu:{_index(what, device)[1]}")[key]


def memory_allocated(device=None):
    """Bytes held by live tensors on the GPU (CuPy's memory pool: in use)."""
    return _gpu_stats("memory_allocated", device, "bytes_in_use")


def max_memory_allocated(device=None):
    """The peak of ``memory_allocated`` since memory statistics were first asked for (or
    since ``reset_peak_memory_stats``)."""
    return _gpu_stats("max_memory_allocated", device, "peak_bytes_in_use")


def memory_reserved(device=None):
    """Bytes the memory pool holds on the GPU: in use plus cached for reuse."""
    return _gpu_stats("memory_reserved", device, "bytes_reserved")


def reset_peak_memory_stats(device=None):
    """Start ``max_memory_allocated`` over from what is in use now."""
    _reset_peak(f"gpu:{_index('reset_peak_memory_stats', device)[1]}")


def empty_cache():
    """Give the memory pool's cached (unused) GPU blocks back to the driver."""
    cp = _cupy("empty_cache")
    cp.get_default_memory_pool().free_all_blocks()
    cp.get_default_pinned_memory_pool().free_all_blocks()


# labkit draws every device's random numbers from one host generator (see lk.manual_seed), so
# that a seed gives the same numbers on CPU and GPU: seeding "the GPU" seeds that generator.
def manual_seed(seed):
    """Seed the random numbers GPU tensors are drawn from. In labkit these are the same numbers
    as the CPU's (one generator for every device), so this is ``lk.manual_seed(seed)``; it works
    without a GPU, as PyTorch's does."""
    _random.manual_seed(seed)


manual_seed_all = manual_seed


def seed():
    """Reseed the random numbers from fresh entropy (``lk.seed()``)."""
    _random.seed()


seed_all = seed


def initial_seed():
    """The seed the random numbers were last started from (``lk.initial_seed()``)."""
    return _random.initial_seed()


from . import amp  # noqa: E402  (torch.cuda.amp: autocast and GradScaler for CUDA devices)
