"""Activation layers: each a thin module over its ``nn.functional`` function, with PyTorch's
constructor arguments and repr. ``inplace=True`` writes the result into the input, as PyTorch
does.

>>> import labkit as lk
>>> lk.nn.Sequential(lk.nn.Linear(2, 3), lk.nn.GELU(), lk.nn.Linear(3, 1))(lk.ones(4, 2)).shape
(4, 1)
"""
from ..errors import ShapeError, describe
from ..tensor.creation import full
from . import functional as F
from . import init as _init
from .module import Module
from .parameter import Parameter


class _Elementwise(Module):
    """An activation without options: ``_function`` applied to the input."""
    _function = None

    def forward(self, input):
        return type(self)._function(input)


class _Inplace(_Elementwise):
    """An activation with only PyTorch's ``inplace`` flag."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self)._function(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


def _inplace_suffix(module):
    return ", inplace=True" if module.inplace else ""


class ReLU(_Inplace):
    """``max(x, 0)``.

    >>> import labkit as lk
    >>> lk.nn.ReLU()(lk.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """
    _function = staticmethod(F.relu)


class ReLU6(_Inplace):
    """``min(max(x, 0), 6)``."""
    _function = staticmethod(F.relu6)


class SELU(_Inplace):
    """Scaled ELU with the self-normalising constants."""
    _function = staticmethod(F.selu)


class SiLU(_Inplace):
    """``x * sigmoid(x)``."""
    _function = staticmethod(F.silu)


class Mish(_Inplace):
    """``x * tanh(softplus(x))``."""
    _function = staticmethod(F.mish)


class Hardsigmoid(_Inplace):
    """``relu6(x + 3) / 6``."""
    _function = staticmethod(F.hardsigmoid)


class Hardswish(_Inplace):
    """``x * relu6(x + 3) / 6``."""
    _function = staticmethod(F.hardswish)


class Threshold(Module):
    """``x`` where ``x > threshold``, else ``value``.

    >>> import labkit as lk
    >>> lk.nn.Threshold(0.5, -1.0)(lk.tensor([0.0, 1.0])).tolist()
    [-1.0, 1.0]
    """

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}{_inplace_suffix(self)}"


class LeakyReLU(Module):
    """``x`` for ``x > 0``, else ``negative_slope * x``."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}{_inplace_suffix(self)}"


class ELU(Module):
    """``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)``."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}{_inplace_suffix(self)}"


class CELU(ELU):
    """``x`` for ``x > 0``, else ``alpha * (exp(x / alpha) - 1)``."""

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)


class GELU(Module):
    """``x * Phi(x)``, exact (``approximate='none'``) or with tanh (``'tanh'``).

    >>> import labkit as lk
    >>> lk.nn.GELU(approximate="tanh")
    GELU(approximate='tanh')
    """

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta``, linear above ``threshold``."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    """``x`` clipped to ``[min_val, max_val]``."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        if min_val > max_val:
            raise ValueError(f"Hardtanh: min_val={min_val} is above max_val={max_val}")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}{_inplace_suffix(self)}"


class _Shrink(Module):
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def extra_repr(self):
        return f"{self.lambd}"


class Softshrink(_Shrink):
    """``x -+ lambd`` outside ``[-lambd, lambd]``, 0 inside."""

    def forward(self, input):
        return F.softshrink(input, self.lambd)


class Hardshrink(_Shrink):
    """``x`` outside ``[-lambd, lambd]``, 0 inside."""

    def forward(self, input):
        return F.hardshrink(input, self.lambd)


class Tanh(_Elementwise):
    """``tanh(x)``."""
    _function = staticmethod(F.tanh)


class Sigmoid(_Elementwise):
    """``1 / (1 + exp(-x))``."""
    _function = staticmethod(F.sigmoid)


class Softsign(_Elementwise):
    """``x / (1 + |x|)``."""
    _function = staticmethod(F.softsign)


class LogSigmoid(_Elementwise):
    """``log(sigmoid(x))``."""
    _function = staticmethod(F.logsigmoid)


class Tanhshrink(_Elementwise):
    """``x - tanh(x)``."""
    _function = staticmethod(F.tanhshrink)


class GLU(Module):
    """First half of ``dim`` times the sigmoid of the second half."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class _SoftmaxFamily(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax(_SoftmaxFamily):
    """Softmax over ``dim``.

    >>> import labkit as lk
    >>> lk.nn.Softmax(dim=-1)(lk.zeros(1, 2)).tolist()
    [[0.5, 0.5]]
    """

    def forward(self, input):
        return F.softmax(input, self.dim)


class LogSoftmax(_SoftmaxFamily):
    """``log(softmax(x))`` over ``dim``."""

    def forward(self, input):
        return F.log_softmax(input, self.dim)


class Softmin(_SoftmaxFamily):
    """``softmax(-x)`` over ``dim``."""

    def forward(self, input):
        return F.softmin(input, self.dim)


class Softmax2d(Module):
    """Softmax over the channels of (N, C, H, W) or (C, H, W) inputs, at each position."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ShapeError(f"Softmax2d: expected a 3-d or 4-d input, got {describe(input)}")
        return F.softmax(input, -3)


class PReLU(Module):
    """``x`` for ``x > 0``, else ``weight * x``, with a learned slope (one, or one per channel),
    initialised to ``init``.

    >>> import labkit as lk
    >>> lk.nn.PReLU(3).weight.tolist()
    [0.25, 0.25, 0.25]
    """

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(full((num_parameters,), init, dtype=dtype, device=device))

    def reset_parameters(self):
        _init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"
