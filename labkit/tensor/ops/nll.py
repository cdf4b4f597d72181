"""The negative log-likelihood loss and its adjoint, a pair of primitives (each the other's vjp).

``nll_loss(log_probs, target, reduction)`` picks ``-log_probs[i, target[i], ...]`` and reduces it
('mean', 'sum' or 'none'). It is linear in ``log_probs``, so its vjp is its adjoint
``nll_loss_backward(g, target, classes, reduction)``: a tensor shaped like ``log_probs`` holding
``-g`` (divided by the count for 'mean') at the targets and zeros elsewhere; and the adjoint's
vjp is ``nll_loss`` again. So cross-entropy's backward is one kernel, not the chain of
gather / scatter / broadcast vjps a composite would leave, and it has gradients of every order.

Scores are (C,) with a 0-d target, or (N, C, d1, ...) with a target of shape (N, d1, ...):
classes along dim 1, as in PyTorch.

>>> import labkit as lk
>>> lp = lk.tensor([[-0.1, -2.3], [-1.2, -0.4]], requires_grad=True)
>>> loss = lk.nn.functional.nll_loss(lp, lk.tensor([0, 1]))
>>> round(loss.item(), 4)
0.25
>>> loss.backward(); lp.grad.tolist()
[[-0.5, 0.0], [0.0, -0.5]]
"""
import math

from ...errors import DTypeError, ShapeError, describe
from ..op import op
from ..shape_rules import shape_of
from .elementwise import div, mul
from .reduce import sum as _sum
from .shape import batch_size, broadcast_to, materialized, reshape

REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(name, reduction):
    if reduction not in REDUCTIONS:
        raise ShapeError(f"{name}: reduction={reduction!r} is not one of {', '.join(REDUCTIONS)}")


def _check(name, scores_shape, scores, target, reduction):
    """The target's shape and dtype against scores of ``scores_shape``; the reduction's name."""
    _check_reduction(name, reduction)
    if target.dtype.is_floating or target.dtype.name == "bool_":
        raise DTypeError(
            f"{name}: target must hold integer class indices (int64), got {describe(target)}. "
            f"If it holds class numbers stored as floats, use target.long(); if it is one-hot or "
            f"probabilities, use target.argmax(dim=1).")
    if not scores_shape:
        raise ShapeError(f"{name}: input must have a class dimension; got {describe(scores)}")
    expected = _target_shape(scores_shape)
    if tuple(shape_of(target)) != expected:
        raise ShapeError(
            f"{name}: input {describe(scores)} needs a target of shape {expected} (one class "
            f"index per row; classes along dim 1), got {describe(target)}.")


def _target_shape(scores_shape):
    """The target's shape for scores of ``scores_shape``: all but the class dimension (dim 1)."""
    s = tuple(scores_shape)
    return s[:1] + s[2:] if len(s) > 1 else ()


def _classes(scores_shape):
    return scores_shape[1] if len(scores_shape) > 1 else scores_shape[0]


def _classes_shape(target_shape, classes):
    """The scores' shape: ``classes`` put in at dim 1 (alone for a 0-d target)."""
    t = tuple(target_shape)
    return (classes,) + t[1:] if not t else t[:1] + (classes,) + t[1:]


def _index(xp, target, shape, name):
    """Index tuple addressing ``scores[i, target[i], j, ...]`` for scores of ``shape``.

    Eagerly only the kernel sees the arrays, so it checks what indexing would not catch: a
    target of the wrong shape or dtype (the shape rule then explains) and classes out of range."""
    if target.shape != _target_shape(shape) or target.dtype.kind not in "iu":
        raise ValueError(f"{name}: target does not fit the scores")
    classes = _classes(shape)
    # one pass: a negative index viewed as unsigned is larger than any class
    if target.size and int(target.view(target.dtype.str.replace("i", "u")).max()) >= classes:
        lo, hi = int(target.min()), int(target.max())
        if lo < 0 or hi >= classes:
            bad = lo if lo < 0 else hi
            raise ShapeError(f"{name}: target holds class {bad}, but the input has {classes} "
                             f"classes (valid targets are 0..{classes - 1}). Check the labels, "
                             f"or the size of the model's last layer.")
    if target.ndim == 0:
        return (target,)
    if target.ndim == 1:
        return (xp.arange(target.shape[0]), target)
    grids = list(xp.indices(target.shape, sparse=True))
    return (grids[0], target) + tuple(grids[1:])


def _nll_rule(log_probs, target, reduction="mean"):
    _check("nll_loss", shape_of(log_probs), log_probs, target, reduction)
    if not log_probs.dtype.is_floating:
        raise DTypeError(f"nll_loss: input must be floating-point log-probabilities, got "
                         f"{describe(log_probs)}")
    return (shape_of(target) if reduction == "none" else ()), log_probs.dtype


def _nll_vjp(g, out, log_probs, target, reduction="mean"):
    return nll_loss_backward(g, target, classes=_classes(log_probs.shape),
                             reduction=reduction), None


