"""``lk.amp``: mixed precision in PyTorch's spelling (``torch.amp``): ``autocast`` runs each op in
the precision its class asks for (``labkit.tensor.autocast``), ``GradScaler`` scales float16
losses and skips steps whose gradients overflowed.

>>> import labkit as lk
>>> with lk.amp.autocast("cpu", dtype=lk.bfloat16):
...     (lk.ones(2, 2) @ lk.ones(2, 2)).dtype
lk.bfloat16
"""
from .autocast_mode import (autocast, get_autocast_dtype, is_autocast_available,
                            is_autocast_enabled)
from .grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "is_autocast_available", "is_autocast_enabled",
           "get_autocast_dtype"]
