"""``torch.cpu``: the questions PyTorch programs ask of the CPU device, and ``torch.cpu.amp``.

>>> import labkit as lk
>>> lk.cpu.is_available(), lk.cpu.device_count()
(True, 1)
"""
from . import amp


def is_available():
    """Always True: labkit always has its CPU device."""
    return True


def device_count():
    """1, as PyTorch's (labkit's virtual CPU devices, ``lk.devices.configure(cpus=N)``, are
    placement targets within it)."""
    return 1


def synchronize(device=None):
    """Nothing to wait for: CPU ops finish before they return."""


def current_device():
    """'cpu', as PyTorch's."""
    return "cpu"


__all__ = ["amp", "is_available", "device_count", "synchronize", "current_device"]
