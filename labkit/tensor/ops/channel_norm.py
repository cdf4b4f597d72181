"""Batch normalisation's kernels: the per-channel moments of (N, C, ...) activations, the
normalisation with given statistics and the layer's weight and bias, and its gradient.

``F.batch_norm`` runs ``channel_moments(x)`` (the batch's mean and biased variance per channel,
one op) and then ``batch_norm(x, mean, var[, w][, b])``, which is
``(x - mean) / sqrt(var + eps) * w + b``, written as PyTorch's CPU kernel writes it:
``x * scale + shift`` with ``scale = w / sqrt(var + eps)`` and ``shift = b - mean * scale``
per channel, one pass over the activations. In evaluation the same op takes the running
statistics. Training's gradient reaches x both directly and through the moments, each by its
own vjp: ``batch_norm_backward`` gives x's, the statistics', the weight's and the bias's
gradients as one flat array (two sums per channel and a product over the activations), and
``channel_moments_backward`` takes the statistics' share back to x (one buffer, three passes).
The statistics are computed once a step, for the normalisation and the running averages both.

The per-channel sums and dot products are taken over each (example, channel) row, read in
place also where the array is laid out channels first (a convolution's output), then added
over the batch in one order: the same bits in every layout (``reduce.channel_sums``).

16-bit inputs are computed in float32; the statistics, weight and bias may be float32 beside
them (a mixed-precision network keeps its BatchNorm parameters in float32, as PyTorch's).

>>> import labkit as lk
>>> from labkit.tensor.ops.channel_norm import batch_norm, channel_moments
>>> x = lk.tensor([[1.0, 2.0], [3.0, 6.0]])
>>> m = channel_moments(x)
>>> m.tolist()
[[2.0, 4.0], [1.0, 4.0]]
>>> batch_norm(x, m[0], m[1], eps=0.0).tolist()
[[-1.0, -1.0], [1.0, 1.0]]
"""
import math

import numpy as np

from ...errors import DTypeError, ShapeError, describe
from ..op import needs_grad, op
from ..shape_rules import dtype_of, float_dtype, shape_of
from .elementwise import add, cast, div, mul, sqrt, sub, zeros_like
from .index import getitem_slices
from .nn_kernels import _upcast
from .reduce import channel_dots, channel_sums, sum as _sum
from .shape import batch_size, concat, materialized, moved, reshape

def _channel_shape(ndim, c):
    return (c,) + (1,) * (ndim - 2)


