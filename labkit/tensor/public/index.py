"""Indexing functions in PyTorch's signatures: index_select, masked_select / masked_fill,
scatter / scatter_reduce, index_add / index_copy / index_fill / index_put, put, nonzero /
argwhere / ``where(condition)``, take_along_dim, and ``F.one_hot``.

>>> import labkit as lk
>>> x = lk.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
>>> x.index_select(1, lk.tensor([2, 0])).tolist(), x.masked_fill(x > 4, 0.0).tolist()
([[3.0, 1.0], [6.0, 4.0]], [[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
>>> lk.zeros(3).index_add(0, lk.tensor([0, 0, 2]), lk.tensor([1.0, 2.0, 3.0])).tolist()
[3.0, 0.0, 3.0]
>>> [t.tolist() for t in lk.where(x > 4)]
[[1, 1], [1, 2]]
"""
from types import SimpleNamespace

from ...errors import DTypeError, ShapeError, describe
from ..creation import full, zeros
from ..ops import elementwise as E
from ..ops import index as I
from ..ops import scatter as SC
from ..ops import shape as S
from ..shape_rules import broadcast_shapes, normalize_dim
from ..tensor import Tensor
from .registry import public, tensor_method


def _integer_index(name, index, x):
    if index.dtype.is_floating or index.dtype.name == "bool_":
        raise DTypeError(f"{name}: index must be an integer tensor; got {describe(index)} to "
                         f"index {describe(x)}. Convert it with index.long()")


def _same_dtype(name, x, other, what="source"):
    if isinstance(other, Tensor) and other.dtype is not x.dtype:
        raise DTypeError(f"{name}: {what} {describe(other)} must have the dtype of {describe(x)}; "
                         f"convert it first: {what}.to({x.dtype})")


def _vector_index(name, x, dim, index):
    """(dim as an axis, index as a 1-d tensor, spec of ``x[:, ..., index]``) for the ops that
    take one index along ``dim``; 0-d tensors are handled as shape (1,) by the callers."""
    _integer_index(name, index, x)
    if index.ndim > 1:
        raise ShapeError(f"{name}: index must be 1-d (or 0-d); got {describe(index)} to index "
                         f"{describe(x)}")
    d = normalize_dim(name, dim, x.ndim, x)
    return d, S.reshape(index, shape=(-1,)), (I._FULL,) * d + (("t", 0),)


def _as_vector(fn):
    """``fn(x, ...)`` for a 0-d ``x`` run on ``x`` as shape (1,) (PyTorch takes dim 0 of a
    0-d tensor), the result reshaped back."""
    def run(x, *args, **kwargs):
        if x.ndim:
            return fn(x, *args, **kwargs)
        flat = [S.reshape(a, shape=(1,)) if isinstance(a, Tensor) and not a.ndim else a
                for a in args]
        return S.reshape(fn(S.reshape(x, shape=(1,)), *flat, **kwargs), shape=())
    run.__name__, run.__doc__ = fn.__name__, fn.__doc__
    return run


# ---- along one dimension ----------------------------------------------------------------------
@public()
@_as_vector
def index_select(input, dim, index):
    """The slices of ``input`` at ``index`` (1-d) along ``dim``, in that order."""
    d, index, spec = _vector_index("index_select", input, dim, index)
    return I._getitem(input, index, spec=spec)


def _source_fits(name, x, d, index, source):
    want = x.shape[:d] + (index.shape[0],) + x.shape[d + 1:]
    if source.shape != want:
        raise ShapeError(f"{name}: source {describe(source)} must have the shape {want} of "
                         f"{describe(x)} with dim {d} as long as index {describe(index)}")


@public()
@_as_vector
def index_add(input, dim, index, source, *, alpha=1):
    """A copy of ``input`` with ``alpha * source`` added at ``index`` along ``dim``
    (repeated indices accumulate)."""
    d, index, spec = _vector_index("index_add", input, dim, index)
    _same_dtype("index_add", input, source)
    _source_fits("index_add", input, d, index, source)
    return I.index_add(input, source if alpha == 1 else source * alpha, index, spec=spec)


@public()
@_as_vector
def index_copy(input, dim, index, source):
    """A copy of ``input`` with the slices of ``source`` written at ``index`` along ``dim``."""
    d, index, spec = _vector_index("index_copy", input, dim, index)
    _same_dtype("index_copy", input, source)
    _source_fits("index_copy", input, d, index, source)
    return I.index_put(input, source, index, spec=spec)


@public()
def index_fill(input, dim, index, value):
    """A copy of ``input`` with ``value`` (a number or a 0-d tensor) at ``index`` along
    ``dim``."""
    x = input if input.ndim else S.reshape(input, shape=(1,))
    d, index, spec = _vector_index("index_fill", x, dim, index)
    picked = I.index_put(zeros(x.shape[d], dtype="bool_", device=x.device), True, index,
                         spec=(("t", 0),))
    mask = S.reshape(picked, shape=(x.shape[d],) + (1,) * (x.ndim - d - 1))
    out = _fill(x, mask, value, "index_fill")
    return out if input.ndim else S.reshape(out, shape=())


