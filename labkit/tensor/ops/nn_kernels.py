"""Kernels of layers that programs run many times: ``gelu`` and ``layer_norm`` (every
transformer), ``leaky_relu`` (GAN discriminators), each with its gradient as one op
(``gelu_backward``, ``layer_norm_backward``, ``leaky_relu_backward``). (Batch normalisation's
are in ``channel_norm``.)

Written as compositions of elementwise ops and reductions they cost 5 ops forward and about 15
backward (GELU), 7 and 15 (layer norm), each a pass over the activations with its own dispatch
and tape entry; as kernels, one op and a few passes each way. The backward ops' own vjps are
written in labkit ops (from the closed-form second derivatives), so gradients of gradients work.

``layer_norm`` here is the normalisation alone, ``(x - mean) / sqrt(var + eps)`` over the last
``ndim`` dimensions (biased variance, as PyTorch's); ``layer_norm_affine`` is it times a weight
(and plus a bias), what ``F.layer_norm`` runs when given a weight. Its backward op gives the
three gradients as one flat array (x's, the weight's, the bias's), which its vjp hands out as
views: on oneDNN one kernel computes them all, where the affine part as ops of its own cost
four more passes (two products, a product and a sum for the weight's gradient).

On the CPU a float32 ``erf`` is computed with a rational approximation (a few float32 ulps,
like PyTorch's vectorised one) instead of SciPy's, which is ten times slower.

>>> import labkit as lk
>>> from labkit.tensor.ops.nn_kernels import gelu, layer_norm
>>> gelu(lk.tensor([0.0, 1.0])).tolist()
[0.0, 0.8413447141647339]
>>> [round(v, 4) for v in layer_norm(lk.tensor([1.0, 2.0, 3.0]), ndim=1, eps=1e-5).tolist()]
[-1.2247, 0.0, 1.2247]
"""
import math

import numpy as np

from ...devices import host_dnnl
from ...errors import DTypeError, ShapeError, describe
from .. import dispatch
from ..batching import ELEMENTWISE
from ..op import needs_grad, op
from ..shape_rules import broadcast_shapes, dtype_of, float_dtype, shape_of
from .elementwise import add, div, exp, mul, sub, tanh, zeros_like
from .elementwise_math import special
from .reduce import row_sums, sum as _sum
from .index import getitem_slices
from .shape import batch_size, concat, materialized, moved, reshape

SQRT_HALF = math.sqrt(0.5)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
TANH_BETA = math.sqrt(2.0 / math.pi)
TANH_KAPPA = 0.044715

# erf(x) ~ x * P(x^2) / Q(x^2) on [-4, 4] (1 outside in float32): the float32 approximation of
# Eigen / XLA, highest powers first
_ERF_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
          -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
          -1.60960333262415e-02)
_ERF_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
          -7.37332916720468e-03, -1.42647390514189e-02)


def _erf(xp, x, scale=1.0):
    """erf(x * scale) of a float array, in a new array: the rational approximation for float32
    on NumPy (each step in place: one pass over the data each), else SciPy's."""
    if xp is np and x.dtype == np.float32:
        t = np.multiply(x, np.float32(scale))
        np.clip(t, np.float32(-4.0), np.float32(4.0), out=t)
        t2 = t * t
        p = t2 * np.float32(_ERF_P[0])
        p += np.float32(_ERF_P[1])
        for c in _ERF_P[2:]:
            p *= t2
            p += np.float32(c)
        p *= t
        q = np.multiply(t2, np.float32(_ERF_Q[0]), out=t)
        q += np.float32(_ERF_Q[1])
        for c in _ERF_Q[2:]:
            q *= t2
            q += np.float32(c)
        return np.divide(p, q, out=p)
    return special(xp).erf(x * scale if scale != 1.0 else x).astype(x.dtype, copy=False)


