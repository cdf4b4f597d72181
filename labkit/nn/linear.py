"""``Identity``, ``Linear`` (``y = x @ W.T + b``) and ``Bilinear``, with PyTorch's default
initialisation."""
import math

from ..tensor.creation import zeros
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter, add_weight_and_bias


class Identity(Module):
    """Returns its input unchanged (a placeholder layer); any constructor arguments are
    ignored, as in PyTorch.

    >>> import labkit as lk
    >>> lk.nn.Identity(54, unused="argument")(lk.ones(2)).tolist()
    [1.0, 1.0]
    """

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` over the last dimension of ``x``.

    ``weight`` has shape (out_features, in_features) and ``bias`` (out_features,), both drawn
    from U(-1/sqrt(in_features), 1/sqrt(in_features)) as in PyTorch.

    >>> import labkit as lk
    >>> layer = lk.nn.Linear(4, 2)
    >>> layer(lk.ones(8, 4)).shape
    (8, 2)
    >>> layer
    Linear(in_features=4, out_features=2, bias=True)
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        add_weight_and_bias(self, (self.out_features, self.in_features), bias, dtype, device)
        self.reset_parameters()

    def reset_parameters(self):
        """Redraw weight and bias with PyTorch's default (Kaiming-uniform, a=sqrt(5))."""
        init.layer_default_(self.weight, self.bias)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Bilinear(Module):
    """``y = x1^T A x2 + b``: ``weight`` (out_features, in1_features, in2_features) and ``bias``
    (out_features,), both from U(-1/sqrt(in1_features), 1/sqrt(in1_features)) as in PyTorch.

    >>> import labkit as lk
    >>> lk.nn.Bilinear(3, 4, 5)(lk.ones(2, 3), lk.ones(2, 4)).shape
    (2, 5)
    """

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features, self.in2_features = int(in1_features), int(in2_features)
        self.out_features = int(out_features)
        self.weight = Parameter(zeros((self.out_features, self.in1_features,
                                       self.in2_features), dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(zeros((self.out_features,), dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
