"""softmax and log_softmax over one dimension, as primitives.

Each is one kernel (subtract the max, exponentiate, normalise: three passes over the data) with a
vjp that reads the op's own output, as PyTorch's and TensorFlow's kernels do, instead of a chain
of seven elementwise and reduction ops with seven vjps. The vjps are written in labkit ops, so
their gradients have gradients too.

>>> import labkit as lk
>>> lk.softmax(lk.tensor([0.0, 0.0]), dim=0).tolist()
[0.5, 0.5]
"""
import numpy as np

from ...errors import ShapeError, describe
from ..batching import ALONG_DIM
from ..op import op
from ..shape_rules import normalize_dim, refuse_complex, shape_of, ufunc_dtype
from .elementwise import exp, mul, sub
from .reduce import short_row_columns, sum


def _rule(name):
    def rule(x, dim=-1):
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
            raise ShapeError(f"{name}: dim must be one int, got dim={dim!r} for {describe(x)}")
        normalize_dim(name, dim, max(len(shape_of(x)), 1), x)
        refuse_complex(name, x)
        return shape_of(x), ufunc_dtype(name, np.exp, x)
    return rule


def _shifted(xp, x, dim):
    """``x - max(x)`` over ``dim`` (a new array, in the result dtype) and the reduction axis."""
    axis = dim if x.ndim else None
    if x.dtype.kind == "c":
        raise TypeError("complex input")         # the rule explains it
    if x.dtype.kind in "biu":      # computed in the dtype NumPy's exp gives (the rule's)
        x = x.astype(np.exp.resolve_dtypes((x.dtype, None))[1])
    if x.size == 0:
        return x.copy(), axis
    if not x.ndim:
        return xp.asarray(x - x), axis                # 0-d: an array, not a NumPy scalar
    return x - x.max(axis=axis, keepdims=True), axis


def _sum(xp, x, axis):
    """The sum kernel's own path (BLAS for short rows), keeping the reduced axis."""
    return sum.kernel(xp, x, dim=axis, keepdim=True)


def _log_softmax_vjp(g, out, x, dim=-1):
    return (sub(g, mul(exp(out), sum(g, dim=dim, keepdim=True))),)


def _columns(xp, x, dim):
    """x's many short rows as columns (``reduce.short_row_columns``), for a float array; else
    None."""
    return short_row_columns(xp, x, dim) if x.dtype.kind == "f" else None


def _rows(columns, x):
    """``columns`` put back in ``x``'s layout and shape."""
    return np.ascontiguousarray(columns.T).reshape(x.shape)


@op("log_softmax", shape=_rule("log_softmax"), vjp=_log_softmax_vjp, batch=ALONG_DIM,
    amp="float32_gpu")
def log_softmax(xp, x, dim=-1):
    """log(softmax(x)) over ``dim``, computed without forming softmax (stable for large inputs).

    >>> import labkit as lk
    >>> [round(v, 4) for v in lk.log_softmax(lk.tensor([1.0, 1.0]), dim=0).tolist()]
    [-0.6931, -0.6931]
    """
    c = _columns(xp, x, dim)
    if c is not None:
        c -= c.max(axis=0)
        c -= np.log(np.exp(c).sum(axis=0))
        return _rows(c, x)
    s, axis = _shifted(xp, x, dim)
    if s.size:
        s -= xp.log(_sum(xp, xp.exp(s), axis))
    return s


def _softmax_vjp(g, out, x, dim=-1):
    return (mul(out, sub(g, sum(mul(g, out), dim=dim, keepdim=True))),)


@op("softmax", shape=_rule("softmax"), vjp=_softmax_vjp, batch=ALONG_DIM, amp="float32_gpu")
def softmax(xp, x, dim=-1):
    """exp(x) / sum(exp(x)) over ``dim``, stable for large inputs (the max is subtracted first).

    >>> import labkit as lk
    >>> [round(v, 4) for v in lk.softmax(lk.tensor([0.0, 1.0]), dim=0).tolist()]
    [0.2689, 0.7311]
    """
    c = _columns(xp, x, dim)
    if c is not None:
        c -= c.max(axis=0)
        np.exp(c, out=c)
        c /= c.sum(axis=0)
        return _rows(c, x)
    e, axis = _shifted(xp, x, dim)
    if e.size:
        xp.exp(e, out=e)
        e /= _sum(xp, e, axis)
    return e
