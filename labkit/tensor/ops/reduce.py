"""Reductions: sum, max, min (differentiable), argmax, argmin; ``sum_to_shape`` for unbroadcasting."""
import itertools
import math

import numpy as np

from ...errors import ArgumentError, IndexingError, ShapeError, describe
from .. import arguments
from ..batching import ONE_DIM_REDUCTION, REDUCTION
from ..dtypes import from_numpy_dtype, int64
from ..op import op
from ..shape_rules import normalize_dims, reduced_shape, refuse_complex, shape_of
from .elementwise import cast, div, eq, mul
from .index import SHORT_AXIS
from .shape import broadcast_like, broadcast_to, expand_dims, moved, reshape


def _axes(dim, ndim):
    """Kernel-side axes: None (all, and any dim of a 0-d tensor), or a tuple of axes.

    Out-of-range dims are passed on for the backend to reject (never wrapped around), so the
    dispatcher turns its failure into the rule's clear error.
    """
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if not ndim:
        if any(d not in (0, -1) for d in dims):
            raise IndexError(f"dim {dim} out of range for a 0-d tensor")
        return None
    return dims


def _fast_path_axes(dim, ndim):
    """The sorted axes of ``dim`` for the reductions' fast paths, or None where they do not
    apply: every axis (``dim`` None), or a dim out of range (left to the backend, which raises,
    and then to the rule's error)."""
    if dim is None:
        return None
    if type(dim) is tuple and len(dim) == 1 and type(dim[0]) is int:   # (sum_to_shape's)
        dim = dim[0]
    if type(dim) is int:
        return [dim % ndim] if -ndim <= dim < ndim else None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if any(not -ndim <= d < ndim for d in dims):
        return None
    return sorted({d % ndim for d in dims})


def _reduce(xp, x, dim, keepdim, method, combine):
    """The array method ``method`` ('sum', 'max', 'min') over ``dim``; a strided view reduced
    over a few small axes (the windows of pooling) is folded with the elementwise ``combine``
    instead, which NumPy runs far faster than a reduction over non-contiguous axes."""
    axes = _axes(dim, x.ndim)
    short = _short_rows(xp, x, axes, keepdim, method)
    if short is not None:
        return short
    reduction = getattr(x, method)
    if axes is None or x.flags.c_contiguous or len(axes) == x.ndim or x.size == 0 or \
            x.dtype == bool:
        return reduction(axis=axes, keepdims=keepdim)
    axes = tuple(a % x.ndim for a in axes)
    count = 1
    for a in axes:
        count *= x.shape[a]
    if count > 16:
        return reduction(axis=axes, keepdims=keepdim)
    out = None
    for position in itertools.product(*(range(x.shape[a]) for a in axes)):
        index = [slice(None)] * x.ndim
        for a, i in zip(axes, position):
            index[a] = i
        window = x[tuple(index)]                      # a view: no copy
        if out is None:
            out = window.copy()
        else:
            combine(out, window, out=out)
    if keepdim:
        out = out.reshape(tuple(1 if a in axes else n for a, n in enumerate(x.shape)))
    return out


