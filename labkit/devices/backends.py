"""Array backends: NumPy for CPU devices, CuPy (imported lazily) for GPU devices.

An op's kernel is written once against the array module ``xp`` that a backend provides; the
backend is the only place that knows which library that is.
"""
import numpy as np

from ..errors import DeviceError

_cupy = None
_cupy_error = None


def numpy_module():
    """The array module of CPU devices."""
    return np


def cupy_module():
    """Import CuPy on first use and check that a CUDA device is usable.

    Raises DeviceError saying what is missing (the package, or a device) and how to get it.
    """
    global _cupy, _cupy_error
    if _cupy is not None:
        return _cupy
    if _cupy_error is not None:
        raise DeviceError(_cupy_error)
    try:
        import cupy
    except ImportError as exc:  # the package is not installed
        _cupy_error = (
            "a GPU device was asked for, but CuPy is not installed "
            f"({exc}). Install labkit's GPU extra: pip install 'labkit[gpu]' "
            "(CuPy for CUDA 12), or use a 'cpu' device.")
        raise DeviceError(_cupy_error) from None
    try:
        available = cupy.is_available()
    except Exception as exc:  # CuPy installed against a driver that fails
        available, why = False, f" ({type(exc).__name__}: {exc})"
    else:
        why = ""
    if not available:
        _cupy_error = ("a GPU device was asked for, but CuPy finds no usable CUDA device on this "
                       f"machine{why}. Use a 'cpu' device, or run on a machine with an NVIDIA GPU.")
        raise DeviceError(_cupy_error)
    _cupy = cupy
    return cupy


def gpu_count():
    """How many CUDA devices CuPy sees; 0 where CuPy or a GPU is missing (never raises)."""
    try:
        cp = cupy_module()
    except DeviceError:
        return 0
    return int(cp.cuda.runtime.getDeviceCount())
