"""Rearranging a tensor, in PyTorch's signatures: padding (``F.pad``), repeat / tile /
repeat_interleave, flips and roll, triangles and diagonals, narrow / select / unbind /
unflatten, movedim / swapaxes, meshgrid, atleast_Nd, block_diag and cartesian_prod.

Each is written in primitives (labkit/tensor/ops), so gradients and capture come free.

>>> import labkit as lk
>>> x = lk.tensor([[1, 2, 3], [4, 5, 6]])
>>> x.repeat(1, 2).tolist(), x.flip(1).tolist(), lk.roll(x, 1, 1).tolist()
([[1, 2, 3, 1, 2, 3], [4, 5, 6, 4, 5, 6]], [[3, 2, 1], [6, 5, 4]], [[3, 1, 2], [6, 4, 5]])
>>> lk.tril(x).tolist(), lk.diagonal(x).tolist(), x.movedim(0, 1).shape
([[1, 0, 0], [4, 5, 0]], [1, 5], (3, 2))
"""
import math

import numpy as np

from ...errors import DTypeError, ShapeError, describe
from ..creation import zeros
from ..ops import composite as C
from ..ops import index as I
from ..ops import layout as L
from ..ops import shape as S
from ..shape_rules import normalize_dim, normalize_dims
from ..tensor import Tensor
from .registry import public, tensor_method


