"""Indexing: ``x[...]`` (ints, slices, None, Ellipsis, bools, integer tensors, lists and tuples,
boolean masks), ``index_put``, gather, scatter_add and take; each differentiable, with vjps
written in each other.

An index is split into a hashable ``spec`` (an attribute) and the index tensors (inputs), so the
same op works eagerly and under capture.

The result's layout is PyTorch's: an integer index (a Python int or a 0-d integer tensor)
selects first, as basic indexing, and only the other advanced indices decide where their
dimensions go. So ``x[0, :, idx]`` has shape ``(x.shape[1], len(idx))``, where NumPy, which
counts the integer as an advanced index too, gives ``(len(idx), x.shape[1])``. Kernels index
the NumPy way and move the advanced dimensions to where PyTorch puts them (``_torch_move``).
"""
import functools
import math

import numpy as np

from ...errors import DataDependentShapeError, DTypeError, ShapeError, describe
from ..batching import ALONG_DIM, ELEMENTWISE, data_dependent
from ..dtypes import int64
from ..op import needs_grad, op
from ..shape_rules import normalize_dim, shape_of
from ..tensor import Tensor
from .shape import aligned, batch_size, expand_dims, materialized, moved, permute, reshape

_FULL = ("s", None, None, None)
_ALL = slice(None)


# ---- index specs ------------------------------------------------------------------------------
def split_index(x, index):
    """``index`` -> (spec, tensors): a hashable description and the index tensors it refers to."""
    if not isinstance(index, tuple):
        index = (index,)
    spec, tensors = [], []
    for item in index:
        if isinstance(item, Tensor):
            if item._device is not x._device and item._device.type == "cpu":
                item = item.to(x._device)        # PyTorch indexes a GPU tensor with CPU indices
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
            spec.append(("b", bool(item)))       # a new dimension of size 1 (True) or 0 (False)
        elif isinstance(item, (int, np.integer)):
            spec.append(("i", int(item)))
        elif isinstance(item, (list, tuple, np.ndarray)):
            spec.append(("t", len(tensors)))
            tensors.append(_index_tensor(x, item))
        else:
            raise ShapeError(f"cannot index {describe(x)} with {type(item).__name__} {item!r}: use "
                             f"ints, slices, None, ..., bools, integer or boolean tensors")
    return tuple(spec), tensors


def _index_tensor(x, item):
    """A list, tuple or array inside an index, as a tensor on ``x``'s device (an empty one as
    int64, as PyTorch reads ``x[[]]``)."""
    from ..creation import tensor as _tensor
    if not isinstance(item, np.ndarray) and not any(isinstance(i, Tensor) for i in item):
        item = np.asarray(item)
        if item.size == 0 and item.dtype.kind == "f":
            item = item.astype(np.int64)
    return _tensor(item, device=x.device)


def _int_or_none(v):
    return None if v is None else int(v)


def build_index(spec, arrays):
    """The backend index tuple for ``spec`` with index arrays ``arrays``."""
    out = []
    for item in spec:
        kind = item[0]
        if kind == "s":
            out.append(slice(item[1], item[2], item[3]))
        elif kind in ("i", "b"):
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


# ---- PyTorch's layout of mixed basic and advanced indices --------------------------------------
def _kinds(idx):
    """Per index tensor: (ndim, whether boolean), the key of ``_torch_move``."""
    return tuple((len(shape_of(t)), t.dtype.name == "bool_") for t in idx)


def _array_kinds(arrays):
    """``_kinds`` of index arrays (in kernels, so kept quick)."""
    if len(arrays) == 1:
        a = arrays[0]
        return ((a.ndim, a.dtype.kind == "b"),)
    return tuple([(a.ndim, a.dtype.kind == "b") for a in arrays])


