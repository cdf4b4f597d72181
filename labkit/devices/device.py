"""Devices: ``"cpu:N"`` and ``"gpu:N"``, parsed in one place, one object per name.

>>> import labkit as lk
>>> lk.devices()
[Device('cpu:0')]
>>> with lk.device("cpu:0"):
...     x = lk.zeros(3)
>>> x.device
Device('cpu:0')
"""
import contextlib
import os
import re
import threading

import numpy as np

from ..errors import DeviceError
from . import backends

_NAME = re.compile(r"^(cpu|gpu|cuda)(?::(\d+))?$")


class Device:
    """A place where arrays live and kernels run. Compare with ``is``: there is one per name.

    Attributes: ``type`` ('cpu' or 'gpu'), ``index``, ``name`` ('cpu:0'), ``xp`` (the array
    module: numpy or cupy), ``array_type`` (the backend's ndarray class).
    """

    __slots__ = ("type", "index", "name", "xp", "array_type", "__weakref__")

    def __init__(self, type_, index):
        self.type = type_
        self.index = index
        self.name = f"{type_}:{index}"
        if type_ == "cpu":
            self.xp = np
        else:
            self.xp = backends.cupy_module()
        self.array_type = self.xp.ndarray

    def __repr__(self):
        return f"Device('{self.name}')"

    def __str__(self):
        """As PyTorch's: the CPU is ``'cpu'`` (``str(x.device)`` of a CPU tensor), a virtual CPU
        device or a GPU has its index (``'cpu:1'``, ``'gpu:0'``). ``name`` always has it."""
        return "cpu" if self.name == "cpu:0" else self.name

    def __reduce__(self):
        return (get_device, (self.name,))

    # ``with lk.device("cpu:1"):`` (as ``with torch.device(...)``): see ``device``
    def __enter__(self):
        scope = _Scope(self, False)
        _scopes.stack.append(scope)
        return scope.__enter__()

    def __exit__(self, *exc):
        return _scopes.stack.pop().__exit__(*exc)

    @contextlib.contextmanager
    def activate(self):
        """Make this the current CUDA device while the block runs (no-op on CPU)."""
        if self.type == "gpu":
            with self.xp.cuda.Device(self.index):
                yield
        else:
            yield


_devices = {}
_cpu_count = 1
_lock = threading.Lock()


def canonical_name(spec):
    """The device name ``spec`` ('cuda', 'cpu', 'gpu:1', a Device) stands for ('gpu:0', 'cpu:0',
    'gpu:1'), whether or not that device exists here."""
    if type(spec) is Device:
        return spec.name
    m = _NAME.match(str(spec).strip().lower())
    if m is None:
        raise DeviceError(f"unknown device name {spec!r}: use 'cpu', 'cpu:N', 'gpu' or 'gpu:N' "
                          f"('cuda' and 'cuda:N' name GPUs too)")
    return f"{'gpu' if m.group(1) in ('gpu', 'cuda') else 'cpu'}:{int(m.group(2) or 0)}"


def get_device(spec=None):
    """Parse ``spec`` (a Device, 'cpu', 'cpu:1', 'gpu', 'gpu:0', 'cuda:0' or None) to a Device.

    None means the current default device (see ``lk.device``). Unknown names and devices that do
    not exist raise DeviceError listing what does exist.
    """
    if spec is None:
        return _default.device
    if type(spec) is Device:
        return spec
    if not isinstance(spec, str):
        raise DeviceError(f"a device is named by a string such as 'cpu:0' or 'gpu:0'; got {spec!r}")
    dev = _devices.get(spec)
    if dev is not None:
        return dev
    m = _NAME.match(spec.strip().lower())
    if m is None:
        raise DeviceError(f"unknown device name {spec!r}: use 'cpu', 'cpu:N', 'gpu' or 'gpu:N' "
                          f"(devices here: {', '.join(d.name for d in devices())})")
    type_ = "gpu" if m.group(1) in ("gpu", "cuda") else "cpu"
    index = int(m.group(2) or 0)
    canonical = f"{type_}:{index}"
    with _lock:
        dev = _devices.get(canonical)
        if dev is None:
            if type_ == "cpu":
                if index >= _cpu_count:
                    raise DeviceError(
                        f"device {spec!r} does not exist: this process has {_cpu_count} CPU "
                        f"device(s), cpu:0..cpu:{_cpu_count - 1}. Use one of those, or split the "
                        f"host into more with lk.devices.configure(cpus={index + 1}).")
            else:
                backends.cupy_module()  # raises a clear error when CuPy or a GPU is missing
                n = backends.gpu_count()
                if index >= n:
                    raise DeviceError(f"device {spec!r} does not exist: CuPy sees {n} GPU(s), "
                                      f"gpu:0..gpu:{n - 1}. Use one of those, or a 'cpu' device.")
            dev = Device(type_, index)
            _devices[canonical] = dev
        _devices[spec] = dev
    return dev


