"""``Flatten`` and ``Unflatten``: reshape one range of dimensions (for ``Sequential``)."""
from ..errors import ShapeError, describe
from ..tensor.ops.composite import flatten
from ..tensor.ops.shape import reshape
from ..tensor.shape_rules import normalize_dim
from .module import Module


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

    def forward(self, input):
        return flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dimension ``dim`` into ``unflattened_size`` (one entry may be -1).

    >>> import labkit as lk
    >>> lk.nn.Unflatten(1, (2, 5))(lk.ones(3, 10)).shape
    (3, 2, 5)
    """

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if isinstance(dim, str):
            raise NotImplementedError("Unflatten: named dimensions are not supported; give dim "
                                      "as an int")
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input):
        d = normalize_dim("Unflatten", self.dim, input.ndim, input)
        sizes = tuple(int(s) for s in self.unflattened_size)
        known = 1
        for s in sizes:
            known *= s if s != -1 else 1
        total = input.shape[d]
        if sizes.count(-1) > 1 or (-1 not in sizes and known != total) or \
                (-1 in sizes and (known == 0 or total % known)):
            raise ShapeError(f"Unflatten: dimension {self.dim} of {describe(input)} ({total}) "
                             f"cannot be split into {self.unflattened_size}")
        return reshape(input, shape=tuple(input.shape[:d]) + sizes + tuple(input.shape[d + 1:]))

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
