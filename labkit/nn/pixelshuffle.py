"""``PixelShuffle`` and ``PixelUnshuffle`` (over ``F.pixel_shuffle`` / ``F.pixel_unshuffle``).

>>> import labkit as lk
>>> lk.nn.PixelShuffle(3)(lk.ones(1, 9, 4, 4)).shape, lk.nn.PixelShuffle(3)
((1, 1, 12, 12), PixelShuffle(upscale_factor=3))
"""
from . import functional as F
from .module import Module


class PixelShuffle(Module):
    """(*, C * r * r, H, W) -> (*, C, H * r, W * r): sub-pixel upsampling."""

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H * r, W * r) -> (*, C * r * r, H, W): the inverse of ``PixelShuffle``."""

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"
