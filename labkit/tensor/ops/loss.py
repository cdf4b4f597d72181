"""Elementwise losses as primitives: ``binary_cross_entropy`` and ``smooth_l1``.

``binary_cross_entropy``: the elementwise loss of probabilities ``x`` against targets ``t``,
``-w (t log x + (1 - t) log(1 - x))`` with each log clamped at -100.

A composite of ``log`` and ``clamp`` would give NaN gradients where ``x`` is exactly 0 or 1
(a saturated float32 sigmoid gives 1.0) and warn of a log of 0; PyTorch's loss is finite there,
and so is its gradient ``w (x - t) / max(x (1 - x), 1e-12)``, which is this op's vjp (written
in labkit ops). The target's gradient is ``w (log(1 - x) - log x)``; the weight gets none.
Reductions are taken after, by ``F.binary_cross_entropy``.

``smooth_l1``: of a difference ``d``, ``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| -
0.5 beta``, one op (a composite of abs, lt, mul, div, sub and where is six, and ten in backward);
its vjp ``g clamp(d / beta, -1, 1)`` is written in ops. ``F.smooth_l1_loss`` and
``F.huber_loss`` (``delta * smooth_l1(d, delta)``) reduce it.

>>> import labkit as lk
>>> from labkit.tensor.ops.loss import binary_cross_entropy
>>> binary_cross_entropy(lk.tensor([0.5, 1.0]), lk.tensor([1.0, 0.0])).tolist()
[0.6931471824645996, 100.0]
"""
import contextlib

import numpy as np

from ...errors import DTypeError, describe
from ..batching import ELEMENTWISE
from ..op import needs_grad, op
from ..shape_rules import broadcast_shapes, to_common
from .elementwise import div, log, maximum, mul, neg, sub
from .elementwise_math import clamp, log1p


def _rule(x, t, *weight):
    for a in (x, t) + weight:
        if not a.dtype.is_floating:
            raise DTypeError(f"binary_cross_entropy: expects floating-point input, target and "
                             f"weight; got {describe(a)}. Convert with .float() first.")
    return broadcast_shapes("binary_cross_entropy", x, t, *weight), x.dtype


def _vjp(g, out, x, t, *weight):
    if weight:
        g = mul(g, weight[0])
    gx = gt = None
    if needs_grad(x):
        gx = div(mul(g, sub(x, t)), maximum(mul(sub(1, x), x), 1e-12))
    if needs_grad(t):
        gt = mul(g, sub(log1p(neg(x)), log(x)))
    return (gx, gt) + (None,) * len(weight)


@op("binary_cross_entropy", shape=_rule, vjp=_vjp, batch=ELEMENTWISE, amp="float32")
def binary_cross_entropy(xp, x, t, *weight):
    """``-w (t log x + (1 - t) log(1 - x))`` elementwise, each log at least -100."""
    x, t = to_common((x, t))
    if not bool(((x >= 0) & (x <= 1)).all()):
        raise ValueError("binary_cross_entropy: all elements of input should be between 0 and "
                         "1 (probabilities); for logits use binary_cross_entropy_with_logits")
    if not bool(((t >= 0) & (t <= 1)).all()):
        raise ValueError("binary_cross_entropy: all elements of target should be between 0 "
                         "and 1")
    quiet = np.errstate(divide="ignore") if xp is np else contextlib.nullcontext()
    with quiet:
        loss = (t - 1) * xp.maximum(xp.log1p(-x), -100) - t * xp.maximum(xp.log(x), -100)
    if weight:
        loss = loss * weight[0].astype(loss.dtype, copy=False)
    return loss.astype(x.dtype, copy=False)


def _smooth_l1_rule(d, beta):
    if not d.dtype.is_floating:
        raise DTypeError(f"smooth_l1: expects a floating-point difference, got {describe(d)}")
    if not beta > 0:
        raise ValueError(f"smooth_l1: beta must be > 0 (beta=0 is the L1 loss), got {beta}")
    return broadcast_shapes("smooth_l1", d), d.dtype


@op("smooth_l1", shape=_smooth_l1_rule, batch=ELEMENTWISE,
    vjp=lambda g, out, d, beta: (mul(g, clamp(d if beta == 1 else div(d, beta), -1.0, 1.0)),))
def smooth_l1(xp, d, beta):
    """``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta``."""
    a = xp.abs(d)
    return xp.where(a < beta, a * a * (0.5 / beta), a - 0.5 * beta).astype(d.dtype, copy=False)