def _upcast(xp, x):
    """float16 is computed in float32 (as PyTorch's kernels accumulate)."""
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _vectors(kernel):
    """``kernel`` on arrays of at least one dimension (its in-place steps need arrays, and
    NumPy turns 0-d results into scalars); a 0-d result is reshaped back."""
    def run(xp, *arrays, **attrs):
        if all(a.ndim for a in arrays):
            return kernel(xp, *arrays, **attrs)
        return kernel(xp, *[a.reshape(a.shape or (1,)) for a in arrays], **attrs).reshape(
            np.broadcast_shapes(*[a.shape for a in arrays]))
    run.__name__, run.__doc__ = kernel.__name__, kernel.__doc__
    return run


def _eltwise_served(xp, *arrays):
    """Whether to ask oneDNN's one-pass elementwise kernels first: large float32 arrays of one
    shape, at one OpenMP thread (``host_dnnl.serves``, which looks at the dtype before it
    loads the library). On DCGAN's (16, 32, 32, 32) activations leaky
    ReLU's forward takes 0.20 ms there against NumPy's 0.29, its backward 0.28 against 0.88."""
    return all(a.shape == arrays[0].shape for a in arrays) and \
        arrays[0].size >= host_dnnl.ELEMENTWISE_MIN and host_dnnl.serves(xp, *arrays)


# ---- gelu ----------------------------------------------------------------------------------------
def _check_approximate(approximate):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate={approximate!r} is not 'none' or 'tanh'")


def _gelu_rule(x, approximate="none"):
    _check_approximate(approximate)
    return shape_of(x), float_dtype("gelu", x)


def _tanh_parts(xp, x):
    """(tanh(u), u') of u = beta * (x + kappa * x**3), GELU's tanh approximation."""
    x2 = x * x
    t = xp.tanh(x * (TANH_BETA * (1 + TANH_KAPPA * x2)))
    return t, TANH_BETA * (1 + 3 * TANH_KAPPA * x2)


def _one_pass(xp, approximate, *arrays):
    """Whether exact GELU's kernels ask oneDNN's one-pass kernels first (``host_dnnl``: float32
    only, large arrays only). At one OpenMP thread only, as the convolutions (conv.py's
    ``_direct`` says why). On nanoGPT's (12, 64, 512): forward 0.19 ms against 0.78 on NumPy,
    PyTorch's 0.19."""
    return approximate == "none" and _eltwise_served(xp, *arrays)


def _gelu_vjp(g, out, x, approximate="none"):
    """``gelu_backward``; in a backward pass that records nothing (no ``create_graph``) and in
    float32/float64, Phi(x) is read from the forward's output (gelu(x) = x Phi(x)) instead of
    computing erf again: ``gelu_backward_from_output``, about a third of the passes."""
    if approximate == "none" and not dispatch._state.grad_enabled and \
            x.dtype.name in ("float32", "float64") and out.dtype is x.dtype:
        return (gelu_backward_from_output(g, x, out),)
    return (gelu_backward(g, x, approximate=approximate),)


@op("gelu", shape=_gelu_rule, batch=ELEMENTWISE, vjp=_gelu_vjp)
@_vectors
def gelu(xp, x, approximate="none"):
    """``x * Phi(x)`` (``approximate='none'``), or ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
    x**3)))`` (``'tanh'``)."""
    out = host_dnnl.gelu(x) if _one_pass(xp, approximate, x) else None
    if out is not None:
        return out
    x32 = _upcast(xp, x)
    if approximate == "tanh":
        out, _ = _tanh_parts(xp, x32)
    else:
        out = _erf(xp, x32, SQRT_HALF)
    out += 1                                   # 0.5 x (1 + erf) / 0.5 x (1 + tanh), in place
    out *= x32
    out *= 0.5
    return out.astype(x.dtype, copy=False)


def _x_phi(xp, x, square):
    """``x * phi(x)`` (phi the standard normal density), written over ``square`` = x * x."""
    square *= -0.5
    xp.exp(square, out=square)
    square *= x
    square *= INV_SQRT_2PI
    return square


def _gelu_backward_rule(g, x, approximate="none"):
    _check_approximate(approximate)
    return broadcast_shapes("gelu_backward", g, x), float_dtype("gelu_backward", x)


