"""``torch.cuda.amp``: PyTorch's older names of autocast and the gradient scaler, for CUDA
devices (``lk.cuda.amp.autocast(dtype=...)`` is ``lk.autocast("cuda", dtype=...)``).

>>> import labkit as lk
>>> lk.cuda.amp.GradScaler(enabled=False).get_scale()
1.0
"""
from ..amp.autocast_mode import _device_autocast
from ..amp.grad_scaler import device_scaler
from ..tensor.dtypes import float16

autocast = _device_autocast("cuda", float16)
GradScaler = device_scaler("cuda")

__all__ = ["autocast", "GradScaler"]
