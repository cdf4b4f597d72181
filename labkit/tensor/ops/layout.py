"""Primitives that place a tensor's values in a new layout: constant padding, the triangles of
a matrix (tril, triu), and diagonals (diagonal, diagonal_scatter, diag_embed).

Each is one declaration: kernel (against ``xp``), shape/dtype rule, vjp in labkit ops; the vjps
are written in each other (padding's in slicing).
"""
from ...errors import ShapeError, describe
from ..batching import LEADING
from ..op import needs_grad, op
from ..shape_rules import normalize_dim, shape_of
from ..tensor import Tensor
from .index import _getitem, zeros_like
from .shape import aligned, batch_size, broadcast_to, materialized, moved


# ---- constant padding ---------------------------------------------------------------------------
def _pad_rule(x, widths, value=0):
    s = shape_of(x)
    if len(widths) != len(s) or any(lo < 0 or hi < 0 for lo, hi in widths):
        raise ShapeError(f"pad: widths {widths} must give (before, after) >= 0 for each of the "
                         f"{len(s)} dimensions of {describe(x)}")
    return tuple(None if n is None else n + lo + hi for n, (lo, hi) in zip(s, widths)), x.dtype


def _pad_vjp(g, out, x, widths, value=0):
    spec = tuple(("s", lo, lo + n, None) for n, (lo, _) in zip(x.shape, widths))
    return (_getitem(g, spec=spec),)


def _pad_batch(inputs, bdims, widths, value=0):
    return pad(moved(inputs[0], bdims[0]), widths=((0, 0),) + tuple(widths), value=value), 0


@op("pad", shape=_pad_rule, vjp=_pad_vjp, batch=_pad_batch)
def pad(xp, x, widths, value=0):
    """``x`` with ``widths[d] = (before, after)`` elements of ``value`` added around each
    dimension ``d`` (``value`` converted to x's dtype, as PyTorch does)."""
    if not any(lo or hi for lo, hi in widths):      # NumPy's pad takes no 0-d array
        return x.copy()
    return xp.pad(x, widths, constant_values=value)


# ---- triangles ----------------------------------------------------------------------------------
def _triangle(name, upper):
    def rule(x, diagonal=0):
        if len(shape_of(x)) < 2:
            raise ShapeError(f"{name}: needs a tensor of at least 2 dimensions (a matrix, or a "
                             f"batch of them); got {describe(x)}")
        return shape_of(x), x.dtype

    def kernel(xp, x, diagonal=0):
        if x.ndim < 2:
            raise ValueError(f"{name} of a {x.ndim}-d array")    # the rule explains it
        return (xp.triu if upper else xp.tril)(x, diagonal)
    kernel.__name__ = name
    kernel.__doc__ = (f"The {'upper' if upper else 'lower'} triangle of the last two dimensions "
                      f"of ``x`` from the ``diagonal``-th diagonal {'up' if upper else 'down'}; "
                      f"zeros elsewhere.")
    return rule, kernel


_tril_rule, _tril_kernel = _triangle("tril", upper=False)
_triu_rule, _triu_kernel = _triangle("triu", upper=True)
tril = op("tril", shape=_tril_rule, batch=LEADING,
          vjp=lambda g, out, x, diagonal=0: (tril(g, diagonal=diagonal),))(_tril_kernel)
triu = op("triu", shape=_triu_rule, batch=LEADING,
          vjp=lambda g, out, x, diagonal=0: (triu(g, diagonal=diagonal),))(_triu_kernel)


# ---- diagonals ----------------------------------------------------------------------------------
def _diagonal_dims(name, x, dim1, dim2, ndim):
    if ndim < 2:
        raise ShapeError(f"{name}: needs a tensor of at least 2 dimensions; got {describe(x)}")
    d1, d2 = normalize_dim(name, dim1, ndim, x), normalize_dim(name, dim2, ndim, x)
    if d1 == d2:
        raise ShapeError(f"{name}: dim1={dim1} and dim2={dim2} name the same dimension of "
                         f"{describe(x)}; give two different dimensions")
    return d1, d2


def _diagonal_length(n1, n2, offset):
    if n1 is None or n2 is None:
        return None
    return max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))


def _diagonal_shape(name, x, offset, dim1, dim2):
    s = shape_of(x)
    d1, d2 = _diagonal_dims(name, x, dim1, dim2, len(s))
    rest = tuple(n for i, n in enumerate(s) if i not in (d1, d2))
    return rest + (_diagonal_length(s[d1], s[d2], offset),)


def _diagonal_rule(x, offset=0, dim1=0, dim2=1):
    return _diagonal_shape("diagonal", x, offset, dim1, dim2), x.dtype


def _diagonal_vjp(g, out, x, offset=0, dim1=0, dim2=1):
    return (diagonal_scatter(zeros_like(x), g, offset=offset, dim1=dim1, dim2=dim2),)


def _shifted(name, nd, *dims):
    """``dims`` of an example of ``nd`` dimensions, as dims of the batch (batch first)."""
    return tuple(normalize_dim(name, d, nd) + 1 for d in dims)