def _count(shape):
    """The number of values each channel's statistics are over (at least 1)."""
    return max(math.prod(shape) // max(shape[1], 1), 1)


def _check_input(name, x):
    if len(shape_of(x)) < 2:
        raise ShapeError(f"{name}: expects (N, C, ...) input, got {describe(x)}")
    return float_dtype(name, x)


# ---- channel_moments: the batch's statistics ---------------------------------------------------
def _moments_rule(x):
    _check_input("channel_moments", x)
    return (2, shape_of(x)[1]), float_dtype("channel_moments", x)


def _moments_batch(inputs, bdims):
    x = moved(inputs[0], bdims[0])           # (B, N, C, ...): each example's own moments
    b, n, c = x.shape[:3]
    merged = reshape(moved(x, 1, to=0), shape=(n, b * c) + tuple(x.shape[3:]))
    return moved(reshape(channel_moments(merged), shape=(2, b, c)), 1, to=0), 0


def _row(t, k, shape):
    """Row ``k`` of a (2, C) tensor, shaped ``shape``."""
    return reshape(getitem_slices(t, 0, k, k + 1), shape=shape)


@op("channel_moments", shape=_moments_rule, vjp=lambda g, out, x: (
    channel_moments_backward(g, x, out),), batch=_moments_batch)
def channel_moments(xp, x):
    """``stack([mean, var])`` per channel of (N, C, ...) ``x`` over the batch and the positions
    (the biased variance): what BatchNorm normalises with in training, and updates its running
    statistics from."""
    x32 = _upcast(xp, x)
    c = x.shape[1]
    inv_n = 1.0 / _count(x.shape)
    mean = channel_sums(xp, x32) * inv_n
    centered = x32 - mean
    var = channel_dots(xp, centered, centered) * inv_n
    return xp.stack([mean.reshape(c), var.reshape(c)]).astype(x.dtype, copy=False)


def _moments_backward_rule(g, x, moments):
    dtype = _check_input("channel_moments_backward", x)
    want = (2, shape_of(x)[1])
    for t, what in ((g, "gradient"), (moments, "moments")):
        if tuple(shape_of(t)) != want:
            raise ShapeError(f"channel_moments_backward: the {what} {describe(t)} must have "
                             f"shape {want} (mean and variance per channel of {describe(x)})")
    return shape_of(x), dtype


def _moments_backward_vjp(c, out, g, x, moments):
    """Cotangents of dx = (x - mean) k + g0 / n, k = 2 g1 / n per channel."""
    cs = x.shape[1]
    shape = _channel_shape(x.ndim, cs)
    inv_n = 1.0 / _count(tuple(x.shape))
    dims = (0,) + tuple(range(2, x.ndim))
    total = lambda t: reshape(_sum(t, dim=dims), shape=(1, cs))    # noqa: E731
    k = mul(_row(g, 1, (1, cs)), 2.0 * inv_n)
    centered = sub(x, _row(moments, 0, shape))
    c_sum = total(c)
    dg = concat(mul(c_sum, inv_n), mul(total(mul(c, centered)), 2.0 * inv_n), dim=0)
    dx = mul(c, reshape(k, shape=shape)) if needs_grad(x) else None
    dm = concat(mul(mul(c_sum, k), -1.0), zeros_like(k), dim=0) if needs_grad(moments) \
        else None
    return dg, dx, dm


def _moments_backward_batch(inputs, bdims):
    n = batch_size(inputs, bdims)
    g, x, m = (materialized(t, d, n) for t, d in zip(inputs, bdims))    # x (B, N, C, ...)
    shape = (n, 1, x.shape[2]) + (1,) * (x.ndim - 3)
    inv_n = 1.0 / _count(tuple(x.shape[1:]))
    rows = [reshape(getitem_slices(t, 1, k, k + 1), shape=shape) for t, k in ((m, 0), (g, 1),
                                                                              (g, 0))]
    mean, g1, g0 = rows
    return add(mul(sub(x, mean), mul(g1, 2.0 * inv_n)), mul(g0, inv_n)), 0


@op("channel_moments_backward", shape=_moments_backward_rule, vjp=_moments_backward_vjp,
    batch=_moments_backward_batch)
def channel_moments_backward(xp, g, x, moments):
    """The gradient through ``moments = channel_moments(x)`` of an upstream (2, C) gradient
    ``g``: ``(g[0] + 2 g[1] (x - mean)) / n`` per channel, in one buffer."""
    shape = _channel_shape(x.ndim, x.shape[1])
    inv_n = 1.0 / _count(x.shape)
    g32, x32, m32 = _upcast(xp, g), _upcast(xp, x), _upcast(xp, moments)
    out = xp.empty(x.shape, xp.result_type(x32, g32))
    xp.subtract(x32, m32[0].reshape(shape), out=out)
    out *= (g32[1] * (2.0 * inv_n)).reshape(shape)
    out += (g32[0] * inv_n).reshape(shape)
    return out.astype(x.dtype, copy=False)


# ---- batch_norm: normalised with given statistics, then the weight and bias ------------------
def _params(weight, bias):
    return ("weight",) * bool(weight) + ("bias",) * bool(bias)


def _check_channel_vectors(name, x, pairs):
    """Each of ``pairs`` ((tensor, what)) has shape (C,) and x's dtype (or float32 beside a
    16-bit x)."""
    c, dx = shape_of(x)[1], dtype_of(x)
    for t, what in pairs:
        if tuple(shape_of(t)) != (c,):
            raise ShapeError(f"{name}: the {what} {describe(t)} must have shape ({c},), the "
                             f"channels (dim 1) of the input {describe(x)}")
        dt = dtype_of(t)
        if dt != dx and not (dt.name == "float32" and dx.itemsize == 2 and dx.is_floating):
            raise DTypeError(f"{name}: the {what} {describe(t)} must have the input's dtype "
                             f"({describe(x)}), or float32 beside a 16-bit input; convert it "
                             f"with .to({dx.name})")


def _batch_norm_rule(x, mean, var, *params, eps, weight=False, bias=False):
    dtype = _check_input("batch_norm", x)
    _check_count("batch_norm", params, weight, bias)
    _check_channel_vectors("batch_norm", x, zip((mean, var) + params,
                                                ("mean", "variance") + _params(weight, bias)))
    return shape_of(x), dtype


def _scale(xp, var, w, eps, like):
    """``w / sqrt(var + eps)`` (``w`` None: 1) per channel, shaped to broadcast over ``like``."""
    rstd = 1.0 / xp.sqrt(_upcast(xp, var) + eps)
    scale = rstd if w is None else rstd * _upcast(xp, w)
    return rstd.reshape(_channel_shape(like.ndim, like.shape[1])), \
        scale.reshape(_channel_shape(like.ndim, like.shape[1]))


def _checked(name, x, vectors, weight, bias):
    """The kernels' own check of the rule's conditions on the channel vectors (eager dispatch
    runs a rule only where a kernel fails, and NumPy would broadcast a (1,) vector): the
    common case at a glance, any other by the rule's check."""
    c = (x.shape[1],)
    if all(v.shape == c and v.dtype == x.dtype for v in vectors):
        return
    _check_channel_vectors(name, x, zip(vectors, ("mean", "variance") + _params(weight, bias)))


def _check_count(name, params, weight, bias):
    """(In the kernels too: eager dispatch runs a rule only when a kernel fails.)"""
    if len(params) != bool(weight) + bool(bias):
        wanted = " and ".join(_params(weight, bias)) or "nothing"
        raise ShapeError(f"{name}: got {len(params)} tensors after the mean and variance with "
                         f"weight={weight}, bias={bias}; pass {wanted} there")


def _split(params, weight, bias):
    _check_count("batch_norm", params, weight, bias)
    w = params[0] if weight else None
    b = params[-1] if bias else None
    return w, b


def _batch_norm_batch(inputs, bdims, eps, weight=False, bias=False):
    n = batch_size(inputs, bdims)
    x = materialized(inputs[0], bdims[0], n)                    # (B, N, C, ...)
    if all(d is None for d in bdims[1:]):                       # shared statistics: one op
        merged = reshape(x, shape=(-1,) + tuple(x.shape[2:]))
        out = batch_norm(merged, *inputs[1:], eps=eps, weight=weight, bias=bias)
        return reshape(out, shape=tuple(x.shape)), 0
    shape = (n, 1, x.shape[2]) + (1,) * (x.ndim - 3)
    mean, var, *params = (reshape(materialized(t, d, n), shape=shape)
                          for t, d in zip(inputs[1:], bdims[1:]))
    w, b = _split(params, weight, bias)
    y = div(sub(x, mean), sqrt(add(var, eps)))
    y = y if w is None else mul(y, w)
    return (y if b is None else add(y, b)), 0


def _batch_norm_vjp(g, out, x, mean, var, *params, eps, weight=False, bias=False):
    w = params[0] if weight else None
    stats = needs_grad(var) or (w is not None and needs_grad(w))
    packed = batch_norm_backward(g, x, mean, var, *params[:1 if weight else 0], eps=eps,
                                 weight=weight, bias=bias, stats=stats)
    return tuple(_unpack(packed, (x, mean, var) + params))


def _unpack(packed, inputs):
    """The gradients of ``inputs`` (x first, then vectors of C) from batch_norm_backward's flat
    result, as views in their shapes (cast to their dtypes where the result is wider)."""
    parts, start = [], 0
    for t in inputs:
        size = math.prod(t.shape)
        part = reshape(getitem_slices(packed, 0, start, start + size), shape=tuple(t.shape))
        parts.append(part if part.dtype == t.dtype else cast(part, dtype=t.dtype.name))
        start += size
    return parts


@op("batch_norm", shape=_batch_norm_rule, vjp=_batch_norm_vjp, batch=_batch_norm_batch)
def batch_norm(xp, x, mean, var, *params, eps, weight=False, bias=False):
    """``(x - mean) / sqrt(var + eps)`` per channel of (N, C, ...) ``x`` (``mean`` and ``var``
    of shape (C,)), times the weight (``weight``) plus the bias (``bias``), given in that order
    after them: ``x * scale + shift`` in one pass."""
    w, b = _split(params, weight, bias)
    _checked("batch_norm", x, (mean, var) + params, weight, bias)
    x32 = _upcast(xp, x)
    _, scale = _scale(xp, var, w, eps, x)
    shift = -_upcast(xp, mean).reshape(scale.shape) * scale
    if b is not None:
        shift += _upcast(xp, b).reshape(scale.shape)
    out = xp.multiply(x32, scale, dtype=xp.result_type(x32, scale))
    out += shift
    return out.astype(x.dtype, copy=False)


def _widest(*dtypes):
    """The widest of dtypes (of arrays or tensors), the first among equals: the gradients'
    dtype, float32 where a 16-bit input has float32 statistics or weights."""
    dtypes = [getattr(d, "dtype", d) for d in dtypes]
    return max(dtypes, key=lambda d: d.itemsize)


# ---- its gradient --------------------------------------------------------------------------------
def _backward_rule(g, x, mean, var, *w, eps, weight, bias, stats):
    if shape_of(g) != shape_of(x):
        raise ShapeError(f"batch_norm_backward: gradient {describe(g)} and input {describe(x)} "
                         f"must have the same shape")
    dtype = _check_input("batch_norm_backward", x)
    _check_count("batch_norm_backward", w, weight, False)
    vectors = (mean, var) + w
    _check_channel_vectors("batch_norm_backward", x,
                           zip(vectors, ("mean", "variance") + _params(weight, False)))
    c = shape_of(x)[1]
    size = math.prod(shape_of(x)) + c * (2 + bool(weight) + bool(bias))
    return (size,), _widest(*(dtype_of(t) for t in (x,) + vectors))


def _backward_vjp(cot, out, g, x, mean, var, *w, eps, weight, bias, stats):
    """Cotangents of dx = g a, dmean = -a S, dvar = -w r^3 D / 2, dw = r D, db = S, with
    r = 1/sqrt(var + eps), a = w r, S = sum(g), D = sum(g (x - mean)) per channel."""
    c_dx, c_mean, c_var, *rest = _unpack(cot, (x, mean, var) + w + (mean,) * bool(bias))
    c_dw = rest[0] if weight else None
    c_db = rest[-1] if bias else None
    shape = _channel_shape(x.ndim, x.shape[1])
    dims = (0,) + tuple(range(2, x.ndim))
    per = lambda t: reshape(t, shape=shape)                       # noqa: E731
    total = lambda t: reshape(_sum(t, dim=dims), shape=(x.shape[1],))  # noqa: E731
    w0 = w[0] if weight else None
    r = div(1.0, sqrt(add(var, eps)))
    a = r if w0 is None else mul(w0, r)
    r3 = mul(mul(r, r), r)
    s, e = total(g), total(mul(c_dx, g))
    centered = sub(x, per(mean)) if stats else None
    d = total(mul(g, centered)) if stats else None
    # u: what D's cotangent is, from dvar and dw
    u = None
    if stats:
        u = mul(mul(c_var, r3), -0.5 if w0 is None else mul(w0, -0.5))
        if weight:
            u = add(u, mul(c_dw, r))
    vector_part = mul(mul(a, -1.0), c_mean)
    if bias:
        vector_part = add(vector_part, c_db)
    dg = add(mul(c_dx, per(a)), per(vector_part))
    if u is not None:
        dg = add(dg, mul(centered, per(u)))
    dx = mul(g, per(u)) if u is not None and needs_grad(x) else None
    dmean = mul(mul(s, u), -1.0) if u is not None else None
    # var: every output's r, with dr/dvar = -r^3 / 2
    wr = (lambda t: t) if w0 is None else (lambda t: mul(t, w0))
    through_r = sub(wr(e), wr(mul(s, c_mean)))
    if stats:
        through_r = add(through_r, mul(mul(wr(mul(d, c_var)), mul(r, r)), -1.5))
        if weight:
            through_r = add(through_r, mul(d, c_dw))
    dvar = mul(mul(through_r, r3), -0.5)
    dw = None
    if weight:
        dw = sub(mul(e, r), mul(mul(r, s), c_mean))
        if stats:
            dw = add(dw, mul(mul(mul(r3, d), c_var), -0.5))
    grads = (dg, dx, dmean, dvar) + ((dw,) if weight else ())
    # (without stats nothing depends on x or the mean: zeros for them, as PyTorch gives)
    return tuple((zeros_like(src) if needs_grad(src) else None) if t is None else
                 t if t.dtype == src.dtype else cast(t, dtype=src.dtype.name)
                 for t, src in zip(grads, (g, x, mean, var) + w))


def _backward_batch(inputs, bdims, eps, weight, bias, stats):
    """Each example's sums are over its own batch and positions: the pieces as ops over the
    batch, packed per example."""
    n = batch_size(inputs, bdims)
    g, x = (materialized(t, d, n) for t, d in zip(inputs[:2], bdims[:2]))   # (B, N, C, ...)
    shape = (n, 1, x.shape[2]) + (1,) * (x.ndim - 3)
    mean, var, *w = (reshape(materialized(t, d, n), shape=shape)
                     for t, d in zip(inputs[2:], bdims[2:]))
    dims = (1,) + tuple(range(3, x.ndim))
    total = lambda t: reshape(_sum(t, dim=dims), shape=(n, -1))  # noqa: E731
    r = div(1.0, sqrt(add(var, eps)))
    a = mul(w[0], r) if weight else r
    s = total(g)
    d = total(mul(g, sub(x, mean))) if stats else mul(s, 0.0)
    flat = lambda t: reshape(t, shape=(n, -1))                    # noqa: E731
    parts = [flat(mul(g, a)), mul(flat(a), mul(s, -1.0)),
             mul(mul(flat(mul(mul(r, r), a)), d), -0.5)]
    if weight:
        parts.append(mul(flat(r), d))
    if bias:
        parts.append(s)
    return concat(*parts, dim=1), 0


@op("batch_norm_backward", shape=_backward_rule, vjp=_backward_vjp, batch=_backward_batch)
def batch_norm_backward(xp, g, x, mean, var, *w, eps, weight, bias, stats):
    """The gradients through ``batch_norm(x, mean, var[, w][, b])`` of an upstream gradient
    ``g``, as one flat array: x's, mean's, var's, then the weight's (``weight``) and the bias's
    (``bias``). ``stats=False`` leaves the variance's and the weight's as zeros (neither wants
    one), which saves the pass that centres x."""
    _check_count("batch_norm_backward", w, weight, False)
    _checked("batch_norm_backward", x, (mean, var) + w, weight, False)
    w0 = w[0] if weight else None
    g32, x32 = _upcast(xp, g), _upcast(xp, x)
    rstd, scale = _scale(xp, var, w0, eps, x)
    c = x.shape[1]
    n = x.size
    size = n + c * (2 + bool(weight) + bool(bias))
    packed = xp.empty(size, _widest(x, mean, var, *w))
    compute = xp.result_type(g32, scale)
    # x's gradient is written into the result, which first holds x - mean where wanted
    in_place = compute == packed.dtype
    region = packed[:n].reshape(x.shape) if in_place else xp.empty(x.shape, compute)
    s = channel_sums(xp, g32).reshape(c)
    vectors = [-scale.reshape(c) * s]
    if stats:
        xp.subtract(x32, _upcast(xp, mean).reshape(rstd.shape), out=region)
        d = channel_dots(xp, g32, region).reshape(c)
        r = rstd.reshape(c)
        vectors.append(-0.5 * (scale.reshape(c) * r * r) * d)
        if weight:
            vectors.append(r * d)
    else:
        vectors.append(xp.zeros(c, compute))
        if weight:
            vectors.append(xp.zeros(c, compute))
    if bias:
        vectors.append(s)
    xp.multiply(g32, scale, out=region)
    if not in_place:
        packed[:n] = region.reshape(-1)
    packed[n:] = xp.concatenate(vectors)
    return packed

