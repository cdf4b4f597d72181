"""The negative log-likelihood loss and its adjoint, a pair of primitives (each the other's vjp).

``nll_loss(log_probs, target, [weight], reduction, ignore_index)`` picks
``-weight[target[i]] * log_probs[i, target[i], ...]`` (0 where ``target`` is ``ignore_index``)
and reduces it: 'sum', 'none', or 'mean', which divides by the total weight of the targets not
ignored (their count without ``weight``; NaN when it is 0), as PyTorch. It is linear in
``log_probs``, so its vjp is its adjoint ``nll_loss_backward(g, target, [weight], classes,
reduction, ignore_index)``: a tensor shaped like ``log_probs`` holding ``-g`` times the target's
weight (over the total weight for 'mean') at the targets and zeros elsewhere; and the adjoint's
vjp is ``nll_loss`` again. So cross-entropy's backward is one kernel, not the chain of
gather / scatter / broadcast vjps a composite would leave, and it has gradients of every order.
No gradient flows to ``weight`` (nor in PyTorch).

Scores are (C,) with a 0-d target, or (N, C, d1, ...) with a target of shape (N, d1, ...):
classes along dim 1, as in PyTorch. The usual call (no weight, no target ignored) costs what it
did before ``weight`` and ``ignore_index`` existed: the range check that each call makes anyway
finds out whether any target is outside the classes.

>>> import labkit as lk
>>> lp = lk.tensor([[-0.1, -2.3], [-1.2, -0.4]], requires_grad=True)
>>> loss = lk.nn.functional.nll_loss(lp, lk.tensor([0, 1]))
>>> round(loss.item(), 4)
0.25
>>> loss.backward(); lp.grad.tolist()
[[-0.5, 0.0], [0.0, -0.5]]
"""
import contextlib

import numpy as np

from ...errors import DTypeError, ShapeError, describe
from ..creation import arange
from ..op import op
from ..shape_rules import shape_of
from .elementwise import cast, div, mul, ne, where
from .index import getitem, open_grid
from .reduce import sum as _sum
from .shape import batch_size, broadcast_to, materialized, moved, reshape

REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(name, reduction):
    if reduction not in REDUCTIONS:
        raise ShapeError(f"{name}: reduction={reduction!r} is not one of {', '.join(REDUCTIONS)}")


def _check(name, scores_shape, scores, target, reduction, weight=()):
    """The target's shape and dtype against scores of ``scores_shape``; the weight's; the
    reduction's name."""
    _check_reduction(name, reduction)
    if target.dtype.is_floating or target.dtype.name == "bool_":
        raise DTypeError(
            f"{name}: target must hold integer class indices (int64), got {describe(target)}. "
            f"If it holds class numbers stored as floats, use target.long(); if it is one-hot or "
            f"probabilities, use target.argmax(dim=1) (or pass the probabilities to "
            f"cross_entropy, which takes them as a target of the input's shape).")
    if not scores_shape:
        raise ShapeError(f"{name}: input must have a class dimension; got {describe(scores)}")
    expected = _target_shape(scores_shape)
    if tuple(shape_of(target)) != expected:
        raise ShapeError(
            f"{name}: input {describe(scores)} needs a target of shape {expected} (one class "
            f"index per row; classes along dim 1), got {describe(target)}.")
    if len(weight) > 1:
        raise ShapeError(f"{name}: at most one weight tensor, got {len(weight)}")
    for w in weight:
        if tuple(shape_of(w)) != (_classes(scores_shape),) or not w.dtype.is_floating:
            raise ShapeError(
                f"{name}: weight must be a floating-point tensor of shape "
                f"({_classes(scores_shape)},), one weight per class of input "
                f"{describe(scores)}; got {describe(w)}")


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


def _targets(xp, target, shape, name, ignore_index):
    """``(target, kept)``: the target with ignored entries moved to class 0 (a valid index),
    and the mask of the entries not ignored (None when none can be).

    Eagerly only the kernel sees the arrays, so it checks what indexing would not catch: a
    target of the wrong shape or dtype (the shape rule then explains) and classes out of range."""
    if target.shape != _target_shape(shape) or target.dtype.kind not in "iu":
        raise ValueError(f"{name}: target does not fit the scores")
    classes = _classes(shape)
    # one pass: a negative index viewed as unsigned is larger than any class
    if not target.size or (not 0 <= ignore_index < classes and int(
            target.view(target.dtype.str.replace("i", "u")).max()) < classes):
        return target, None
    kept = target != ignore_index
    target = xp.where(kept, target, 0)
    lo, hi = int(target.min()), int(target.max())
    if lo < 0 or hi >= classes:
        bad = lo if lo < 0 else hi
        raise ShapeError(f"{name}: target holds class {bad}, but the input has {classes} "
                         f"classes (valid targets are 0..{classes - 1}, or ignore_index="
                         f"{ignore_index} for entries to leave out). Check the labels, or the "
                         f"size of the model's last layer.")
    return target, kept


