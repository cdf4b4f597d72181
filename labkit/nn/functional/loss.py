"""Losses in PyTorch's ``torch.nn.functional`` spellings and signatures: ``reduction=`` ('mean',
'sum', 'none'; the legacy ``size_average`` / ``reduce`` too), class ``weight``,
``ignore_index``, ``label_smoothing`` and probability targets where PyTorch has them, with
PyTorch's formulas (clamps, epsilons, the denominators of 'mean').

Each is a composite of labkit ops, so gradients (of any order), vmap and capture come free;
``cross_entropy`` and ``nll_loss`` rest on the fused ``nll_loss`` primitive (one kernel forward
and one backward, weights and ignored targets included), ``binary_cross_entropy`` on a
primitive whose gradient stays finite at probabilities 0 and 1.

>>> import labkit as lk
>>> import labkit.nn.functional as F
>>> logits = lk.tensor([[2.0, 0.0, -1.0], [0.0, 3.0, 0.0]])
>>> round(F.cross_entropy(logits, lk.tensor([0, -100])).item(), 4)      # the second ignored
0.1698
>>> round(F.cross_entropy(logits, lk.tensor([0, 1]), label_smoothing=0.1).item(), 4)
0.3157
"""
import math
import warnings

from ...errors import DTypeError, IndexingError, LabkitError, ShapeError, api_boundary, describe
from ...graph.symbolic import SymbolicTensor
from ...tensor.autocast import precision
from ...tensor.creation import arange
from ...tensor.creation import full as _full
from ...tensor.ops.composite import mean
from ...tensor.ops.elementwise import (abs, add, cast, div, eq, exp, gt, log, lt, minimum, mul,
                                       ne, neg, relu, sqrt, stop_gradient, sub, where)
from ...tensor.ops.elementwise_math import clamp_min, log1p, xlogy
from ...tensor.ops.index import getitem
from ...tensor.ops.loss import binary_cross_entropy as _bce
from ...tensor.ops.nll import _check as _check_nll
from ...tensor.ops.loss import smooth_l1 as _smooth_l1
from ...tensor.ops.nll import nll_loss as _nll_loss
from ...tensor.ops.reduce import sum as _sum
from ...tensor.ops.shape import reshape
from ...tensor.ops.softmax import log_softmax
from .distance import pairwise_distance

REDUCTIONS = ("mean", "sum", "none")


def legacy_reduction(size_average, reduce, reduction="mean"):
    """``reduction`` from PyTorch's deprecated ``size_average`` / ``reduce`` (when either is
    given, with PyTorch's warning)."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use "
                  "reduction='mean', 'sum' or 'none' instead.", UserWarning, stacklevel=3)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return ("mean" if size_average else "sum") if reduce else "none"


def reduce_loss(name, loss, reduction):
    """``loss`` reduced by ``reduction``: 'mean', 'sum' or 'none'."""
    if reduction == "mean":
        return mean(loss)
    if reduction == "sum":
        return _sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{name}: reduction={reduction!r} is not one of {', '.join(REDUCTIONS)}")


def _check_reduction(name, reduction, allowed=REDUCTIONS):
    if reduction not in allowed:
        raise ValueError(f"{name}: reduction={reduction!r} is not one of {', '.join(allowed)}")


def _weighted(name, loss, weight, reduction, mean_over_weight):
    """``loss * weight`` (the shape of the input) reduced; 'mean' divides by the sum of the
    weights (``mean_over_weight``, as mse/l1) or by the count (as huber)."""
    if tuple(weight.shape) != tuple(loss.shape):
        raise ShapeError(f"{name}: weight {describe(weight)} must have the input's shape "
                         f"{tuple(loss.shape)} (Weights and input must have the same size)")
    loss = mul(loss, weight)
    if reduction == "mean" and mean_over_weight:
        return div(_sum(loss), _sum(weight))
    return reduce_loss(name, loss, reduction)


def _broadcast_warning(name, input, target):
    if tuple(input.shape) != tuple(getattr(target, "shape", ())):
        warnings.warn(
            f"{name}: Using a target size ({tuple(getattr(target, 'shape', ()))}) that is "
            f"different to the input size ({tuple(input.shape)}). This will likely lead to "
            f"incorrect results due to broadcasting. Please ensure they have the same size "
            f"(e.g. pred.squeeze(-1) or target.unsqueeze(-1)).", UserWarning, stacklevel=3)


def _class_dim(input):
    return 1 if input.ndim > 1 else 0


def _per_class(weight, input):
    """A (C,) class weight shaped to broadcast along ``input``'s class dimension."""
    d = _class_dim(input)
    return reshape(weight, shape=(weight.shape[0],) + (1,) * (input.ndim - d - 1))


