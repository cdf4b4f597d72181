"""Distances as modules: ``PairwiseDistance`` and ``CosineSimilarity`` (see
``labkit.nn.functional.distance``)."""
from . import functional as F
from .module import Module


class PairwiseDistance(Module):
    """The ``p``-norm of ``x1 - x2 + eps`` over the last dimension.

    >>> import labkit as lk
    >>> lk.nn.PairwiseDistance(eps=0.0)(lk.zeros(1, 2), lk.tensor([[3.0, 4.0]])).tolist()
    [5.0]
    """

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class CosineSimilarity(Module):
    """The cosine of the angle between ``x1`` and ``x2`` along ``dim``.

    >>> import labkit as lk
    >>> lk.nn.CosineSimilarity(dim=0)(lk.tensor([1.0, 0.0]), lk.tensor([0.0, 2.0])).item()
    0.0
    """

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)
