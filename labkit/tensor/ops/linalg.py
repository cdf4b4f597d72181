"""Matrix multiplication, with NumPy's ``matmul`` semantics (batching, 1-D operands)."""
import math

import numpy as np

from ...devices import host_dnnl
from ...errors import ShapeError, describe
from ..op import needs_grad, op
from ..shape_rules import broadcast_shapes, shape_of, ufunc_dtype
from .elementwise import holomorphic
from .shape import aligned, expand_dims, moved, reshape


def _swapped(shape):
    return shape[:-2] + (shape[-1], shape[-2])


def _matmul_rule(a, b, transpose_a=False, transpose_b=False):
    sa, sb = shape_of(a), shape_of(b)
    for flag, name, s, x in ((transpose_a, "transpose_a", sa, a),
                             (transpose_b, "transpose_b", sb, b)):
        if flag and len(s) < 2:
            raise ShapeError(f"matmul: {name}=True swaps the last two dimensions, so it needs a "
                             f"tensor with at least 2; got {describe(x)}")
    sa = _swapped(sa) if transpose_a else sa
    sb = _swapped(sb) if transpose_b else sb
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
    try:
        batch = broadcast_shapes("matmul (batch dimensions)", ba, bb)
    except ShapeError:
        raise ShapeError(
            f"matmul: {sa} @ {sb}: the batch dimensions {tuple(sa[:-2])} and {tuple(sb[:-2])} "
            f"(all but the last two) cannot be broadcast together: each pair, matched from the "
            f"right, must be equal or 1. Inputs: {describe(a)}, {describe(b)}.") from None
    out = batch + (sa[-2:-1] if len(sa) > 1 else ()) + (sb[-1:] if len(sb) > 1 else ())
    return out, ufunc_dtype("matmul", np.matmul, a, b)


def matmul_t(a, b, transpose_a=False, transpose_b=False):
    """``matmul`` of ``a`` and ``b``, either with its last two dimensions swapped first (a view,
    no copy); only the flags that are set become attributes of the op."""
    attrs = {}
    if transpose_a:
        attrs["transpose_a"] = True
    if transpose_b:
        attrs["transpose_b"] = True
    return matmul(a, b, **attrs)


def _matmul_vjp(g, out, a, b, transpose_a=False, transpose_b=False):
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
    # out = op(a) @ op(b), op a transpose where its flag is set (the flags need 2-d operands)
    ga = gb = None
    if needs_grad(a):
        if transpose_a:                          # (g @ op(b)^T)^T = op(b) @ g^T
            ga = matmul_t(b2, g2, transpose_a=transpose_b, transpose_b=True)
        else:                                    # g @ op(b)^T: (..., m, k)
            ga = matmul_t(g2, b2, transpose_b=not transpose_b)
        if a.ndim == 1:
            ga = reshape(ga, shape=ga.shape[:-2] + ga.shape[-1:])
    if needs_grad(b):
        if b.ndim == 2 and a.ndim > 2 and not transpose_a:
            # a stack of rows times one matrix (a linear layer): one product over all the
            # rows, not a stack of products summed afterwards
            rows = math.prod(a.shape[:-1])
            a2, g2 = reshape(a, shape=(rows, a.shape[-1])), reshape(g, shape=(rows, g.shape[-1]))
        if transpose_b:                          # (op(a)^T @ g)^T = g^T @ op(a)
            gb = matmul_t(g2, a2, transpose_a=True, transpose_b=transpose_a)
        else:                                    # op(a)^T @ g: (..., k, n)
            gb = matmul_t(a2, g2, transpose_a=not transpose_a)
        if b.ndim == 1:
            gb = reshape(gb, shape=gb.shape[:-1])
    return ga, gb


def transposed(xp, a, b, transpose_a=False, transpose_b=False):
    """The arrays ``a`` and ``b`` with the last two dimensions swapped (a view) where the
    flag says so: the operands a kernel taking matmul's flags multiplies."""
    return (xp.swapaxes(a, -1, -2) if transpose_a else a,
            xp.swapaxes(b, -1, -2) if transpose_b else b)


