"""Statistics and logical reductions in PyTorch's signatures: prod, var/std (``correction=`` and
the legacy ``unbiased``), var_mean/std_mean, logsumexp, all/any, amax/amin/aminmax, median,
nanmedian, mode, count_nonzero, nansum, nanmean.

>>> import labkit as lk
>>> x = lk.tensor([[1.0, 4.0, 2.0], [3.0, 3.0, 0.0]])
>>> x.prod(1).tolist(), x.var(1, unbiased=False).tolist(), x.amax((0, 1)).item()
([8.0, 0.0], [1.5555557012557983, 2.0], 4.0)
>>> values, indices = x.median(1)
>>> values.tolist(), indices.tolist(), bool(x.all()), x.any(1).tolist()
([2.0, 3.0], [2, 0], False, [True, True])
"""
from ..ops import composite as C
from ..ops import elementwise as E
from ..ops import index as I
from ..ops import reduce as R
from ..ops import sorting as SO
from ..ops import statistics as ST
from ..shape_rules import float_dtype, normalize_dim, normalize_dims
from . import return_types
from .reduce import _cast_to
from .registry import public


def dims(dim):
    """A dim argument as ops take it: lists become tuples (attributes are hashable)."""
    return tuple(dim) if isinstance(dim, list) else dim


# ---- prod ------------------------------------------------------------------------------------
@public()
def prod(x, dim=None, keepdim=False, *, dtype=None):
    """Product of every element, or along ``dim`` (one int); ``dtype`` casts first. The
    gradient is exact where ``x`` holds zeros.

    >>> import labkit as lk
    >>> lk.prod(lk.tensor([[1.0, 2.0], [3.0, 4.0]]), 0).tolist()
    [3.0, 8.0]
    """
    return ST.prod(_cast_to(x, dtype), dim=dim, keepdim=keepdim)


# ---- variance and standard deviation --------------------------------------------------------
def _correction(name, x, dim, unbiased, correction):
    """``(dim, correction)`` from PyTorch's forms: ``correction=``, the legacy ``unbiased``
    (``var(x, dim, unbiased)``, and ``var(x, unbiased)`` with a bool in dim's place)."""
    float_dtype(name, x)
    if isinstance(dim, bool):
        if unbiased is not None:
            raise TypeError(f"{name}(x, {dim}, {unbiased}): a bool in dim's place is the legacy "
                            f"unbiased; pass {name}(x, dim, unbiased=...) instead")
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise TypeError(f"{name}: pass either unbiased= (the legacy form) or correction=, not "
                        f"both; unbiased=False is correction=0")
    if correction is None:
        correction = 0 if unbiased is False else 1
    return dims(dim), correction


@public()
def var(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over ``dim`` (None: every element) with Bessel's ``correction`` (default 1;
    ``unbiased=False`` is ``correction=0``). Fewer elements than ``correction + 1`` give NaN or
    Inf, as in PyTorch.

    >>> import labkit as lk
    >>> x = lk.tensor([1.0, 2.0, 6.0])
    >>> lk.var(x).item(), lk.var(x, 0, False).item(), lk.var(x, correction=2).item()
    (7.0, 4.666666507720947, 14.0)
    """
    dim, correction = _correction("var", x, dim, unbiased, correction)
    return C.var(x, dim=dim, keepdim=keepdim, correction=correction)


@public()
def std(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation over ``dim``, as ``var`` takes its arguments (NaN for one element).

    >>> import labkit as lk
    >>> lk.std(lk.tensor([[1.0, 3.0]], dtype=lk.float64), 1, keepdim=True).tolist()
    [[1.4142135623730951]]
    """
    dim, correction = _correction("std", x, dim, unbiased, correction)
    return ST.std(x, dim=dim, keepdim=keepdim, correction=correction)


@public(method=False)
def var_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(var, mean)`` over ``dim``, a tuple; arguments as ``var`` takes them."""
    dim, correction = _correction("var_mean", x, dim, unbiased, correction)
    return (C.var(x, dim=dim, keepdim=keepdim, correction=correction),
            C.mean(x, dim=dim, keepdim=keepdim))


@public(method=False)
def std_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(std, mean)`` over ``dim``, a tuple; arguments as ``var`` takes them.

    >>> import labkit as lk
    >>> std, mean = lk.std_mean(lk.tensor([1.0, 3.0]), unbiased=False)
    >>> std.item(), mean.item()
    (1.0, 2.0)
    """
    dim, correction = _correction("std_mean", x, dim, unbiased, correction)
    return (ST.std(x, dim=dim, keepdim=keepdim, correction=correction),
            C.mean(x, dim=dim, keepdim=keepdim))


@public()
def logsumexp(x, dim, keepdim=False):
    """``log(sum(exp(x)))`` over ``dim`` (an int or a tuple), computed stably; -inf over no
    elements.

    >>> import labkit as lk
    >>> round(lk.logsumexp(lk.tensor([0.0, 0.0]), 0).item(), 4)
    0.6931
    """
    return C.logsumexp(x, dim=dims(dim), keepdim=keepdim)


# ---- logical reductions ------------------------------------------------------------------------
@public()
def all(x, dim=None, keepdim=False):
    """Whether every element (over ``dim``: an int or a tuple) is nonzero, as a bool tensor.

    >>> import labkit as lk
    >>> lk.all(lk.tensor([[1.0, 0.0], [2.0, 3.0]]), 1).tolist(), lk.all(lk.zeros(0)).item()
    ([False, True], True)
    """
    return ST.all_(x, dim=dims(dim), keepdim=keepdim)


