"""``Linear``: an affine map ``y = x @ W.T + b`` with PyTorch's default initialisation."""

from . import functional as F
from . import init
from .module import Module
from .parameter import add_weight_and_bias


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

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")
