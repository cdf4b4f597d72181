"""Indexing: ``x[...]`` (ints, slices, None, Ellipsis, integer arrays, boolean masks), gather,
scatter_add and take; each differentiable, with vjps written in each other.

An index is split into a hashable ``spec`` (an attribute) and the index tensors (inputs), so the
same op works eagerly and under capture.
"""
import numpy as np

from ...errors import ShapeError, describe
from ..batching import ELEMENTWISE
from ..op import op
from ..shape_rules import normalize_dim, shape_of
from ..tensor import Tensor
from .shape import aligned, batch_size, expand_dims, materialized, moved, permute, reshape

_FULL = ("s", None, None, None)


# ---- index specs ------------------------------------------------------------------------------
def split_index(x, index):
    """``index`` -> (spec, tensors): a hashable description and the index tensors it refers to."""
    if not isinstance(index, tuple):
        index = (index,)
    spec, tensors = [], []
    for item in index:
        if isinstance(item, Tensor):
            spec.append(("t", len(tensors)))
            tensors.append(item)
        elif isinstance(item, slice):
            spec.append(("s", _int_or_none(item.start), _int_or_none(item.stop),
                         _int_or_none(item.step)))
        elif item is None:
            spec.append(("n",))
        elif item is Ellipsis:
            spec.append(("e",))
        elif isinstance(item, (bool, np.bool_)):
            raise ShapeError(f"indexing {describe(x)} with a Python bool is not supported; use a "
                             f"boolean tensor mask")
        elif isinstance(item, (int, np.integer)):
            spec.append(("i", int(item)))
        elif isinstance(item, (list, np.ndarray)):
            from ..creation import tensor as _tensor
            spec.append(("t", len(tensors)))
            tensors.append(_tensor(item, device=x.device))
        else:
            raise ShapeError(f"cannot index {describe(x)} with {type(item).__name__} {item!r}: use "
                             f"ints, slices, None, ..., integer or boolean tensors")
    return tuple(spec), tensors


def _int_or_none(v):
    return None if v is None else int(v)


def build_index(spec, arrays):
    """The backend index tuple for ``spec`` with index arrays ``arrays``."""
    out = []
    for item in spec:
        kind = item[0]
        if kind == "s":
            out.append(slice(item[1], item[2], item[3]))
        elif kind == "i":
            out.append(item[1])
        elif kind == "t":
            out.append(arrays[item[1]])
        elif kind == "n":
            out.append(None)
        else:
            out.append(Ellipsis)
    return tuple(out)


def _has_arrays(spec):
    return any(item[0] == "t" for item in spec)


def _check_index_dtypes(x, idx):
    for t in idx:
        if t.dtype.is_floating:
            raise ShapeError(f"getitem: index tensors must be integer or bool; got {describe(t)} "
                             f"to index {describe(x)}. Convert the index with idx.long().")


def _getitem_rule(x, *idx, spec):
    _check_index_dtypes(x, idx)
    dummy = np.broadcast_to(np.zeros((), x.dtype.np), shape_of(x))
    probe = [np.ones(shape_of(t), dtype=t.dtype.np) if t.dtype.name == "bool_"
             else np.zeros(shape_of(t), dtype=np.int64) for t in idx]
    try:
        out = dummy[build_index(spec, probe)]
    except IndexError as exc:
        raise ShapeError(f"getitem: index {_spec_text(spec)} does not fit {describe(x)}: {exc}") \
            from None
    shape = out.shape
    if any(t.dtype.name == "bool_" for t in idx):
        # a mask's count of True values is known only at run time: the dimensions that differ
        # between an all-True and an all-False mask are unknown (None) until then
        empty = [np.zeros(shape_of(t), dtype=np.bool_) if t.dtype.name == "bool_" else p
                 for t, p in zip(idx, probe)]
        other = dummy[build_index(spec, empty)].shape
        shape = tuple(None if a != b else a for a, b in zip(shape, other))
    return shape, x.dtype