def _ints(args):
    """``f(2, 3)``, ``f((2, 3))`` and ``f([2, 3])`` as one tuple of ints."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    return tuple(int(a) for a in args)


def _along(x, d, item):
    """``x[:, ..., item]`` with ``item`` at dimension ``d``."""
    return I.getitem(x, (slice(None),) * d + (item,))


# ---- padding ------------------------------------------------------------------------------------
_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input, pad, mode="constant", value=None):
    """PyTorch's ``F.pad``: ``pad`` lists (before, after) counts for the last dimension first,
    then the one before it, and so on (negative counts crop). ``mode``: 'constant' (``value``,
    default 0, converted to input's dtype), or 'reflect', 'replicate' and 'circular' for the
    last 1, 2 or 3 dimensions of a (batch, channels, ...) or (channels, ...) tensor.

    >>> import labkit as lk
    >>> import labkit.nn.functional as F
    >>> x = lk.tensor([[1.0, 2.0, 3.0]])
    >>> F.pad(x, (1, 2)).tolist(), F.pad(x, (2, 1), mode="reflect").tolist()
    ([[0.0, 1.0, 2.0, 3.0, 0.0, 0.0]], [[3.0, 2.0, 1.0, 2.0, 3.0, 2.0]])
    """
    pads = tuple(int(p) for p in pad)
    n = len(pads) // 2
    if len(pads) % 2 or n > input.ndim:
        raise ShapeError(f"pad: got {len(pads)} pad values for {describe(input)}; give an even "
                         f"number, two (before, after) per padded dimension, last dimension "
                         f"first, for at most its {input.ndim} dimensions")
    pairs = {input.ndim - 1 - i: (pads[2 * i], pads[2 * i + 1]) for i in range(n)}
    if mode == "constant":
        return _pad_constant(input, pairs, 0 if value is None else value)
    if mode not in _PAD_MODES:
        raise ValueError(f"pad: mode={mode!r} is not one of {', '.join(_PAD_MODES)}")
    if value is not None:
        raise ValueError(f"pad: mode={mode!r} takes no value; only mode='constant' pads with one")
    if n not in (1, 2, 3) or input.ndim not in (n + 1, n + 2):
        raise ShapeError(f"pad: mode={mode!r} pads the last 1, 2 or 3 dimensions of a (batch, "
                         f"channels, ...) or (channels, ...) tensor, so {len(pads)} pad values "
                         f"need a tensor of {n + 1} or {n + 2} dimensions; got {describe(input)}")
    first = 1 if input.ndim == n + 2 else 0
    if 0 in input.shape[first:]:
        raise ShapeError(f"pad: mode={mode!r} needs every dimension but the batch one non-empty; "
                         f"got {describe(input)}")
    x = input
    if mode == "circular":      # wraps around what is left after cropping
        x = _crop(input, pairs)
        pairs = {d: (max(lo, 0), max(hi, 0)) for d, (lo, hi) in pairs.items()}
    for d, (lo, hi) in pairs.items():
        x = _along(x, d, _pad_positions(mode, x.shape[d], lo, hi, input))
    return x


def _crop(x, pairs):
    """``x`` cut down by the negative counts of ``pairs`` (dim -> (before, after)): PyTorch
    crops first, then pads what is left."""
    for d, (lo, hi) in pairs.items():
        if x.shape[d] + lo + hi < 0:
            raise ShapeError(f"pad: ({lo}, {hi}) crops more than the {x.shape[d]} elements of "
                             f"dimension {d} of {describe(x)}")
    if all(lo >= 0 and hi >= 0 for lo, hi in pairs.values()):
        return x
    return I._getitem(x, spec=tuple(
        ("s", max(-lo, 0), x.shape[d] - max(-hi, 0), None) if d in pairs else I._FULL
        for d, (lo, hi) in ((d, pairs.get(d, (0, 0))) for d in range(x.ndim))))


def _pad_constant(x, pairs, value):
    x = _crop(x, pairs)
    widths = tuple((max(lo, 0), max(hi, 0)) for lo, hi in (pairs.get(d, (0, 0))
                                                           for d in range(x.ndim)))
    return L.pad(x, widths=widths, value=value)


def _pad_positions(mode, size, lo, hi, x):
    """Which of ``size`` positions each padded position repeats, in ``mode``."""
    if mode == "reflect" and (lo >= size or hi >= size):
        raise ShapeError(f"pad: reflect padding ({lo}, {hi}) must be less than the size {size} "
                         f"of the dimension it pads, in {describe(x)}")
    if mode == "circular" and (lo > size or hi > size):
        raise ShapeError(f"pad: circular padding ({lo}, {hi}) may wrap around at most once: "
                         f"no more than the size {size} of the dimension it pads, in "
                         f"{describe(x)}")
    j = np.arange(-lo, size + hi)
    if mode == "replicate":
        return np.clip(j, 0, size - 1)
    if mode == "reflect":
        j = np.abs(j)
        return np.where(j >= size, 2 * (size - 1) - j, j)
    return j % size


# ---- repeating ----------------------------------------------------------------------------------
def _tile(x, reps):
    if any(r < 0 for r in reps):
        raise ShapeError(f"repeat: counts must be >= 0; got {reps} for {describe(x)}")
    shape = (1,) * (len(reps) - x.ndim) + x.shape
    spread = S.reshape(x, shape=tuple(v for s in shape for v in (1, s)))
    spread = S.broadcast_to(spread, shape=tuple(v for r, s in zip(reps, shape) for v in (r, s)))
    return S.reshape(spread, shape=tuple(r * s for r, s in zip(reps, shape)))


@tensor_method()
def repeat(self, *sizes):
    """The tensor repeated ``sizes[i]`` times along dimension ``i`` (NumPy's ``tile``); extra
    leading sizes add dimensions: ``x.repeat(2, 3)``."""
    reps = _ints(sizes)
    if len(reps) < self.ndim:
        raise ShapeError(f"repeat: give a count for each of the {self.ndim} dimensions of "
                         f"{describe(self)} (more add leading dimensions); got {reps}. To repeat "
                         f"only some, pass 1 for the others: x.repeat(1, 2)")
    return _tile(self, reps)


@public()
def tile(input, *dims):
    """``input`` repeated ``dims[i]`` times along dimension ``i``; fewer counts than dimensions
    are padded with 1s in front (``lk.tile(x, (2,))`` repeats the last dimension)."""
    reps = _ints(dims)
    return _tile(input, (1,) * (input.ndim - len(reps)) + reps)


@public()
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element repeated ``repeats`` times (an int, or a tensor with a count per element)
    along ``dim`` (None: of the flattened tensor), next to itself: ``[1, 2] -> [1, 1, 2, 2]``.
    ``lk.repeat_interleave(counts)`` alone gives ``i`` repeated ``counts[i]`` times.

    >>> import labkit as lk
    >>> lk.tensor([1, 2]).repeat_interleave(2).tolist(), lk.repeat_interleave(lk.tensor([1, 2]))
    ([1, 1, 2, 2], tensor([0, 1, 1]))
    """
    if repeats is None:
        return I.repeat_interleave(input, output_size=output_size)
    x = input
    if dim is None:
        x, dim = S.reshape(x, shape=(-1,)), 0
    elif x.ndim == 0:
        x = S.reshape(x, shape=(1,))
    d = normalize_dim("repeat_interleave", dim, x.ndim, x)
    n = x.shape[d]
    if not isinstance(repeats, Tensor):
        r = int(repeats)
        if r < 0:
            raise ShapeError(f"repeat_interleave: repeats must be >= 0, got {r}")
        spread = S.broadcast_to(C.unsqueeze(x, d + 1), shape=x.shape[:d + 1] + (r,) +
                                x.shape[d + 1:])
        return S.reshape(spread, shape=x.shape[:d] + (n * r,) + x.shape[d + 1:])
    counts = S.reshape(repeats, shape=(-1,))
    if counts.shape[0] == 1 and n != 1:
        counts = S.broadcast_to(counts, shape=(n,))
    if counts.shape[0] != n:
        raise ShapeError(f"repeat_interleave: repeats {describe(repeats)} must have one count per "
                         f"element along dim {dim} of {describe(input)} ({n}), or a single one")
    return _along(x, d, I.repeat_interleave(counts, output_size=output_size))


# ---- flips and roll -----------------------------------------------------------------------------
@public()
def flip(input, dims, *more):
    """``input`` with the order of its elements reversed along ``dims``."""
    axes = normalize_dims("flip", _ints((dims,) + more), input.ndim, input)
    if not input.ndim:
        return I._getitem(input, spec=())
    return I._getitem(input, spec=tuple(("s", None, None, -1) if d in axes else I._FULL
                                        for d in range(input.ndim)))


@public()
def fliplr(input):
    """``input`` reversed left to right (along dimension 1); needs 2 or more dimensions."""
    if input.ndim < 2:
        raise ShapeError(f"fliplr: needs a tensor of at least 2 dimensions; got "
                         f"{describe(input)}. For a vector, use x.flip(0)")
    return flip(input, 1)


@public()
def flipud(input):
    """``input`` reversed upside down (along dimension 0); needs 1 or more dimensions."""
    if input.ndim < 1:
        raise ShapeError(f"flipud: needs a tensor of at least 1 dimension; got {describe(input)}")
    return flip(input, 0)


@public()
def roll(input, shifts, dims=None):
    """``input`` with its elements shifted ``shifts`` places along ``dims`` (ints or tuples of
    one length), those pushed off the end coming back at the start; ``dims=None`` rolls the
    flattened tensor and restores the shape."""
    shifts = _ints((shifts,))
    if dims is None:
        if len(shifts) != 1:
            raise ShapeError(f"roll: {len(shifts)} shifts need as many dims; with dims=None "
                             f"give one shift (of the flattened tensor)")
        return S.reshape(roll(S.reshape(input, shape=(-1,)), shifts, 0), shape=input.shape)
    dims = _ints((dims,))
    if len(dims) != len(shifts):
        raise ShapeError(f"roll: shifts {shifts} and dims {dims} must have one length")
    x = input
    for shift, dim in zip(shifts, dims):
        d = normalize_dim("roll", dim, x.ndim, x) if x.ndim else None
        if d is None:
            raise ShapeError(f"roll: a 0-d tensor has no dim {dim}; roll it with dims=None")
        size = x.shape[d]
        s = shift % size if size else 0
        if s:
            tail, head = I.getitem_slices(x, d, size - s, size), I.getitem_slices(x, d, 0, size - s)
            x = S.concat(tail, head, dim=d)
    return x


# ---- triangles and diagonals --------------------------------------------------------------------
@public()
def tril(input, diagonal=0):
    """The lower triangle of each matrix in the last two dimensions (from the ``diagonal``-th
    diagonal down); zeros above."""
    return L.tril(input, diagonal=int(diagonal))


@public()
def triu(input, diagonal=0):
    """The upper triangle of each matrix in the last two dimensions (from the ``diagonal``-th
    diagonal up); zeros below."""
    return L.triu(input, diagonal=int(diagonal))


@public()
def diag(input, diagonal=0):
    """A vector's square matrix with it on the ``diagonal``-th diagonal, or a matrix's
    ``diagonal``-th diagonal as a vector.

    >>> import labkit as lk
    >>> lk.diag(lk.tensor([1, 2])).tolist(), lk.diag(lk.tensor([[1, 2], [3, 4]]), 1).tolist()
    ([[1, 0], [0, 2]], [2])
    """
    if input.ndim == 1:
        return L.diag_embed(input, offset=int(diagonal), dim1=0, dim2=1)
    if input.ndim == 2:
        return L.diagonal(input, offset=int(diagonal), dim1=0, dim2=1)
    raise ShapeError(f"diag: takes a vector or a matrix; got {describe(input)}. For a batch, use "
                     f"lk.diagonal (matrices to vectors) or lk.diag_embed (the other way)")


@public()
def diagonal(input, offset=0, dim1=0, dim2=1):
    """The ``offset``-th diagonal of the matrices in dimensions ``dim1``, ``dim2``, as the last
    dimension (a view)."""
    return L.diagonal(input, offset=int(offset), dim1=int(dim1), dim2=int(dim2))


@public()
def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices (in dimensions ``dim1``, ``dim2`` of the result) with the last dimension of
    ``input`` on their ``offset``-th diagonal, zeros elsewhere."""
    return L.diag_embed(input, offset=int(offset), dim1=int(dim1), dim2=int(dim2))


@public()
def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """A copy of ``input`` whose ``offset``-th diagonal in ``dim1``, ``dim2`` holds ``src``."""
    return L.diagonal_scatter(input, src, offset=int(offset), dim1=int(dim1), dim2=int(dim2))


# ---- pieces -----------------------------------------------------------------------------------
@public()
def narrow(input, dim, start, length):
    """``length`` elements of ``input`` along ``dim`` from ``start`` (negative: from the end)."""
    if not input.ndim:
        raise ShapeError("narrow: a 0-d tensor has no dimension to narrow")
    d = normalize_dim("narrow", dim, input.ndim, input)
    size, start, length = input.shape[d], int(start), int(length)
    if start < 0:
        start += size
    if not 0 <= start <= size or length < 0 or start + length > size:
        raise ShapeError(f"narrow: start={start} and length={length} do not fit in dim {dim} "
                         f"(size {size}) of {describe(input)}")
    return I.getitem_slices(input, d, start, start + length)


@public()
def select(input, dim, index):
    """The slice of ``input`` at ``index`` along ``dim`` (the dimension removed)."""
    if not input.ndim:
        raise ShapeError("select: a 0-d tensor has no dimension to select from")
    return _along(input, normalize_dim("select", dim, input.ndim, input), int(index))


@public()
def unbind(input, dim=0):
    """The slices of ``input`` along ``dim``, as a tuple (the dimension removed from each)."""
    if not input.ndim:
        raise ShapeError("unbind: a 0-d tensor has no dimension to unbind")
    d = normalize_dim("unbind", dim, input.ndim, input)
    return tuple(_along(input, d, i) for i in range(input.shape[d]))


@public()
def unflatten(input, dim, sizes):
    """``input`` with dimension ``dim`` split into ``sizes`` (one of them may be -1).

    >>> import labkit as lk
    >>> lk.zeros(2, 6).unflatten(1, (3, -1)).shape
    (2, 3, 2)
    """
    if not input.ndim:
        raise ShapeError("unflatten: a 0-d tensor has no dimension to unflatten")
    d = normalize_dim("unflatten", dim, input.ndim, input)
    sizes = S.resolve_shape("unflatten", (input.shape[d],), _ints((sizes,)), input)
    return S.reshape(input, shape=input.shape[:d] + sizes + input.shape[d + 1:])


@public(aliases=("moveaxis",))
def movedim(input, source, destination):
    """``input`` with dimensions ``source`` moved to positions ``destination`` (ints or
    sequences of one length), the others keeping their order."""
    src, dst = _ints((source,)), _ints((destination,))
    if len(src) != len(dst):
        raise ShapeError(f"movedim: source {src} and destination {dst} must have one length")
    nd = input.ndim
    src = tuple(normalize_dim("movedim", d, nd, input) for d in src)
    dst = tuple(normalize_dim("movedim", d, nd, input) for d in dst)
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ShapeError(f"movedim: source {source} and destination {destination} must each "
                         f"name a dimension of {describe(input)} at most once")
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return S.permute(input, dims=tuple(order))


@public()
def swapaxes(input, axis0, axis1):
    """``input`` with dimensions ``axis0`` and ``axis1`` swapped (``transpose``)."""
    return swapdims(input, axis0, axis1)


@public()
def swapdims(input, dim0, dim1):
    """``input`` with dimensions ``dim0`` and ``dim1`` swapped (``transpose``)."""
    if not input.ndim:          # dims 0 and -1 of a 0-d tensor: itself
        for d in (dim0, dim1):
            normalize_dim("swapdims", d, 0, input)
        return S.reshape(input, shape=())
    return C.transpose(input, dim0, dim1)


# ---- building from several tensors ------------------------------------------------------------
def _tensors(tensors):
    """``f(a, b)`` and ``f([a, b])`` as one list."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return list(tensors[0])
    return list(tensors)


@public(method=False)
def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 1-d (or 0-d) tensors: the i-th result varies along dimension i
    (``indexing="ij"``, the default) or, with ``"xy"``, the first two swapped (Cartesian).

    >>> import labkit as lk
    >>> rows, cols = lk.meshgrid(lk.arange(2), lk.arange(3), indexing="ij")
    >>> rows.tolist(), cols.tolist()
    ([[0, 0, 0], [1, 1, 1]], [[0, 1, 2], [0, 1, 2]])
    """
    ts = _tensors(tensors)
    if indexing not in (None, "ij", "xy"):
        raise ValueError(f"meshgrid: indexing={indexing!r} is not 'ij' or 'xy'")
    for t in ts:
        if t.ndim > 1:
            raise ShapeError(f"meshgrid: takes 0-d or 1-d tensors; got {describe(t)}")
        if t.dtype is not ts[0].dtype:
            raise DTypeError(f"meshgrid: every tensor must have one dtype; got "
                             f"{', '.join(describe(t) for t in ts)}. Convert them first")
    sizes = [math.prod(t.shape) for t in ts]
    axes = list(range(len(ts)))
    if indexing == "xy" and len(ts) > 1:
        axes[0], axes[1] = 1, 0
    shape = [0] * len(ts)
    for a, n in zip(axes, sizes):
        shape[a] = n
    return tuple(S.broadcast_to(S.reshape(t, shape=tuple(n if i == a else 1
                                                          for i in range(len(ts)))),
                                shape=tuple(shape)) for t, a, n in zip(ts, axes, sizes))


def _at_least(n, shape):
    if len(shape) >= n:
        return shape
    if n == 3 and len(shape) == 1:
        return (1,) + shape + (1,)
    if n == 3 and len(shape) == 2:
        return shape + (1,)
    return (1,) * (n - len(shape)) + shape


def _atleast(n, tensors):
    out = tuple(t if t.ndim >= n else S.reshape(t, shape=_at_least(n, t.shape))
                for t in _tensors(tensors))
    return out[0] if len(tensors) == 1 and isinstance(tensors[0], Tensor) else out


@public(method=False)
def atleast_1d(*tensors):
    """Each tensor with at least 1 dimension (a 0-d one as shape (1,))."""
    return _atleast(1, tensors)


@public(method=False)
def atleast_2d(*tensors):
    """Each tensor with at least 2 dimensions (leading ones added)."""
    return _atleast(2, tensors)


@public(method=False)
def atleast_3d(*tensors):
    """Each tensor with at least 3 dimensions: () -> (1, 1, 1), (n,) -> (1, n, 1),
    (m, n) -> (m, n, 1)."""
    return _atleast(3, tensors)


@public(method=False)
def block_diag(*tensors):
    """A block-diagonal matrix of the tensors (0-d, 1-d as one row, or 2-d), zeros elsewhere.

    >>> import labkit as lk
    >>> lk.block_diag(lk.tensor([[1, 2]]), lk.tensor(3)).tolist()
    [[1, 2, 0], [0, 0, 3]]
    """
    blocks = []
    for t in tensors:
        if t.ndim > 2:
            raise ShapeError(f"block_diag: takes tensors of at most 2 dimensions; got "
                             f"{describe(t)}")
        blocks.append(S.reshape(t, shape=(1,) * (2 - t.ndim) + t.shape))
    if not blocks:
        return zeros(1, 0)
    total, start, rows = sum(b.shape[1] for b in blocks), 0, []
    for b in blocks:
        rows.append(L.pad(b, widths=((0, 0), (start, total - start - b.shape[1])), value=0))
        start += b.shape[1]
    return S.concat(*rows, dim=0)


@public(method=False)
def cartesian_prod(*tensors):
    """Every combination of one element from each 1-d tensor, one per row (like
    ``itertools.product``); a single tensor comes back as it is."""
    for t in tensors:
        if t.ndim != 1:
            raise ShapeError(f"cartesian_prod: takes 1-d tensors; got {describe(t)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return C.stack([S.reshape(g, shape=(-1,)) for g in grids], dim=1)