@public()
def any(x, dim=None, keepdim=False):
    """Whether some element (over ``dim``: an int or a tuple) is nonzero, as a bool tensor.

    >>> import labkit as lk
    >>> lk.any(lk.tensor([[1.0, 0.0], [0.0, 0.0]]), 1).tolist(), lk.any(lk.zeros(0)).item()
    ([True, False], False)
    """
    return ST.any_(x, dim=dims(dim), keepdim=keepdim)


@public()
def count_nonzero(x, dim=None):
    """How many elements (over ``dim``: an int or a tuple) are nonzero, as int64."""
    return ST.count_nonzero(x, dim=dims(dim))


# ---- extrema over several dims -------------------------------------------------------------
def _all_dims(dim):
    """amax's ``dim=()`` (its default) means every dimension."""
    dim = dims(dim)
    return None if dim == () else dim


def _nonempty(name, x, dim):
    R._check_nonempty(name, x, normalize_dims(name, dim, x.ndim, x), dim)


@public()
def amax(x, dim=(), keepdim=False):
    """Largest value over ``dim`` (an int, a tuple; ``()``: every element). The gradient is
    shared evenly among tied maxima, as in PyTorch.

    >>> import labkit as lk
    >>> lk.amax(lk.tensor([[1.0, 5.0], [7.0, 2.0]]), 0).tolist()
    [7.0, 5.0]
    """
    dim = _all_dims(dim)
    _nonempty("amax", x, dim)
    return R.max(x, dim=dim, keepdim=keepdim)


@public()
def amin(x, dim=(), keepdim=False):
    """Smallest value over ``dim`` (an int, a tuple; ``()``: every element); ties share the
    gradient evenly."""
    dim = _all_dims(dim)
    _nonempty("amin", x, dim)
    return R.min(x, dim=dim, keepdim=keepdim)


@public()
def aminmax(x, *, dim=None, keepdim=False):
    """``(min, max)`` over ``dim`` (one int, or None: every element), a named tuple.

    >>> import labkit as lk
    >>> r = lk.aminmax(lk.tensor([3.0, 1.0, 2.0]))
    >>> r.min.item(), r.max.item()
    (1.0, 3.0)
    """
    _nonempty("aminmax", x, dim)
    return return_types.aminmax(R.min(x, dim=dim, keepdim=keepdim),
                                R.max(x, dim=dim, keepdim=keepdim))


# ---- median and mode ---------------------------------------------------------------------------
def picked(result, x, d, indices, keepdim):
    """``result(values, indices)`` for int64 ``indices`` along dim ``d`` (kept as size 1): the
    values are gathered there, so the gradient goes to those indices."""
    if not x.ndim:
        return result(E.clone(x), indices)
    values = I.gather(x, d, indices)
    if not keepdim:
        values, indices = C.squeeze(values, d), C.squeeze(indices, d)
    return result(values, indices)


def _median(name, x, dim, keepdim, ignore_nan, result):
    if dim is None:
        if keepdim:
            raise TypeError(f"{name}(x, keepdim=True) needs a dim: {name}(x, dim, keepdim=True)")
        flat = C.flatten(x)
        if not flat.shape[0]:
            return E.add(R.sum(x), float("nan"))        # NaN, as PyTorch's median of nothing
        index = SO.median_indices(flat, dim=0, ignore_nan=ignore_nan)
        return ST.evenly_shared(x, C.squeeze(I.gather(flat, 0, index), None))
    d = normalize_dim(name, dim, x.ndim, x)
    return picked(result, x, d, SO.median_indices(x, dim=d, ignore_nan=ignore_nan), keepdim)


@public()
def median(x, dim=None, keepdim=False):
    """``median(x)``: the lower median of every element (NaN if any is NaN), its gradient shared
    among the elements equal to it; ``median(x, dim, keepdim)``: ``(values, indices)`` of the
    lower median along ``dim``, the gradient going to the index.

    >>> import labkit as lk
    >>> lk.median(lk.tensor([4.0, 1.0, 3.0, 2.0])).item()
    2.0
    """
    return _median("median", x, dim, keepdim, False, return_types.median)


@public()
def nanmedian(x, dim=None, keepdim=False):
    """``median`` of the elements that are not NaN (NaN where all are)."""
    return _median("nanmedian", x, dim, keepdim, True, return_types.nanmedian)


@public()
def mode(x, dim=-1, keepdim=False):
    """``(values, indices)``: the most frequent value along ``dim`` (the smallest of equally
    frequent ones) and its last position.

    >>> import labkit as lk
    >>> r = lk.mode(lk.tensor([1.0, 2.0, 2.0, 1.0, 3.0]))
    >>> r.values.item(), r.indices.item()
    (1.0, 3)
    """
    d = normalize_dim("mode", dim, x.ndim, x)
    return picked(return_types.mode, x, d, SO.mode_indices(x, dim=d), keepdim)


# ---- NaN-ignoring sum and mean ---------------------------------------------------------------
@public()
def nansum(x, dim=None, keepdim=False, *, dtype=None):
    """Sum over ``dim`` with NaN counted as zero (and given a zero gradient)."""
    return ST.nansum(_cast_to(x, dtype), dim=dims(dim), keepdim=keepdim)


@public()
def nanmean(x, dim=None, keepdim=False, *, dtype=None):
    """Mean over ``dim`` of the elements that are not NaN (a floating-point ``x``).

    >>> import labkit as lk
    >>> lk.nanmean(lk.tensor([1.0, float("nan"), 3.0])).item()
    2.0
    """
    x = _cast_to(x, dtype)
    float_dtype("nanmean", x)
    return ST.nanmean(x, dim=dims(dim), keepdim=keepdim)

