"""``Upsample`` (over ``F.interpolate``), ``UpsamplingNearest2d`` and ``UpsamplingBilinear2d``.

>>> import labkit as lk
>>> up = lk.nn.Upsample(scale_factor=2, mode="bilinear")
>>> up(lk.ones(1, 3, 4, 4)).shape, up
((1, 3, 8, 8), Upsample(scale_factor=2.0, mode='bilinear'))
"""
from . import functional as F
from .module import Module


class Upsample(Module):
    """Resize (N, C, *spatial) inputs to ``size`` or by ``scale_factor`` with ``mode``
    ('nearest', 'nearest-exact', 'linear', 'bilinear', 'trilinear', 'area')."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, (tuple, list)):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        info = (f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None
                else f"size={self.size!r}")
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour upsampling of images."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling of images with ``align_corners=True``."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
