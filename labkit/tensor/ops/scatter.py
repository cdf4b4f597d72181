"""Scatter primitives beside ``index.gather`` / ``index.scatter_add``: ``scatter`` (write ``src``
at ``index`` along a dimension) and ``scatter_reduce`` (combine with sum, prod, mean, amax or
amin). Their vjps are PyTorch's, written in labkit ops (gather, scatter_add and themselves).
"""
import numpy as np

from ...errors import DTypeError, ShapeError, describe
from ..batching import ALONG_DIM
from ..op import needs_grad, op
from ..shape_rules import shape_of
from .elementwise import cast, div, eq, mul, where
from .index import _along_axis_index, _gather, _gather_rule, _kernel_axis, _scatter_add, add_at
from .index import zeros_like

REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _scatter_rule(opname):
    def rule(x, index, src, dim, **attrs):
        _gather_rule(x, index, dim, opname)
        if isinstance(src, (bool, int, float)):
            return shape_of(x), x.dtype
        if shape_of(src) != shape_of(index):
            raise ShapeError(f"{opname}: src {describe(src)} must have the shape of index "
                             f"{describe(index)} (writing into {describe(x)}); slice src to it")
        if src.dtype is not x.dtype:
            raise DTypeError(f"{opname}: src {describe(src)} must have the dtype of "
                             f"{describe(x)}; convert it first: src.to({x.dtype})")
        reduce = attrs.get("reduce")
        if reduce is not None and reduce not in REDUCTIONS:
            raise ValueError(f"{opname}: reduce={reduce!r} is not one of {', '.join(REDUCTIONS)}")
        return shape_of(x), x.dtype
    return rule


def _scatter_vjp(g, out, x, index, src, dim):
    return (scatter(g, index, 0, dim=dim) if needs_grad(x) else None, None,
            _gather(g, index, dim=dim) if needs_grad(src) else None)


@op("scatter", shape=_scatter_rule("scatter"), vjp=_scatter_vjp, batch=ALONG_DIM)
def scatter(xp, x, index, src, dim):
    """A copy of ``x`` with ``src`` (a tensor of index's shape, or a number) written at
    ``index`` along ``dim``: ``out[i][index[i][j]] = src[i][j]`` for ``dim=1``. Where an
    index repeats along ``dim``, one of its values is kept."""
    out = x.copy()
    out[_along_axis_index(xp, index, _kernel_axis(dim, x.ndim))] = src
    return out


# ---- scatter_reduce ---------------------------------------------------------------------------
def _identity(xp, dtype, reduce):
    """The value a reduction starts from (positions that ``include_self=False`` empties)."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "b":
        return reduce == "amin"
    info = xp.finfo(dtype) if dtype.kind == "f" else xp.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _reduce_at(xp, reduce, out, index, values):
    """``out[index] = reduce(out[index], values)`` in place, repeated indices all combined."""
    if reduce in ("sum", "mean"):
        return add_at(xp, out, index, values)
    name = {"prod": "multiply", "amax": "maximum", "amin": "minimum"}[reduce]
    if xp is np:
        return getattr(np, name).at(out, index, values)
    import cupyx
    fn = {"maximum": getattr(cupyx, "scatter_max", None),
          "minimum": getattr(cupyx, "scatter_min", None)}.get(name)
    if fn is not None:
        return fn(out, index, values)
    # CuPy has no multiply.at: the product is combined on the host and copied back
    host = out.get()
    getattr(np, name).at(host, tuple(i.get() for i in index),
                         values.get() if hasattr(values, "get") else values)   # or a number
    out[...] = xp.asarray(host)


def _count(xp, x, at, include_self):
    """How many values each position of a mean combines (at least 1)."""
    n = xp.full(x.shape, 1 if include_self else 0, dtype=np.int64)
    add_at(xp, n, at, 1)
    return xp.maximum(n, 1)


def _scatter_reduce_vjp(g, out, x, index, src, dim, reduce, include_self=True):
    """PyTorch's gradient of scatter_reduce (ties of amax/amin share it evenly)."""
    kw = dict(dim=dim)
    if reduce == "sum":
        gx, gs = g, _gather(g, index, **kw)
    elif reduce == "mean":
        n = _scatter_add(zeros_like(g) + (1 if include_self else 0), index,
                         zeros_like(src) + 1, **kw)
        n = where(eq(n, 0), 1, n)
        gx, gs = div(g, n), div(_gather(g, index, **kw), _gather(n, index, **kw))
    elif reduce in ("amax", "amin"):
        x_hit = cast(eq(x, out), dtype=g.dtype.name)
        src_hit = cast(eq(src, _gather(out, index, **kw)), dtype=g.dtype.name)
        share = div(g, _scatter_add(x_hit, index, src_hit, **kw))
        gx, gs = mul(x_hit, share), mul(src_hit, _gather(share, index, **kw))
    else:   # prod: exclusive products, exact where a single factor is zero
        x_nz = where(eq(x, 0), 1, x)
        gx = div(mul(g, scatter_reduce(x_nz, index, src, reduce="prod", include_self=include_self,
                                       **kw)), x_nz)
        src_zero = eq(src, 0)
        zeros_there = _gather(_scatter_add(zeros_like(x), index, cast(src_zero, dtype=x.dtype.name),
                                           **kw), index, **kw)
        single_zero = where(src_zero, eq(zeros_there, 1), False)
        without = scatter_reduce(x, index, where(single_zero, 1, src), reduce="prod",
                                 include_self=include_self, **kw)
        gs = where(single_zero, _gather(mul(g, without), index, **kw),
                   div(_gather(mul(g, out), index, **kw), where(src_zero, 1, src)))
    if not include_self:
        gx = scatter(gx, index, 0, **kw)
    return (gx if needs_grad(x) else None), None, (gs if needs_grad(src) else None)


@op("scatter_reduce", shape=_scatter_rule("scatter_reduce"), vjp=_scatter_reduce_vjp,
    batch=ALONG_DIM)
def scatter_reduce(xp, x, index, src, dim, reduce, include_self=True):
    """A copy of ``x`` where the values of ``src`` at ``index`` along ``dim`` are combined into
    their positions by ``reduce`` ('sum', 'prod', 'mean', 'amax' or 'amin'), together with x's
    own value there if ``include_self``, else without it (positions no index names keep x's)."""
    out = x.copy()
    at = _along_axis_index(xp, index, _kernel_axis(dim, x.ndim))
    if not include_self:
        out[at] = _identity(xp, x.dtype, reduce)
    _reduce_at(xp, reduce, out, at, src)
    if reduce == "mean":
        n = _count(xp, x, at, include_self)
        out = (out // n if x.dtype.kind in "iu" else out / n).astype(x.dtype, copy=False)
    return out