def _check_class_weight(name, weight, input):
    classes = input.shape[_class_dim(input)] if input.ndim else None
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != classes):
        raise ShapeError(f"{name}: weight must hold one value per class, shape ({classes},); "
                         f"got {describe(weight)} for input {describe(input)}")


def _check_targets(name, input, target, reduction, weight):
    """Raise the error of the nll_loss kernel's checks (class targets), naming ``name``."""
    try:
        _check_nll(name, tuple(input.shape), input, target, reduction, weight)
    except LabkitError as e:
        raise e from None


# ---- classification ---------------------------------------------------------------------------
@api_boundary
@precision("float32")
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log-likelihood of integer ``target`` classes under log-probabilities ``input``
    (N, C, d1...) or (C,): ``-weight[t] * input[i, t]`` per element (0 where ``t`` is
    ``ignore_index``), 'mean' divided by the total weight of the targets kept.

    >>> import labkit as lk
    >>> lp = lk.tensor([[-0.1, -2.3], [-1.2, -0.4]])
    >>> round(lk.nn.functional.nll_loss(lp, lk.tensor([0, 1])).item(), 4)
    0.25
    >>> lk.nn.functional.nll_loss(lp, lk.tensor([0, 1]), weight=lk.tensor([1.0, 3.0])).item()
    0.32500001788139343
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("nll_loss", reduction)
    w = () if weight is None else (weight,)
    return _nll_loss(input, target, *w, reduction=reduction, ignore_index=int(ignore_index))


