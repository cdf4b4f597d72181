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

from ...devices import host_dnnl
from ...errors import ShapeError, describe
from ..batching import ALONG_DIM
from ..op import needs_grad, op
from ..shape_rules import normalize_dim, refuse_complex, shape_of, ufunc_dtype
from .elementwise import exp, mul, neg, sub
from .reduce import short_row_columns, sum


def _rule(name):
    def rule(x, dim=-1):
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


def _in_one_kernel(xp, x, dim):
    """Whether the kernels ask oneDNN's (``host_dnnl``: float32, large arrays) first: over the
    last dimension, at one OpenMP thread as its other kernels. On nanoGPT's attention weights
    (3072 rows of 64) and word_language_model's (700, 443) logits, half to a third of NumPy's
    time forward and backward."""
    return x.ndim > 0 and dim in (-1, x.ndim - 1) and x.size >= host_dnnl.ELEMENTWISE_MIN and \
        host_dnnl.serves(xp, x)


def _backward_rule(name):
    def rule(g, out, dim=-1):
        if shape_of(g) != shape_of(out):
            raise ShapeError(f"{name}: the cotangent {describe(g)} and the forward's result "
                             f"{describe(out)} must have the same shape")
        normalize_dim(name, dim, max(len(shape_of(out)), 1), out)
        refuse_complex(name, out)
        return shape_of(out), ufunc_dtype(name, np.multiply, g, out)
    return rule


def _log_softmax_vjp(g, out, x, dim=-1):
    return (log_softmax_backward(g, out, dim=dim),)


def _log_softmax_backward_vjp(c, r, g, out, dim=-1):
    # r = g - e sum(g), e = exp(out): d g = c - sum(c e), d out = -c e sum(g)
    e = exp(out)
    return (sub(c, sum(mul(c, e), dim=dim, keepdim=True)) if needs_grad(g) else None,
            neg(mul(mul(c, e), sum(g, dim=dim, keepdim=True))) if needs_grad(out) else None)


@op("log_softmax_backward", shape=_backward_rule("log_softmax_backward"),
    vjp=_log_softmax_backward_vjp, batch=ALONG_DIM)
def log_softmax_backward(xp, g, out, dim=-1):
    """log_softmax's vjp: ``g - exp(out) * sum(g)`` over ``dim``, from the cotangent ``g`` and
    the forward's result ``out``."""
    if _in_one_kernel(xp, out, dim):
        dx = host_dnnl.softmax_backward(g, out, log=True)
        if dx is not None:
            return dx
    return g - xp.exp(out) * _sum(xp, g, dim if out.ndim else None)


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
    if _in_one_kernel(xp, x, dim):
        out = host_dnnl.softmax(x, log=True)
        if out is not None:
            return out
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
    return (softmax_backward(g, out, dim=dim),)


def _softmax_backward_vjp(c, r, g, out, dim=-1):
    # r = out (g - s), s = sum(g out): d g = out (c - sum(c out)) (the same map, applied to c),
    # d out = c (g - s) - g sum(c out)
    dout = None
    if needs_grad(out):
        s = sum(mul(g, out), dim=dim, keepdim=True)
        dout = sub(mul(c, sub(g, s)), mul(g, sum(mul(c, out), dim=dim, keepdim=True)))
    return softmax_backward(c, out, dim=dim) if needs_grad(g) else None, dout


@op("softmax_backward", shape=_backward_rule("softmax_backward"), vjp=_softmax_backward_vjp,
    batch=ALONG_DIM)
def softmax_backward(xp, g, out, dim=-1):
    """softmax's vjp: ``out * (g - sum(g * out))`` over ``dim``, from the cotangent ``g`` and the
    forward's result ``out`` (one op, where its composition was four with three temporaries)."""
    if _in_one_kernel(xp, out, dim):
        dx = host_dnnl.softmax_backward(g, out)
        if dx is not None:
            return dx
    r = g - _sum(xp, g * out, dim if out.ndim else None)
    r *= out
    return r


@op("softmax", shape=_rule("softmax"), vjp=_softmax_vjp, batch=ALONG_DIM, amp="float32_gpu")
def softmax(xp, x, dim=-1):
    """exp(x) / sum(exp(x)) over ``dim``, stable for large inputs (the max is subtracted first).

    >>> import labkit as lk
    >>> [round(v, 4) for v in lk.softmax(lk.tensor([0.0, 1.0]), dim=0).tolist()]
    [0.2689, 0.7311]
    """
    if _in_one_kernel(xp, x, dim):
        out = host_dnnl.softmax(x)
        if out is not None:
            return out
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
