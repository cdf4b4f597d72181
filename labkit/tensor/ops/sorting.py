"""Sorting and selection: primitives that give int64 indices (argsort, the median's and the mode's
index along a dimension, searchsorted) or data-dependent shapes (unique), none differentiable.
The values of sort, topk, kthvalue, median and mode are gathered at those indices, so their
gradient goes to the indices, as PyTorch's rules send it.

NaN sorts after every number, as in PyTorch (first when descending).

>>> import labkit as lk
>>> from labkit.tensor.ops.sorting import argsort
>>> argsort(lk.tensor([3.0, 1.0, 2.0]), dim=0, descending=True).tolist()
[0, 2, 1]
"""
import math

import numpy as np

from ...errors import ShapeError, describe
from ..batching import ALONG_DIM, data_dependent
from ..creation import tensor
from ..dtypes import int32, int64
from ..op import op
from ..shape_rules import normalize_dim, reduced_shape, shape_of
from ..tensor import Tensor
from .scan import running, scan_axis
from .shape import batch_size, materialized, reshape


def _dim_rule(name, x, dim, nonempty=False):
    """``dim`` checked (one int, in range) and made non-negative; with ``nonempty``, the
    dimension must hold elements."""
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise ShapeError(f"{name}: dim must be one int, got dim={dim!r} for {describe(x)}")
    d = normalize_dim(name, dim, len(shape_of(x)), x)
    if nonempty and shape_of(x) and shape_of(x)[d] == 0:
        raise ShapeError(f"{name}: dim={dim} of {describe(x)} has no elements, and {name} of "
                         f"nothing is undefined. Check the shape, or pick a non-empty dimension.")
    return d


# ---- argsort ---------------------------------------------------------------------------------
def _argsort_rule(x, dim=-1, descending=False):
    _dim_rule("argsort", x, dim)
    return shape_of(x), int64


def argsort_kernel(xp, x, axis, descending=False):
    """Stable argsort along ``axis``: equal elements keep their order, NaN goes last (first when
    ``descending``)."""
    if not descending:
        return xp.argsort(x, axis=axis, kind="stable")
    # descending and stable: sort the reversed array, reverse the order, and map positions back
    flipped = xp.argsort(xp.flip(x, axis), axis=axis, kind="stable")
    return (x.shape[axis] - 1) - xp.flip(flipped, axis)


@op("argsort", shape=_argsort_rule, vjp=None, batch=ALONG_DIM)
def argsort(xp, x, dim=-1, descending=False):
    """Indices that sort ``x`` along ``dim`` (stable; ascending unless ``descending``)."""
    a = scan_axis(dim, x.ndim)
    if not x.ndim:
        return xp.zeros((), xp.int64)
    return argsort_kernel(xp, x, a, descending).astype(xp.int64, copy=False)


# ---- median and mode along a dimension -------------------------------------------------------
def _selection_rule(name):
    def rule(x, dim, **attrs):
        opname = "nanmedian" if attrs.get("ignore_nan") else name
        d = _dim_rule(opname, x, dim, nonempty=True)
        return reduced_shape(shape_of(x), (d,), True), int64
    return rule


