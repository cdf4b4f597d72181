"""Convolution layers: ``Conv1d``, ``Conv2d``, ``ConvTranspose1d``, ``ConvTranspose2d``, with
PyTorch's arguments (``groups``, ``padding='same'/'valid'``, ``padding_mode`` zeros, reflect,
replicate or circular), parameter shapes, default initialisation and repr.

>>> import labkit as lk
>>> conv = lk.nn.Conv2d(1, 8, kernel_size=3, padding=1)
>>> conv(lk.ones(2, 1, 8, 8)).shape
(2, 8, 8, 8)
>>> conv
Conv2d(1, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
"""
from ..errors import ShapeError, describe
from ..tensor.ops.conv import same_padding
from . import functional as F
from . import init
from .module import Module
from .parameter import add_weight_and_bias

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _tuple(v, n, name):
    if isinstance(v, (tuple, list)):
        if len(v) != n:
            raise ValueError(f"{name} must be an int or a tuple of {n} ints, got {v}")
        return tuple(int(a) for a in v)
    return (int(v),) * n


class _ConvNd(Module):
    """Parameters, checks and repr shared by the convolutions (``_n`` spatial dimensions)."""

    _n = 2
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", output_padding=0, device=None,
                 dtype=None):
        super().__init__()
        name, n = type(self).__name__, self._n
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: groups={groups} must be positive and divide in_channels="
                             f"{in_channels} and out_channels={out_channels}")
        if padding_mode not in PADDING_MODES:
            raise ValueError(f"{name}: padding_mode={padding_mode!r} is not one of "
                             f"{', '.join(PADDING_MODES)}")
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = _tuple(kernel_size, n, "kernel_size")
        self.stride = _tuple(stride, n, "stride")
        self.dilation = _tuple(dilation, n, "dilation")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: padding={padding!r} is not 'same', 'valid', an int "
                                 f"or a tuple of ints")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided "
                                 f"convolutions (stride={self.stride})")
            self.padding = padding
            lohi = same_padding(self.kernel_size, self.dilation) if padding == "same" \
                else [(0, 0)] * n
        else:
            self.padding = _tuple(padding, n, "padding")
            lohi = [(p, p) for p in self.padding]
        # F.pad's order (last dimension first) of the padding a non-zeros padding_mode adds
        self._reversed_padding_repeated_twice = [p for lo, hi in reversed(lohi)
                                                 for p in (lo, hi)]
        self.output_padding = _tuple(output_padding, n, "output_padding")
        self.transposed = self._transposed
        self.groups = int(groups)
        self.padding_mode = padding_mode
        shape = ((self.in_channels, self.out_channels // self.groups) if self._transposed else
                 (self.out_channels, self.in_channels // self.groups)) + self.kernel_size
        add_weight_and_bias(self, shape, bias, dtype, device, bias_size=self.out_channels)
        self.reset_parameters()

    def reset_parameters(self):
        """Redraw weight and bias with PyTorch's default (Kaiming-uniform, a=sqrt(5))."""
        init.layer_default_(self.weight, self.bias)

    def _check_channels(self, input):
        n = self._n
        if input.ndim not in (n + 1, n + 2) or input.shape[-n - 1] != self.in_channels:
            dims = "L" if n == 1 else "H, W"
            raise ShapeError(
                f"{self!r} expects input (N, {self.in_channels}, {dims}) or "
                f"({self.in_channels}, {dims}), got {describe(input)}. Images need a channel "
                f"dimension: a batch of greyscale images of shape (N, H, W) becomes "
                f"x.unsqueeze(1).")

    def extra_repr(self):
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * self._n:
            s += ", padding={padding}"
        if self.dilation != (1,) * self._n:
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * self._n:
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)


class _Conv(_ConvNd):
    _function = None

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device=device, dtype=dtype)

    def forward(self, input):
        self._check_channels(input)
        conv = type(self)._function
        if self.padding_mode != "zeros":
            return conv(F.pad(input, self._reversed_padding_repeated_twice,
                              mode=self.padding_mode), self.weight, self.bias, self.stride,
                        0, self.dilation, self.groups)
        return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                    self.groups)


class Conv1d(_Conv):
    """1-d convolution of (N, C_in, L) (or (C_in, L)) inputs; ``weight`` has shape
    (out_channels, in_channels / groups, kernel_size).

    >>> import labkit as lk
    >>> lk.nn.Conv1d(4, 6, 3, padding="same", padding_mode="circular")(lk.ones(2, 4, 10)).shape
    (2, 6, 10)
    """
    _n = 1
    _function = staticmethod(F.conv1d)


class Conv2d(_Conv):
    """2-d convolution (cross-correlation, as in PyTorch) of (N, C_in, H, W) (or (C_in, H, W))
    images; ``weight`` has shape (out_channels, in_channels / groups, kh, kw), initialised like
    PyTorch's (U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in_channels / groups * kh * kw).

    >>> import labkit as lk
    >>> lk.nn.Conv2d(4, 8, 3, groups=2, padding="same", bias=False)
    Conv2d(4, 8, kernel_size=(3, 3), stride=(1, 1), padding=same, groups=2, bias=False)
    """
    _n = 2
    _function = staticmethod(F.conv2d)


class _ConvTranspose(_ConvNd):
    _transposed = True
    _function = None

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f"{type(self).__name__}: only padding_mode='zeros' is supported "
                             f"(as in PyTorch)")
        if isinstance(padding, str):
            raise ValueError(f"{type(self).__name__}: padding must be numbers, not "
                             f"{padding!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, output_padding, device=device, dtype=dtype)

    def _output_padding(self, input, output_size):
        """``output_padding``, or what gives the output exactly ``output_size``."""
        if output_size is None:
            return self.output_padding
        n = self._n
        sizes = tuple(output_size)[-n:] if len(output_size) > n else tuple(output_size)
        if len(sizes) != n:
            raise ValueError(f"{type(self).__name__}: output_size {output_size} must give {n} "
                             f"spatial size(s)")
        pads = []
        for d in range(n):
            smallest = ((input.shape[input.ndim - n + d] - 1) * self.stride[d]
                        - 2 * self.padding[d] + self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            if not smallest <= sizes[d] <= smallest + self.stride[d] - 1:
                raise ValueError(f"{type(self).__name__}: requested output size {sizes} is not "
                                 f"reachable: dimension {d} must be between {smallest} and "
                                 f"{smallest + self.stride[d] - 1}")
            pads.append(sizes[d] - smallest)
        return tuple(pads)

    def forward(self, input, output_size=None):
        self._check_channels(input)
        return type(self)._function(input, self.weight, self.bias, self.stride, self.padding,
                                    self._output_padding(input, output_size), self.groups,
                                    self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """Transposed 1-d convolution; ``weight`` has shape (in_channels, out_channels / groups,
    kernel_size).

    >>> import labkit as lk
    >>> lk.nn.ConvTranspose1d(2, 3, 4, stride=2, padding=1)(lk.ones(1, 2, 5)).shape
    (1, 3, 10)
    """
    _n = 1
    _function = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTranspose):
    """Transposed 2-d convolution (upsampling by ``stride``); ``weight`` has shape
    (in_channels, out_channels / groups, kh, kw).

    >>> import labkit as lk
    >>> up = lk.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1)
    >>> up(lk.ones(1, 4, 5, 5)).shape
    (1, 2, 10, 10)
    """
    _n = 2
    _function = staticmethod(F.conv_transpose2d)