def _spec_text(spec):
    parts = []
    for item in spec:
        k = item[0]
        if k == "s":
            parts.append(":".join("" if v is None else str(v) for v in item[1:3]) +
                         ("" if item[3] is None else f":{item[3]}"))
        elif k == "i":
            parts.append(str(item[1]))
        elif k == "t":
            parts.append(f"<tensor {item[1]}>")
        elif k == "n":
            parts.append("None")
        else:
            parts.append("...")
    return "[" + ", ".join(parts) + "]"


# ---- indexing a batch (lk.vmap) ------------------------------------------------------------------
def _is_mask(t):
    return t.dtype.name == "bool_"


def _index_plan(spec, idx, idx_bdims, x_ndim, x_batched, size):
    """How to index a batch of examples (each of ``x_ndim`` dimensions) at once: ``(spec,
    tensors, layout)`` such that ``x[spec]`` with the batch dimension first in ``x`` (if
    ``x_batched``) gives the batched result laid out as ``layout`` says (``_batch_first``).
    None where a boolean mask meets batched index tensors (then vmap goes example by example).

    NumPy's rule decides: index tensors (and ints, when there are any) next to each other put
    their dimensions where they stand; separated (by a slice, None or ...), first."""
    arrays = _has_arrays(spec)
    advanced = [i for i, item in enumerate(spec) if item[0] in ("t", "i")] if arrays else []
    adjacent = advanced == list(range(advanced[0], advanced[-1] + 1)) if advanced else True
    ndims = [1 if _is_mask(t) else t.ndim - (d is not None) for t, d in zip(idx, idx_bdims)]
    block = max(ndims, default=0)        # dimensions the index tensors give the result
    if all(d is None for d in idx_bdims):
        return ((_FULL,) + spec, list(idx), ("axis", 0 if adjacent else block))
    if any(_is_mask(t) for t in idx):
        return None
    tensors = [t if d is None else aligned(t, d, block) for t, d in zip(idx, idx_bdims)]
    before = _dims_before(spec, x_ndim)
    if not x_batched:
        return spec, tensors, ("axis", before if adjacent else 0)
    from ..creation import arange
    rows = arange(size, device=idx[0].device)
    tensors.append(reshape(rows, shape=(size,) + (1,) * block))
    spec = (("t", len(tensors) - 1),) + spec
    if adjacent and before:     # NumPy puts (batch, block) first: the block goes back in place
        return spec, tensors, ("block", block, before)
    return spec, tensors, ("axis", 0)


def _dims_before(spec, x_ndim):
    """How many dimensions of the result come before its first index tensor (or int)."""
    consumed = sum(1 for item in spec if item[0] in ("s", "i", "t"))
    n = 0
    for item in spec:
        kind = item[0]
        if kind in ("i", "t"):
            break
        n += (x_ndim - consumed) if kind == "e" else 1
    return n


def _batch_first(out, layout):
    """The batched result of ``_index_plan`` with its batch dimension first, each example's
    dimensions in order."""
    if layout[0] == "axis":
        return moved(out, layout[1])
    _, block, before = layout          # (batch, block, before, after) -> (batch, before, block, after)
    return permute(out, dims=_block_order(block, before, out.ndim))


def _block_order(block, before, ndim):
    return ((0,) + tuple(range(block + 1, block + 1 + before)) + tuple(range(1, block + 1)) +
            tuple(range(block + 1 + before, ndim)))


def _in_layout(values, layout):
    """Values laid out batch first, each example's dimensions in order, put in ``layout``."""
    if layout[0] == "axis":
        return moved(values, 0, layout[1])
    order = _block_order(layout[1], layout[2], values.ndim)
    inverse = [0] * len(order)
    for i, o in enumerate(order):
        inverse[o] = i
    return permute(values, dims=tuple(inverse))


def _getitem_batch(inputs, bdims, spec):
    x, idx = inputs[0], inputs[1:]
    plan = _index_plan(spec, idx, bdims[1:], x.ndim - (bdims[0] is not None),
                       bdims[0] is not None, batch_size(inputs, bdims))
    if plan is None:
        return NotImplemented
    spec, tensors, layout = plan
    if bdims[0] is not None:
        x = moved(x, bdims[0])
    out = _getitem(x, *tensors, spec=spec)
    return (out, layout[1]) if layout[0] == "axis" else (_batch_first(out, layout), 0)