@api_boundary
@precision("float32")
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """Softmax cross-entropy of logits ``input`` (N, C, d1...) or (C,) against ``target``:
    integer classes (N, d1...) or class probabilities shaped like ``input``.

    ``weight`` (C,) weighs each class; ``ignore_index`` leaves out targets of that class ('mean'
    then divides by the weight of the targets kept); ``label_smoothing`` mixes the target with
    the uniform distribution. Computed as ``nll_loss(log_softmax(input))``, stable for large
    logits; with class targets and no smoothing that is one fused kernel each way.

    >>> import labkit as lk
    >>> round(lk.nn.functional.cross_entropy(lk.tensor([[0.0, 0.0]]), lk.tensor([1])).item(), 4)
    0.6931
    >>> soft = lk.tensor([[0.25, 0.75]])
    >>> round(lk.nn.functional.cross_entropy(lk.tensor([[0.0, 0.0]]), soft).item(), 4)
    0.6931
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("cross_entropy", reduction)
    if not input.dtype.is_floating:
        raise DTypeError(f"cross_entropy: input must be floating-point logits, got "
                         f"{describe(input)}")
    if input.ndim == 0:
        raise IndexingError(f"cross_entropy: input must have a class dimension; got "
                            f"{describe(input)}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got "
                         f"{label_smoothing}")
    _check_class_weight("cross_entropy", weight, input)
    d = _class_dim(input)
    lp = log_softmax(input, dim=d)
    if tuple(target.shape) == tuple(input.shape) and target.dtype.is_floating:
        return _soft_cross_entropy(lp, target, weight, reduction, label_smoothing, ignore_index)
    w = () if weight is None else (weight,)
    try:
        loss = _nll_loss(lp, target, *w, reduction=reduction, ignore_index=int(ignore_index))
    except LabkitError:     # the fused kernel's checks name nll_loss: name the loss called
        _check_targets("cross_entropy", input, target, reduction, w)
        raise
    if not label_smoothing:
        return loss
    classes = input.shape[d]
    smooth = neg(_sum(mul(lp, _per_class(weight, input)) if weight is not None else lp, dim=d))
    ignored = eq(target, ignore_index)
    smooth = where(ignored, 0.0, smooth)
    if reduction == "mean":
        kept = cast(ne(target, ignore_index), dtype=lp.dtype.name)
        if weight is not None:
            kept = mul(cast(getitem(weight, where(ignored, 0, target)), dtype=lp.dtype.name),
                       kept)
        smooth = div(_sum(smooth), _sum(kept))
    elif reduction == "sum":
        smooth = _sum(smooth)
    return add(mul(loss, 1 - label_smoothing), mul(smooth, label_smoothing / classes))


def _soft_cross_entropy(lp, target, weight, reduction, label_smoothing, ignore_index):
    if ignore_index >= 0:
        raise ValueError("cross_entropy: ignore_index is not supported for floating point "
                         "(probability) targets")
    d = _class_dim(lp)
    classes = lp.shape[d]
    if label_smoothing > 0:
        target = add(mul(target, 1 - label_smoothing), label_smoothing / classes)
    per = mul(lp, target)
    if weight is not None:
        per = mul(per, _per_class(weight, lp))
    if reduction == "none":
        return neg(_sum(per, dim=d))
    total = neg(_sum(per))
    if reduction == "sum":
        return total
    rows = math.prod(lp.shape) // classes if classes else 0
    return div(total, rows) if math.prod(lp.shape) else mul(total, math.nan)


@api_boundary
@precision("float32")
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """``-weight * (t log x + (1 - t) log(1 - x))`` for probabilities ``x`` (each log at least
    -100, as PyTorch, so a saturated probability gives a large finite loss and gradient).

    >>> import labkit as lk
    >>> round(lk.nn.functional.binary_cross_entropy(lk.tensor([0.8]), lk.tensor([1.0])).item(), 4)
    0.2231
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("binary_cross_entropy", reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ShapeError(f"binary_cross_entropy: Using a target size ({tuple(target.shape)}) "
                         f"that is different to the input size ({tuple(input.shape)}) is "
                         f"deprecated. Please ensure they have the same size (target "
                         f"{describe(target)}, input {describe(input)}).")
    w = () if weight is None else (weight,)
    return reduce_loss("binary_cross_entropy", _bce(input, target, *w), reduction)


def _log_sigmoid(x):
    """``log(sigmoid(x))`` computed stably as PyTorch does: ``min(x, 0) - log1p(exp(-|x|))``
    (the tie of min at 0 splits its gradient, which gives PyTorch's 1/2 there)."""
    return sub(minimum(x, 0.0), log1p(exp(neg(abs(x)))))


@api_boundary
@precision("float32")
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction="mean", pos_weight=None):
    """Sigmoid and binary cross-entropy in one stable formula:
    ``(1 - t) x - (1 + (pos_weight - 1) t) log sigmoid(x)``, times ``weight``. ``pos_weight``
    weighs the positive term (one value per class, broadcast along the last dimension).

    >>> import labkit as lk
    >>> F = lk.nn.functional
    >>> round(F.binary_cross_entropy_with_logits(lk.tensor([100.0]), lk.tensor([0.0])).item(), 4)
    100.0
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("binary_cross_entropy_with_logits", reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ShapeError(f"binary_cross_entropy_with_logits: Target size "
                         f"({tuple(target.shape)}) must be the same as input size "
                         f"({tuple(input.shape)})")
    log_sig = _log_sigmoid(input)
    if pos_weight is not None:
        log_sig = mul(log_sig, add(mul(sub(pos_weight, 1), target), 1))
    loss = sub(mul(sub(1, target), input), log_sig)
    if weight is not None:
        loss = mul(loss, weight)
    return reduce_loss("binary_cross_entropy_with_logits", loss, reduction)


@api_boundary
@precision("float32")
def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """Per example, the mean over classes of the binary cross-entropy of ``sigmoid(input)``
    against ``target`` (0 or 1 per class), times ``weight``.

    >>> import labkit as lk
    >>> x = lk.tensor([[0.0, 0.0]])
    >>> round(lk.nn.functional.multilabel_soft_margin_loss(x, lk.tensor([[1.0, 0.0]])).item(), 4)
    0.6931
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("multilabel_soft_margin_loss", reduction)
    loss = neg(add(mul(target, _log_sigmoid(input)),
                   mul(sub(1, target), _log_sigmoid(neg(input)))))
    if weight is not None:
        loss = mul(loss, weight)
    d = input.ndim - 1
    loss = div(_sum(loss, dim=d), input.shape[d])
    return reduce_loss("multilabel_soft_margin_loss", loss, reduction)