# ---- masks ----------------------------------------------------------------------------------
def _check_mask(name, mask, x):
    if mask.dtype.name != "bool_":
        raise DTypeError(f"{name}: mask must be a bool tensor; got {describe(mask)} for "
                         f"{describe(x)}. Compare to make one (x > 0), or convert it: mask.bool()")


def _fill(x, mask, value, name):
    if isinstance(value, Tensor) and value.ndim:
        raise ShapeError(f"{name}: value must be a number or a 0-d tensor; got {describe(value)}")
    out = E.where(mask, value, x)
    return out if out.dtype is x.dtype else E.cast(out, dtype=x.dtype.name)


@public()
def masked_fill(input, mask, value):
    """``input`` with ``value`` (a number or a 0-d tensor, converted to input's dtype) where the
    bool ``mask`` (broadcast with input) is True."""
    _check_mask("masked_fill", mask, input)
    return _fill(input, mask, value, "masked_fill")


@public()
def masked_select(input, mask):
    """The elements of ``input`` where the bool ``mask`` is True (the two broadcast together),
    as a 1-d tensor."""
    _check_mask("masked_select", mask, input)
    shape = broadcast_shapes("masked_select", input, mask)
    x = input if input.shape == shape else S.broadcast_to(input, shape=shape)
    m = mask if mask.shape == shape else S.broadcast_to(mask, shape=shape)
    return I.getitem(x, m)


# ---- scatter --------------------------------------------------------------------------------
def _scatter_source(name, x, index, src):
    """``src`` cut to index's extent (PyTorch reads only that part of a larger one)."""
    _integer_index(name, index, x)
    _same_dtype(name, x, src, "src")
    if not isinstance(src, Tensor) or src.shape == index.shape:
        return src
    if src.ndim != index.ndim or any(i > s for i, s in zip(index.shape, src.shape)):
        raise ShapeError(f"{name}: index {describe(index)} must be no larger than src "
                         f"{describe(src)} in every dimension")
    return I.getitem(src, tuple(slice(0, n) for n in index.shape))


_SCATTER_REDUCE = {"add": "sum", "multiply": "prod"}


@public()
@_as_vector
def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    """A copy of ``input`` with ``src`` (a tensor, or a number; or ``value=``) written at
    ``index`` along ``dim``: ``out[i][index[i][j]] = src[i][j]`` for ``dim=1``.
    ``reduce="add"`` or ``"multiply"`` combines with what is there instead.

    >>> import labkit as lk
    >>> lk.zeros(2, 3).scatter(1, lk.tensor([[2], [0]]), lk.ones(2, 1)).tolist()
    [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter: give src (a tensor or a number) or value=")
    src = _scatter_source("scatter", input, index, src)
    if reduce is None:
        return SC.scatter(input, index, src, dim=dim)
    if reduce not in _SCATTER_REDUCE:
        raise ValueError(f"scatter: reduce={reduce!r} is not 'add' or 'multiply'; "
                         f"scatter_reduce takes 'sum', 'prod', 'mean', 'amax', 'amin'")
    if not isinstance(src, Tensor):
        src = full(index.shape, src, dtype=input.dtype, device=input.device)
    return SC.scatter_reduce(input, index, src, dim=dim, reduce=_SCATTER_REDUCE[reduce])


@public()
@_as_vector
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """A copy of ``input`` where the values of ``src`` at ``index`` along ``dim`` are combined
    into their positions by ``reduce``: 'sum', 'prod', 'mean', 'amax' or 'amin', with
    input's own value there if ``include_self``.

    >>> import labkit as lk
    >>> src, index = lk.tensor([1.0, 5.0, 2.0]), lk.tensor([0, 0, 1])
    >>> lk.zeros(2).scatter_reduce(0, index, src, "amax", include_self=False).tolist()
    [5.0, 2.0]
    """
    if reduce not in SC.REDUCTIONS:
        raise ValueError(f"scatter_reduce: reduce={reduce!r} is not one of "
                         f"{', '.join(SC.REDUCTIONS)}")
    src = _scatter_source("scatter_reduce", input, index, src)
    return SC.scatter_reduce(input, index, src, dim=dim, reduce=reduce,
                             include_self=bool(include_self))


# ---- index tuples -----------------------------------------------------------------------------
@public()
def index_put(input, indices, values, accumulate=False):
    """A copy of ``input`` with ``values`` (broadcast) at ``input[indices]``, ``indices`` a
    tuple of index tensors (integer or bool); ``accumulate=True`` adds instead (repeated
    indices accumulate).

    >>> import labkit as lk
    >>> lk.zeros(2, 2).index_put((lk.tensor([0, 0]), lk.tensor([1, 1])), lk.tensor(1.0),
    ...                          accumulate=True).tolist()
    [[0.0, 2.0], [0.0, 0.0]]
    """
    indices = tuple(indices)
    if not all(isinstance(t, Tensor) for t in indices):
        raise TypeError(f"index_put: indices must be a tuple of tensors; got "
                        f"{[type(t).__name__ for t in indices]}. For slices use x[...] indexing")
    _same_dtype("index_put", input, values, "values")
    spec = tuple(("t", i) for i in range(len(indices)))
    return (I.index_add if accumulate else I.index_put)(input, values, *indices, spec=spec)


@public()
def put(input, index, source, accumulate=False):
    """A copy of ``input`` with ``source`` written at ``index`` into the flattened tensor
    (``accumulate=True`` adds instead)."""
    _integer_index("put", index, input)
    _same_dtype("put", input, source)
    if index.numel() != source.numel():
        raise ShapeError(f"put: index {describe(index)} and source {describe(source)} must have "
                         f"as many elements")
    flat = S.reshape(input, shape=(-1,))
    out = index_put(flat, (S.reshape(index, shape=(-1,)),), S.reshape(source, shape=(-1,)),
                    accumulate)
    return S.reshape(out, shape=input.shape)


# ---- where the values are -------------------------------------------------------------------
@public()
def nonzero(input, *, as_tuple=False):
    """The indices of the nonzero elements: a (count, ndim) int64 tensor, one row each, or with
    ``as_tuple=True`` one 1-d tensor per dimension (what ``x[...]`` takes).

    >>> import labkit as lk
    >>> lk.tensor([[0, 1], [2, 0]]).nonzero().tolist()
    [[0, 1], [1, 0]]
    """
    if not as_tuple:
        return I.nonzero(input)
    rows = I.nonzero(input if input.ndim else S.reshape(input, shape=(1,)))
    return tuple(I.getitem(rows, (slice(None), i)) for i in range(rows.shape[1]))


@public()
def argwhere(input):
    """The indices of the nonzero elements, one row each: shape (count, ndim), int64."""
    return I.nonzero(input)


@public(method=False)
def where(condition, input=None, other=None):
    """``input`` where ``condition`` is True, else ``other`` (broadcast together; either may be
    a number); ``lk.where(condition)`` alone is ``lk.nonzero(condition, as_tuple=True)``."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise TypeError("where: give both input and other, or neither (where(condition) gives "
                        "the indices where condition is True)")
    return E.where(condition, input, other)