def _matmul_into(xp, transpose_a=False, transpose_b=False):
    def into(a, b, out=None):
        return _product(xp, *transposed(xp, a, b, transpose_a, transpose_b), out=out)
    return into


def matmul_batch(inputs, bdims, transpose_a=False, transpose_b=False):
    """matmul's batching rule (also used by ``assign_add_matmul``'s)."""
    (a, b), (da, db) = inputs, bdims
    ra, rb = a.ndim - (da is not None), b.ndim - (db is not None)
    if db is None and ra == 1 and rb == 2:        # vectors @ one matrix: one (B, k) @ (k, n)
        return matmul_t(moved(a, da), b, transpose_b=transpose_b), 0
    if da is None and ra == 2 and rb == 1:        # one matrix @ vectors: (B, k) @ (m, k)^T
        return matmul_t(moved(b, db), a, transpose_b=not transpose_a), 0
    # otherwise as matrices ((k,) -> (1, k) and (k, 1)), batch dims first, padded to one rank
    if da is not None:
        a = moved(a, da)
    if db is not None:
        b = moved(b, db)
    if ra == 1:
        a = expand_dims(a, axes=(a.ndim - 1,))
    if rb == 1:
        b = expand_dims(b, axes=(b.ndim,))
    rank = max(ra, rb, 2)
    a = a if da is None else aligned(a, 0, rank)
    b = b if db is None else aligned(b, 0, rank)
    out = matmul_t(a, b, transpose_a=transpose_a, transpose_b=transpose_b)
    shape = list(out.shape)
    if rb == 1:
        del shape[-1]
    if ra == 1:
        del shape[-1 if rb == 1 else -2]
    return (reshape(out, shape=tuple(shape)) if ra == 1 or rb == 1 else out), 0


@op("matmul", shape=_matmul_rule, vjp=holomorphic(_matmul_vjp), into=_matmul_into,
    batch=matmul_batch, amp="low")
def matmul(xp, a, b, transpose_a=False, transpose_b=False):
    """Matrix product with NumPy's ``@`` semantics: batched over leading dims, 1-D promoted.
    ``transpose_a`` / ``transpose_b`` swap an operand's last two dimensions first (as BLAS's
    transpose flags: no copy, and no separate ``permute`` op in a gradient)."""
    return _product(xp, *transposed(xp, a, b, transpose_a, transpose_b))


def _product(xp, a, b, out=None):
    """``xp.matmul(a, b, out=out)``; a stack of rows times one matrix (``a`` (..., m, k) with
    its rows one after the other in memory, ``b`` 2-d) is one GEMM over all the rows, where
    ``matmul`` would run one small GEMM per matrix of the stack."""
    if a.ndim > 2 and b.ndim == 2 and a.flags.c_contiguous and \
            (out is None or out.flags.c_contiguous):
        rows = a.reshape(math.prod(a.shape[:-1]), a.shape[-1])
        if out is None:
            return _gemm(xp, rows, b).reshape(a.shape[:-1] + b.shape[-1:])
        _gemm(xp, rows, b, out=out.reshape(rows.shape[0], b.shape[-1]))
        return out
    if a.ndim == 2 and b.ndim == 2:
        return _gemm(xp, a, b, out)
    return xp.matmul(a, b, out=out)


def _gemm(xp, a, b, out=None):
    """The product of two matrices: oneDNN's GEMM where it serves (large float32 products at
    one thread, ``host_dnnl.matmul``: faster than OpenBLAS's on the Xeons measured), else
    ``xp.matmul``. (The dtype and size first: a program of small or float64 products never
    loads oneDNN, about 17 MB.) An inner dimension of 1 is an outer product, which
    OpenBLAS's GEMM runs at a fifth of the speed of a broadcast multiply (the same products,
    each rounded once)."""
    if a.shape[1] == 1 and xp is np and a.dtype.kind == "f" and b.dtype.kind == "f":
        return np.multiply(a, b, out=out)
    if a.shape[0] * a.shape[1] * b.shape[1] >= host_dnnl.MATMUL_MIN and \
            host_dnnl.serves(xp, a, b):
        result = host_dnnl.matmul(a, b, out)
        if result is not None:
            return result
    return xp.matmul(a, b, out=out)