@api_boundary
@precision("float32")
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """Multi-class hinge loss: per example, the mean over the other classes j of
    ``max(0, margin - x[y] + x[j]) ** p`` (p 1 or 2), times ``weight[y]``.

    >>> import labkit as lk
    >>> x = lk.tensor([[0.1, 0.2, 0.4, 0.8]])
    >>> round(lk.nn.functional.multi_margin_loss(x, lk.tensor([3])).item(), 4)
    0.325
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("multi_margin_loss", reduction)
    if p not in (1, 2):
        raise ValueError("multi_margin_loss: only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("multi_margin_loss: weight must be one-dimensional")
    if input.ndim > 2 or target.ndim != max(input.ndim - 1, 0):
        raise ShapeError(f"multi_margin_loss: expects input (N, C) with target (N,), or (C,) "
                         f"with a 0-d target; got {describe(input)} and {describe(target)}")
    x = reshape(input, shape=(1, -1)) if input.ndim < 2 else input
    t = reshape(target, shape=(-1,))
    classes = x.shape[1]
    hit = eq(reshape(arange(classes, device=x.device), shape=(1, classes)),
             reshape(t, shape=(-1, 1)))
    x_t = _sum(where(hit, x, 0.0), dim=1, keepdim=True)
    z = relu(add(sub(margin, x_t), x))
    if p == 2:
        z = mul(z, z)
    z = where(hit, 0.0, z)
    if weight is not None:
        z = mul(z, reshape(getitem(weight, t), shape=(-1, 1)))
    loss = div(_sum(z, dim=1), classes)
    if input.ndim < 2:
        loss = reshape(loss, shape=tuple(target.shape))
    return reduce_loss("multi_margin_loss", loss, reduction)


# ---- regression ---------------------------------------------------------------------------
@api_boundary
@precision("float32")
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error ``(input - target) ** 2`` (``weight``: per element, 'mean' over the
    weights' sum). A target of another shape broadcasts, with PyTorch's warning.

    >>> import labkit as lk
    >>> lk.nn.functional.mse_loss(lk.tensor([1.0, 2.0]), lk.tensor([1.0, 4.0])).item()
    2.0
    """
    _broadcast_warning("mse_loss", input, target)
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("mse_loss", reduction)
    diff = sub(input, target)
    loss = mul(diff, diff)
    if weight is not None:
        return _weighted("mse_loss", loss, weight, reduction, True)
    return reduce_loss("mse_loss", loss, reduction)


