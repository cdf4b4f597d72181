"""Shape primitives: reshape, permute, broadcast_to, concat (views where the backend allows);
and the pieces batching rules (``lk.vmap``) are made of."""
import math

import numpy as np

from ...errors import ShapeError, describe
from ..op import op
from ..dtypes import common_np_dtype, result_type
from ..shape_rules import dtype_of, normalize_dim, shape_of


def resolve_shape(opname, x_shape, shape, x=None):
    """``shape`` with one -1 filled in; ShapeError (describing ``x`` if given) if the sizes do
    not match."""
    what = describe(x) if x is not None else str(tuple(x_shape))
    if isinstance(shape, int):
        shape = (shape,)
    if any(s is None for s in shape):
        raise ShapeError(f"{opname}: the target shape {tuple(shape)} of {what} has sizes known "
                         f"only when the graph runs (they come from a boolean mask, nonzero or "
                         f"unique); reshape with -1 for at most one of them, or do this step "
                         f"outside lk.function")
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise ShapeError(f"{opname}: at most one dimension can be -1, got {shape} for {what}")
    if any(s is None for s in x_shape):      # sizes known only when the graph runs: -1 is too
        return tuple(None if s == -1 else s for s in shape)
    size = math.prod(x_shape)
    if -1 in shape:
        rest = math.prod(s for s in shape if s != -1)
        if rest == 0 or size % rest:
            raise ShapeError(f"{opname}: cannot reshape {what} ({size} elements) into {shape}: "
                             f"no size for the -1 dimension makes the element counts match")
        shape = tuple(size // rest if s == -1 else s for s in shape)
    if math.prod(shape) != size:
        raise ShapeError(f"{opname}: cannot reshape {what} ({size} elements) into {shape} "
                         f"({math.prod(shape)} elements); the element counts must match (use -1 "
                         f"for one dimension to have it inferred)")
    return shape


# ---- batching (lk.vmap): the pieces every rule is made of -------------------------------------
# A batching rule sees each input with its batch dimension where vmap found it (``d``; None for
# an input shared by every example). These put that dimension where a rule wants it.
def moved(x, d, to=0):
    """``x`` with its dimension ``d`` moved to position ``to`` (a permuted view)."""
    if d == to:
        return x
    order = [i for i in range(x.ndim) if i != d]
    order.insert(to, d)
    return permute(x, dims=tuple(order))


def aligned(x, d, ndim):
    """Batched ``x`` with its batch dimension first and size-1 dimensions after it, so that
    each example has ``ndim`` dimensions: it then broadcasts against unbatched operands of up
    to ``ndim`` dimensions as one example would."""
    x = moved(x, d)
    extra = ndim - (x.ndim - 1)
    return expand_dims(x, axes=tuple(range(1, 1 + extra))) if extra > 0 else x


def materialized(x, d, size):
    """``x`` with its batch dimension first; an unbatched ``x`` broadcast to ``size`` examples
    (a read-only view)."""
    if d is not None:
        return moved(x, d)
    return broadcast_to(expand_dims(x, axes=(0,)), shape=(size,) + tuple(x.shape))


def batch_size(inputs, bdims):
    """The number of examples: the size of the first batched input's batch dimension."""
    return next(x.shape[d] for x, d in zip(inputs, bdims) if d is not None)


# ---- the primitives -----------------------------------------------------------------------------
def _reshape_rule(x, shape):
    return resolve_shape("reshape", shape_of(x), shape, x), x.dtype


def _reshape_batch(inputs, bdims, shape):
    x = moved(inputs[0], bdims[0])
    return reshape(x, shape=(x.shape[0],) + resolve_shape("reshape", x.shape[1:], shape)), 0


@op("reshape", shape=_reshape_rule, vjp=lambda g, out, x, shape: (reshape(g, shape=x.shape),),
    batch=_reshape_batch, moves=True)
def reshape(xp, x, shape):
    """``x`` with a new shape holding the same elements (one dimension may be -1)."""
    return x.reshape(shape)


def _check_perm(x, dims):
    nd = len(shape_of(x))
    if sorted(d % nd if nd else d for d in dims) != list(range(nd)):
        raise ShapeError(f"permute: dims={tuple(dims)} is not a permutation of the {nd} "
                         f"dimensions of {describe(x)}: name each of 0..{nd - 1} exactly once")
    return tuple(d % nd for d in dims)


def _permute_rule(x, dims):
    dims = _check_perm(x, dims)
    s = shape_of(x)
    return tuple(s[d] for d in dims), x.dtype


def _permute_vjp(g, out, x, dims):
    nd = len(dims)
    inverse = [0] * nd
    for i, d in enumerate(dims):
        inverse[d % nd] = i
    return (permute(g, dims=tuple(inverse)),)


def _permute_batch(inputs, bdims, dims):
    x = moved(inputs[0], bdims[0])
    nd = x.ndim - 1
    return permute(x, dims=(0,) + tuple(d % nd + 1 for d in dims)), 0


@op("permute", shape=_permute_rule, vjp=_permute_vjp, batch=_permute_batch, moves=True)
def permute(xp, x, dims):
    """``x`` with its dimensions reordered: output dim i is input dim ``dims[i]``."""
    return x.transpose(dims)


def _broadcast_rule(x, shape):
    s, target = shape_of(x), tuple(shape)
    if len(s) > len(target) or any(a != 1 and a != b for a, b in zip(s[::-1], target[::-1])):
        raise ShapeError(
            f"broadcast_to: cannot broadcast {describe(x)} to shape {target}: matching trailing "
            f"dimensions, each of the tensor's must be 1 or equal the target's (and the target "
            f"may not have fewer dimensions). Reshape the tensor, or pick a target shape that "
            f"fits it.")
    return target, x.dtype


def _broadcast_vjp(g, out, x, shape):
    from .reduce import sum_to_shape
    return (sum_to_shape(g, x.shape),)


def _broadcast_batch(inputs, bdims, shape):
    x = aligned(inputs[0], bdims[0], len(shape))
    return broadcast_to(x, shape=(x.shape[0],) + tuple(shape)), 0


@op("broadcast_to", shape=_broadcast_rule, vjp=_broadcast_vjp, batch=_broadcast_batch,
    moves=True)
def broadcast_to(xp, x, shape):
    """A read-only view of ``x`` broadcast to ``shape`` (NumPy rules)."""
    strides = _broadcast_strides(x, shape) if xp is np else None
    if strides is None:
        return xp.broadcast_to(x, shape)
    out = np.ndarray(shape, x.dtype, x, 0, strides)   # a view of x (its base), made directly
    out.flags.writeable = False
    return out


def _broadcast_strides(x, shape):
    """The strides of NumPy's broadcast of a C-contiguous, non-empty array ``x`` of plain
    numbers to ``shape``, or None (any other array, or shapes that do not broadcast: NumPy's
    ``broadcast_to`` then runs, and explains). NumPy's own costs several microseconds a call,
    which a backward pass pays for every ``sum``/``mean`` of a loss."""
    n, k = len(shape), x.ndim
    if n < k or not x.size or x.dtype.kind not in "biufc" or not x.flags.c_contiguous:
        return None
    strides = [0] * n
    for i in range(1, k + 1):
        size = x.shape[-i]
        if size != 1:               # (a dimension of size 1 gets stride 0, as NumPy gives it)
            if size != shape[-i]:
                return None
            strides[-i] = x.strides[-i]
    return tuple(strides)


# ---- shapes known only when a graph runs ------------------------------------------------------
# In a captured graph, a shape that depends on the data (after a boolean mask) is None in some
# dimensions until the graph runs. vjp rules that would bake such a shape into an attribute
# (``broadcast_to(g, shape=x.shape)``) use these two instead: they read the shape at run time.
def _broadcast_like_rule(x, like):
    s, target = shape_of(x), shape_of(like)
    if len(s) > len(target) or any(a != 1 and b is not None and a is not None and a != b
                                   for a, b in zip(s[::-1], target[::-1])):
        raise ShapeError(f"broadcast_like: cannot broadcast {describe(x)} to the shape of "
                         f"{describe(like)}: matching trailing dimensions, each of the first's "
                         f"must be 1 or equal the second's")
    return target, x.dtype


def _broadcast_like_vjp(g, out, x, like):
    from .reduce import sum_to_shape
    return sum_to_shape(g, x.shape), None


def _broadcast_like_batch(inputs, bdims):
    (x, like), (dx, dl) = inputs, bdims
    nd = like.ndim - (dl is not None)
    if dx is not None:
        x = aligned(x, dx, nd)
    if dl is None:
        return broadcast_to(x, shape=(x.shape[0],) + tuple(like.shape)), 0
    return broadcast_like(x, moved(like, dl)), 0


@op("broadcast_like", shape=_broadcast_like_rule, vjp=_broadcast_like_vjp,
    batch=_broadcast_like_batch, moves=True, shape_only=(1,))
def broadcast_like(xp, x, like):
    """``x`` broadcast to the shape ``like`` has when the op runs (a read-only view)."""
    return xp.broadcast_to(x, like.shape)


def _expand_dims_rule(x, axes):
    s = list(shape_of(x))
    n = len(s) + len(axes)
    for a in sorted(normalize_dim("expand_dims", d, n, x) for d in axes):
        s.insert(a, 1)
    return tuple(s), x.dtype


def _expand_dims_vjp(g, out, x, axes):
    from .reduce import sum
    return (sum(g, dim=tuple(axes)),)


def _expand_dims_batch(inputs, bdims, axes):
    x = moved(inputs[0], bdims[0])
    n = x.ndim - 1 + len(axes)
    return expand_dims(x, axes=tuple(normalize_dim("expand_dims", a, n) + 1 for a in axes)), 0


@op("expand_dims", shape=_expand_dims_rule, vjp=_expand_dims_vjp, batch=_expand_dims_batch,
    moves=True)
def expand_dims(xp, x, axes):
    """``x`` with size-1 dimensions inserted at ``axes`` (positions in the result), whatever its
    other dimensions are when the op runs."""
    return xp.expand_dims(x, tuple(axes))


def _concat_rule(*xs, dim=0):
    if not xs:
        raise ShapeError("concat: needs at least one tensor")
    first = shape_of(xs[0])
    if not first:
        raise ShapeError(f"concat: cannot join 0-d tensors along an existing dimension "
                         f"({', '.join(describe(x) for x in xs)}); use lk.stack(...) to join them "
                         f"along a new one")
    d = normalize_dim("concat", dim, len(first), xs[0])
    for x in xs[1:]:
        s = shape_of(x)
        if len(s) != len(first) or any(a != b for i, (a, b) in enumerate(zip(s, first)) if i != d):
            raise ShapeError(
                f"concat along dim {dim}: every tensor must match except in that dimension; got "
                f"{', '.join(describe(x) for x in xs)}")
    total = sum(shape_of(x)[d] for x in xs)
    return first[:d] + (total,) + first[d + 1:], result_type(*[dtype_of(x) for x in xs])


def _concat_vjp(g, out, *xs, dim=0):
    from .index import getitem_slices
    d = dim % g.ndim
    grads, start = [], 0
    for x in xs:
        n = x.shape[d]
        grads.append(getitem_slices(g, d, start, start + n))
        start += n
    return tuple(grads)


def _concat_batch(inputs, bdims, dim=0):
    size = batch_size(inputs, bdims)
    xs = [materialized(x, d, size) for x, d in zip(inputs, bdims)]
    return concat(*xs, dim=normalize_dim("concat", dim, xs[0].ndim - 1) + 1), 0


@op("concat", shape=_concat_rule, vjp=_concat_vjp, batch=_concat_batch, moves=True)
def concat(xp, *xs, dim=0):
    """Join tensors along an existing dimension ``dim`` (dtypes promoted as PyTorch does)."""
    first = xs[0].dtype
    if any(x.dtype is not first for x in xs):
        return xp.concatenate(xs, axis=dim, dtype=common_np_dtype(xs))
    return xp.concatenate(xs, axis=dim)