@functools.lru_cache(maxsize=1024)
def _torch_move(spec, kinds, ndim):
    """``(to_torch, to_numpy)``, the permutations between NumPy's result and PyTorch's where they
    differ (NumPy puts the advanced dimensions first, PyTorch further in); else None.

    NumPy puts them first when the advanced indices, integers included, are not side by side;
    PyTorch applies integers as selections first, so only the other advanced indices count (and
    an Ellipsis standing for no dimension does not keep them apart)."""
    roles = []          # per item: (role, dims it consumes, basic dims it makes, index ndim)
    for item in spec:
        k = item[0]
        if k == "t":
            nd, is_bool = kinds[item[1]]
            roles.append(("adv", nd, 0, 1) if is_bool else
                         ("int", 1, 0, 0) if nd == 0 else ("adv", 1, 0, nd))
        elif k == "b":
            roles.append(("adv", 0, 0, 1))
        elif k == "i":
            roles.append(("int", 1, 0, 0))
        elif k == "e":
            roles.append(("e", 0, 0, 0))
        else:
            roles.append(("basic", 1 if k == "s" else 0, 1, 0))
    adv = [j for j, r in enumerate(roles) if r[0] == "adv"]
    if not adv or not any(r[0] in ("int", "e") for r in roles):
        return None
    numpy_adv = [j for j, r in enumerate(roles) if r[0] in ("adv", "int")]
    if numpy_adv[-1] - numpy_adv[0] == len(numpy_adv) - 1:
        return None                          # side by side: both keep them in place
    rest = ndim - sum(r[1] for r in roles)   # the dimensions an Ellipsis stands for
    # (an Ellipsis standing for none keeps nothing apart in PyTorch, where NumPy's does)
    kept = [j for j, r in enumerate(roles) if r[0] != "int" and (r[0] != "e" or rest)]
    torch_adv = [kept.index(j) for j in adv]
    if torch_adv[-1] - torch_adv[0] != len(torch_adv) - 1:
        return None                          # apart in PyTorch too: both put them first
    made = [rest if r[0] == "e" else r[2] for r in roles]
    b = max(r[3] for r in roles)
    p = sum(made[:adv[0]])
    if not b or not p:
        return None
    n = b + sum(made) + (0 if any(r[0] == "e" for r in roles) else rest)   # + trailing dims
    return (tuple(range(b, b + p)) + tuple(range(b)) + tuple(range(b + p, n)),
            tuple(range(p, p + b)) + tuple(range(p)) + tuple(range(p + b, n)))


def _layout_of(spec, idx, ndim):
    """``_torch_move`` for these index arrays (None at once where it cannot apply)."""
    if idx:
        return _torch_move(spec, _array_kinds(idx), ndim) if len(spec) > 1 else None
    return _torch_move(spec, (), ndim) if ("b", True) in spec or ("b", False) in spec else None


def _to_numpy_layout(values, move):
    """``values`` laid out for ``x[index]`` the PyTorch way (and broadcastable to it), moved to
    NumPy's layout."""
    to_numpy = move[1]
    if not hasattr(values, "ndim"):
        return values
    if values.ndim < len(to_numpy):
        values = values.reshape((1,) * (len(to_numpy) - values.ndim) + values.shape)
    return values.transpose(to_numpy)


# ---- the shape of x[index], from shapes alone ------------------------------------------------
def _mask_probe(shape, count):
    m = np.zeros(math.prod(shape), np.bool_)
    m[:count] = True
    return m.reshape(shape)


def indexed_shape(opname, x, idx, spec):
    """The shape of ``x[index]`` (PyTorch's layout), None in each dimension known only when the
    op runs: one that depends on a dimension unknown until then (None in an input's shape), or
    on how many values a boolean mask holds. Found by indexing zero-strided stand-ins of a few
    sizes and seeing which dimensions change."""
    sx, sidx = shape_of(x), [shape_of(t) for t in idx]
    kinds = _kinds(idx)
    big = 2 + max((abs(item[1]) for item in spec if item[0] == "i"), default=0)

    def probe(size, count):
        def fill(s):
            return tuple(size if d is None else d for d in s)
        arrays = [_mask_probe(fill(s), count) if is_bool
                  else np.broadcast_to(np.zeros((), np.int64), fill(s))
                  for s, (_, is_bool) in zip(sidx, kinds)]
        dummy = np.broadcast_to(np.zeros((), np.float32), fill(sx))
        return dummy[build_index(spec, arrays)].shape

    attempts = [(big, 1)]
    if None in sx or any(None in s for s in sidx):
        attempts += [(big + 1, 1), (0, 1), (1, 1)]
    if any(is_bool for _, is_bool in kinds):
        attempts += [(big, 2), (big, 0)]
    found, error = [], None
    for size, count in attempts:
        try:
            found.append(probe(size, count))
        except IndexError as exc:            # not a size (or count) the index allows
            error = error or exc
    if not found:
        raise ShapeError(f"{opname}: index {_spec_text(spec)} does not fit {describe(x)}"
                         f"{''.join(', ' + describe(t) for t in idx)}: {error}") from None
    shape = found[0]
    for other in found[1:]:
        shape = tuple(None if a != b else a for a, b in zip(shape, other))
    move = _torch_move(spec, kinds, len(sx)) if idx or ("b", True) in spec or \
        ("b", False) in spec else None
    if move:
        shape = tuple(shape[i] for i in move[0])
    return shape