def _gelu_backward_vjp(c, out, g, x, approximate="none"):
    """d/dg: ``c * gelu'(x)``; d/dx: ``c * g * gelu''(x)``."""
    dg = gelu_backward(c, x, approximate=approximate) if needs_grad(g) else None
    if not needs_grad(x):
        return dg, None
    if approximate == "tanh":
        x2 = mul(x, x)
        t = tanh(mul(mul(x, add(mul(x2, TANH_KAPPA), 1.0)), TANH_BETA))
        du = mul(add(mul(x2, 3 * TANH_KAPPA), 1.0), TANH_BETA)
        second = mul(sub(1.0, mul(t, t)),
                     add(sub(du, mul(mul(x, t), mul(du, du))), mul(x2, 3 * TANH_BETA * TANH_KAPPA)))
    else:
        pdf = mul(exp(mul(mul(x, x), -0.5)), INV_SQRT_2PI)
        second = mul(pdf, sub(2.0, mul(x, x)))
    return dg, mul(mul(c, g), second)


@op("gelu_backward", shape=_gelu_backward_rule, vjp=_gelu_backward_vjp, batch=ELEMENTWISE)
@_vectors
def gelu_backward(xp, g, x, approximate="none"):
    """``g * gelu'(x)``: the gradient through ``gelu(x)`` of an upstream gradient ``g``."""
    dx = host_dnnl.gelu_backward(g, x) if _one_pass(xp, approximate, g, x) else None
    if dx is not None:
        return dx
    x32 = _upcast(xp, x)
    if approximate == "tanh":
        t, du = _tanh_parts(xp, x32)
        slope = 1 - t * t                       # 0.5 (1 + t) + 0.5 x (1 - t**2) u'
        slope *= du
        slope *= x32
        slope += t
        slope += 1
        slope *= 0.5
    else:
        slope = _x_phi(xp, x32, x32 * x32)      # Phi(x) + x phi(x)
        cdf = _erf(xp, x32, SQRT_HALF)
        cdf += 1
        cdf *= 0.5
        slope += cdf
    return (g * slope).astype(np.result_type(g.dtype, x.dtype), copy=False)


def _from_output_rule(g, x, out):
    if dtype_of(out) is not dtype_of(x):
        raise DTypeError(f"gelu_backward_from_output: the output {describe(out)} is not of the "
                         f"input's dtype ({describe(x)})")
    return broadcast_shapes("gelu_backward_from_output", g, x, out), \
        float_dtype("gelu_backward_from_output", x)


# x * x below this (|x| < 1e-15): Phi(x) as 1/2 + x phi(0), exact to rounding there, not out / x
# (gelu(x) is subnormal or zero for the smallest x)
_TINY_SQUARE = 1e-30


@op("gelu_backward_from_output", shape=_from_output_rule, vjp=None, batch=ELEMENTWISE)
@_vectors
def gelu_backward_from_output(xp, g, x, out):
    """``g * gelu'(x)`` with Phi(x) taken from ``out`` = gelu(x) (exact GELU) as ``out / x``:
    what gelu's vjp runs in a backward pass that records nothing. It has no gradient of its own
    (a recorded backward uses ``gelu_backward``, which computes from ``x`` alone).

    >>> import labkit as lk
    >>> from labkit.tensor.ops.nn_kernels import gelu, gelu_backward_from_output
    >>> x = lk.tensor([-1.0, 0.0, 2.0])
    >>> [round(v, 4) for v in gelu_backward_from_output(lk.ones(3), x, gelu(x)).tolist()]
    [-0.0833, 0.5, 1.0852]
    """
    dx = host_dnnl.gelu_backward(g, x) if _one_pass(xp, "none", g, x) else None
    if dx is not None:            # (from x in one pass: cheaper still than from the output)
        return dx
    x32, out32 = _upcast(xp, x), _upcast(xp, out)
    if x32.shape != out32.shape:                # (under lk.vmap: one of them batched)
        x32 = xp.broadcast_to(x32, np.broadcast_shapes(x32.shape, out32.shape))
    x2 = x32 * x32
    with np.errstate(divide="ignore", invalid="ignore"):
        cdf = xp.divide(out32, x32)
    tiny = xp.less(x2, _TINY_SQUARE)
    if tiny.any():
        xp.copyto(cdf, 0.5 + x32 * INV_SQRT_2PI, where=tiny)
    slope = _x_phi(xp, x32, x2)                 # Phi(x) + x phi(x)
    slope += cdf
    return (g * slope).astype(np.result_type(g.dtype, x.dtype), copy=False)


