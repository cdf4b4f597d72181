"""Devices, array backends (NumPy | CuPy), transfers, one worker thread per device
(``workers``) and memory statistics. The lowest layer of labkit.

The module itself is callable: ``lk.devices()`` lists the devices, while ``lk.devices.configure``,
``lk.devices.get_device`` ... are its functions.
"""
import sys
import types

from .backends import cupy_module, gpu_count
from .device import (Device, configure, default_device, device, device_of_array, devices,
                     get_device)
from .host_memory import keep_freed_memory
from .memory import memory_stats, reset_peak_memory_stats
from .transfer import transfer

keep_freed_memory()

__all__ = ["Device", "configure", "default_device", "device", "device_of_array", "devices",
           "get_device", "transfer", "cupy_module", "gpu_count", "memory_stats",
           "reset_peak_memory_stats"]


class _DevicesModule(types.ModuleType):
    def __call__(self):
        """Every device of this process: CPU devices, then one per CUDA device CuPy sees."""
        return devices()


sys.modules[__name__].__class__ = _DevicesModule