def _index(xp, target):
    """Index tuple addressing ``scores[i, target[i], j, ...]`` (classes along dim 1)."""
    if target.ndim == 0:
        return (target,)
    if target.ndim == 1:
        return (xp.arange(target.shape[0]), target)
    grids = open_grid(xp, target.shape)
    return (grids[0], target) + tuple(grids[1:])


def _target_weights(xp, target, kept, weight, dtype):
    """Each target's weight (0 where ignored), or None when all are 1."""
    if weight:
        w = weight[0][target].astype(dtype, copy=False)
        return w if kept is None else xp.where(kept, w, dtype.type(0))
    return None if kept is None else kept.astype(dtype)


def _quiet(xp):
    """0 / 0 (every target ignored) is NaN, as in PyTorch, without NumPy's warning."""
    return np.errstate(divide="ignore", invalid="ignore") if xp is np else \
        contextlib.nullcontext()


def _nll_rule(log_probs, target, *weight, reduction="mean", ignore_index=-100):
    _check("nll_loss", shape_of(log_probs), log_probs, target, reduction, weight)
    if not log_probs.dtype.is_floating:
        raise DTypeError(f"nll_loss: input must be floating-point log-probabilities, got "
                         f"{describe(log_probs)}")
    return (shape_of(target) if reduction == "none" else ()), log_probs.dtype


def _nll_vjp(g, out, log_probs, target, *weight, reduction="mean", ignore_index=-100):
    return (nll_loss_backward(g, target, *weight, classes=_classes(log_probs.shape),
                              reduction=reduction, ignore_index=ignore_index), None) \
        + (None,) * len(weight)


# Batched (lk.vmap): the examples' rows go into one call with reduction='none' (an example's
# target () becomes one row of a (B,) target); each example's sum is taken after, and its mean
# divides by the example's total target weight. A weight that differs from example to example
# multiplies the unweighted losses.
def _merged(inputs, bdims):
    size = batch_size(inputs, bdims)
    first, target = (materialized(x, d, size) for x, d in zip(inputs[:2], bdims[:2]))
    rows = (size * target.shape[1],) if target.ndim > 1 else (size,)
    return (reshape(first, shape=rows + tuple(first.shape[2 if target.ndim > 1 else 1:])),
            reshape(target, shape=rows + tuple(target.shape[2:])), tuple(target.shape))


def _per_example(x):
    """Per-example sums of ``x`` (batch dimension first)."""
    return _sum(x, dim=tuple(range(1, x.ndim))) if x.ndim > 1 else x


def _element_weights(target, weight, wdim, ignore_index, dtype):
    """Each target's weight (0 where ignored), shaped like the batched ``target``."""
    kept = ne(target, ignore_index)
    w = cast(kept, dtype=dtype.name)
    if not weight:
        return w
    safe = where(kept, target, 0)
    if wdim is None:
        picked = getitem(weight[0], safe)
    else:                            # one weight row per example
        size = target.shape[0]
        rows = reshape(arange(size, device=target.device), shape=(size,) + (1,) * (target.ndim - 1))
        picked = getitem(moved(weight[0], wdim), (rows, safe))
    return mul(cast(picked, dtype=dtype.name), w)


def _nll_batch(inputs, bdims, reduction="mean", ignore_index=-100):
    log_probs, target, target_shape = _merged(inputs, bdims)
    weight, wdim = tuple(inputs[2:]), (bdims[2] if len(bdims) > 2 else None)
    shared = weight if wdim is None else ()
    loss = reshape(nll_loss(log_probs, target, *shared, reduction="none",
                            ignore_index=ignore_index), shape=target_shape)
    if reduction == "none" and wdim is None:
        return loss, 0
    w = _element_weights(reshape(target, shape=target_shape), weight, wdim, ignore_index,
                         log_probs.dtype)
    if wdim is not None:
        loss = mul(loss, w)
    if reduction == "none":
        return loss, 0
    total = _per_example(loss)
    return (total if reduction == "sum" else div(total, _per_example(w))), 0