# ---- leaky_relu ----------------------------------------------------------------------------------
def _leaky_rule(name, *tensors):
    x = tensors[-1]
    if not x.dtype.is_floating:
        raise DTypeError(f"{name}: expects a floating-point tensor, got {describe(x)}")
    return broadcast_shapes(name, *tensors), float_dtype(name, x)


@op("leaky_relu", shape=lambda x, negative_slope=0.01: _leaky_rule("leaky_relu", x),
    vjp=lambda g, out, x, negative_slope=0.01: (
        leaky_relu_backward(g, x, negative_slope=negative_slope),),
    batch=ELEMENTWISE)
@_vectors
def leaky_relu(xp, x, negative_slope=0.01):
    """``x`` where ``x > 0``, else ``negative_slope * x``: oneDNN's one pass where it serves,
    else the larger of the two for a slope in [0, 1] (two passes over the data; NaN stays NaN),
    else a select."""
    out = host_dnnl.leaky_relu(x, negative_slope) if _eltwise_served(xp, x) else None
    if out is not None:
        return out
    out = xp.multiply(x, negative_slope, dtype=x.dtype)
    if 0 <= negative_slope <= 1:
        return xp.maximum(x, out, out=out)
    return xp.where(x > 0, x, out)


@op("leaky_relu_backward",
    shape=lambda g, x, negative_slope=0.01: _leaky_rule("leaky_relu_backward", g, x),
    # linear in g; its derivative in x is zero wherever it exists
    vjp=lambda c, out, g, x, negative_slope=0.01: (
        leaky_relu_backward(c, x, negative_slope=negative_slope) if needs_grad(g) else None,
        zeros_like(x) if needs_grad(x) else None),
    batch=ELEMENTWISE)
@_vectors
def leaky_relu_backward(xp, g, x, negative_slope=0.01):
    """``g`` where ``x > 0``, else ``negative_slope * g``."""
    # (oneDNN's kernel takes a NaN in x as positive, this rule and PyTorch's do not)
    dx = host_dnnl.leaky_relu_backward(g, x, negative_slope) \
        if _eltwise_served(xp, g, x) and not np.isnan(np.min(x)) else None
    if dx is not None:
        return dx
    dtype = np.result_type(g.dtype, x.dtype)
    if xp is np and g.shape == x.shape:
        # the factor (negative_slope or 1) looked up by the sign test: several times faster than
        # a masked copy or a select, whose branches on a random sign mispredict
        out = np.array([negative_slope, 1], dtype=dtype).take((x > 0).view(np.uint8))
        out *= g
        return out
    if g.shape == x.shape:
        out = xp.multiply(g, negative_slope, dtype=dtype)
        xp.copyto(out, g, where=x > 0)
        return out
    return xp.where(x > 0, g, xp.multiply(g, negative_slope, dtype=dtype)).astype(dtype,
                                                                               copy=False)


# ---- layer_norm ----------------------------------------------------------------------------------
def _layer_norm_rule(x, ndim, eps):
    sx = shape_of(x)
    if not 1 <= ndim <= len(sx):
        raise ShapeError(f"layer_norm: cannot normalise over the last {ndim} dimension(s) of "
                         f"{describe(x)}")
    return sx, float_dtype("layer_norm", x)


def _stats(xp, x, ndim, eps):
    """(x - mean, 1 / sqrt(var + eps), 1 / n) over the last ``ndim`` axes (n elements), in
    float32 at least; the sums over short rows as BLAS products (``row_sums``)."""
    x = _upcast(xp, x)
    inv_n = 1.0 / max(math.prod(x.shape[x.ndim - ndim:]), 1)
    centered = x - row_sums(xp, x, ndim) * inv_n
    var = row_sums(xp, centered * centered, ndim) * inv_n
    return centered, 1 / xp.sqrt(var + eps), inv_n


