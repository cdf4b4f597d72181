"""Random tensors, reproducible with ``lk.manual_seed`` on every device.

Values are drawn on the host from one NumPy generator and then moved to the target device, so the
same seed gives the same numbers on CPU and GPU.
"""
import numpy as np

from .creation import _place, _shape
from .dtypes import as_dtype, get_default_dtype

_generator = np.random.default_rng()


def manual_seed(seed):
    """Seed labkit's random numbers (``rand``, ``randn``, dropout, shuffling, initialisation)."""
    global _generator
    _generator = np.random.default_rng(int(seed))


def generator():
    """The NumPy Generator behind labkit's random functions."""
    return _generator


def rand(*shape, dtype=None, device=None, requires_grad=False):
    """Uniform samples in [0, 1) (float32 by default)."""
    d = as_dtype(dtype) or get_default_dtype()
    return _place(_generator.random(_shape(shape)).astype(d.np), device, requires_grad)


def randn(*shape, dtype=None, device=None, requires_grad=False):
    """Standard normal samples (float32 by default)."""
    d = as_dtype(dtype) or get_default_dtype()
    return _place(_generator.standard_normal(_shape(shape)).astype(d.np), device, requires_grad)


def randint(low, high, size, dtype=None, device=None):
    """Integers uniform in [low, high) (int64 by default)."""
    d = as_dtype(dtype) or as_dtype("int64")
    return _place(_generator.integers(low, high, size=_shape((size,) if isinstance(size, int)
                                                             else (tuple(size),))).astype(d.np),
                  device, False)


def randperm(n, device=None):
    """A random permutation of 0..n-1 (int64)."""
    return _place(_generator.permutation(n).astype(np.int64), device, False)