def _check_index_dtypes(opname, x, idx):
    for t in idx:
        if t.dtype.is_floating:
            raise ShapeError(f"{opname}: index tensors must be integer or bool; got {describe(t)} "
                             f"to index {describe(x)}. Convert the index with idx.long().")


def _getitem_rule(x, *idx, spec):
    _check_index_dtypes("getitem", x, idx)
    return indexed_shape("getitem", x, idx, spec), x.dtype


def _spec_text(spec):
    parts = []
    for item in spec:
        k = item[0]
        if k == "s":
            parts.append(":".join("" if v is None else str(v) for v in item[1:3]) +
                         ("" if item[3] is None else f":{item[3]}"))
        elif k in ("i", "b"):
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


def _torch_dims(spec, kinds, ndim):
    """The dimensions of ``x[spec]`` (``x`` of ``ndim`` dimensions; ``kinds`` as ``_kinds``
    gives them) in PyTorch's layout, which the kernels give, each named: ``("x", i)`` for x's
    dimension i (kept by a slice, an Ellipsis, or no index), ``("new", n)`` for the n-th None,
    ``("adv", k)`` for dimension k of the advanced indices' broadcast block.

    PyTorch selects with the ints first; the other advanced indices (tensors, masks, bools)
    put their block where they stand if they are side by side, else first."""
    def consumes(item):
        if item[0] == "t":
            nd, is_bool = kinds[item[1]]
            return nd if is_bool else 1
        return 1 if item[0] in ("s", "i") else 0
    rest = ndim - sum(consumes(item) for item in spec)      # what an Ellipsis stands for
    kept = []        # per item PyTorch keeps: the names of the dims it makes; None: advanced
    dim = new = block = 0
    for item in spec:
        k = item[0]
        if k == "t" and kinds[item[1]] != (0, False):        # (a 0-d integer tensor is an int)
            nd, is_bool = kinds[item[1]]
            kept.append(None)
            block = max(block, 1 if is_bool else nd)
        elif k == "b":
            kept.append(None)
            block = max(block, 1)
        elif k == "s":
            kept.append([("x", dim)])
        elif k == "n":
            kept.append([("new", new)])
            new += 1
        elif k == "e" and rest:
            kept.append([("x", dim + i) for i in range(rest)])
        dim += rest if k == "e" else consumes(item)
    trailing = [("x", i) for i in range(dim, ndim)]
    adv = [j for j, names in enumerate(kept) if names is None]

    def basic(items):
        return [name for names in items if names is not None for name in names]
    if not adv:
        return basic(kept) + trailing
    advanced = [("adv", k) for k in range(block)]
    if adv[-1] - adv[0] == len(adv) - 1:
        return basic(kept[:adv[0]]) + advanced + basic(kept[adv[0]:]) + trailing
    return advanced + basic(kept) + trailing


def _masks_as_integers(spec, idx, idx_bdims):
    """``(spec, idx, idx_bdims)`` with each boolean mask of one or more dimensions (shared by
    the examples) replaced by the integer indices of its True elements, one tensor per
    dimension it covers, as PyTorch indexes with a mask; None where a 0-d mask is among them."""
    out_spec, out_idx, out_bdims = [], [], []
    for item in spec:
        if item[0] != "t":
            out_spec.append(item)
            continue
        t, d = idx[item[1]], idx_bdims[item[1]]
        if not _is_mask(t):
            columns = [t]
        elif t.ndim == 0:
            return None
        else:
            rows = nonzero(t)
            columns = [_getitem(rows, spec=(_FULL, ("i", i))) for i in range(t.ndim)]
        for c in columns:
            out_spec.append(("t", len(out_idx)))
            out_idx.append(c)
            out_bdims.append(d)
    return tuple(out_spec), out_idx, out_bdims