def _trailing_batch(rule_op):
    """The batching rule of an op over trailing dimensions: every input's batch dimension
    first (materialized where an input is shared), then the op as it is."""
    def rule(inputs, bdims, **attrs):
        n = batch_size(inputs, bdims)
        return rule_op(*[moved(x, d) if d is not None else materialized(x, d, n)
                         for x, d in zip(inputs, bdims)], **attrs), 0
    return rule


@op("layer_norm", shape=_layer_norm_rule,
    vjp=lambda g, out, x, ndim, eps: (layer_norm_backward(g, x, ndim=ndim, eps=eps),),
    batch=lambda inputs, bdims, **attrs: _trailing_batch(layer_norm)(inputs, bdims, **attrs),
    amp="float32_gpu")
def layer_norm(xp, x, ndim, eps):
    """``(x - mean) / sqrt(var + eps)`` over the last ``ndim`` dimensions."""
    # oneDNN's kernels first where it serves (float32, large arrays): on nanoGPT's (12, 64, 128)
    # forward 0.10 ms against 0.24 on NumPy, backward 0.28 against 0.34 (PyTorch's about 0.12)
    out = host_dnnl.layer_norm(x, ndim, eps) if _eltwise_served(xp, x) else None
    if out is not None:
        return out
    out, rstd, _ = _stats(xp, x, ndim, eps)
    out *= rstd
    return out.astype(x.dtype, copy=False)


def _layer_norm_backward_rule(g, x, ndim, eps):
    if shape_of(g) != shape_of(x):
        raise ShapeError(f"layer_norm_backward: gradient {describe(g)} and input {describe(x)} "
                         f"must have the same shape")
    return _layer_norm_rule(x, ndim, eps)


def _mean(x, ndim):
    dims = tuple(range(-ndim, 0))
    n = 1
    for s in x.shape[x.ndim - ndim:]:
        n *= s
    return mul(_sum(x, dim=dims, keepdim=True), 1.0 / max(n, 1))


def _normalisation_vjp(c, g, x, mean, normalised, backward, want_g=None):
    """Cotangents of ``dx = r (g - mean(g) - xhat mean(g xhat))`` (r = 1/sqrt(var + eps), the
    means over the normalised dimensions): for g, the same map applied to c (it is symmetric);
    for x, ``-r**2 ((mean(c g) - mean(c) mean(g) - 3 a b) xhat + b (g - mean(g)) + a (c -
    mean(c)))`` with ``a = mean(g xhat)``, ``b = mean(c xhat)``. ``normalised(t)`` and
    ``backward(t)`` are the op and its backward (at x). ``want_g``: whether to give g's
    cotangent, where g is not an input itself (default: whether g wants one)."""
    dg = backward(c) if (needs_grad(g) if want_g is None else want_g) else None
    if not needs_grad(x):
        return dg, None
    xhat = normalised(x)
    centered = sub(x, mean(x))
    minus_r2 = div(-1.0, add(mean(mul(centered, centered)), normalised.eps))
    g_mean, c_mean = mean(g), mean(c)
    a, b = mean(mul(g, xhat)), mean(mul(c, xhat))
    k = sub(sub(mean(mul(c, g)), mul(c_mean, g_mean)), mul(mul(a, b), 3.0))
    total = add(add(mul(k, xhat), mul(b, sub(g, g_mean))), mul(a, sub(c, c_mean)))
    return dg, mul(total, minus_r2)


def _with_eps(f, eps):
    f.eps = eps
    return f


def _layer_norm_backward_vjp(c, out, g, x, ndim, eps, want_g=None):
    return _normalisation_vjp(
        c, g, x, lambda t: _mean(t, ndim),
        _with_eps(lambda t: layer_norm(t, ndim=ndim, eps=eps), eps),
        lambda t: layer_norm_backward(t, x, ndim=ndim, eps=eps), want_g)


