"""PyTorch's ``torch.ao`` spellings, for code written against them: ``lk.ao.quantization`` is
``lk.quantization`` and ``lk.ao.nn.quantized`` is ``lk.nn.quantized`` (the same modules, also
importable under these names: ``import labkit.ao.nn.quantized.dynamic as nnqd``).

>>> import labkit as lk
>>> lk.ao.quantization is lk.quantization
True
>>> lk.ao.nn.quantized.dynamic.Linear is lk.nn.quantized.dynamic.Linear
True
"""
import sys
import types

from .. import quantization
from ..nn import quantized as _quantized

nn = types.ModuleType(f"{__name__}.nn", "PyTorch's torch.ao.nn: quantized is lk.nn.quantized.")
nn.quantized = _quantized
sys.modules.update({f"{__name__}.quantization": quantization, f"{__name__}.nn": nn,
                    f"{__name__}.nn.quantized": _quantized,
                    f"{__name__}.nn.quantized.dynamic": _quantized.dynamic})

__all__ = ["quantization", "nn"]