def _getitem_vjp(g, out, x, *idx, spec):
    return (index_add(zeros_like(x), g, *idx, spec=spec),) + (None,) * len(idx)


def _getitem_vjp_into(xp, acc, g, out, x, *idx, spec):
    _add_at_index(xp, acc, g, idx, spec)


@op("getitem", shape=_getitem_rule, vjp=_getitem_vjp, vjp_into=_getitem_vjp_into,
    batch=_getitem_batch)
def _getitem(xp, x, *idx, spec):
    index = build_index(spec, idx)
    out = x[index]
    if not idx and not isinstance(out, xp.ndarray) and not any(i is Ellipsis for i in index):
        return x[index + (Ellipsis,)]    # one element as a 0-d view (x[1][0].add_(1) writes x)
    return out


def getitem(x, index):
    """``x[index]`` for ints, slices, None, ..., integer tensors/lists and boolean masks."""
    spec, tensors = split_index(x, index)
    return _getitem(x, *tensors, spec=spec)


def getitem_slices(x, dim, start, stop):
    """``x`` restricted to ``start:stop`` along ``dim`` (used by vjps of concat and split)."""
    spec = (_FULL,) * (dim % x.ndim) + (("s", start, stop, None),)
    return _getitem(x, spec=spec)


def add_at(xp, out, index, values):
    """``out[index] += values`` with repeated indices accumulated (NumPy's ``add.at``)."""
    if xp is np:
        np.add.at(out, index, values)
    else:
        import cupyx
        cupyx.scatter_add(out, index, values)


def _index_add_rule(base, values, *idx, spec):
    return shape_of(base), base.dtype


def _index_add_vjp(g, out, base, values, *idx, spec):
    return (g, _getitem(g, *idx, spec=spec)) + (None,) * len(idx)


def _result_ndim(spec, idx, idx_bdims, x_ndim):
    """How many dimensions one example's ``x[spec]`` has."""
    masks = sum(t.ndim - (d is not None) - 1 for t, d in zip(idx, idx_bdims) if _is_mask(t))
    consumed = sum(1 for item in spec if item[0] in ("s", "i", "t")) + masks
    rest = x_ndim - consumed
    n = sum(1 for item in spec if item[0] in ("s", "n")) + rest
    if _has_arrays(spec):
        n += max((1 if _is_mask(t) else t.ndim - (d is not None)
                  for t, d in zip(idx, idx_bdims)), default=0)
    return n


def _index_add_batch(inputs, bdims, spec):
    (base, values), idx = inputs[:2], inputs[2:]
    (db, dv), didx = bdims[:2], bdims[2:]
    size = batch_size(inputs, bdims)
    base = materialized(base, db, size)
    plan = _index_plan(spec, idx, didx, base.ndim - 1, True, size)
    if plan is None:
        return NotImplemented
    spec2, tensors, layout = plan
    n = _result_ndim(spec, idx, didx, base.ndim - 1)
    values = aligned(values if dv is not None else expand_dims(values, axes=(0,)),
                     0 if dv is None else dv, n)
    return index_add(base, _in_layout(values, layout), *tensors, spec=spec2), 0


@op("index_add", shape=_index_add_rule, vjp=_index_add_vjp, batch=_index_add_batch)
def index_add(xp, base, values, *idx, spec):
    """A copy of ``base`` with ``values`` added at ``index`` (repeated indices accumulate)."""
    out = base.copy()
    _add_at_index(xp, out, values, idx, spec)
    return out


def _add_at_index(xp, out, values, idx, spec):
    """``out[index] += values`` in place, repeated indices accumulated."""
    index = build_index(spec, idx)
    if _has_arrays(spec):
        add_at(xp, out, index, values)
    else:
        out[index] += values


@op("zeros_like", shape=lambda x: (shape_of(x), x.dtype), vjp=None, batch=ELEMENTWISE)
def zeros_like(xp, x):
    """Zeros with ``x``'s shape, dtype and device (no gradient flows to ``x``)."""
    return xp.zeros_like(x)


