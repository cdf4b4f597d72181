"""``vector_norm``: the p-norm over some dimensions, as one primitive.

A composite (``sqrt(sum(x * x))``) would have a NaN gradient at x = 0, where PyTorch's is 0 (a
zero distance in ``cdist``, a zero row in a normalisation); this op's vjp is PyTorch's, masked
there, and written in labkit ops so it has a gradient itself.
"""
import contextlib
import math

import numpy as np

from ...errors import DTypeError, ShapeError, describe
from ..batching import REDUCTION
from ..op import op
from ..shape_rules import normalize_dims, reduced_shape, shape_of
from .elementwise import abs, cast, div, eq, mul, pow, sign, where
from .index import zeros_like
from .reduce import _axes, _keep_shape, sum
from .shape import reshape


def _rule(x, ord=2.0, dim=None, keepdim=False):
    if not x.dtype.is_floating:
        raise DTypeError(f"linalg.vector_norm: expects a floating-point tensor; got "
                         f"{describe(x)}. Convert it first: x.float().")
    s = shape_of(x)
    axes = normalize_dims("linalg.vector_norm", dim, len(s), x)
    if math.isinf(ord) and any(s[a] == 0 for a in axes):
        raise ShapeError(f"linalg.vector_norm: the {ord} norm of {describe(x)} over dim={dim} "
                         f"reduces over no elements, and a max or min of nothing is undefined; "
                         f"use a finite ord or a non-empty dimension")
    return reduced_shape(s, axes, keepdim), x.dtype


def _masked(value, zero):
    """``value`` where ``zero`` is false, else 0; written so that no NaN reaches a gradient."""
    return where(zero, 0, value)


def _vjp(g, out, x, ord=2.0, dim=None, keepdim=False):
    if ord == 0:
        return (zeros_like(x),)
    keep = _keep_shape(x, dim)
    g, out = reshape(g, shape=keep), reshape(out, shape=keep)
    if ord == 1:
        return (mul(sign(x), g),)
    if math.isinf(ord):                  # the largest (smallest) |x| share the gradient
        hit = cast(eq(abs(x), out), dtype=x.dtype.name)
        count = sum(hit, dim=dim, keepdim=True)
        return (mul(mul(sign(x), hit), div(g, count)),)
    zero = eq(out, 0)
    safe_out = where(zero, 1, out)
    if ord == 2:
        return (_masked(mul(div(x, safe_out), g), zero),)
    if ord < 1:                          # sgn(x) |x|^(p-1) is infinite at x = 0: 0 there
        xzero = eq(x, 0)
        scaled = _masked(mul(sign(x), pow(where(xzero, 1, abs(x)), ord - 1)), xzero)
        return (mul(mul(scaled, g), pow(out, 1 - ord)),)
    if ord < 2:
        scaled = mul(sign(x), pow(abs(x), ord - 1))
    else:
        scaled = mul(x, pow(abs(x), ord - 2))
    return (_masked(div(mul(scaled, g), pow(safe_out, ord - 1)), zero),)


@op("vector_norm", shape=_rule, vjp=_vjp, batch=REDUCTION, amp="float32_gpu")
def vector_norm(xp, x, ord=2.0, dim=None, keepdim=False):
    """``sum(|x|^ord) ^ (1/ord)`` over ``dim`` (None: every element); ``ord`` inf / -inf: the
    largest / smallest ``|x|``; 0: the number of non-zero elements."""
    if x.dtype.kind != "f":
        raise TypeError("not floating-point")           # the rule explains
    axes = _axes(dim, x.ndim)
    if ord == 2:
        out = xp.sqrt((x * x).sum(axis=axes, keepdims=keepdim))
    elif ord == 1:
        out = xp.abs(x).sum(axis=axes, keepdims=keepdim)
    elif ord == 0:
        out = (x != 0).sum(axis=axes, keepdims=keepdim)
    elif ord == math.inf:
        out = xp.abs(x).max(axis=axes, keepdims=keepdim)
    elif ord == -math.inf:
        out = xp.abs(x).min(axis=axes, keepdims=keepdim)
    else:
        with _quiet(xp):                 # |0| ** negative ord: inf, as PyTorch's
            out = (xp.abs(x) ** ord).sum(axis=axes, keepdims=keepdim) ** (1.0 / ord)
    return xp.asarray(out, dtype=x.dtype)


def _quiet(xp):
    return np.errstate(divide="ignore") if xp is np else contextlib.nullcontext()
