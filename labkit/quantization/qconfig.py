"""``QConfig``: how ``quantize_dynamic`` quantizes a module (PyTorch's ``QConfig``, holding the
two schemes labkit has rather than observer classes).

>>> import labkit as lk
>>> lk.quantization.per_channel_dynamic_qconfig.weight
'per_channel_symmetric'
"""
from typing import NamedTuple

from ..nn.quantized.dynamic.linear import check_qscheme

# the one activation scheme: uint8 over the whole input at run time (ONNX DynamicQuantizeLinear)
DYNAMIC_QUINT8 = "dynamic_quint8_per_tensor"


class QConfig(NamedTuple):
    """``activation``: how a layer's input is quantized at run time
    (``"dynamic_quint8_per_tensor"``: uint8, scale and zero point from the whole input's min and
    max, as ONNX's DynamicQuantizeLinear); ``weight``: the int8 weight's scheme, ``"per_tensor_symmetric"`` or
    ``"per_channel_symmetric"`` (zero point 0, scale max|w| / 127)."""
    activation: str
    weight: str

    def check(self, where):
        """This QConfig if labkit can do what it says; else a ValueError naming ``where``."""
        if self.activation != DYNAMIC_QUINT8:
            raise ValueError(f"{where}: activation {self.activation!r} is not a scheme labkit "
                             f"has; dynamic quantization uses {DYNAMIC_QUINT8!r}")
        check_qscheme(self.weight, where)
        return self


default_dynamic_qconfig = QConfig(DYNAMIC_QUINT8, "per_tensor_symmetric")
per_channel_dynamic_qconfig = QConfig(DYNAMIC_QUINT8, "per_channel_symmetric")