@api_boundary
@precision("float32")
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error ``|input - target|`` (``weight`` as for mse_loss).

    >>> import labkit as lk
    >>> lk.nn.functional.l1_loss(lk.tensor([1.0, 2.0]), lk.tensor([1.0, 4.0])).item()
    1.0
    """
    _broadcast_warning("l1_loss", input, target)
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("l1_loss", reduction)
    loss = abs(sub(input, target))
    if weight is not None:
        return _weighted("l1_loss", loss, weight, reduction, True)
    return reduce_loss("l1_loss", loss, reduction)


@api_boundary
@precision("float32")
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (d = input - target;
    ``beta=0`` is the L1 loss).

    >>> import labkit as lk
    >>> F = lk.nn.functional
    >>> F.smooth_l1_loss(lk.tensor([0.5, 3.0]), lk.zeros(2), reduction="none").tolist()
    [0.125, 2.5]
    """
    _broadcast_warning("smooth_l1_loss", input, target)
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("smooth_l1_loss", reduction)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    if beta == 0:
        return reduce_loss("smooth_l1_loss", abs(sub(input, target)), reduction)
    return reduce_loss("smooth_l1_loss", _smooth_l1(sub(input, target), beta=float(beta)),
                       reduction)


@api_boundary
@precision("float32")
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """``0.5 d**2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``; ``weight`` per
    element ('mean' is then the mean of the weighted losses, as PyTorch).

    >>> import labkit as lk
    >>> lk.nn.functional.huber_loss(lk.tensor([0.5, 3.0]), lk.zeros(2), reduction="none").tolist()
    [0.125, 2.5]
    """
    _broadcast_warning("huber_loss", input, target)
    _check_reduction("huber_loss", reduction)
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be > 0, got {delta}")
    loss = mul(_smooth_l1(sub(input, target), beta=float(delta)), delta)
    if weight is not None:
        return _weighted("huber_loss", loss, weight, reduction, False)
    return reduce_loss("huber_loss", loss, reduction)


