"""Distances: ``F.pairwise_distance`` and ``F.cosine_similarity``, as PyTorch computes them (the
losses that compare embeddings use them; ``F.normalize`` is in normalization.py).

>>> import labkit as lk
>>> import labkit.nn.functional as F
>>> a, b = lk.tensor([[3.0, 4.0]]), lk.tensor([[4.0, 3.0]])
>>> round(F.cosine_similarity(a, b).item(), 4), round(F.pairwise_distance(a, b, eps=0).item(), 4)
(0.96, 1.4142)
"""
from ...errors import ShapeError, describe
from ...tensor.autocast import precision
from ...tensor.ops.elementwise import add, div, mul, stop_gradient, sub
from ...tensor.ops.elementwise_math import clamp_min
from ...tensor.ops.norm import vector_norm
from ...tensor.ops.reduce import sum as _sum
from ...tensor.ops.shape import broadcast_to
from ...tensor.shape_rules import broadcast_shapes, normalize_dim


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The ``p``-norm of ``x1 - x2 + eps`` over the last dimension (inputs broadcast).

    >>> import labkit as lk
    >>> lk.nn.functional.pairwise_distance(lk.zeros(2, 3), lk.ones(2, 3), eps=0).tolist()
    [1.7320507764816284, 1.7320507764816284]
    """
    ndim = max(x1.ndim, x2.ndim)
    if ndim == 0:
        raise ShapeError(f"pairwise_distance: the inputs need a dimension to measure along; got "
                         f"{describe(x1)} and {describe(x2)}")
    return vector_norm(add(sub(x1, x2), eps), ord=float(p), dim=ndim - 1, keepdim=keepdim)


def _floor(x, eps):
    """``x`` clamped below at ``eps``, with the gradient of ``x`` itself (PyTorch clamps the
    norms under no_grad)."""
    return add(x, stop_gradient(sub(clamp_min(x, eps), x)))


@precision("float32_gpu")
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``sum(x1 / |x1| * x2 / |x2|)`` over ``dim`` (inputs broadcast; each norm at least ``eps``).

    >>> import labkit as lk
    >>> a, b = lk.tensor([1.0, 0.0]), lk.tensor([1.0, 1.0])
    >>> lk.nn.functional.cosine_similarity(a, b, dim=0).item()
    0.7071067690849304
    """
    d = normalize_dim("cosine_similarity", dim, max(x1.ndim, x2.ndim),
                      x1 if x1.ndim >= x2.ndim else x2)
    if tuple(x1.shape) != tuple(x2.shape):    # the norms are taken after broadcasting
        shape = broadcast_shapes("cosine_similarity", x1, x2)
        x1, x2 = broadcast_to(x1, shape=shape), broadcast_to(x2, shape=shape)
    n1 = _floor(vector_norm(x1, ord=2.0, dim=d, keepdim=True), eps)
    n2 = _floor(vector_norm(x2, ord=2.0, dim=d, keepdim=True), eps)
    return _sum(mul(div(x1, n1), div(x2, n2)), dim=d)

