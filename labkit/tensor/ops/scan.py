"""Scans along one dimension: cumsum and cumprod (differentiable; cumprod's gradient is exact
where the input holds zeros, as PyTorch's is), and the indices of a running max or min (cummax,
cummin: their values are gathered at those indices, so the gradient goes to them).

Each scan runs forwards, or backwards (``reverse=True``: from the last element to the first),
which is what a forward scan's gradient needs.

>>> import labkit as lk
>>> from labkit.tensor.ops.scan import cumprod
>>> cumprod(lk.tensor([2.0, 3.0, 4.0]), dim=0, reverse=True).tolist()
[24.0, 12.0, 4.0]
"""
import numpy as np

from ..batching import ALONG_DIM
from ..dtypes import from_numpy_dtype, int64
from ..op import op
from ..shape_rules import normalize_dim, refuse_complex, shape_of
from .elementwise import cast, div, eq, holomorphic, mul, where
from .reduce import sum


def scan_axis(dim, ndim):
    """The kernel's axis for ``dim``; out-of-range dims raise (never wrap), so the rule explains."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"dim {dim} out of range for {ndim} dimension(s)")
    return dim % n


def accumulated_dtype(x):
    """cumsum's and cumprod's result dtype: bool and int32 accumulate in int64, as in PyTorch."""
    return from_numpy_dtype(np.cumsum(np.zeros(1, x.dtype.np)).dtype)


def _scan_rule(name, dtype):
    def rule(x, dim, **attrs):
        normalize_dim(name, dim, len(shape_of(x)), x)
        return shape_of(x), dtype(x)
    return rule


def _scan(xp, fn, x, dim, reverse):
    """``fn`` (xp.cumsum or xp.cumprod) along ``dim``, from the end if ``reverse``; a 0-d input
    is scanned as one element."""
    a = scan_axis(dim, x.ndim)
    if not x.ndim:
        return fn(x.reshape(1)).reshape(())
    if reverse:
        return xp.flip(fn(xp.flip(x, a), axis=a), a)
    return fn(x, axis=a)


@op("cumsum", shape=_scan_rule("cumsum", accumulated_dtype), batch=ALONG_DIM, amp="float32_gpu",
    vjp=lambda g, out, x, dim, reverse=False: (cumsum(g, dim=dim, reverse=not reverse),))
def cumsum(xp, x, dim, reverse=False):
    """Running sums along ``dim`` (from the last element if ``reverse``)."""
    return _scan(xp, xp.cumsum, x, dim, reverse)


def _cumprod_vjp(g, out, x, dim, reverse=False):
    # d out_k / d x_i = prod_{j <= k, j != i} x_j (j, k in scan order). Before the first zero
    # that is out_k / x_i; after it, every such product holds the zero; at the first zero z it
    # is the running product with x_z taken as 1. (This rule's own derivative at an exact zero
    # misses the terms through positions after the first zero, which PyTorch's O(n^2) rule for
    # second derivatives has; prod's gradient, built on cumprod, is exact to second order.)
    zeros = cumsum(cast(eq(x, 0), dtype=x.dtype.name), dim=dim, reverse=reverse)
    before = eq(zeros, 0)
    first_zero = mul(eq(x, 0), eq(zeros, 1))
    later = cumsum(mul(g, out), dim=dim, reverse=not reverse)       # sum over k >= i
    grad = where(before, div(later, where(before, x, 1)), 0)
    skipped = cumprod(where(first_zero, 1, x), dim=dim, reverse=reverse)
    at_zero = sum(where(before, 0, mul(g, skipped)), dim=dim, keepdim=True)
    return (where(first_zero, at_zero, grad),)


@op("cumprod", shape=_scan_rule("cumprod", accumulated_dtype), vjp=holomorphic(_cumprod_vjp),
    batch=ALONG_DIM, amp="float32_gpu")
def cumprod(xp, x, dim, reverse=False):
    """Running products along ``dim`` (from the last element if ``reverse``)."""
    return _scan(xp, xp.cumprod, x, dim, reverse)


def running(xp, name, x, axis):
    """``xp.<name>.accumulate(x, axis)`` for a binary ufunc ``name`` ('maximum', 'minimum'), or
    the same by doubling where the backend lacks it (CuPy accumulates only add and multiply)."""
    fn = getattr(xp, name)
    try:
        return fn.accumulate(x, axis=axis)
    except NotImplementedError:
        return doubling_scan(xp, fn, x, axis)


def doubling_scan(xp, fn, x, axis):
    """The running ``fn`` along ``axis`` in log2(n) elementwise steps (Hillis and Steele): step
    k combines each element with the one 2**k before it."""
    out = x.copy()
    n, shift = x.shape[axis], 1
    while shift < n:
        later = tuple(slice(shift, None) if i == axis else slice(None) for i in range(x.ndim))
        earlier = tuple(slice(0, n - shift) if i == axis else slice(None) for i in range(x.ndim))
        out[later] = fn(out[later], out[earlier])      # the right side is read in full first
        shift *= 2
    return out


def _cumextremum_rule(x, dim, largest=True):
    refuse_complex("cummax" if largest else "cummin", x)
    return _scan_rule("cumextremum_indices", lambda x: int64)(x, dim)


@op("cumextremum_indices", shape=_cumextremum_rule, vjp=None, batch=ALONG_DIM)
def cumextremum_indices(xp, x, dim, largest=True):
    """Where the running max (``largest``) or min along ``dim`` was last attained, as int64:
    PyTorch's cummax/cummin indices (a tie or a NaN takes the index over)."""
    if x.dtype.kind == "c":
        raise TypeError("complex input")         # the rule explains it
    a = scan_axis(dim, x.ndim)
    if not x.ndim:
        return xp.zeros((), xp.int64)
    hit = x == running(xp, "maximum" if largest else "minimum", x, a)
    if x.dtype.kind == "f":
        hit |= xp.isnan(x)
    position = xp.arange(x.shape[a], dtype=xp.int64).reshape(
        tuple(-1 if i == a else 1 for i in range(x.ndim)))
    return running(xp, "maximum", xp.where(hit, position, 0), a)
