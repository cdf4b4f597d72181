"""``Conv2d`` and ``MaxPool2d`` over (N, C, H, W) images, built on ``lk.conv2d`` and
``lk.max_pool2d``."""

from ..errors import ShapeError, describe
from ..tensor.ops.composite import squeeze, unsqueeze
from ..tensor.ops.conv import conv2d, max_pool2d, pair
from . import init
from .module import Module
from .parameter import add_weight_and_bias


class Conv2d(Module):
    """2-d convolution (cross-correlation, as in PyTorch) of (N, C_in, H, W) images.

    ``weight`` has shape (out_channels, in_channels, kh, kw) and ``bias`` (out_channels,),
    initialised like PyTorch (U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in_channels*kh*kw).
    A 3-d (C, H, W) input is treated as a batch of one.

    >>> import labkit as lk
    >>> conv = lk.nn.Conv2d(1, 8, kernel_size=3, padding=1)
    >>> conv(lk.ones(2, 1, 8, 8)).shape
    (2, 8, 8, 8)
    >>> conv
    Conv2d(1, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 bias=True, device=None, dtype=None):
        super().__init__()
        self.in_channels = int(in_channels)
        self.out_channels = int(out_channels)
        self.kernel_size = pair(kernel_size, "kernel_size")
        self.stride = pair(stride, "stride")
        self.padding = pair(padding, "padding")
        self.dilation = pair(dilation, "dilation")
        add_weight_and_bias(self, (self.out_channels, self.in_channels) + self.kernel_size, bias,
                            dtype, device)
        self.reset_parameters()

    def reset_parameters(self):
        """Redraw weight and bias with PyTorch's default (Kaiming-uniform, a=sqrt(5))."""
        init.layer_default_(self.weight, self.bias)

    def forward(self, x):
        if x.ndim == 3:
            return squeeze(self.forward(unsqueeze(x, 0)), 0)
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise ShapeError(
                f"{self!r} expects input (N, {self.in_channels}, H, W), got {describe(x)}. "
                f"Images need a channel dimension: a batch of greyscale images of shape (N, H, W) "
                f"becomes x.unsqueeze(1).")
        return conv2d(x, self.weight, self.bias, stride=self.stride, padding=self.padding,
                      dilation=self.dilation)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.bias is None:
            s += ", bias=False"
        return s


class MaxPool2d(Module):
    """Max over each ``kernel_size`` window of (N, C, H, W) images; ``stride`` defaults to
    ``kernel_size``.

    >>> import labkit as lk
    >>> lk.nn.MaxPool2d(2)(lk.ones(1, 3, 8, 8)).shape
    (1, 3, 4, 4)
    """

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation

    def forward(self, x):
        if x.ndim == 3:
            return squeeze(self.forward(unsqueeze(x, 0)), 0)
        if x.ndim != 4:
            raise ShapeError(f"{self!r} expects input (N, C, H, W), got {describe(x)}")
        return max_pool2d(x, self.kernel_size, stride=self.stride, padding=self.padding,
                          dilation=self.dilation)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}")