def _refuse_mask(opname):
    raise DataDependentShapeError(
        opname, f"lk.vmap cannot batch {opname} with a boolean mask that differs from example "
                f"to example (x[mask], masked_select): the size of the result depends on each "
                f"example's mask, so the examples' results need not have one shape and cannot "
                f"be stacked into one batch (PyTorch's vmap refuses it too). Keep shapes fixed: "
                f"lk.where(mask, x, 0) instead of x[mask].")


def _index_plan(opname, spec, idx, idx_bdims, x_ndim, x_batched, size):
    """How to index a batch of examples (each of ``x_ndim`` dimensions) at once: ``(spec,
    tensors, order)`` such that ``x[spec]``, with the batch dimension first in ``x`` (if
    ``x_batched``), gives the batch's result, which ``order`` permutes to batch first, each
    example's dimensions in order (``_batch_first``). None where that takes a loop (a 0-d
    mask beside batched index tensors). A mask that differs between examples is refused."""
    if any(_is_mask(t) and d is not None for t, d in zip(idx, idx_bdims)):
        _refuse_mask(opname)
    example = _torch_dims(spec, tuple((len(shape_of(t)) - (d is not None), _is_mask(t))
                                      for t, d in zip(idx, idx_bdims)), x_ndim)
    if all(d is None for d in idx_bdims):
        # the examples share the index: the batch is one more sliced dimension of x
        spec, tensors, batch = (_FULL,) + spec, list(idx), ("x", 0)
    else:
        # the batch is the first dimension of the advanced block: the index tensors, batch
        # first and padded to the block's rank, pick each example's own; ``rows`` picks x's
        planned = _masks_as_integers(spec, idx, idx_bdims)
        if planned is None:
            return None
        spec, idx, idx_bdims = planned
        block = sum(1 for name in example if name[0] == "adv")
        tensors = [t if d is None else aligned(t, d, block) for t, d in zip(idx, idx_bdims)]
        if x_batched:
            from ..creation import arange
            rows = arange(size, device=idx[0].device)
            tensors.append(reshape(rows, shape=(size,) + (1,) * block))
            spec = (("t", len(tensors) - 1),) + spec
        batch = ("adv", 0)

    def as_example(name):
        if name == batch:
            return "batch"
        if name[0] == "adv" == batch[0] or name[0] == "x" and x_batched:
            return (name[0], name[1] - 1)
        return name
    got = [as_example(name) for name in _torch_dims(spec, _kinds(tensors), x_ndim + x_batched)]
    return spec, tensors, tuple(got.index(name) for name in ["batch"] + example)


def _batch_first(out, order):
    """The batched result of ``_index_plan``, batch dimension first: ``(out, bdim)``."""
    rest = tuple(i for i in range(len(order)) if i != order[0])
    if order[1:] == rest:          # only the batch dimension is elsewhere: say where
        return out, order[0]
    return permute(out, dims=order), 0


def _in_layout(values, order):
    """Values laid out batch first, each example's dimensions in order, put in the layout of
    ``x[spec]`` of ``_index_plan``."""
    inverse = [0] * len(order)
    for i, o in enumerate(order):
        inverse[o] = i
    return permute(values, dims=tuple(inverse))


def _getitem_batch(inputs, bdims, spec):
    x, idx = inputs[0], inputs[1:]
    plan = _index_plan("getitem", spec, idx, bdims[1:], x.ndim - (bdims[0] is not None),
                       bdims[0] is not None, batch_size(inputs, bdims))
    if plan is None:
        return NotImplemented
    spec, tensors, order = plan
    if bdims[0] is not None:
        x = moved(x, bdims[0])
    return _batch_first(_getitem(x, *tensors, spec=spec), order)


def _getitem_vjp(g, out, x, *idx, spec):
    return (index_add(zeros_like(x), g, *idx, spec=spec),) + (None,) * len(idx)


def _getitem_vjp_into(xp, acc, g, out, x, *idx, spec):
    _add_at_index(xp, acc, g, idx, spec)


@op("getitem", shape=_getitem_rule, vjp=_getitem_vjp, vjp_into=_getitem_vjp_into,
    batch=_getitem_batch)
