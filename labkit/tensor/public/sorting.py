"""Sorting and searching in PyTorch's signatures: sort, argsort, msort, topk, kthvalue (named
tuples of values and int64 indices; the gradient goes to the indices), unique and
unique_consecutive, searchsorted and bucketize.

>>> import labkit as lk
>>> x = lk.tensor([3.0, 1.0, 2.0, 1.0])
>>> values, indices = x.sort()
>>> values.tolist(), indices.tolist(), x.topk(2).indices.tolist()
([1.0, 1.0, 2.0, 3.0], [1, 3, 2, 0], [0, 2])
>>> output, counts = x.unique(return_counts=True)
>>> output.tolist(), counts.tolist(), lk.searchsorted(values, 2.0).item()
([1.0, 2.0, 3.0], [2, 1, 1], 2)
"""
from ...errors import ShapeError, describe
from .. import arguments
from ..ops import elementwise as E
from ..ops import index as I
from ..ops import sorting as SO
from ..shape_rules import normalize_dim
from . import return_types
from .registry import public
from .statistics import picked


@public()
def argsort(x, dim=-1, descending=False, *, stable=False):
    """Indices that sort ``x`` along ``dim``, as int64. Equal elements keep their order (which
    ``stable=False`` allows too); NaN sorts last (first when ``descending``)."""
    return SO.argsort(x, dim=dim, descending=descending)


@public()
def sort(x, dim=-1, descending=False, *, stable=False):
    """``(values, indices)`` of ``x`` sorted along ``dim``; equal elements keep their order.

    >>> import labkit as lk
    >>> lk.sort(lk.tensor([[2.0, 9.0, 4.0]]), descending=True).values.tolist()
    [[9.0, 4.0, 2.0]]
    """
    dim = normalize_dim("sort", dim, x.ndim, x)
    indices = SO.argsort(x, dim=dim, descending=descending)
    if not x.ndim:
        return return_types.sort(E.clone(x), indices)
    return return_types.sort(I.gather(x, dim, indices), indices)


@public()
def msort(x):
    """``x`` sorted along its first dimension (the values of ``sort(x, 0)``)."""
    return sort(x, 0).values


def _k_in_range(name, x, k, d, low):
    n = x.shape[d] if x.ndim else 1
    arguments.integer(name, "k", k)
    if not low <= k <= n:
        raise ShapeError(f"{name}: k={k!r} is out of range for dim {d} of {describe(x)}, which "
                         f"has {n} element(s); pick k in {low}..{n}")


def _first(indices, d, start, stop):
    """``indices[start:stop]`` along ``d`` (a 0-d tensor of indices is its own first)."""
    return I.getitem_slices(indices, d, start, stop) if indices.ndim else indices


@public()
def topk(x, k, dim=-1, largest=True, sorted=True):
    """``(values, indices)`` of the ``k`` largest (or, ``largest=False``, smallest) elements
    along ``dim``, in order (``sorted=False`` is accepted, and sorts too). NaN counts as the
    largest value.

    >>> import labkit as lk
    >>> r = lk.topk(lk.tensor([1.0, 5.0, 3.0]), 2)
    >>> r.values.tolist(), r.indices.tolist()
    ([5.0, 3.0], [1, 2])
    """
    d = normalize_dim("topk", dim, x.ndim, x)
    _k_in_range("topk", x, k, d, 0)
    indices = _first(SO.argsort(x, dim=d, descending=largest), d, 0, k)
    if not x.ndim:
        return return_types.topk(E.clone(x), indices)
    return return_types.topk(I.gather(x, d, indices), indices)


@public()
def kthvalue(x, k, dim=-1, keepdim=False):
    """``(values, indices)`` of the ``k``-th smallest element along ``dim`` (k from 1).

    >>> import labkit as lk
    >>> lk.kthvalue(lk.tensor([4.0, 1.0, 3.0]), 2).values.item()
    3.0
    """
    d = normalize_dim("kthvalue", dim, x.ndim, x)
    _k_in_range("kthvalue", x, k, d, 1)
    indices = _first(SO.argsort(x, dim=d), d, k - 1, k)
    return picked(return_types.kthvalue, x, d, indices, keepdim)


def _unique(x, sorted, return_inverse, return_counts, dim, consecutive):
    if isinstance(dim, int) and not isinstance(dim, bool):
        dim = normalize_dim("unique_consecutive" if consecutive else "unique", dim, x.ndim, x)
    wanted = ["values"] + ["inverse"] * bool(return_inverse) + ["counts"] * bool(return_counts)
    out = tuple(SO.unique(x, dim=dim, consecutive=consecutive, result=r)
                for r in wanted)
    return out if len(out) > 1 else out[0]


@public()
def unique(x, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements of ``x`` in ascending order (of the flattened tensor; with ``dim``,
    the distinct slices along it), and, if asked, the inverse (each element's position among
    them) and the counts: a tensor, or a tuple ``(output, inverse?, counts?)``. NaNs are all
    distinct. ``sorted=False`` is accepted (PyTorch leaves the order open) and sorts too. The
    result's size depends on the values, so a captured graph knows it only when it runs."""
    return _unique(x, sorted, return_inverse, return_counts, dim, consecutive=False)


@public()
def unique_consecutive(x, return_inverse=False, return_counts=False, dim=None):
    """``x`` with each run of equal neighbours (elements, or slices along ``dim``) collapsed to
    one, and, if asked, the inverse and the run lengths, as ``unique`` returns them.

    >>> import labkit as lk
    >>> lk.unique_consecutive(lk.tensor([1, 1, 2, 2, 1])).tolist()
    [1, 2, 1]
    """
    return _unique(x, True, return_inverse, return_counts, dim, consecutive=True)


@public(method=False)
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """For each element of ``input`` (a tensor or a number), where it would go in
    ``sorted_sequence`` (1-D, or one sorted row per row of ``input``) to keep it sorted: before
    equal elements, or after them with ``right=True`` / ``side="right"``. ``sorter`` holds the
    indices that sort an unsorted ``sorted_sequence``. int64 (int32 with ``out_int32``).

    >>> import labkit as lk
    >>> lk.searchsorted(lk.tensor([1.0, 3.0, 5.0]), lk.tensor([3.0, 6.0]), right=True).tolist()
    [2, 3]
    """
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ValueError("searchsorted: side='left' and right=True contradict each other; "
                             "pass one of them")
        right = side == "right"
    if sorter is not None:
        sorted_sequence = I.gather(sorted_sequence, -1, sorter)
    return SO.searchsorted(sorted_sequence, input, right=right, out_int32=out_int32)


@public(method=False)
def bucketize(input, boundaries, *, out_int32=False, right=False):
    """For each element of ``input``, the index of its bucket among the 1-D ``boundaries``:
    ``boundaries[i-1] < x <= boundaries[i]`` (``right=True``: ``boundaries[i-1] <= x <
    boundaries[i]``).

    >>> import labkit as lk
    >>> lk.bucketize(lk.tensor([1.0, 3.0, 6.0]), lk.tensor([1.0, 3.0, 5.0])).tolist()
    [0, 1, 3]
    """
    if getattr(boundaries, "ndim", 1) != 1:
        raise ShapeError(f"bucketize: boundaries must be 1-D, got {describe(boundaries)}; for "
                         f"one sorted row per row of values use lk.searchsorted")
    return SO.searchsorted(boundaries, input, right=right, out_int32=out_int32)