@op("layer_norm_backward", shape=_layer_norm_backward_rule, vjp=_layer_norm_backward_vjp,
    batch=lambda inputs, bdims, **attrs: _trailing_batch(layer_norm_backward)(inputs, bdims,
                                                                               **attrs))
def layer_norm_backward(xp, g, x, ndim, eps):
    """The gradient through ``layer_norm(x)`` of an upstream gradient ``g``."""
    dx = host_dnnl.layer_norm_backward(g, x, ndim, eps) if _eltwise_served(xp, g, x) else None
    if dx is not None:
        return dx
    xhat, rstd, inv_n = _stats(xp, x, ndim, eps)
    xhat *= rstd
    return _through_rows(xp, _upcast(xp, g), xhat, rstd, inv_n, ndim).astype(x.dtype,
                                                                            copy=False)


def _through_rows(xp, g, xhat, rstd, inv_n, ndim):
    """``rstd (g - mean(g) - xhat mean(g xhat))`` over the last ``ndim`` dimensions: ``g``
    through the normalisation, whose result is ``xhat`` (overwritten)."""
    dx = g - row_sums(xp, g, ndim) * inv_n
    xhat *= row_sums(xp, g * xhat, ndim) * inv_n
    dx -= xhat
    dx *= rstd
    return dx


# ---- layer_norm with its weight (and bias): F.layer_norm's usual case, in one op each way ------
def _affine_rule(x, w, *b, ndim, eps):
    sx, dtype = _layer_norm_rule(x, ndim, eps)
    normalised = sx[len(sx) - ndim:]
    for t, what in ((w, "weight"),) + tuple((t, "bias") for t in b):
        if shape_of(t) != normalised:
            raise ShapeError(f"layer_norm_affine: the {what} {describe(t)} must have the "
                             f"normalised dimensions' shape {normalised} of {describe(x)}")
        if dtype_of(t) != dtype_of(x):
            raise DTypeError(f"layer_norm_affine: the {what} {describe(t)} must have the "
                             f"input's dtype ({describe(x)})")
    return sx, dtype


def _unpack(packed, x, w, bias):
    """[dx, dw] (and db, with ``bias``) of layer_norm_affine_backward's flat result, as views in
    x's and w's shapes."""
    n, k = math.prod(x.shape), math.prod(w.shape)
    parts = [reshape(getitem_slices(packed, 0, 0, n), shape=tuple(x.shape))]
    for start in range(n, n + k * (1 + bool(bias)), k):
        parts.append(reshape(getitem_slices(packed, 0, start, start + k), shape=tuple(w.shape)))
    return parts


def _lead_sum(t, ndim, first=0):
    """``t`` summed over its dimensions from ``first`` to the last ``ndim`` (excluded)."""
    lead = tuple(range(first, t.ndim - ndim))
    return _sum(t, dim=lead) if lead else t


def _per_example(p, d, n, x):
    """A parameter of the normalised shape, batched or not, as (n, 1, ..., *shape) against
    the batched input ``x`` (n, ..., *shape)."""
    p = materialized(p, d, n)
    return reshape(p, shape=(n,) + (1,) * (x.ndim - p.ndim) + tuple(p.shape[1:]))


def _affine_batch(inputs, bdims, ndim, eps):
    n = batch_size(inputs, bdims)
    x = materialized(inputs[0], bdims[0], n)
    if all(d is None for d in bdims[1:]):            # shared parameters: more rows, one op
        return layer_norm_affine(x, *inputs[1:], ndim=ndim, eps=eps), 0
    y = layer_norm(x, ndim=ndim, eps=eps)
    for p, d, f in zip(inputs[1:], bdims[1:], (mul, add)):
        y = f(y, _per_example(p, d, n, x))
    return y, 0


@op("layer_norm_affine", shape=_affine_rule, batch=_affine_batch, amp="float32_gpu",
    vjp=lambda g, out, x, w, *b, ndim, eps: tuple(_unpack(
        layer_norm_affine_backward(g, x, w, ndim=ndim, eps=eps, bias=bool(b)), x, w, b)))
