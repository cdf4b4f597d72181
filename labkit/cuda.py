"""``torch.cuda``'s questions about GPUs, answered from labkit's devices (CUDA devices through
CuPy), so ``device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`` runs as is.

>>> import labkit as lk
>>> lk.cuda.is_available() == (lk.cuda.device_count() > 0)
True
"""
from .devices import gpu_count

__all__ = ["is_available", "device_count"]


def is_available():
    """Whether a CUDA device is usable here (CuPy installed and a GPU present); never raises."""
    return gpu_count() > 0


def device_count():
    """How many CUDA devices labkit can use (0 without CuPy or a GPU)."""
    return gpu_count()
