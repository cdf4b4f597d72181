"""``Unfold`` (im2col) and ``Fold`` (col2im), over ``F.unfold`` and ``F.fold``.

>>> import labkit as lk
>>> cols = lk.nn.Unfold(kernel_size=2, stride=2)(lk.ones(1, 3, 4, 4))
>>> cols.shape, lk.nn.Fold((4, 4), 2, stride=2)(cols).shape
((1, 12, 4), (1, 3, 4, 4))
"""
from . import functional as F
from .module import Module


class Fold(Module):
    """Columns (N, C * kh * kw, L) summed back into images of ``output_size``."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")


class Unfold(Module):
    """Sliding windows of images as columns (N, C * kh * kw, L)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")