@op("median_indices", shape=_selection_rule("median"), vjp=None, batch=ALONG_DIM)
def median_indices(xp, x, dim, ignore_nan=False):
    """The index of the lower median along ``dim`` (reduced dim kept as size 1), as PyTorch's
    median picks it: a row holding NaN gives its first NaN, unless ``ignore_nan`` (nanmedian:
    the lower median of the other values; a row of NaN only gives its first)."""
    a = scan_axis(dim, x.ndim)
    if not x.ndim:
        return xp.zeros((), xp.int64)
    order = argsort_kernel(xp, x, a)
    n = x.shape[a]
    numbers = (~xp.isnan(x)).sum(axis=a, keepdims=True) if x.dtype.kind == "f" else \
        xp.full(reduced_shape(x.shape, (a,), True), n)
    if ignore_nan:
        k = xp.maximum((numbers - 1) // 2, 0)
    else:
        k = xp.where(numbers < n, numbers, (n - 1) // 2)      # numbers < n: the first NaN
    return xp.take_along_axis(order, k.astype(xp.int64), axis=a).astype(xp.int64, copy=False)


@op("mode_indices", shape=_selection_rule("mode"), vjp=None, batch=ALONG_DIM)
def mode_indices(xp, x, dim):
    """The index of the most frequent value along ``dim`` (reduced dim kept as size 1): the
    smallest such value, at its last position, as PyTorch's mode gives it."""
    a = scan_axis(dim, x.ndim)
    if not x.ndim:
        return xp.zeros((), xp.int64)
    order = argsort_kernel(xp, x, a)
    ordered = xp.take_along_axis(x, order, axis=a)
    n = x.shape[a]
    position = xp.arange(n, dtype=xp.int64).reshape(
        tuple(-1 if i == a else 1 for i in range(x.ndim)))
    # where each run of equal values starts; a run's length so far at each of its positions
    cut = tuple(slice(1, None) if i == a else slice(None) for i in range(x.ndim))
    before = tuple(slice(0, -1) if i == a else slice(None) for i in range(x.ndim))
    starts = xp.ones(x.shape, bool)
    starts[cut] = ordered[cut] != ordered[before]
    run_start = running(xp, "maximum", xp.where(starts, position, 0), a)
    longest = xp.argmax(position - run_start, axis=a)   # the first (smallest) longest run's end
    return xp.take_along_axis(order, xp.expand_dims(longest, a), axis=a).astype(xp.int64,
                                                                                 copy=False)


# ---- unique ------------------------------------------------------------------------------------
_UNIQUE_RESULTS = ("values", "inverse", "counts")


def _unique_rule(x, dim=None, consecutive=False, result="values"):
    s = shape_of(x)
    name = "unique_consecutive" if consecutive else "unique"
    if result not in _UNIQUE_RESULTS:
        raise ValueError(f"{name}: result must be one of {_UNIQUE_RESULTS}, got {result!r}")
    if dim is None:
        shape = {"values": (None,), "inverse": s, "counts": (None,)}[result]
    else:
        d = _dim_rule(name, x, dim)
        if not s:
            s, d = (1,), 0
        if any(n == 0 for i, n in enumerate(s) if i != d):
            raise ShapeError(f"{name}: dim={dim} of {describe(x)}: the other dimensions hold no "
                             f"elements, so there are no slices to compare. Reduce over another "
                             f"dim, or check the shape.")
        shape = {"values": s[:d] + (None,) + s[d + 1:], "inverse": (s[d],),
                 "counts": (None,)}[result]
    return shape, (x.dtype if result == "values" else int64)


@op("unique", shape=_unique_rule, vjp=None, batch=data_dependent(
    "how many of its values are distinct",
    "Compute it outside the vmapped function, or with fixed shapes (sort, then compare "
    "neighbours)."))
def unique(xp, x, dim=None, consecutive=False, result="values"):
    """The distinct elements of ``x`` (``dim`` None), or distinct slices along ``dim``, in
    ascending order; with ``consecutive``, only runs of equal neighbours collapse. ``result`` picks what is returned: the ``values``, the
    ``inverse`` (for each element or slice, its position among the values) or the ``counts``.
    NaNs are all distinct, as in PyTorch."""
    if dim is None:
        rows, restore = x.reshape(-1, 1), None
    else:
        a = scan_axis(dim, x.ndim)
        moved = xp.moveaxis(x.reshape(x.shape or (1,)), a, 0)
        rows = moved.reshape(moved.shape[0], math.prod(moved.shape[1:]))
        restore = (moved.shape, a)
    n = rows.shape[0]
    if n and not rows.shape[1]:
        raise ValueError("slices without elements")      # the rule explains
    if consecutive:
        order = xp.arange(n)
    elif rows.shape[1] == 1:
        order = xp.argsort(rows[:, 0], kind="stable")
    else:
        order = xp.lexsort(rows.T[::-1])       # the first column is the primary key
    ordered = rows[order]
    starts = xp.ones(n, bool)
    starts[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    if result == "inverse":
        inverse = xp.empty(n, xp.int64)
        inverse[order] = xp.cumsum(starts) - 1
        return inverse.reshape(x.shape) if dim is None else inverse
    if result == "counts":
        first = xp.flatnonzero(starts)
        return xp.diff(xp.concatenate([first, xp.asarray([n])])).astype(xp.int64, copy=False)
    values = ordered[starts]
    if restore is None:
        return values.reshape(-1)
    shape, a = restore
    return xp.moveaxis(values.reshape((-1,) + shape[1:]), 0, a)


# ---- searchsorted ------------------------------------------------------------------------------
def _searchsorted_rule(sorted_sequence, values, right=False, out_int32=False):
    s, v = shape_of(sorted_sequence), shape_of(values)
    if not s or (len(s) > 1 and s[:-1] != v[:-1]):
        raise ShapeError(
            f"searchsorted: sorted_sequence {describe(sorted_sequence)} must be 1-D, or have the "
            f"leading dimensions of values {describe(values)} (one sorted row per row of "
            f"values); reshape or expand one of them to fit")
    return v, (int32 if out_int32 else int64)


def _searchsorted_batch(inputs, bdims, **attrs):
    (seq, values), (ds, dv) = inputs, bdims
    if ds is None and seq.ndim == 1:      # one sorted row for every example: by value
        return searchsorted(seq, values, **attrs), dv
    size = batch_size(inputs, bdims)
    seq = materialized(seq, ds, size)
    if isinstance(values, Tensor):
        values = materialized(values, dv, size)
    else:
        values = tensor(np.full((size,), values), device=seq.device)
    if seq.ndim > 2:                      # a sorted row per row of values: batch first in both
        return searchsorted(seq, values, **attrs), 0
    shape = tuple(values.shape)           # 1-D rows: each example's values as one row
    rows = reshape(values, shape=(size, math.prod(shape[1:])))
    return reshape(searchsorted(seq, rows, **attrs), shape=shape), 0


@op("searchsorted", shape=_searchsorted_rule, vjp=None, batch=_searchsorted_batch)
def searchsorted(xp, sorted_sequence, values, right=False, out_int32=False):
    """For each value, the position in ``sorted_sequence`` (sorted along its last dimension)
    where it would go to keep the order: before equal elements, or after them if ``right``."""
    side = "right" if right else "left"
    values = xp.asarray(values)
    dtype = xp.int32 if out_int32 else xp.int64
    if sorted_sequence.ndim == 1:
        return xp.asarray(xp.searchsorted(sorted_sequence, values, side=side)).astype(dtype)
    if sorted_sequence.shape[:-1] != values.shape[:-1]:
        raise ValueError("leading dimensions differ")      # the rule explains
    out = xp.empty(values.shape, dtype)
    for row in np.ndindex(sorted_sequence.shape[:-1]):     # one sorted row at a time
        out[row] = xp.searchsorted(sorted_sequence[row], values[row], side=side)
    return out