def short_row_columns(xp, x, axis):
    """For a C-contiguous NumPy array reduced over its last axis (``axis``) in many short rows:
    a (row length, rows) C-contiguous copy to reduce along axis 0; else None. NumPy reduces each
    short row with an inner-loop call of its own ((128, 10): 6.7 us for a max), while the copy
    is reduced by elementwise work along long rows (2.2 us); softmax normalises it too."""
    if xp is not np or not x.ndim or axis % x.ndim != x.ndim - 1 or not x.flags.c_contiguous:
        return None
    k = x.shape[-1]
    if not (2 <= k <= 32 and x.size // k >= 32):
        return None
    return np.ascontiguousarray(x.reshape(-1, k).T)


def _short_rows(xp, x, axes, keepdim, method):
    """``method`` over the last axis through ``short_row_columns``, or None."""
    if method == "sum" or axes is None or len(axes) != 1:
        return None
    columns = short_row_columns(xp, x, axes[0])
    if columns is None:
        return None
    return getattr(columns, method)(axis=0).reshape(x.shape[:-1] + ((1,) if keepdim else ()))


_BLAS_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _keep_shape(x, dim):
    """Shape of ``x`` with the reduced axes kept as size 1."""
    axes = normalize_dims("sum", dim, x.ndim, x)
    return tuple(1 if i in axes else s for i, s in enumerate(x.shape))


def _reduce_rule(name, dtype_fn, needs_elements=False):
    def rule(x, dim=None, keepdim=False):
        axes = normalize_dims(name, dim, len(shape_of(x)), x)
        if needs_elements:                 # max and min: they also order their values
            _check_nonempty(name, x, axes, dim)
            refuse_complex(name, x)
        return reduced_shape(shape_of(x), axes, keepdim), dtype_fn(x)
    return rule


def _check_nonempty(name, x, axes, dim):
    """max/min/argmax/argmin have no value for an empty reduction; say so with a remedy."""
    s = shape_of(x)
    if any(s[a] == 0 for a in axes if a < len(s)) or (dim is None and 0 in s):
        raise IndexingError(f"{name}: dim={dim} of {describe(x)} reduces over no elements, and "
                            f"{name}"
                         f" of nothing is undefined. Check the shape, or reduce over a non-empty "
                         f"dimension.")


def _sum_dtype(x):
    return from_numpy_dtype(np.add.reduce(np.zeros((1,), x.dtype.np)).dtype) \
        if x.dtype.name in ("bool_", "int32") else x.dtype


def _sum_vjp(g, out, x, dim=None, keepdim=False):
    if None in x.shape:       # a captured shape known only at run time (after a boolean mask)
        axes = normalize_dims("sum", dim, x.ndim, x)
        if not keepdim and axes and x.ndim:
            g = expand_dims(g, axes=axes)
        return (broadcast_like(g, x),)
    if not keepdim and g.ndim:    # a 0-d cotangent, or one with its axes kept, broadcasts as is
        g = reshape(g, shape=_keep_shape(x, dim))
    return (broadcast_to(g, shape=x.shape),)


@op("sum", shape=_reduce_rule("sum", _sum_dtype), vjp=_sum_vjp, batch=REDUCTION,
    amp="float32_gpu")
def sum(xp, x, dim=None, keepdim=False):
    """Sum over ``dim`` (None: every element), keeping reduced axes as size 1 if ``keepdim``.

    A floating-point sum is the same, bit for bit, whatever the memory layout of ``x``: that of
    its C-ordered copy (a broadcast view aside, which is summed as it is rather than copied). (Eager ops keep their input's layout while a captured plan writes into
    C-ordered buffers, so a sum whose order followed the layout would round differently in the
    two, and a training run captured would drift from the same run eager.)"""
    if _per_channel_sum(xp, x, dim):
        out = channel_sums(xp, x)
        return out if keepdim else out.reshape(x.shape[1])
    if x.dtype.kind in "fc" and not x.flags.c_contiguous and x.size and \
            all(s or n == 1 for s, n in zip(x.strides, x.shape)):     # a broadcast: not copied
        out = _sum_in_c_order(xp, x, dim, keepdim)
        if out is None:
            out = _blas_sum(xp, x, dim, keepdim)
        if out is not None:
            return out
        x = xp.ascontiguousarray(x)
    out = _blas_sum(xp, x, dim, keepdim)
    return out if out is not None else _reduce(xp, x, dim, keepdim, "sum", xp.add)


def _per_channel_sum(xp, x, dim):
    """Whether ``sum`` over ``dim`` of ``x`` is over every dimension of (N, C, ...) float32/64 but
    the channels (a bias's or BatchNorm's gradient) to take as ``channel_sums``: always on the
    CPU (faster than NumPy's reduction, the same bits in every layout), and on a GPU where ``x``
    is strided (there ``channel_sums`` adds as the backend does its C-ordered copy)."""
    if x.ndim < 3 or not x.size or x.dtype not in _BLAS_DTYPES or \
            (xp is not np and x.flags.c_contiguous):
        return False
    return _fast_path_axes(dim, x.ndim) == [0] + list(range(2, x.ndim))


def _channel_rows(xp, a, b=None):
    """(N, C, ...) ``a`` (and ``b`` of its shape) as rows of their positions, with no copy of
    ``a``: (N, C, L) where ``a`` is C-ordered, (C, N, L) where it is laid out channels first (a
    convolution's output), ``b`` copied into that layout where it differs; and whether the
    rows run channels first. Each row is then reduced by itself and the rows' results added
    over the batch in one order, so the sums are the same, bit for bit, in either layout."""
    n, c = a.shape[:2]
    first = not a.flags.c_contiguous and xp.swapaxes(a, 0, 1).flags.c_contiguous
    arrange = (lambda t: xp.ascontiguousarray(xp.swapaxes(t, 0, 1)).reshape(c, n, -1)) if first \
        else (lambda t: xp.ascontiguousarray(t).reshape(n, c, -1))
    return arrange(a), None if b is None else arrange(b), first


def _over_batch(xp, rows, first, a):
    """Per-row results (N, C), or (C, N) if ``first``, added over the batch (one row of
    channels after another, as NumPy adds an (N, C) C-ordered array over its rows), shaped
    (1, C, 1, ...) for (N, C, ...) ``a``."""
    if first:
        rows = xp.ascontiguousarray(rows.T)
    return rows.sum(axis=0).reshape((1, a.shape[1]) + (1,) * (a.ndim - 2))


def channel_sums(xp, a):
    """Sums of ``a`` (N, C, ...) over every dimension but 1, kept as size 1: each (example,
    channel) row's sum (``_channel_rows``), then over the batch. On the CPU rows up to 128 long
    are summed with one vectorised loop each (NumPy's pairwise sum is a plain 8-lane sum there
    too, but calls a loop per row), longer ones pairwise; rows shorter than 8 a position at a
    time."""
    if not a.size or a.ndim < 2:
        return a.sum(axis=tuple(i for i in range(a.ndim) if i != 1), keepdims=True)
    rows, _, first = _channel_rows(xp, a)
    length = rows.shape[2]
    if length < 8:
        s = rows[:, :, 0].copy()
        for i in range(1, length):
            s += rows[:, :, i]
    elif length <= 128 and xp is np:
        s = np.einsum("ncl->nc", rows)
    else:
        s = rows.sum(axis=2)
    return _over_batch(xp, s, first, a)


def channel_dots(xp, a, b):
    """Sums of ``a * b`` (both (N, C, ...)) over every dimension but 1, kept as size 1, with no
    product array: each (example, channel) row's dot product (``_channel_rows``), then the sum
    over the batch."""
    if not a.size or a.ndim < 2:
        return (a * b).sum(axis=tuple(i for i in range(a.ndim) if i != 1), keepdims=True)
    ra, rb, first = _channel_rows(xp, a, b)
    length = ra.shape[2]
    if length < 8:
        s = ra[:, :, 0] * rb[:, :, 0]
        for i in range(1, length):
            s += ra[:, :, i] * rb[:, :, i]
    elif length >= 256:         # long rows: one BLAS dot product each
        s = xp.matmul(ra[:, :, None, :], rb[:, :, :, None]).reshape(ra.shape[:2])
    else:                       # short ones: a BLAS call each would cost more than its row
        s = xp.einsum("ncl,ncl->nc", ra, rb)
    return _over_batch(xp, s, first, a)


def _sum_in_c_order(xp, x, dim, keepdim):
    """The sum of a strided ``x`` over at most 16 elements per result (the windows of pooling)
    folded from views, in the order NumPy adds the C-ordered copy: reduced dimensions that end
    the shape (size-1 ones aside) by NumPy's pairwise sum, the others one after another; None
    where that copy would be summed by BLAS, or more than 16 elements give each result."""
    axes = _fast_path_axes(dim, x.ndim)
    if axes is None or len(axes) == x.ndim or math.prod(x.shape[a] for a in axes) > 16 or \
            _blas_sum_shape(xp, x.shape, x.dtype, axes) is not None:
        return None
    trailing = []
    for a in range(x.ndim - 1, -1, -1):
        if x.shape[a] == 1:
            continue
        if a not in axes:
            break
        trailing.insert(0, a)
    outer = [a for a in axes if a not in trailing and x.shape[a] > 1]

    def window(at):
        index = [slice(None)] * x.ndim
        for a in axes:
            index[a] = at.get(a, 0)
        return x[tuple(index)]
    out = None
    for place in itertools.product(*(range(x.shape[a]) for a in outer)):
        at = dict(zip(outer, place))
        terms = [window({**at, **dict(zip(trailing, q))})
                 for q in itertools.product(*(range(x.shape[a]) for a in trailing))]
        if out is None:
            out = _pairwise(xp, terms)
        else:
            xp.add(out, terms[0] if len(terms) == 1 else _pairwise(xp, terms), out=out)
    if keepdim:
        out = out.reshape(tuple(1 if a in axes else n for a, n in enumerate(x.shape)))
    return out


def _pairwise(xp, terms):
    """The sum of the arrays ``terms`` in the order of NumPy's pairwise sum of that many
    numbers (up to 128): eight running sums, then added as a tree, then the rest in turn."""
    if len(terms) < 8:
        out = terms[0].copy()
        for t in terms[1:]:
            xp.add(out, t, out=out)
        return out
    lanes = [t.copy() for t in terms[:8]]
    whole = len(terms) - len(terms) % 8
    for i in range(8, whole, 8):
        for j in range(8):
            xp.add(lanes[j], terms[i + j], out=lanes[j])
    a, b, c, d, e, f, g, h = lanes
    out = ((a + b) + (c + d)) + ((e + f) + (g + h))
    for t in terms[whole:]:
        xp.add(out, t, out=out)
    return out


def _blas_sum_shape(xp, shape, dtype, axes):
    """For ``_blas_sum``: ("columns", rows) or ("rows", length) where a C-contiguous array of
    ``shape`` and ``dtype`` summed over the sorted ``axes`` is a BLAS matrix-vector product."""
    k = len(axes)
    if xp is not np or len(shape) < 2 or dtype not in _BLAS_DTYPES or not 0 < k < len(shape) \
            or axes[-1] - axes[0] != k - 1 or axes[0] not in (0, len(shape) - k):
        return None
    if axes[0] == 0:                                # column sums (a bias's gradient)
        rows = math.prod(shape[:k])
        return ("columns", rows) if rows >= 8 else None
    length = math.prod(shape[len(shape) - k:])      # short rows (softmax's normaliser)
    return ("rows", length) if 8 <= length <= 128 else None


def _blas_sum(xp, x, dim, keepdim):
    """The sum of a float32/64 array over its leading or its trailing dimensions (a matrix's
    rows or columns once reshaped) as a matrix-vector product, or None for any other case. BLAS
    runs it two to three times as fast as NumPy's reductions (which call an inner loop per row).
    Columns are added row by row, as NumPy does; rows only up to 128 long, where NumPy's
    pairwise summation is a plain 8-lane sum too, so neither loses accuracy. ``x`` is read in
    place where it is such a matrix with rows apart (a column slice, as an LSTM's gate
    gradients): BLAS adds it in the same order as its C-ordered copy."""
    if xp is not np:
        return None
    axes = _fast_path_axes(dim, x.ndim)
    how = None if axes is None else _blas_sum_shape(xp, x.shape, x.dtype, axes)
    if how is None:
        return None
    kind, n = how
    split = len(axes) if kind == "columns" else x.ndim - len(axes)
    rows = x.reshape(math.prod(x.shape[:split]), math.prod(x.shape[split:])) \
        if x.flags.c_contiguous else _as_matrix(x, split)
    if rows is None:
        return None
    kept = tuple(1 if i in axes else n for i, n in enumerate(x.shape)) if keepdim else \
        tuple(n for i, n in enumerate(x.shape) if i not in axes)
    if kind == "columns":
        return (_ones(n, x.dtype) @ rows).reshape(kept)
    return (rows @ _ones(n, x.dtype)).reshape(kept)


_ONES = {}


def _ones(n, dtype):
    """A read-only vector of ``n`` ones, kept for the next sum of its length where it is short
    (a few hundred lengths at most: making one costs more than a small sum's product)."""
    key = (n, dtype)
    v = _ONES.get(key)
    if v is None:
        v = np.ones(n, dtype)
        v.flags.writeable = False
        if n <= 1 << 16:
            if len(_ONES) >= 256:
                _ONES.clear()
            _ONES[key] = v
    return v


def _as_matrix(x, split):
    """``x`` viewed as a matrix whose rows run over its dimensions before ``split`` and columns
    over the rest, the columns a unit step apart (as BLAS reads a matrix), or None where that
    view does not exist and only a copy would do."""
    item, shape, strides = x.itemsize, x.shape, x.strides
    width = item
    for n, s in zip(reversed(shape[split:]), reversed(strides[split:])):
        if n != 1 and s != width:
            return None
        width *= n
    step = reach = None
    for n, s in zip(reversed(shape[:split]), reversed(strides[:split])):
        if n == 1:
            continue
        if reach is not None and s != reach:
            return None
        step = s if step is None else step
        reach = s * n
    step = width if step is None else step
    if step < width or step % item:
        return None
    return x.reshape(math.prod(shape[:split]), width // item)     # a view, as it exists


def row_sums(xp, x, ndim=1):
    """The sums of ``x`` over its last ``ndim`` dimensions, kept as size 1 (BLAS where that
    is faster, as ``sum``)."""
    dims = tuple(range(x.ndim - ndim, x.ndim))
    out = _blas_sum(xp, x, dims, True)
    return out if out is not None else x.sum(axis=dims, keepdims=True)


def _sum_to_partly_known_shape(g, shape):
    """``sum_to_shape`` where some dimensions (None) are known only when a captured graph runs:
    sums every axis the target has as 1 (a no-op where g's is 1 too) and drops leading ones,
    with no reshape (which would need the sizes)."""
    lead = len(g.shape) - len(shape)
    if lead:
        g = sum(g, dim=tuple(range(lead)))
    ones = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
    return sum(g, dim=ones, keepdim=True) if ones else g


def _reduction_size_rule(x, dim=None):
    normalize_dims("reduction_size", dim, len(shape_of(x)), x)
    return (), (x.dtype if x.dtype.is_floating else from_numpy_dtype(np.dtype(np.float64)))


def _reduction_size_batch(inputs, bdims, dim=None):
    x = moved(inputs[0], bdims[0])
    nd = x.ndim - 1
    axes = tuple(a + 1 for a in normalize_dims("reduction_size", dim, nd)) if nd else ()
    return reduction_size(x, dim=axes), None     # the same count for every example


@op("reduction_size", shape=_reduction_size_rule, vjp=None, batch=_reduction_size_batch)
def reduction_size(xp, x, dim=None):
    """How many elements a reduction of ``x`` over ``dim`` combines, as a 0-d tensor (x's dtype
    if floating, else float64), read when the op runs: ``mean`` divides by it when a captured
    shape is known only at run time (after a boolean mask)."""
    axes = _axes(dim, x.ndim)
    n = x.size if axes is None else math.prod(x.shape[a] for a in axes)
    return xp.asarray(n, dtype=x.dtype if x.dtype.kind == "f" else np.float64)


def _extremum_vjp(g, out, x, dim=None, keepdim=False):
    keep = _keep_shape(x, dim)
    hit = cast(eq(x, reshape(out, shape=keep)), dtype=x.dtype.name)  # ties share the gradient
    count = sum(hit, dim=dim, keepdim=True)
    return (mul(div(reshape(g, shape=keep), count), hit),)


@op("max", shape=_reduce_rule("max", lambda x: x.dtype, True), vjp=_extremum_vjp,
    batch=REDUCTION)
def max(xp, x, dim=None, keepdim=False):
    """Largest value over ``dim`` (the values, like ``torch.amax``; see ``argmax`` for indices)."""
    if x.dtype.kind == "c":
        raise TypeError("complex input")         # the rule explains it
    return _reduce(xp, x, dim, keepdim, "max", xp.maximum)


@op("min", shape=_reduce_rule("min", lambda x: x.dtype, True), vjp=_extremum_vjp,
    batch=REDUCTION)
def min(xp, x, dim=None, keepdim=False):
    """Smallest value over ``dim`` (the values, like ``torch.amin``; see ``argmin``)."""
    if x.dtype.kind == "c":
        raise TypeError("complex input")         # the rule explains it
    return _reduce(xp, x, dim, keepdim, "min", xp.minimum)


def _arg_rule(name):
    def rule(x, dim=None, keepdim=False):
        if dim is not None and not arguments.is_int(dim):
            raise ArgumentError(f"{name}: dim must be one int or None (all elements), got "
                                f"dim={dim!r} for {describe(x)}")
        axes = normalize_dims(name, dim, len(shape_of(x)), x)
        _check_nonempty(name, x, axes, dim)
        refuse_complex(name, x)
        if dim is None:
            return ((1,) * len(shape_of(x)) if keepdim else ()), int64
        return reduced_shape(shape_of(x), axes, keepdim), int64
    return rule


def _arg_kernel(fn):
    def kernel(xp, x, dim=None, keepdim=False):
        if x.dtype.kind == "c":
            raise TypeError("complex input")     # the rule explains it
        if dim is None:
            i = getattr(xp, fn)(x)
            return xp.asarray(i, dtype=xp.int64).reshape((1,) * x.ndim if keepdim else ())
        if x.ndim == 0:           # dim 0 (or -1) of a number: index 0 (CuPy refuses the axis)
            return xp.zeros((), dtype=xp.int64)
        out = _arg_along_short_axis(xp, x, dim, fn == "argmax")
        if out is not None:
            return out if keepdim else out.squeeze(dim)
        return getattr(xp, fn)(x, axis=dim, keepdims=keepdim).astype(xp.int64, copy=False)
    return kernel


def _arg_along_short_axis(xp, x, dim, largest):
    """argmax / argmin over a short axis that is not the last (a max-pool's window positions,
    over a strided view) as one elementwise comparison per position, kept as size 1; None
    where NumPy's own is as fast (the last axis, small arrays) or where a NaN is present (NumPy
    then returns the first NaN's position, which the comparisons would miss). Ties go to the
    first position, as NumPy's."""
    if xp is not np or not -x.ndim <= dim < x.ndim or x.dtype.kind not in "iuf":
        return None
    axis = dim % x.ndim
    k = x.shape[axis]
    if axis == x.ndim - 1 or not 2 <= k <= SHORT_AXIS or x.size < 1024 * k:
        return None
    if x.dtype.kind == "f" and np.isnan(x.max()):
        return None
    lines = x.reshape(math.prod(x.shape[:axis]), k, -1)   # long inner loops for the ufuncs
    best = lines[:, 0].copy()
    where = np.zeros(best.shape, np.int8)
    better = np.empty(best.shape, np.bool_)
    step = np.empty(best.shape, np.int8)
    beats, keep = (np.greater, np.maximum) if largest else (np.less, np.minimum)
    for i in range(1, k):            # branch-free: masked copies cost ten times as much
        value = lines[:, i]
        beats(value, best, out=better)
        keep(best, value, out=best)
        np.subtract(np.int8(i), where, out=step)      # where += better * (i - where)
        np.multiply(step, better, out=step)
        where += step
    return where.astype(np.int64).reshape(x.shape[:axis] + (1,) + x.shape[axis + 1:])


argmax = op("argmax", shape=_arg_rule("argmax"), vjp=None,
            batch=ONE_DIM_REDUCTION)(_arg_kernel("argmax"))
argmin = op("argmin", shape=_arg_rule("argmin"), vjp=None,
            batch=ONE_DIM_REDUCTION)(_arg_kernel("argmin"))


def sum_to_shape(g, shape):
    """Sum ``g`` down to ``shape`` (undoing NumPy broadcasting); written in labkit ops.

    The autodiff engine calls this once for every cotangent, so vjp rules never unbroadcast.
    """
    shape = tuple(shape)
    if g.shape == shape:
        return g
    if None in g.shape or None in shape:
        return _sum_to_partly_known_shape(g, shape)
    lead = g.ndim - len(shape)
    inner = tuple(lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1)
    if lead > 0 and not inner:                 # a bias's gradient: one sum, already in shape
        g = sum(g, dim=tuple(range(lead)), keepdim=False)
    elif lead == 0 and inner:
        g = sum(g, dim=inner, keepdim=True)
    elif inner or lead > 0:
        g = sum(g, dim=tuple(range(lead)) + inner, keepdim=True)
    return g if g.shape == shape else reshape(g, shape=shape)