@op("nll_loss", shape=_nll_rule, vjp=_nll_vjp, batch=_nll_batch)
def nll_loss(xp, log_probs, target, *weight, reduction="mean", ignore_index=-100):
    """``-weight[target[i]] * log_probs[i, target[i], ...]`` (0 where ``target`` is
    ``ignore_index``), reduced by ``reduction`` ('mean' over the total weight, 'sum', 'none').

    >>> import labkit as lk
    >>> from labkit.tensor.ops.nll import nll_loss
    >>> nll_loss(lk.tensor([[-1.0, -2.0]]), lk.tensor([1]), reduction="none").tolist()
    [2.0]
    >>> nll_loss(lk.tensor([[-1.0, -2.0], [-3.0, -4.0]]), lk.tensor([1, -100])).item()
    2.0
    """
    _check_reduction("nll_loss", reduction)
    dtype = log_probs.dtype
    target, kept = _targets(xp, target, log_probs.shape, "nll_loss", ignore_index)
    picked = xp.asarray(log_probs[_index(xp, target)])          # 0-d too
    w = _target_weights(xp, target, kept, weight, dtype)
    if w is None:
        if reduction == "none":
            return xp.negative(picked)
        total = xp.negative(picked.sum(dtype=dtype))
        if reduction == "mean":
            total = total / dtype.type(picked.size) if picked.size else total * dtype.type("nan")
        return xp.asarray(total, dtype=dtype)
    loss = xp.negative(picked) * w
    if kept is not None:      # exactly 0 where ignored, even where the score is -inf
        loss = xp.where(kept, loss, dtype.type(0))
    if reduction == "none":
        return loss
    total = loss.sum(dtype=dtype)
    if reduction == "mean":
        with _quiet(xp):
            total = total / w.sum(dtype=dtype) if w.size else total * dtype.type("nan")
    return xp.asarray(total, dtype=dtype)


def _nll_backward_rule(g, target, *weight, classes, reduction="mean", ignore_index=-100):
    shape = _classes_shape(shape_of(target), classes)
    _check("nll_loss_backward", shape, g, target, reduction, weight)
    want = tuple(shape_of(target)) if reduction == "none" else ()
    if tuple(shape_of(g)) != want:
        raise ShapeError(f"nll_loss_backward: the gradient {describe(g)} must have shape {want} "
                         f"(the shape of nll_loss's result with reduction={reduction!r})")
    if not g.dtype.is_floating:
        raise DTypeError(f"nll_loss_backward: the gradient must be floating-point, got "
                         f"{describe(g)}")
    return shape, g.dtype


def _nll_backward_vjp(c, out, g, target, *weight, classes, reduction="mean", ignore_index=-100):
    return (nll_loss(c, target, *weight, reduction=reduction, ignore_index=ignore_index),
            None) + (None,) * len(weight)


def _nll_backward_batch(inputs, bdims, classes, reduction="mean", ignore_index=-100):
    (g, target), (dg, dt) = inputs[:2], bdims[:2]
    weight, wdim = tuple(inputs[2:]), (bdims[2] if len(bdims) > 2 else None)
    size = batch_size(inputs, bdims)
    target = materialized(target, dt, size)
    g = materialized(g, dg, size)
    w = None
    if reduction == "mean" or wdim is not None:
        w = _element_weights(target, weight, wdim, ignore_index, g.dtype)
    if reduction == "mean":           # each example's g over its total target weight
        g = div(g, _per_example(w))
    if reduction != "none" and target.ndim > 1:      # spread over the example's targets
        g = broadcast_to(reshape(g, shape=(size,) + (1,) * (target.ndim - 1)),
                         shape=tuple(target.shape))
    if wdim is not None:              # the weights go into g; the op runs unweighted
        g, weight = mul(g, w), ()
    g, target, target_shape = _merged((g, target), (0, 0))
    out = nll_loss_backward(g, target, *weight, classes=classes, reduction="none",
                            ignore_index=ignore_index)
    return reshape(out, shape=target_shape[:2] + tuple(out.shape[1:])
                   if len(target_shape) > 1 else tuple(out.shape)), 0


@op("nll_loss_backward", shape=_nll_backward_rule, vjp=_nll_backward_vjp,
    batch=_nll_backward_batch)
def nll_loss_backward(xp, g, target, *weight, classes, reduction="mean", ignore_index=-100):
    """The adjoint of ``nll_loss``: zeros shaped like its input, with ``-g`` times the target's
    weight (over the total weight for 'mean') at the targets, 0 where ignored. It is nll_loss's
    vjp.

    >>> import labkit as lk
    >>> from labkit.tensor.ops.nll import nll_loss_backward
    >>> nll_loss_backward(lk.tensor(1.0), lk.tensor([1, 0]), classes=2).tolist()
    [[0.0, -0.5], [-0.5, 0.0]]
    """
    _check_reduction("nll_loss_backward", reduction)
    dtype = g.dtype
    out = xp.zeros(_classes_shape(target.shape, classes), dtype=dtype)
    target, kept = _targets(xp, target, out.shape, "nll_loss_backward", ignore_index)
    if not target.size:
        return out
    w = _target_weights(xp, target, kept, weight, dtype)
    if w is None:
        value = -(g / dtype.type(target.size)) if reduction == "mean" else -g
    else:
        with _quiet(xp):
            value = (-(g / w.sum(dtype=dtype)) if reduction == "mean" else -g) * w
        if kept is not None:
            value = xp.where(kept, value, dtype.type(0))
    out[_index(xp, target)] = value
    return out
