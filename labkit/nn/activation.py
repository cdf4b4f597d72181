"""Layers without parameters: activations, ``Flatten`` and ``Identity``."""
from ..tensor.ops.composite import flatten
from ..tensor.ops.softmax import softmax
from ..tensor.ops.elementwise import relu, sigmoid, tanh
from .module import Module


class ReLU(Module):
    """``max(x, 0)`` elementwise.

    >>> import labkit as lk
    >>> lk.nn.ReLU()(lk.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """

    def forward(self, x):
        return relu(x)


class Tanh(Module):
    """``tanh(x)`` elementwise.

    >>> import labkit as lk
    >>> lk.nn.Tanh()(lk.tensor([0.0])).tolist()
    [0.0]
    """

    def forward(self, x):
        return tanh(x)


class Sigmoid(Module):
    """``1 / (1 + exp(-x))`` elementwise.

    >>> import labkit as lk
    >>> lk.nn.Sigmoid()(lk.tensor([0.0])).tolist()
    [0.5]
    """

    def forward(self, x):
        return sigmoid(x)


class Softmax(Module):
    """Softmax over ``dim``.

    >>> import labkit as lk
    >>> lk.nn.Softmax(dim=-1)(lk.zeros(1, 2)).tolist()
    [[0.5, 0.5]]
    """

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return softmax(x, dim=self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Flatten(Module):
    """Merge dimensions ``start_dim..end_dim`` (default: all but the batch dimension).

    >>> import labkit as lk
    >>> lk.nn.Flatten()(lk.ones(2, 3, 4, 4)).shape
    (2, 48)
    """

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, x):
        return flatten(x, self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Identity(Module):
    """Returns its input unchanged (a placeholder layer).

    >>> import labkit as lk
    >>> lk.nn.Identity()(lk.ones(2)).tolist()
    [1.0, 1.0]
    """

    def forward(self, x):
        return x
