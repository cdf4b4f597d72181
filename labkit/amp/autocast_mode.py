"""``lk.autocast`` (also ``lk.amp.autocast``): PyTorch's autocast, as a context manager and a
decorator. The mode it enters and the precision classes it applies are in
``labkit.tensor.autocast``."""
import functools
import warnings

from ..devices import gpu_count
from ..tensor import autocast as _mode


class autocast:
    """Run ops in mixed precision on ``device_type`` ('cpu' or 'cuda'): ops of the low-precision
    class (matmul, linear, convolutions, attention) in ``dtype``, those of the float32 class
    (losses, ``prod``, linear algebra; on a GPU also exp, log, pow, softmax, sum and the norms)
    in float32, the rest in whatever their inputs promote to. ``dtype``: lk.bfloat16 (the CPU's
    default) or lk.float16 (the GPU's). Works eagerly and inside ``lk.function``, and nests;
    ``enabled=False`` switches it off inside an outer region. A 'cuda' autocast where there is
    no GPU, or one asked for another dtype (``dtype=lk.float32``, as nanoGPT's ``--dtype=float32``
    gives it), warns and does nothing, as PyTorch's.

    >>> import labkit as lk
    >>> model = lk.nn.Linear(4, 2)
    >>> with lk.autocast("cpu", dtype=lk.bfloat16):
    ...     y = model(lk.ones(3, 4))
    ...     loss = y.float().pow(2).mean()
    >>> y.dtype, loss.dtype
    (lk.bfloat16, lk.float32)
    >>> @lk.autocast("cpu")                       # as a decorator
    ... def forward(x):
    ...     return model(x)
    >>> forward(lk.ones(1, 4)).dtype
    lk.bfloat16
    """

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        self.device_type = _mode.device_type_of(device_type) and device_type
        self.fast_dtype = dtype
        if enabled and _mode.device_type_of(device_type) == "gpu" and gpu_count() == 0:
            warnings.warn(f"lk.autocast: device_type {device_type!r} was given, but no GPU is "
                          f"available here. Disabling (autocast('cpu') casts CPU ops).",
                          stacklevel=2)
            enabled = False
        if enabled and dtype is not None and _mode.as_dtype(dtype) not in _mode.LOW_DTYPES:
            warnings.warn(f"lk.autocast: dtype {_mode.as_dtype(dtype)} was given, but autocast "
                          f"runs ops in lk.bfloat16 or lk.float16 only. Disabling autocast (as "
                          f"PyTorch does).", stacklevel=2)
            enabled = False
        self._enabled = bool(enabled)
        self._cache_enabled = cache_enabled

    def __enter__(self):
        _mode.enter(self.device_type, self.fast_dtype, self._enabled, self._cache_enabled)
        return self

    def __exit__(self, *exc):
        _mode.leave()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self._enabled,
                          self._cache_enabled):
                return fn(*args, **kwargs)
        return run

    def __repr__(self):
        state = "on" if self._enabled else "off"
        return f"lk.autocast({self.device_type!r}, dtype={self.fast_dtype}, {state})"


def is_autocast_available(device_type):
    """Whether autocast works on ``device_type``: 'cpu' and 'cuda' do (PyTorch's name)."""
    try:
        _mode.device_type_of(device_type)
    except ValueError:
        return False
    return True


def is_autocast_enabled(device_type="cuda"):
    """Whether autocast is on for ``device_type`` in this thread."""
    return _mode.is_enabled(device_type)


def get_autocast_dtype(device_type):
    """The dtype autocast runs low-precision ops in on ``device_type``."""
    return _mode.get_dtype(device_type)


def _device_autocast(device_type, default):
    """``torch.cuda.amp.autocast`` / ``torch.cpu.amp.autocast``: the device fixed."""
    class device_autocast(autocast):
        __doc__ = (f"``lk.autocast({device_type!r}, ...)`` under its older name (PyTorch's "
                   f"``torch.{device_type}.amp.autocast``).")

        def __init__(self, enabled=True, dtype=default, cache_enabled=True):
            super().__init__(device_type, dtype=dtype, enabled=enabled,
                             cache_enabled=cache_enabled)
    device_autocast.__name__ = device_autocast.__qualname__ = "autocast"
    return device_autocast