def layer_norm_affine(xp, x, w, *b, ndim, eps):
    """``layer_norm(x) * w (+ b)``: the weight ``w`` and the optional bias ``b`` of the last
    ``ndim`` dimensions' shape, in x's dtype."""
    out = host_dnnl.layer_norm(x, ndim, eps, w, *b) if _eltwise_served(xp, x) else None
    if out is not None:
        return out
    out, rstd, _ = _stats(xp, x, ndim, eps)
    out *= rstd
    out *= _upcast(xp, w)
    if b:
        out += _upcast(xp, b[0])
    return out.astype(x.dtype, copy=False)


def _affine_backward_rule(g, x, w, ndim, eps, bias):
    if shape_of(g) != shape_of(x):
        raise ShapeError(f"layer_norm_affine_backward: gradient {describe(g)} and input "
                         f"{describe(x)} must have the same shape")
    sx, dtype = _affine_rule(x, w, ndim=ndim, eps=eps)
    return (math.prod(sx) + math.prod(shape_of(w)) * (1 + bool(bias)),), dtype


def _affine_backward_vjp(c, out, g, x, w, ndim, eps, bias):
    """From the cotangents of dx = layer_norm_backward(g w), dw = sum(g xhat), db = sum(g)."""
    parts = _unpack(c, x, w, bias)
    c_dx, c_dw = parts[0], parts[1]
    d_gw, dx = _layer_norm_backward_vjp(c_dx, None, mul(g, w), x, ndim, eps,
                                        want_g=needs_grad(g) or needs_grad(w))
    dg = mul(c_dw, layer_norm(x, ndim=ndim, eps=eps))
    if d_gw is not None:
        dg = add(dg, mul(d_gw, w))
    if bias:
        dg = add(dg, parts[2])
    if needs_grad(x):
        through_dw = layer_norm_backward(mul(g, c_dw), x, ndim=ndim, eps=eps)
        dx = through_dw if dx is None else add(dx, through_dw)
    dw = _lead_sum(mul(d_gw, g), ndim) if d_gw is not None and needs_grad(w) else None
    return dg, dx, dw


def _affine_backward_batch(inputs, bdims, ndim, eps, bias):
    """Each example's weight and bias gradients are sums over its own rows: the pieces as ops
    over the batch, packed per example."""
    n = batch_size(inputs, bdims)
    g, x = (materialized(t, d, n) for t, d in zip(inputs[:2], bdims[:2]))
    w = _per_example(inputs[2], bdims[2], n, x)
    parts = [layer_norm_backward(mul(g, w), x, ndim=ndim, eps=eps),
             _lead_sum(mul(g, layer_norm(x, ndim=ndim, eps=eps)), ndim, first=1)]
    if bias:
        parts.append(_lead_sum(g, ndim, first=1))
    return concat(*[reshape(p, shape=(n, -1)) for p in parts], dim=1), 0


@op("layer_norm_affine_backward", shape=_affine_backward_rule, vjp=_affine_backward_vjp,
    batch=_affine_backward_batch)
def layer_norm_affine_backward(xp, g, x, w, ndim, eps, bias):
    """The gradients through ``layer_norm_affine(x, w[, b])`` of an upstream gradient ``g``, as
    one flat array: x's, then w's, then (``bias``) b's."""
    packed = host_dnnl.layer_norm_backward(g, x, ndim, eps, w, bias) if _eltwise_served(xp, g, x) \
        else None
    if packed is not None:
        return packed
    xhat, rstd, inv_n = _stats(xp, x, ndim, eps)
    xhat *= rstd
    g32 = _upcast(xp, g)
    lead = tuple(range(x.ndim - ndim))
    sums = [(g32 * xhat).sum(axis=lead)] + ([g32.sum(axis=lead)] if bias else [])
    dx = _through_rows(xp, g32 * _upcast(xp, w), xhat, rstd, inv_n, ndim)
    return xp.concatenate([p.reshape(-1) for p in [dx] + sums]).astype(x.dtype, copy=False)
