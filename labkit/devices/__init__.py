"""Devices, array backends (NumPy | CuPy) and transfers. The lowest layer of labkit."""
from .backends import cupy_module, gpu_count
from .device import Device, configure, default_device, device, device_of_array, devices, get_device
from .transfer import transfer

__all__ = ["Device", "configure", "default_device", "device", "device_of_array", "devices", "get_device",
           "transfer", "cupy_module", "gpu_count"]