# Batched (lk.vmap): the examples' rows go into one call with reduction='none' (an example's
# target () becomes one row of a (B,) target); each example's mean or sum is taken after.
def _merged(inputs, bdims):
    size = batch_size(inputs, bdims)
    first, target = (materialized(x, d, size) for x, d in zip(inputs, bdims))
    rows = (size * target.shape[1],) if target.ndim > 1 else (size,)
    return (reshape(first, shape=rows + tuple(first.shape[2 if target.ndim > 1 else 1:])),
            reshape(target, shape=rows + tuple(target.shape[2:])), tuple(target.shape))


def _nll_batch(inputs, bdims, reduction="mean"):
    log_probs, target, target_shape = _merged(inputs, bdims)
    loss = reshape(nll_loss(log_probs, target, reduction="none"), shape=target_shape)
    if reduction == "none" or len(target_shape) == 1:
        return loss, 0
    total = _sum(loss, dim=tuple(range(1, len(target_shape))))
    if reduction == "sum":
        return total, 0
    count = math.prod(target_shape[1:])
    return (div(total, count) if count else mul(total, float("nan"))), 0


@op("nll_loss", shape=_nll_rule, vjp=_nll_vjp, batch=_nll_batch)
def nll_loss(xp, log_probs, target, reduction="mean"):
    """``-log_probs[i, target[i], ...]``, reduced by ``reduction`` ('mean', 'sum', 'none').

    >>> import labkit as lk
    >>> from labkit.tensor.ops.nll import nll_loss
    >>> nll_loss(lk.tensor([[-1.0, -2.0]]), lk.tensor([1]), reduction="none").tolist()
    [2.0]
    """
    _check_reduction("nll_loss", reduction)
    picked = xp.asarray(log_probs[_index(xp, target, log_probs.shape, "nll_loss")])  # 0-d too
    if reduction == "none":
        return xp.negative(picked)
    total = xp.negative(picked.sum(dtype=log_probs.dtype))
    if reduction == "mean":
        total = total / log_probs.dtype.type(picked.size) if picked.size else \
            total * log_probs.dtype.type("nan")
    return xp.asarray(total, dtype=log_probs.dtype)


def _nll_backward_rule(g, target, classes, reduction="mean"):
    shape = _classes_shape(shape_of(target), classes)
    _check("nll_loss_backward", shape, g, target, reduction)
    want = tuple(shape_of(target)) if reduction == "none" else ()
    if tuple(shape_of(g)) != want:
        raise ShapeError(f"nll_loss_backward: the gradient {describe(g)} must have shape {want} "
                         f"(the shape of nll_loss's result with reduction={reduction!r})")
    if not g.dtype.is_floating:
        raise DTypeError(f"nll_loss_backward: the gradient must be floating-point, got "
                         f"{describe(g)}")
    return shape, g.dtype


def _nll_backward_vjp(c, out, g, target, classes, reduction="mean"):
    return nll_loss(c, target, reduction=reduction), None


def _nll_backward_batch(inputs, bdims, classes, reduction="mean"):
    (g, target), (dg, dt) = inputs, bdims
    size = batch_size(inputs, bdims)
    target = materialized(target, dt, size)
    g = materialized(g, dg, size)
    if reduction != "none" and target.ndim > 1:   # each example's g spread over its targets
        count = math.prod(target.shape[1:])
        if reduction == "mean" and count:
            g = div(g, count)
        g = broadcast_to(reshape(g, shape=(size,) + (1,) * (target.ndim - 1)),
                         shape=tuple(target.shape))
    g, target, target_shape = _merged((g, target), (0, 0))
    out = nll_loss_backward(g, target, classes=classes, reduction="none")
    return reshape(out, shape=target_shape[:2] + tuple(out.shape[1:])
                   if len(target_shape) > 1 else tuple(out.shape)), 0


@op("nll_loss_backward", shape=_nll_backward_rule, vjp=_nll_backward_vjp,
    batch=_nll_backward_batch)
def nll_loss_backward(xp, g, target, classes, reduction="mean"):
    """The adjoint of ``nll_loss``: zeros shaped like its input, with ``-g`` (over the count for
    'mean') at the targets. It is nll_loss's vjp.

    >>> import labkit as lk
    >>> from labkit.tensor.ops.nll import nll_loss_backward
    >>> nll_loss_backward(lk.tensor(1.0), lk.tensor([1, 0]), classes=2).tolist()
    [[0.0, -0.5], [-0.5, 0.0]]
    """
    _check_reduction("nll_loss_backward", reduction)
    out = xp.zeros(_classes_shape(target.shape, classes), dtype=g.dtype)
    index = _index(xp, target, out.shape, "nll_loss_backward")
    if target.size:
        value = -g
        if reduction == "mean":
            value = value / g.dtype.type(target.size)
        out[index] = value
    return out