def _getitem(xp, x, *idx, spec):
    index = build_index(spec, idx)
    out = x[index]
    move = _layout_of(spec, idx, x.ndim)
    if move is not None:
        return out.transpose(move[0])
    if not idx and not isinstance(out, xp.ndarray) and not any(i is Ellipsis for i in index):
        return x[index + (Ellipsis,)]    # one element as a 0-d view (x[1][0].add_(1) writes x)
    return out


def getitem(x, index):
    """``x[index]`` for ints, slices, None, ..., bools, integer tensors/lists/tuples and boolean
    masks, with PyTorch's rules."""
    spec, tensors = split_index(x, index)
    return _getitem(x, *tensors, spec=spec)


def getitem_slices(x, dim, start, stop):
    """``x`` restricted to ``start:stop`` along ``dim`` (used by vjps of concat and split)."""
    spec = (_FULL,) * (dim % x.ndim) + (("s", start, stop, None),)
    return _getitem(x, spec=spec)


def add_at(xp, out, index, values):
    """``out[index] += values`` with repeated indices accumulated (NumPy's ``add.at``)."""
    if xp is np:
        if not _add_rows(out, index, values):
            np.add.at(out, index, values)
    else:
        import cupyx
        cupyx.scatter_add(out, index, values)


# Below this many values, NumPy's add.at costs less than building a sparse matrix.
_ROWS_MIN_SIZE = 4096


def _add_rows(out, index, values):
    """``out[rows] += values`` for ``index`` an integer array of rows (then full slices), on the
    host, as a sparse product: a matrix with a one at (row, position) for every position of
    ``rows``, times the values laid out one position a row. An embedding's gradient is this
    sum (1024 rows of 128 into 256: 0.08 ms, where ``add.at`` takes 1.2 ms); each row's values
    are added in the order of their positions, from zero, as ``add.at`` adds them. False where
    it does not apply (other indices, broadcast values, an index out of range: ``add.at``
    then raises)."""
    rows = index[0] if isinstance(index, tuple) and index else None
    if not isinstance(rows, np.ndarray) or not isinstance(values, np.ndarray) or \
            rows.dtype.kind not in "iu" or \
            any(not isinstance(i, slice) or i != _ALL for i in index[1:]) or \
            values.dtype != out.dtype or \
            out.dtype.kind != "f" or values.size < _ROWS_MIN_SIZE or \
            values.shape != rows.shape + out.shape[1:] or not out.flags.c_contiguous:
        return False
    n = out.shape[0]
    rows = rows.reshape(-1)
    if rows.size and rows.min() < 0:
        rows = np.where(rows < 0, rows + n, rows)
    counts = np.bincount(rows, minlength=n) if rows.size and rows.min() >= 0 else None
    if counts is None or counts.size > n:
        return False
    import scipy.sparse
    indptr = np.zeros(n + 1, np.intp)
    np.cumsum(counts, out=indptr[1:])
    picks = scipy.sparse.csr_matrix(
        (np.ones(rows.size, out.dtype), np.argsort(rows, kind="stable"), indptr),
        shape=(n, rows.size))
    flat = out.reshape(n, -1)          # a view: out is contiguous
    flat += picks @ values.reshape(rows.size, -1)
    return True


def _index_put_rule(opname):
    def rule(base, values, *idx, spec, **accumulate):
        _check_index_dtypes(opname, base, idx)
        target = indexed_shape(opname, base, idx, spec)
        vs = shape_of(values)
        if len(vs) > len(target) or any(
                a != 1 and b is not None and a is not None and a != b
                for a, b in zip(vs[::-1], target[::-1])):
            raise ShapeError(f"{opname}: values {describe(values)} do not broadcast to the shape "
                             f"{tuple(target)} that index {_spec_text(spec)} picks from "
                             f"{describe(base)}; give values of that shape (or one that "
                             f"broadcasts to it)")
        return shape_of(base), base.dtype
    return rule


def _index_add_vjp(g, out, base, values, *idx, spec):
    return (g, _getitem(g, *idx, spec=spec)) + (None,) * len(idx)


