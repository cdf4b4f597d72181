"""``CosineSimilarity`` and ``PairwiseDistance``.

>>> import labkit as lk
>>> y = lk.nn.CosineSimilarity(dim=1)(lk.ones(2, 3), 2 * lk.ones(2, 3))
>>> [round(v, 4) for v in y.tolist()]
[1.0, 1.0]
"""
from . import functional as F
from .module import Module


class PairwiseDistance(Module):
    """``||x1 - x2 + eps||_p`` along the last dimension."""

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class CosineSimilarity(Module):
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim``."""

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)
