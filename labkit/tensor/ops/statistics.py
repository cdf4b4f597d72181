"""More reductions: prod (its gradient exact where the input holds zeros, as PyTorch's is),
all and any (bool results), and composites written in primitives: std, the NaN-ignoring sum
and mean, count_nonzero, and a reduction to one chosen element whose gradient is shared evenly
among the elements equal to it (PyTorch's rule for ``median()``).

>>> import labkit as lk
>>> from labkit.tensor.ops.statistics import prod
>>> x = lk.tensor([2.0, 0.0, 3.0], requires_grad=True)
>>> prod(x).backward(); x.grad.tolist()
[0.0, 6.0, 0.0]
"""
from ...errors import ShapeError, describe
from ..batching import ONE_DIM_REDUCTION, REDUCTION
from ..dtypes import bool_
from ..op import op
from ..shape_rules import normalize_dims, reduced_shape, shape_of
from .composite import var
from .elementwise import add, cast, div, eq, mul, ne, sqrt, stop_gradient, sub, where
from .index import getitem_slices, zeros_like
from .reduce import sum
from .scan import accumulated_dtype, cumprod, scan_axis
from .shape import concat, expand_dims, reshape


def _reduce_axes(dim, ndim):
    """The kernel's axes: None for every element (and for any dim of a 0-d tensor)."""
    if dim is None or not ndim:
        if dim is not None:
            scan_axis(dim, ndim)          # a 0-d tensor takes dim 0 or -1 only
        return None
    return tuple(scan_axis(d, ndim) for d in ((dim,) if isinstance(dim, int) else dim))


# ---- prod ------------------------------------------------------------------------------------
def _prod_rule(x, dim=None, keepdim=False):
    if not isinstance(dim, (int, type(None))) or isinstance(dim, bool):
        raise ShapeError(f"prod: dim must be one int or None (every element), got dim={dim!r} "
                         f"for {describe(x)}; for several dims, take prod once per dim")
    axes = normalize_dims("prod", dim, len(shape_of(x)), x)
    return reduced_shape(shape_of(x), axes, keepdim), accumulated_dtype(x)


def exclusive_cumprod(x, dim, reverse=False):
    """Products of the elements before each one along ``dim`` (after it, if ``reverse``): 1 for
    the first. No division, so exact where ``x`` holds zeros."""
    one = add(zeros_like(getitem_slices(x, dim, 0, 1)), 1)
    if reverse:
        shifted = concat(getitem_slices(x, dim, 1, None), one, dim=dim)
    else:
        shifted = concat(one, getitem_slices(x, dim, 0, -1), dim=dim)
    return cumprod(shifted, dim=dim, reverse=reverse)


def _prod_vjp(g, out, x, dim=None, keepdim=False):
    if not x.ndim:
        return (g,)
    if dim is None and x.ndim > 1:            # the product of the flattened tensor's elements
        grad, = _prod_vjp(reshape(g, shape=()), None, reshape(x, shape=(-1,)), 0)
        return (reshape(grad, shape=x.shape),)
    d = 0 if dim is None else dim % x.ndim
    # the product of every other element: exclusive products from the left and from the right
    others = mul(exclusive_cumprod(x, d), exclusive_cumprod(x, d, True))
    return (mul(g if keepdim else expand_dims(g, axes=(d,)), others),)


@op("prod", shape=_prod_rule, vjp=_prod_vjp, batch=ONE_DIM_REDUCTION)
def prod(xp, x, dim=None, keepdim=False):
    """Product over ``dim`` (None: every element; 1 for none), bool and int32 giving int64."""
    if not isinstance(dim, (int, type(None))):
        raise TypeError("prod takes one dim")          # the rule explains
    return xp.prod(x, axis=_reduce_axes(dim, x.ndim), keepdims=keepdim)


# ---- all / any ---------------------------------------------------------------------------------
def _logical_rule(name):
    def rule(x, dim=None, keepdim=False):
        axes = normalize_dims(name, dim, len(shape_of(x)), x)
        return reduced_shape(shape_of(x), axes, keepdim), bool_
    return rule


@op("all", shape=_logical_rule("all"), vjp=None, batch=REDUCTION)
def all_(xp, x, dim=None, keepdim=False):
    """Whether every element over ``dim`` is nonzero (True over no elements)."""
    return xp.all(x, axis=_reduce_axes(dim, x.ndim), keepdims=keepdim)


@op("any", shape=_logical_rule("any"), vjp=None, batch=REDUCTION)
def any_(xp, x, dim=None, keepdim=False):
    """Whether some element over ``dim`` is nonzero (False over no elements)."""
    return xp.any(x, axis=_reduce_axes(dim, x.ndim), keepdims=keepdim)


# ---- composites ------------------------------------------------------------------------------
def isnan(x):
    return ne(x, x)


def std(x, dim=None, keepdim=False, correction=1):
    """Standard deviation over ``dim`` with Bessel's ``correction``."""
    v = var(x, dim=dim, keepdim=keepdim, correction=correction)
    # zero where the variance is zero, as PyTorch's gradient is (not sqrt's infinite slope)
    flat = eq(v, 0)
    return where(flat, 0, sqrt(where(flat, 1, v)))


def count_nonzero(x, dim=None):
    """How many elements over ``dim`` are nonzero, as int64."""
    return sum(ne(x, 0), dim=dim)


def nansum(x, dim=None, keepdim=False):
    """Sum over ``dim`` counting NaN as zero (its gradient is zero there)."""
    return sum(where(isnan(x), 0, x), dim=dim, keepdim=keepdim)


def nanmean(x, dim=None, keepdim=False):
    """Mean over ``dim`` of the elements that are not NaN."""
    count = sum(cast(eq(x, x), dtype=x.dtype.name), dim=dim, keepdim=keepdim)
    return div(nansum(x, dim=dim, keepdim=keepdim), count)


def evenly_shared(x, value):
    """``value`` (a 0-d tensor equal to some elements of ``x``, or NaN), with a gradient shared
    evenly among the elements of ``x`` equal to it (the NaNs, for NaN): PyTorch's gradient of
    ``median()`` and ``nanmedian()``."""
    if not x.dtype.is_floating:
        return value
    v = stop_gradient(value)
    hit = where(isnan(v), isnan(x), eq(x, v))
    count = sum(cast(hit, dtype=x.dtype.name))
    return add(v, div(sum(where(hit, sub(x, v), 0)), count))