@api_boundary
@precision("float32")
def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """Poisson negative log-likelihood: ``exp(input) - target * input`` (``log_input``), else
    ``input - target * log(input + eps)``; ``full`` adds Stirling's term where target > 1
    (at a target of exactly 0 its gradient is 0; PyTorch's is NaN there).

    >>> import labkit as lk
    >>> round(lk.nn.functional.poisson_nll_loss(lk.tensor([0.0]), lk.tensor([2.0])).item(), 4)
    1.0
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("poisson_nll_loss", reduction)
    if log_input:
        loss = sub(exp(input), mul(target, input))
    else:
        loss = sub(input, mul(target, log(add(input, eps))))
    if full:
        big = gt(target, 1)
        t = where(big, target, 2.0)       # Stirling's term is 0 where target <= 1
        stirling = add(sub(mul(t, log(t)), t), mul(0.5, log(mul(2 * math.pi, t))))
        loss = add(loss, where(big, stirling, 0.0))
    return reduce_loss("poisson_nll_loss", loss, reduction)


@api_boundary
def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """Gaussian negative log-likelihood ``0.5 (log var + (input - target)**2 / var)`` (plus
    ``0.5 log 2 pi`` with ``full``); ``var`` (clamped at ``eps`` without changing its gradient,
    as PyTorch) is shaped like ``input``, like it with the last dimension dropped or of size 1,
    or a number.

    >>> import labkit as lk
    >>> F = lk.nn.functional
    >>> round(F.gaussian_nll_loss(lk.tensor([1.0]), lk.tensor([2.0]), lk.tensor([1.0])).item(), 4)
    0.5
    """
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("gaussian_nll_loss: var has negative entry/entries")
        var = _full(tuple(input.shape), float(var), dtype=input.dtype, device=input.device)
    elif not isinstance(var, SymbolicTensor) and bool((var < 0).any()):
        raise ValueError("gaussian_nll_loss: var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = reshape(var, shape=tuple(var.shape) + (1,))
        elif input.ndim == var.ndim and sum(b for a, b in zip(input.shape, var.shape)
                                            if a != b) == 1:
            pass                          # heteroscedastic: one variance along a dimension
        else:
            raise ShapeError(f"gaussian_nll_loss: var is of incorrect size: {describe(var)} "
                             f"for input {describe(input)} (give input's shape, or it without "
                             f"the last dimension)")
    _check_reduction("gaussian_nll_loss", reduction)
    var = add(var, stop_gradient(sub(clamp_min(var, eps), var)))
    diff = sub(input, target)
    loss = mul(0.5, add(log(var), div(mul(diff, diff), var)))
    if full:
        loss = add(loss, 0.5 * math.log(2 * math.pi))
    return reduce_loss("gaussian_nll_loss", loss, reduction)


@api_boundary
@precision("float32")
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Kullback-Leibler divergence of ``target`` from log-probabilities ``input``, pointwise
    ``target * (log target - input)`` (``log_target``: the target given as log-probabilities).
    ``reduction='batchmean'`` divides the sum by the batch size (the KL divergence); 'mean'
    divides by the number of elements, with PyTorch's warning.

    >>> import labkit as lk
    >>> lp = lk.tensor([[0.25, 0.75]]).log()
    >>> lk.nn.functional.kl_div(lp, lk.tensor([[0.25, 0.75]]), reduction="batchmean").item()
    0.0
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("kl_div", reduction, REDUCTIONS + ("batchmean",))
    if not (input.dtype.is_floating and target.dtype.is_floating):
        raise DTypeError(f"kl_div: Integral inputs not supported: {describe(input)}, "
                         f"{describe(target)}")
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", UserWarning, stacklevel=2)
    if log_target:
        loss = mul(exp(target), sub(target, input))
    else:
        loss = sub(xlogy(target, target), mul(target, input))
    if reduction == "batchmean":
        total = _sum(loss)
        return div(total, input.shape[0]) if input.ndim else total
    return reduce_loss("kl_div", loss, reduction)


# ---- margins and embeddings ---------------------------------------------------------------------
@api_boundary
@precision("float32")
def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    """``max(0, -target * (input1 - input2) + margin)``, target 1 (input1 should rank higher)
    or -1.

    >>> import labkit as lk
    >>> F = lk.nn.functional
    >>> F.margin_ranking_loss(lk.tensor([1.0]), lk.tensor([2.0]), lk.tensor([1.0])).item()
    1.0
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("margin_ranking_loss", reduction)
    if not input1.ndim == input2.ndim == target.ndim:
        raise ShapeError(f"margin_ranking_loss: All input tensors should have same dimension but "
                         f"got sizes: input1: {tuple(input1.shape)}, input2: "
                         f"{tuple(input2.shape)}, target: {tuple(target.shape)}")
    loss = clamp_min(add(mul(neg(target), sub(input1, input2)), margin), 0)
    return reduce_loss("margin_ranking_loss", loss, reduction)


