"""Matrix multiplication, with NumPy's ``matmul`` semantics (batching, 1-D operands)."""
import numpy as np

from ...errors import ShapeError, describe
from ..op import needs_grad, op
from ..shape_rules import broadcast_shapes, shape_of, ufunc_dtype
from .shape import permute, reshape


def _matmul_rule(a, b):
    sa, sb = shape_of(a), shape_of(b)
    if not sa or not sb:
        raise ShapeError(f"matmul needs tensors with at least 1 dimension; got {describe(a)} @ "
                         f"{describe(b)}. For a scalar product use '*'.")
    ka = sa[-1]
    kb = sb[0] if len(sb) == 1 else sb[-2]
    if ka != kb:
        raise ShapeError(
            f"matmul: {sa} @ {sb}: the inner dimensions differ ({ka} vs {kb}). The last "
            f"dimension of the left operand must equal the {'only' if len(sb) == 1 else 'second-to-last'}"
            f" dimension of the right one. Inputs: {describe(a)}, {describe(b)}. Did you mean to "
            f"transpose one (x.T)?")

    class _Batch:
        pass
    ba, bb = _Batch(), _Batch()
    ba.shape, bb.shape = sa[:-2], sb[:-2]
    batch = broadcast_shapes("matmul (batch dimensions)", ba, bb)
    out = batch + (sa[-2:-1] if len(sa) > 1 else ()) + (sb[-1:] if len(sb) > 1 else ())
    return out, ufunc_dtype("matmul", np.matmul, a, b)


def _swap_last(x):
    nd = x.ndim
    return permute(x, dims=tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _matmul_vjp(g, out, a, b):
    a2 = a if a.ndim > 1 else reshape(a, shape=(1,) + a.shape)
    b2 = b if b.ndim > 1 else reshape(b, shape=b.shape + (1,))
    if a.ndim == 1 and b.ndim == 1:
        g2 = reshape(g, shape=(1, 1))
    elif a.ndim == 1:
        g2 = reshape(g, shape=g.shape[:-1] + (1,) + g.shape[-1:])
    elif b.ndim == 1:
        g2 = reshape(g, shape=g.shape + (1,))
    else:
        g2 = g
    ga = gb = None
    if needs_grad(a):
        ga = matmul(g2, _swap_last(b2))           # (..., m, k)
        if a.ndim == 1:
            ga = reshape(ga, shape=ga.shape[:-2] + ga.shape[-1:])
    if needs_grad(b):
        gb = matmul(_swap_last(a2), g2)           # (..., k, n)
        if b.ndim == 1:
            gb = reshape(gb, shape=gb.shape[:-1])
    return ga, gb


@op("matmul", shape=_matmul_rule, vjp=_matmul_vjp, into=lambda xp: xp.matmul)
def matmul(xp, a, b):
    """Matrix product with NumPy's ``@`` semantics: batched over leading dims, 1-D promoted."""
    return xp.matmul(a, b)
