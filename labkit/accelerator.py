"""``torch.accelerator``: the device-generic way newer PyTorch programs pick a device. labkit's
only accelerator is the CUDA GPU (through CuPy).

>>> import labkit as lk
>>> device = lk.accelerator.current_accelerator() if lk.accelerator.is_available() else "cpu"
>>> lk.zeros(2, device=device).device.type in ("cpu", "gpu")
True
"""
from .devices import gpu_count
from .devices import get_device as _get_device

__all__ = ["is_available", "current_accelerator", "device_count"]


def is_available():
    """Whether an accelerator (a CUDA GPU) is usable here; never raises."""
    return gpu_count() > 0


def device_count():
    """How many accelerator devices there are (0 without one)."""
    return gpu_count()


def current_accelerator(check_available=False):
    """The accelerator's device (``gpu:0``), or None where there is none."""
    return _get_device("gpu:0") if gpu_count() > 0 else None
