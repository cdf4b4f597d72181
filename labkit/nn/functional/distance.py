"""Distances between vectors: ``F.cosine_similarity`` and ``F.pairwise_distance``.

>>> import labkit as lk
>>> import labkit.nn.functional as F
>>> F.cosine_similarity(lk.tensor([[1.0, 0.0]]), lk.tensor([[1.0, 1.0]])).tolist()
[0.7071067690849304]
"""
from ...tensor.ops.elementwise import add, div, mul, stop_gradient, sub
from ...tensor.ops.elementwise_math import clamp_min
from ...tensor.ops.norm import vector_norm
from ...tensor.ops.reduce import sum as _sum
from ...tensor.ops.shape import broadcast_to
from ...tensor.shape_rules import broadcast_shapes


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``x1 . x2 / (max(||x1||, eps) * max(||x2||, eps))`` along ``dim`` (the inputs broadcast).
    As in PyTorch, each input is divided by its clamped norm first, and the clamp itself passes
    the norm's gradient on.

    >>> import labkit as lk
    >>> y = lk.nn.functional.cosine_similarity(lk.ones(2, 3), -lk.ones(2, 3), dim=1)
    >>> [round(v, 4) for v in y.tolist()]
    [-1.0, -1.0]
    """
    shape = broadcast_shapes("cosine_similarity", x1, x2)
    x1 = x1 if tuple(x1.shape) == shape else broadcast_to(x1, shape=shape)
    x2 = x2 if tuple(x2.shape) == shape else broadcast_to(x2, shape=shape)
    return _sum(mul(div(x1, _clamped_norm(x1, dim, eps)), div(x2, _clamped_norm(x2, dim, eps))),
                dim=dim)


def _clamped_norm(x, dim, eps):
    """``max(||x||, eps)`` whose gradient is the norm's (PyTorch clamps it in place, out of
    autograd's sight)."""
    norm = vector_norm(x, ord=2.0, dim=(dim,), keepdim=True)
    return add(norm, stop_gradient(sub(clamp_min(norm, eps), norm)))


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The ``p``-norm of ``x1 - x2 + eps`` along the last dimension.

    >>> import labkit as lk
    >>> d = lk.nn.functional.pairwise_distance(lk.tensor([[0.0, 0.0]]), lk.tensor([[3.0, 4.0]]))
    >>> round(d.item(), 4)
    5.0
    """
    last = max(x1.ndim, x2.ndim) - 1
    return vector_norm(add(sub(x1, x2), eps), ord=float(p), dim=(max(last, 0),), keepdim=keepdim)