@api_boundary
@precision("float32")
def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """``input`` where target is 1, ``max(0, margin - input)`` where it is -1 (input: a
    distance).

    >>> import labkit as lk
    >>> F = lk.nn.functional
    >>> x, y = lk.tensor([0.3, 0.3]), lk.tensor([1.0, -1.0])
    >>> F.hinge_embedding_loss(x, y, reduction="none").tolist()
    [0.30000001192092896, 0.699999988079071]
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("hinge_embedding_loss", reduction)
    beyond = where(ne(target, 1), clamp_min(sub(margin, input), 0), 0.0)
    loss = add(beyond, where(ne(target, -1), input, 0.0))
    return reduce_loss("hinge_embedding_loss", loss, reduction)


@api_boundary
@precision("float32")
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Two-class logistic loss ``log(1 + exp(-target * input))``, target 1 or -1.

    >>> import labkit as lk
    >>> round(lk.nn.functional.soft_margin_loss(lk.tensor([0.0]), lk.tensor([1.0])).item(), 4)
    0.6931
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("soft_margin_loss", reduction)
    loss = log1p(exp(mul(neg(input), target)))
    return reduce_loss("soft_margin_loss", loss, reduction)


@api_boundary
@precision("float32")
def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    """``1 - cos(x1, x2)`` where target is 1, ``max(0, cos(x1, x2) - margin)`` where it is -1
    (rows of (N, D) inputs with a (N,) target, or (D,) inputs with a 0-d target).

    >>> import labkit as lk
    >>> F = lk.nn.functional
    >>> round(F.cosine_embedding_loss(lk.tensor([[1.0, 0.0]]), lk.tensor([[1.0, 1.0]]),
    ...                               lk.tensor([1.0])).item(), 4)
    0.2929
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("cosine_embedding_loss", reduction)
    if target.ndim not in (0, 1):
        raise ShapeError(f"cosine_embedding_loss: 0D or 1D target tensor expected, multi-target "
                         f"not supported; got {describe(target)}")
    if input1.ndim != target.ndim + 1 or input2.ndim != target.ndim + 1:
        raise ShapeError(f"cosine_embedding_loss: {target.ndim}D target tensor expects "
                         f"{target.ndim + 1}D input tensors, but found inputs with sizes "
                         f"{tuple(input1.shape)} and {tuple(input2.shape)}")
    d = target.ndim
    dot = _sum(mul(input1, input2), dim=d)
    square1 = add(_sum(mul(input1, input1), dim=d), 1e-12)
    square2 = add(_sum(mul(input2, input2), dim=d), 1e-12)
    cos = div(dot, sqrt(mul(square1, square2)))
    loss = add(where(eq(target, 1), sub(1, cos), 0.0),
               where(eq(target, -1), clamp_min(sub(cos, margin), 0), 0.0))
    return reduce_loss("cosine_embedding_loss", loss, reduction)


def _triplet(name, anchor, positive, negative, margin, swap, distance, reduction):
    if margin <= 0:
        raise ValueError(f"{name}: margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise ShapeError(f"{name}: The anchor, positive, and negative tensors are expected to "
                         f"have the same number of dimensions, but got: anchor "
                         f"{anchor.ndim}D, positive {positive.ndim}D, and negative "
                         f"{negative.ndim}D inputs")
    d_pos = distance(anchor, positive)
    d_neg = distance(anchor, negative)
    if swap:
        d_neg = minimum(d_neg, distance(positive, negative))
    loss = clamp_min(sub(add(d_pos, margin), d_neg), 0)
    return reduce_loss(name, loss, reduction)


@api_boundary
@precision("float32")
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """``max(0, margin + d(a, p) - d(a, n))`` with the ``p``-norm ``pairwise_distance``
    (``swap``: the distance to the negative is the smaller of d(a, n) and d(p, n)).

    >>> import labkit as lk
    >>> a, p, n = lk.tensor([[0.0, 0.0]]), lk.tensor([[1.0, 0.0]]), lk.tensor([[3.0, 0.0]])
    >>> lk.nn.functional.triplet_margin_loss(a, p, n, margin=1.0, eps=0).item()
    0.0
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("triplet_margin_loss", reduction)
    return _triplet("triplet_margin_loss", anchor, positive, negative, margin, swap,
                    lambda x, y: pairwise_distance(x, y, p, eps), reduction)


@api_boundary
def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """``triplet_margin_loss`` with any ``distance_function(x, y)`` (default
    ``pairwise_distance``).

    >>> import labkit as lk
    >>> a, p, n = lk.tensor([[0.0, 0.0]]), lk.tensor([[1.0, 0.0]]), lk.tensor([[1.5, 0.0]])
    >>> F = lk.nn.functional
    >>> round(F.triplet_margin_with_distance_loss(a, p, n, distance_function=lambda x, y:
    ...     (x - y).abs().sum(-1)).item(), 4)
    0.5
    """
    _check_reduction("triplet_margin_with_distance_loss", reduction)
    return _triplet("triplet_margin_with_distance_loss", anchor, positive, negative, margin,
                    swap, distance_function or pairwise_distance, reduction)