# ---- gather / scatter_add / take ------------------------------------------------------------
def _gather_rule(x, index, dim, opname="gather"):
    sx, si = shape_of(x), shape_of(index)
    d = normalize_dim(opname, dim, len(sx), x)
    if len(si) != len(sx) or any(si[i] > sx[i] for i in range(len(sx)) if i != d):
        raise ShapeError(f"{opname} along dim {dim}: index {describe(index)} must have the same "
                         f"number of dimensions as {describe(x)} and be no larger outside dim {d}"
                         f". Reshape the index (e.g. index.unsqueeze(...)) to fit.")
    if index.dtype.is_floating or index.dtype.name == "bool_":
        raise ShapeError(f"{opname}: index must be an integer tensor; got {describe(index)} to "
                         f"index {describe(x)}. Convert it with index.long().")
    return si, x.dtype


def _gather_vjp(g, out, x, index, dim):
    return _scatter_add(zeros_like(x), index, g, dim=dim), None


def _gather_batch(inputs, bdims, dim):
    size = batch_size(inputs, bdims)
    x, index = (materialized(a, d, size) for a, d in zip(inputs, bdims))
    return _gather(x, index, dim=normalize_dim("gather", dim, x.ndim - 1) + 1), 0


@op("gather", shape=_gather_rule, vjp=_gather_vjp, batch=_gather_batch)
def _gather(xp, x, index, dim):
    # PyTorch's gather lets index be smaller than x outside ``dim``; take_along_axis would
    # broadcast it instead, so x is first cut down to the index's extent there.
    d = _kernel_axis(dim, x.ndim)
    if any(si != sx for i, (si, sx) in enumerate(zip(index.shape, x.shape)) if i != d):
        x = x[tuple(slice(None) if i == d else slice(0, si) for i, si in enumerate(index.shape))]
    return xp.take_along_axis(x, index, axis=d)


def gather(x, dim, index):
    """PyTorch's gather: ``out[i][j] = x[i][index[i][j]]`` for ``dim=1`` (any rank)."""
    return _gather(x, index, dim=dim)


def _kernel_axis(dim, ndim):
    """``dim`` made non-negative; out of range raises (never wraps), so the rule explains it."""
    if not -ndim <= dim < ndim:
        raise IndexError(f"dim {dim} out of range for {ndim} dimension(s)")
    return dim % ndim


def _along_axis_index(xp, index, dim):
    """Full index tuple addressing ``index`` along ``dim`` and positions elsewhere."""
    grids = list(xp.indices(index.shape, sparse=True))
    grids[dim] = index
    return tuple(grids)


def _scatter_rule(x, index, src, dim):
    if shape_of(index) != shape_of(src):
        raise ShapeError(f"scatter_add: index {describe(index)} and src {describe(src)} must have "
                         f"the same shape (adding into {describe(x)}); slice src to the index's "
                         f"shape")
    _gather_rule(x, index, dim, "scatter_add")
    return shape_of(x), x.dtype


def _scatter_vjp(g, out, x, index, src, dim):
    return g, None, _gather(g, index, dim=dim)


def _scatter_batch(inputs, bdims, dim):
    size = batch_size(inputs, bdims)
    x, index, src = (materialized(a, d, size) for a, d in zip(inputs, bdims))
    return _scatter_add(x, index, src, dim=normalize_dim("scatter_add", dim, x.ndim - 1) + 1), 0


@op("scatter_add", shape=_scatter_rule, vjp=_scatter_vjp, batch=_scatter_batch)
def _scatter_add(xp, x, index, src, dim):
    out = x.copy()
    add_at(xp, out, _along_axis_index(xp, index, _kernel_axis(dim, x.ndim)), src)
    return out


def scatter_add(x, dim, index, src):
    """A copy of ``x`` with ``src`` added at ``index`` along ``dim`` (PyTorch's scatter_add)."""
    return _scatter_add(x, index, src, dim=dim)


def take(x, indices, dim=None):
    """Elements of ``x`` at integer ``indices`` along ``dim`` (None: of the flattened tensor)."""
    if dim is None:
        from .shape import reshape
        return getitem(reshape(x, shape=(-1,)), indices)
    d = normalize_dim("take", dim, x.ndim, x)
    return getitem(x, (slice(None),) * d + (indices,))