def _index_write_batch(opname):
    """The batching rule of index_add / index_put (``opname``)."""
    def rule(inputs, bdims, spec):
        (base, values), idx = inputs[:2], inputs[2:]
        (db, dv), didx = bdims[:2], bdims[2:]
        size = batch_size(inputs, bdims)
        base = materialized(base, db, size)
        plan = _index_plan(opname, spec, idx, didx, base.ndim - 1, True, size)
        if plan is None:
            return NotImplemented
        spec, tensors, order = plan
        if isinstance(values, Tensor):     # batch first, the example's rank, in x[spec]'s layout
            values = aligned(values if dv is not None else expand_dims(values, axes=(0,)),
                             0 if dv is None else dv, len(order) - 1)
            values = _in_layout(values, order)
        fn = index_add if opname == "index_add" else index_put
        return fn(base, values, *tensors, spec=spec), 0
    return rule


@op("index_add", shape=_index_put_rule("index_add"), vjp=_index_add_vjp,
    batch=_index_write_batch("index_add"))
def index_add(xp, base, values, *idx, spec):
    """A copy of ``base`` with ``values`` added at ``index`` (repeated indices accumulate)."""
    out = base.copy()
    _add_at_index(xp, out, values, idx, spec)
    return out


def _add_at_index(xp, out, values, idx, spec):
    """``out[index] += values`` in place, repeated indices accumulated."""
    index = build_index(spec, idx)
    move = _layout_of(spec, idx, out.ndim)
    if move is not None:
        values = _to_numpy_layout(values, move)
    if _has_arrays(spec):
        add_at(xp, out, index, values)
    else:
        out[index] += values


def _index_put_vjp(g, out, base, values, *idx, spec):
    return ((index_put(g, 0, *idx, spec=spec) if needs_grad(base) else None),
            (_getitem(g, *idx, spec=spec) if needs_grad(values) else None)) + (None,) * len(idx)


@op("index_put", shape=_index_put_rule("index_put"), vjp=_index_put_vjp,
    batch=_index_write_batch("index_put"))
def index_put(xp, base, values, *idx, spec):
    """A copy of ``base`` with ``values`` written at ``index`` (``x[index] = values``; where an
    index repeats, one of its values is kept). ``index_add`` accumulates instead."""
    out = base.copy()
    move = _layout_of(spec, idx, out.ndim)
    out[build_index(spec, idx)] = values if move is None else _to_numpy_layout(values, move)
    return out


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


@op("gather", shape=_gather_rule, vjp=_gather_vjp, batch=ALONG_DIM)
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


def open_grid(xp, shape):
    """``xp.indices(shape, sparse=True)`` (one ``arange`` per dimension, shaped to broadcast
    against the others), written out: CuPy's ``indices`` has no ``sparse``."""
    n = len(shape)
    return [xp.arange(size).reshape((1,) * d + (size,) + (1,) * (n - d - 1))
            for d, size in enumerate(shape)]


def _along_axis_index(xp, index, dim):
    """Full index tuple addressing ``index`` along ``dim`` and positions elsewhere."""
    grids = open_grid(xp, index.shape)
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


@op("scatter_add", shape=_scatter_rule, vjp=_scatter_vjp, batch=ALONG_DIM)
def _scatter_add(xp, x, index, src, dim):
    out = x.copy()
    d = _kernel_axis(dim, x.ndim)
    if not _add_one_per_line(xp, out, index, src, d):
        add_at(xp, out, _along_axis_index(xp, index, d), src)
    return out


# Positions along an axis up to this long are handled one after another (pooling windows):
# scatter_add of one position per line here, argmax/argmin in reduce.py.
SHORT_AXIS = 16


def _add_one_per_line(xp, out, index, src, d):
    """``scatter_add`` where ``index`` picks one position of a short axis ``d`` for every line
    along it (the gradient of a max-pool's window maximum), on the host: one masked add per
    position. False where that does not apply (other shapes, an index out of range)."""
    k = out.shape[d]
    if xp is not np or index.shape[d] != 1 or not 2 <= k <= SHORT_AXIS or index.size < 1024 or \
            any(si != so for i, (si, so) in enumerate(zip(index.shape, out.shape)) if i != d):
        return False
    if index.min() < 0 or index.max() >= k:
        return False
    if not out.flags.c_contiguous or src.dtype != out.dtype or src.dtype.kind not in "iuf" or \
            (src.dtype.kind == "f" and not np.isfinite(src).all()):
        return False             # (0 * inf would be NaN where nothing is added)
    outer = math.prod(out.shape[:d])
    lines = out.reshape(outer, k, -1)          # a view: long inner loops for the ufuncs
    index, src = index.reshape(outer, -1), src.reshape(outer, -1)
    hit = np.empty(index.shape, np.bool_)
    part = np.empty(src.shape, src.dtype)
    for i in range(k):           # branch-free: a masked add costs ten times as much
        np.equal(index, i, out=hit)
        np.multiply(src, hit, out=part)
        lines[:, i] += part
    return True


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


