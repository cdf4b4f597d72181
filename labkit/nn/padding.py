"""Padding layers over ``F.pad``: ``ZeroPad1d/2d``, ``ConstantPad1d/2d``, ``ReflectionPad1d/2d``,
``ReplicationPad1d/2d``, ``CircularPad1d/2d``. ``padding`` is an int (every side) or PyTorch's
tuple, last dimension first: (left, right) or (left, right, top, bottom).

>>> import labkit as lk
>>> lk.nn.ReflectionPad2d((1, 1, 2, 0))(lk.ones(1, 3, 4, 4)).shape
(1, 3, 6, 6)
"""
from . import functional as F
from .module import Module


def _sides(padding, n):
    if isinstance(padding, int):
        return (padding,) * n
    padding = tuple(int(p) for p in padding)
    if len(padding) != n:
        raise ValueError(f"padding must be an int or a tuple of {n} ints, got {padding}")
    return padding


class _Pad(Module):
    _mode = "constant"
    _sides = 2

    def __init__(self, padding):
        super().__init__()
        self.padding = _sides(padding, self._sides)

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPad(_Pad):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPad):
    """Pad the last dimension with ``value``."""


class ConstantPad2d(_ConstantPad):
    """Pad the last two dimensions with ``value``."""
    _sides = 4


class ZeroPad1d(ConstantPad1d):
    """Pad the last dimension with zeros."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pad the last two dimensions with zeros."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ReflectionPad1d(_Pad):
    """Pad the last dimension with its reflection (the edge not repeated)."""
    _mode = "reflect"


class ReflectionPad2d(_Pad):
    """Pad the last two dimensions with their reflection."""
    _mode, _sides = "reflect", 4


class ReplicationPad1d(_Pad):
    """Pad the last dimension by repeating its edge values."""
    _mode = "replicate"


class ReplicationPad2d(_Pad):
    """Pad the last two dimensions by repeating their edge values."""
    _mode, _sides = "replicate", 4


class CircularPad1d(_Pad):
    """Pad the last dimension by wrapping around."""
    _mode = "circular"


class CircularPad2d(_Pad):
    """Pad the last two dimensions by wrapping around."""
    _mode, _sides = "circular", 4
