"""Losses as modules, PyTorch's classes over the functions of ``labkit.nn.functional.loss``:
the same constructor arguments (``reduction``, the legacy ``size_average`` / ``reduce``,
``weight``, ``ignore_index``, ``label_smoothing``...), and class weights held as buffers
(``weight``, ``pos_weight``), so they move with ``.to()`` and appear in ``state_dict``.

>>> import labkit as lk
>>> criterion = lk.nn.CrossEntropyLoss(label_smoothing=0.1)
>>> loss = criterion(lk.tensor([[2.0, 0.0, -1.0]]), lk.tensor([0]))
>>> round(loss.item(), 4)
0.3365
"""
from . import functional as F
from .functional.loss import legacy_reduction
from .module import Module


class _Loss(Module):
    """A loss with a ``reduction`` ('mean', 'sum', 'none'; or from the legacy
    ``size_average`` / ``reduce``)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.reduction = legacy_reduction(size_average, reduce, reduction)


class _WeightedLoss(_Loss):
    """A loss with a per-class ``weight`` buffer (None: every class weighs 1)."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class L1Loss(_Loss):
    """``|input - target|``, reduced (see ``F.l1_loss``).

    >>> import labkit as lk
    >>> lk.nn.L1Loss()(lk.tensor([1.0, 2.0]), lk.tensor([1.0, 4.0])).item()
    1.0
    """

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class MSELoss(_Loss):
    """``(input - target) ** 2``, reduced (see ``F.mse_loss``).

    >>> import labkit as lk
    >>> lk.nn.MSELoss()(lk.tensor([1.0, 2.0]), lk.tensor([1.0, 4.0])).item()
    2.0
    """

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Quadratic below ``beta``, linear above (see ``F.smooth_l1_loss``).

    >>> import labkit as lk
    >>> lk.nn.SmoothL1Loss(beta=1.0)(lk.tensor([0.5, 3.0]), lk.zeros(2)).item()
    1.3125
    """

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Quadratic below ``delta``, linear (slope ``delta``) above (see ``F.huber_loss``).

    >>> import labkit as lk
    >>> lk.nn.HuberLoss(delta=1.0)(lk.tensor([0.5, 3.0]), lk.zeros(2)).item()
    1.3125
    """

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of class targets under log-probabilities (see ``F.nll_loss``).

    >>> import labkit as lk
    >>> lp = lk.tensor([[-0.1, -2.3], [-1.2, -0.4]])
    >>> round(lk.nn.NLLLoss(ignore_index=1)(lp, lk.tensor([0, 1])).item(), 4)
    0.1
    """

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Softmax cross-entropy of logits against class indices or class probabilities, with
    ``weight``, ``ignore_index`` and ``label_smoothing`` (see ``F.cross_entropy``).

    >>> import labkit as lk
    >>> round(lk.nn.CrossEntropyLoss()(lk.tensor([[0.0, 0.0]]), lk.tensor([1])).item(), 4)
    0.6931
    """

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean", label_smoothing=0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class BCELoss(_WeightedLoss):
    """Binary cross-entropy of probabilities (see ``F.binary_cross_entropy``).

    >>> import labkit as lk
    >>> round(lk.nn.BCELoss()(lk.tensor([0.8]), lk.tensor([1.0])).item(), 4)
    0.2231
    """

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight,
                                      reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Sigmoid and binary cross-entropy in one stable formula, with ``weight`` and a per-class
    ``pos_weight`` (both buffers; see ``F.binary_cross_entropy_with_logits``).

    >>> import labkit as lk
    >>> crit = lk.nn.BCEWithLogitsLoss(pos_weight=lk.tensor([2.0]))
    >>> round(crit(lk.tensor([0.0]), lk.tensor([1.0])).item(), 4)
    1.3863
    """

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean",
                 pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  pos_weight=self.pos_weight,
                                                  reduction=self.reduction)


class KLDivLoss(_Loss):
    """Kullback-Leibler divergence of the target from log-probabilities, ``reduction``
    'batchmean' for the true KL divergence (see ``F.kl_div``).

    >>> import labkit as lk
    >>> lp = lk.tensor([[0.5, 0.5]]).log()
    >>> round(lk.nn.KLDivLoss(reduction="batchmean")(lp, lk.tensor([[0.25, 0.75]])).item(), 4)
    0.1308
    """

    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class PoissonNLLLoss(_Loss):
    """Poisson negative log-likelihood (see ``F.poisson_nll_loss``).

    >>> import labkit as lk
    >>> round(lk.nn.PoissonNLLLoss()(lk.tensor([0.0]), lk.tensor([2.0])).item(), 4)
    1.0
    """

    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                 reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input, target):
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full,
                                  eps=self.eps, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """Gaussian negative log-likelihood of ``target`` under mean ``input`` and variance ``var``
    (see ``F.gaussian_nll_loss``).

    >>> import labkit as lk
    >>> lk.nn.GaussianNLLLoss()(lk.tensor([1.0]), lk.tensor([2.0]), lk.tensor([1.0])).item()
    0.5
    """

    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(reduction=reduction)
        self.full = full
        self.eps = eps

    def forward(self, input, target, var):
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                   reduction=self.reduction)


class MarginRankingLoss(_Loss):
    """``max(0, -y (x1 - x2) + margin)`` (see ``F.margin_ranking_loss``).

    >>> import labkit as lk
    >>> lk.nn.MarginRankingLoss()(lk.tensor([1.0]), lk.tensor([2.0]), lk.tensor([1.0])).item()
    1.0
    """

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin,
                                     reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """``x`` for target 1, ``max(0, margin - x)`` for -1 (see ``F.hinge_embedding_loss``).

    >>> import labkit as lk
    >>> lk.nn.HingeEmbeddingLoss()(lk.tensor([0.25]), lk.tensor([-1.0])).item()
    0.75
    """

    def __init__(self, margin=1.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input, target):
        return F.hinge_embedding_loss(input, target, margin=self.margin,
                                      reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """``log(1 + exp(-y x))`` (see ``F.soft_margin_loss``).

    >>> import labkit as lk
    >>> round(lk.nn.SoftMarginLoss()(lk.tensor([0.0]), lk.tensor([1.0])).item(), 4)
    0.6931
    """

    def forward(self, input, target):
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """Per-class binary cross-entropy of ``sigmoid(x)``, averaged over classes (see
    ``F.multilabel_soft_margin_loss``).

    >>> import labkit as lk
    >>> crit = lk.nn.MultiLabelSoftMarginLoss()
    >>> round(crit(lk.tensor([[0.0, 0.0]]), lk.tensor([[1.0, 0.0]])).item(), 4)
    0.6931
    """

    def forward(self, input, target):
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight,
                                             reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """Multi-class hinge loss (see ``F.multi_margin_loss``).

    >>> import labkit as lk
    >>> lk.nn.MultiMarginLoss()(lk.tensor([[0.1, 0.2, 0.4, 0.8]]), lk.tensor([3])).item()
    0.32499998807907104
    """

    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("MultiMarginLoss: only p == 1 and p == 2 supported")
        if weight is not None and weight.ndim != 1:
            raise ValueError(f"MultiMarginLoss: expected weight to be a 1D tensor but got "
                             f"shape {tuple(weight.shape)}")
        self.p = p
        self.margin = margin

    def forward(self, input, target):
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin,
                                   weight=self.weight, reduction=self.reduction)


class CosineEmbeddingLoss(_Loss):
    """``1 - cos(x1, x2)`` for target 1, ``max(0, cos - margin)`` for -1 (see
    ``F.cosine_embedding_loss``).

    >>> import labkit as lk
    >>> crit = lk.nn.CosineEmbeddingLoss()
    >>> crit(lk.tensor([[1.0, 0.0]]), lk.tensor([[0.0, 1.0]]), lk.tensor([1.0])).item()
    1.0
    """

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin,
                                       reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """``max(0, margin + d(a, p) - d(a, n))`` with the p-norm distance (see
    ``F.triplet_margin_loss``).

    >>> import labkit as lk
    >>> a, p, n = lk.tensor([[0.0]]), lk.tensor([[1.0]]), lk.tensor([[1.5]])
    >>> round(lk.nn.TripletMarginLoss(eps=0.0)(a, p, n).item(), 4)
    0.5
    """

    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: margin must be greater than 0, got {margin}")
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p,
                                     eps=self.eps, swap=self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """The triplet loss with any ``distance_function`` (see
    ``F.triplet_margin_with_distance_loss``).

    >>> import labkit as lk
    >>> l1 = lambda x, y: (x - y).abs().sum(-1)
    >>> crit = lk.nn.TripletMarginWithDistanceLoss(distance_function=l1)
    >>> crit(lk.tensor([[0.0]]), lk.tensor([[1.0]]), lk.tensor([[1.5]])).item()
    0.5
    """

    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(reduction=reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: margin must be greater than 0, "
                             f"got {margin}")
        self.distance_function = distance_function
        self.margin = margin
        self.swap = swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)