@tensor_method("where")
def _where_method(self, condition, other):
    """``self`` where ``condition`` is True, else ``other``."""
    return E.where(condition, self, other)


# ---- gathering --------------------------------------------------------------------------------
@public()
def take_along_dim(input, indices, dim=None):
    """The values of ``input`` at ``indices`` along ``dim``, the two broadcast together in the
    other dimensions (``dim=None``: of the flattened tensors).

    >>> import labkit as lk
    >>> x = lk.tensor([[10, 30, 20], [60, 40, 50]])
    >>> lk.take_along_dim(x, x.argmax(1, keepdim=True), 1).tolist()
    [[30], [60]]
    """
    _integer_index("take_along_dim", indices, input)
    if dim is None:
        return I.gather(S.reshape(input, shape=(-1,)), 0, S.reshape(indices, shape=(-1,)))
    if input.ndim != indices.ndim:
        raise ShapeError(f"take_along_dim: input {describe(input)} and indices "
                         f"{describe(indices)} must have the same number of dimensions")
    d = normalize_dim("take_along_dim", dim, input.ndim, input)
    try:
        shape = broadcast_shapes("take_along_dim", _outside(input, d), _outside(indices, d))
    except ShapeError:
        raise ShapeError(f"take_along_dim: input {describe(input)} and indices "
                         f"{describe(indices)} must broadcast together outside dim {dim}") \
            from None
    return I.gather(_broadcast_except(input, shape, d), d, _broadcast_except(indices, shape, d))


def _outside(t, d):
    """Something with t's shape, size 1 at ``d`` (for broadcasting the other dimensions)."""
    return SimpleNamespace(shape=t.shape[:d] + (1,) + t.shape[d + 1:])


def _broadcast_except(t, shape, d):
    target = shape[:d] + (t.shape[d],) + shape[d + 1:]
    return t if t.shape == target else S.broadcast_to(t, shape=target)


# ---- one-hot --------------------------------------------------------------------------------
def one_hot(tensor, num_classes=-1):
    """PyTorch's ``F.one_hot``: an int64 tensor of shape ``tensor.shape + (num_classes,)``
    with 1 at each class index; ``num_classes=-1`` takes one more than the largest value.

    >>> import labkit as lk
    >>> lk.nn.functional.one_hot(lk.tensor([0, 2]), 3).tolist()
    [[1, 0, 0], [0, 0, 1]]
    """
    return I.one_hot(tensor, num_classes=int(num_classes))