def configure(cpus=None):
    """Split the host into ``cpus`` virtual CPU devices ``cpu:0`` .. ``cpu:N-1``.

    Virtual devices share the host's memory and cores; they let placement, transfers and
    multi-device errors be shown and tested on a machine without a GPU. The environment variable
    ``LABKIT_CPUS`` sets the count at import. Tensors already on a removed device stay valid.
    Each device runs its part of a graph on its own worker thread (``labkit.devices.workers``),
    and while the host is split, BLAS calls use each device's share of the cores.

    >>> import labkit as lk
    >>> lk.devices.configure(cpus=2); [d.name for d in lk.devices.devices()]
    ['cpu:0', 'cpu:1']
    >>> lk.devices.configure(cpus=1)
    """
    global _cpu_count
    if cpus is not None:
        cpus = int(cpus)
        if cpus < 1:
            raise DeviceError(f"configure(cpus={cpus}): at least one CPU device is needed")
        with _lock:
            _cpu_count = cpus
            for name in [n for n, d in _devices.items() if d.type == "cpu" and d.index >= cpus]:
                del _devices[name]
        from .workers import share_host_cores
        share_host_cores(cpus)


def devices():
    """Every device of this process: the CPU devices, then one per CUDA device CuPy sees."""
    out = [get_device(f"cpu:{i}") for i in range(_cpu_count)]
    out += [get_device(f"gpu:{i}") for i in range(backends.gpu_count())]
    return out


def device_of_array(array):
    """The device an array lives on (cpu:0 for NumPy arrays, gpu:N for CuPy arrays)."""
    dev = getattr(array, "device", None)
    if dev is not None and hasattr(dev, "id"):  # a CuPy array (NumPy's say "cpu")
        return get_device(f"gpu:{dev.id}")
    if isinstance(array, np.ndarray) or np.isscalar(array):
        return get_device("cpu:0")
    raise DeviceError(f"cannot tell which device an object of type {type(array).__name__} is on")


configure(cpus=int(os.environ.get("LABKIT_CPUS", "1") or 1))


class _Default(threading.local):
    def __init__(self):
        self.device = get_device("cpu:0")
        self.request = None         # (Device, force) inside a ``with lk.device(...)`` block


_default = _Default()


class _Scopes(threading.local):
    def __init__(self):
        self.stack = []


_scopes = _Scopes()      # the open ``with <Device>:`` blocks of this thread


class _Scope:
    """What ``with lk.device(...)`` does: new tensors go to the device, and ops captured inside
    the block carry a request to run there. Entries nest (a stack per thread)."""

    __slots__ = ("device", "force", "_saved")

    def __init__(self, dev, force):
        self.device, self.force, self._saved = dev, bool(force), []

    def __enter__(self):
        self._saved.append((_default.device, _default.request))
        _default.device = self.device
        _default.request = (self.device, self.force)
        return self.device

    def __exit__(self, *exc):
        _default.device, _default.request = self._saved.pop()
        return False


def device(spec, force=False):
    """The device named ``spec`` ('cpu', 'cpu:1', 'gpu:0', 'cuda'...), as PyTorch's
    ``torch.device``: a value to pass as ``device=``, and a context manager: new tensors created
    inside ``with lk.device(...)`` go there. ``"cpu"`` means ``cpu:0``.

    While a graph is being built (``lk.function``, ``with lk.Graph()``), every op made inside
    the block also carries an explicit request to run on ``spec``; the placement pass honours
    it (or says clearly why it cannot). A request that conflicts with colocation (an assign
    asked for elsewhere than its variable) gives way to the colocation unless ``force=True``,
    which makes the conflict an error.

    >>> import labkit as lk
    >>> lk.device("cpu")
    Device('cpu:0')
    >>> with lk.device("cpu"):
    ...     lk.ones(2).device
    Device('cpu:0')
    >>> lk.zeros(2, device=lk.device("cpu")).device is lk.device("cpu:0")
    True
    """
    dev = get_device(spec)
    return _Scope(dev, True) if force else dev


def requested_device():
    """The explicit request of the innermost ``with lk.device(...)`` block of this thread, as
    ``(Device, force)``, or None outside any block (graph capture records it on each node)."""
    return _default.request


@contextlib.contextmanager
def no_device_request():
    """Run the block as if no ``with lk.device(...)`` were open (default device unchanged).

    ``lk.function`` traces inside it, so that a trace does not depend on the caller's block."""
    previous = _default.request
    _default.request = None
    try:
        yield
    finally:
        _default.request = previous


def default_device():
    """The device new tensors go to when no ``device=`` is given."""
    return _default.device