# ---- indices of data: nonzero, repeat_interleave ------------------------------------------------
def _nonzero_rule(x):
    return (None, len(shape_of(x))), int64


@op("nonzero", shape=_nonzero_rule, vjp=None, batch=data_dependent(
    "how many of its elements are nonzero",
    "Keep shapes fixed: a mask (x != 0) with lk.where, or compute it outside lk.vmap."))
def nonzero(xp, x):
    """The indices of ``x``'s nonzero elements, one row each, in row-major order: shape
    (count, x.ndim), int64. The count is known only when the op runs."""
    return xp.argwhere(x).astype(xp.int64, copy=False)


def _repeat_interleave_rule(repeats, output_size=None):
    if len(shape_of(repeats)) != 1 or repeats.dtype.is_floating or repeats.dtype.name == "bool_":
        raise ShapeError(f"repeat_interleave: repeats must be a 1-d integer tensor; got "
                         f"{describe(repeats)}")
    return (output_size,), int64


@op("repeat_interleave", shape=_repeat_interleave_rule, vjp=None, batch=data_dependent(
    "the sum of its repeats; an output_size would be one example's",
    "Repeat by an int, or by repeats shared by every example (in_axes None for them)."))
def repeat_interleave(xp, repeats, output_size=None):
    """``i`` repeated ``repeats[i]`` times, for each ``i`` in order (int64): the index that
    ``x.repeat_interleave(repeats, dim)`` picks along ``dim``. ``output_size``, the sum of
    ``repeats``, makes the result's length known before the op runs."""
    if repeats.size and int(repeats.min()) < 0:
        raise ValueError(f"repeat_interleave: repeats must be >= 0, got {repeats.min()}")
    ends = xp.cumsum(repeats)          # (CuPy's repeat takes no array of counts)
    total = int(ends[-1]) if repeats.shape[0] else 0
    out = xp.searchsorted(ends, xp.arange(total), side="right").astype(xp.int64, copy=False)
    if output_size is not None and out.shape[0] != output_size:
        raise ValueError(f"repeat_interleave: output_size={output_size}, but the repeats add up "
                         f"to {out.shape[0]}")
    return out


def _one_hot_rule(x, num_classes=-1):
    if x.dtype is not int64:
        raise DTypeError(f"one_hot: takes an int64 tensor of class indices; got {describe(x)}. "
                         f"Convert it with .long()")
    return shape_of(x) + (num_classes if num_classes >= 0 else None,), int64


def _one_hot_batch(inputs, bdims, num_classes=-1):
    if num_classes < 0:
        raise DataDependentShapeError(
            "one_hot", "lk.vmap cannot batch one_hot without num_classes: the number of classes "
                       "would be read from each example's largest index, so the examples' "
                       "results need not have one shape (PyTorch's vmap refuses it too). Pass "
                       "num_classes=.")
    return one_hot(inputs[0], num_classes=num_classes), bdims[0]    # (classes come last)


@op("one_hot", shape=_one_hot_rule, vjp=None, batch=_one_hot_batch)
def one_hot(xp, x, num_classes=-1):
    """``x``'s class indices as one-hot rows: shape ``x.shape + (num_classes,)``, int64, 1 at
    each index. ``num_classes=-1``: one more than the largest index (read when the op runs)."""
    if x.dtype != xp.int64:
        raise TypeError("one_hot of a non-int64 array")     # the rule explains it
    if num_classes < 0:
        if not x.size:
            raise ValueError("one_hot: cannot tell num_classes from an empty tensor; pass it")
        num_classes = int(x.max()) + 1
    if x.size and (int(x.min()) < 0 or int(x.max()) >= num_classes):
        raise ValueError(f"one_hot: class values must lie in 0..{num_classes - 1}; got "
                         f"{int(x.min()) if int(x.min()) < 0 else int(x.max())}")
    return (x[..., None] == xp.arange(num_classes)).astype(xp.int64)
