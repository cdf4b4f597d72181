"""``LayerNorm``, ``GroupNorm`` and ``RMSNorm``: normalisation over features, with PyTorch's
parameters (``elementwise_affine`` / ``affine``, ``bias``) and their initialisation (ones and
zeros).

>>> import labkit as lk
>>> ln = lk.nn.LayerNorm(8)
>>> ln(lk.randn(2, 5, 8)).shape, ln
((2, 5, 8), LayerNorm((8,), eps=1e-05, elementwise_affine=True, bias=True))
"""
from ..tensor.creation import ones, zeros
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


def _shape(normalized_shape):
    if isinstance(normalized_shape, int):
        return (normalized_shape,)
    return tuple(int(s) for s in normalized_shape)


def _affine_parameters(module, shape, weight, bias, device, dtype):
    """``weight`` (ones) and ``bias`` (zeros) of ``shape``, each a Parameter or None."""
    if weight:
        module.weight = Parameter(ones(shape, dtype=dtype, device=device))
    else:
        module.register_parameter("weight", None)
    if weight and bias:
        module.bias = Parameter(zeros(shape, dtype=dtype, device=device))
    else:
        module.register_parameter("bias", None)


def _reset_affine(module):
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


class LayerNorm(Module):
    """Normalise over the last ``len(normalized_shape)`` dimensions (mean 0, variance 1), then
    scale by ``weight`` and shift by ``bias`` (each of ``normalized_shape``)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine, bias, device, dtype)

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class GroupNorm(Module):
    """Normalise each group of ``num_channels / num_groups`` channels of (N, C, *) inputs, then
    apply a per-channel ``weight`` and ``bias``."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, bias=True, device=None,
                 dtype=None):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels={num_channels} must be divisible by "
                             f"num_groups={num_groups}")
        self.num_groups, self.num_channels = num_groups, num_channels
        self.eps, self.affine = eps, affine
        _affine_parameters(self, (num_channels,), affine, bias, device, dtype)

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    """``x / sqrt(mean(x**2) + eps) * weight`` over the last dimensions (``eps=None``: the
    dtype's machine epsilon)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine, False, device, dtype)

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")