def _diagonal_batch(inputs, bdims, offset=0, dim1=0, dim2=1):
    x = moved(inputs[0], bdims[0])
    d1, d2 = _shifted("diagonal", x.ndim - 1, dim1, dim2)
    return diagonal(x, offset=offset, dim1=d1, dim2=d2), 0


@op("diagonal", shape=_diagonal_rule, vjp=_diagonal_vjp, batch=_diagonal_batch, moves=True)
def diagonal(xp, x, offset=0, dim1=0, dim2=1):
    """The ``offset``-th diagonal of the matrices in dimensions ``dim1``, ``dim2`` of ``x``, as
    its last dimension (a read-only view)."""
    return xp.diagonal(x, offset, dim1, dim2)


def _write_diagonal(xp, out, src, offset, dim1, dim2):
    """``out``'s ``offset``-th diagonal in ``dim1``, ``dim2`` set to ``src`` in place (src laid
    out as ``diagonal`` returns it: the diagonal last)."""
    view = xp.moveaxis(out, (dim1, dim2), (-2, -1))
    n = _diagonal_length(view.shape[-2], view.shape[-1], offset)
    i = xp.arange(n)
    view[..., i + max(-offset, 0), i + max(offset, 0)] = src


def _diagonal_scatter_rule(x, src, offset=0, dim1=0, dim2=1):
    target = _diagonal_shape("diagonal_scatter", x, offset, dim1, dim2)
    if shape_of(src) not in ((), target) and not isinstance(src, (int, float)):
        raise ShapeError(f"diagonal_scatter: src {describe(src)} must have the shape {target} "
                         f"of the diagonal (offset={offset}, dim1={dim1}, dim2={dim2}) of "
                         f"{describe(x)}")
    return shape_of(x), x.dtype


def _diagonal_scatter_vjp(g, out, x, src, offset=0, dim1=0, dim2=1):
    where = dict(offset=offset, dim1=dim1, dim2=dim2)
    return (diagonal_scatter(g, 0, **where) if needs_grad(x) else None,
            diagonal(g, **where) if needs_grad(src) else None)


def _diagonal_scatter_batch(inputs, bdims, offset=0, dim1=0, dim2=1):
    (x, src), (dx, ds) = inputs, bdims
    x = materialized(x, dx, batch_size(inputs, bdims))
    d1, d2 = _shifted("diagonal_scatter", x.ndim - 1, dim1, dim2)
    if isinstance(src, Tensor):        # the batch's diagonals in full (src may be one number)
        target = _diagonal_shape("diagonal_scatter", x, offset, d1, d2)
        src = broadcast_to(src if ds is None else aligned(src, ds, len(target) - 1),
                           shape=target)
    return diagonal_scatter(x, src, offset=offset, dim1=d1, dim2=d2), 0


@op("diagonal_scatter", shape=_diagonal_scatter_rule, vjp=_diagonal_scatter_vjp,
    batch=_diagonal_scatter_batch)
def diagonal_scatter(xp, x, src, offset=0, dim1=0, dim2=1):
    """A copy of ``x`` whose ``offset``-th diagonal in ``dim1``, ``dim2`` holds ``src``."""
    out = x.copy()
    _write_diagonal(xp, out, src, offset, dim1 % x.ndim, dim2 % x.ndim)
    return out


def _diag_embed_dims(x, dim1, dim2):
    return _diagonal_dims("diag_embed", x, dim1, dim2, len(shape_of(x)) + 1)


def _diag_embed_rule(x, offset=0, dim1=-2, dim2=-1):
    s = shape_of(x)
    if not s:
        raise ShapeError(f"diag_embed: needs a tensor of at least 1 dimension (its last holds the "
                         f"diagonals); got {describe(x)}")
    d1, d2 = _diag_embed_dims(x, dim1, dim2)
    n = None if s[-1] is None else s[-1] + abs(offset)
    batch = iter(s[:-1])
    return tuple(n if i in (d1, d2) else next(batch) for i in range(len(s) + 1)), x.dtype


def _diag_embed_batch(inputs, bdims, offset=0, dim1=-2, dim2=-1):
    x = moved(inputs[0], bdims[0])
    d1, d2 = _shifted("diag_embed", x.ndim, dim1, dim2)
    return diag_embed(x, offset=offset, dim1=d1, dim2=d2), 0


@op("diag_embed", shape=_diag_embed_rule, batch=_diag_embed_batch,
    vjp=lambda g, out, x, offset=0, dim1=-2, dim2=-1: (
        diagonal(g, offset=offset, dim1=dim1, dim2=dim2),))
def diag_embed(xp, x, offset=0, dim1=-2, dim2=-1):
    """Matrices in dimensions ``dim1``, ``dim2`` whose ``offset``-th diagonals are the last
    dimension of ``x``; zeros elsewhere."""
    n = x.shape[-1] + abs(offset)
    out = xp.zeros(x.shape[:-1] + (n, n), x.dtype)
    _write_diagonal(xp, out, x, offset, out.ndim - 2, out.ndim - 1)
    nd = x.ndim + 1
    return xp.moveaxis(out, (-2, -1), (dim1 % nd, dim2 % nd))
