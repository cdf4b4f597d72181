"""Dropout layers: random zeroing while training, identity after ``model.eval()``; masks come
from labkit's seeded generator.

>>> import labkit as lk
>>> drop = lk.nn.Dropout(p=0.5)
>>> drop.eval()(lk.ones(3)).tolist()
[1.0, 1.0, 1.0]
>>> drop
Dropout(p=0.5, inplace=False)
"""
from . import functional as F
from .module import Module


class _DropoutNd(Module):
    _function = None

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}: dropout probability has to be between 0 "
                             f"and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return type(self)._function(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zero each element with probability ``p`` while training, scaling the rest by
    ``1 / (1 - p)``."""
    _function = staticmethod(F.dropout)


class Dropout1d(_DropoutNd):
    """Zero whole channels of (N, C, L) or (C, L) inputs while training."""
    _function = staticmethod(F.dropout1d)


class Dropout2d(_DropoutNd):
    """Zero whole channels of (N, C, H, W) or (C, H, W) inputs while training."""
    _function = staticmethod(F.dropout2d)


class AlphaDropout(_DropoutNd):
    """Dropout for SELU networks (keeps zero mean and unit variance)."""
    _function = staticmethod(F.alpha_dropout)


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels."""
    _function = staticmethod(F.feature_alpha_dropout)
