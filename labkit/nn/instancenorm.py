"""``InstanceNorm1d`` and ``InstanceNorm2d``: each channel of each example normalised over its
positions (no affine parameters and no running statistics unless asked, as in PyTorch).

>>> import labkit as lk
>>> lk.nn.InstanceNorm2d(3, affine=True)(lk.randn(2, 3, 5, 5)).shape
(2, 3, 5, 5)
"""
import warnings

from ..errors import ShapeError, describe
from ..tensor.ops.composite import squeeze, unsqueeze
from . import functional as F
from .batchnorm import _NormBase


class _InstanceNorm(_NormBase):
    _spatial = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype)

    def forward(self, input):
        n = self._spatial
        if input.ndim not in (n + 1, n + 2):
            raise ShapeError(f"{type(self).__name__}: expected {n + 1}D or {n + 2}D input (got "
                             f"{describe(input)})")
        if input.shape[input.ndim - n - 1] != self.num_features:
            message = (f"{type(self).__name__}: the input {describe(input)} has "
                       f"{input.shape[input.ndim - n - 1]} channels, expected "
                       f"{self.num_features}")
            if self.affine:
                raise ShapeError(message)
            warnings.warn(message, stacklevel=2)
        if input.ndim == n + 1:
            return squeeze(self._normalise(unsqueeze(input, 0)), 0)
        return self._normalise(input)

    def _normalise(self, input):
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight,
                               self.bias, self.training or not self.track_running_stats,
                               self.momentum if self.momentum is not None else 0.0, self.eps)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of (N, C, L) or (C, L) inputs."""
    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of (N, C, H, W) or (C, H, W) images."""
    _spatial = 2
