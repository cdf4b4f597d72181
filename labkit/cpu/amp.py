"""``torch.cpu.amp``: PyTorch's older names of CPU autocast and the gradient scaler
(``lk.cpu.amp.autocast()`` is ``lk.autocast("cpu")``, bfloat16 unless told otherwise).

>>> import labkit as lk
>>> with lk.cpu.amp.autocast():
...     (lk.ones(2, 2) @ lk.ones(2, 2)).dtype
lk.bfloat16
"""
from ..amp.autocast_mode import _device_autocast
from ..amp.grad_scaler import device_scaler
from ..tensor.dtypes import bfloat16

autocast = _device_autocast("cpu", bfloat16)
GradScaler = device_scaler("cpu")

__all__ = ["autocast", "GradScaler"]
