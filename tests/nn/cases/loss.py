"""Cases of the loss modules (and the distance modules), each with a reduction or option that
matters; class weights are buffers, copied from PyTorch's state_dict by the harness."""
import numpy as np

from ..module_cases import ModuleCase, ints, normal


def _lib(nn):
    """The library whose ``nn`` this is (to make weight tensors for either)."""
    if nn.__name__.startswith("torch"):
        import torch
        return torch
    import labkit
    return labkit


def _weight(values):
    return lambda nn: _lib(nn).tensor(np.asarray(values, dtype=np.float64))


def _classes_with_ignored(shape, high, ignore):
    def make(rng):
        t = rng.integers(0, high, shape)
        t.reshape(-1)[::3] = ignore
        return t
    return make


def _pair(first, second):
    return lambda rng: (first(rng), second(rng))


def _probabilities(shape):
    def make(rng):
        e = np.exp(rng.standard_normal(shape))
        return e / e.sum(axis=1, keepdims=True)
    return make


def _uniform(shape, lo, hi):
    return lambda rng: rng.uniform(lo, hi, shape)


def _signs(shape):
    return lambda rng: np.where(rng.uniform(0, 1, shape) > 0.5, 1.0, -1.0)


W4 = [0.5, 1.0, 2.0, 1.5]

MODULE_CASES = [
    ModuleCase("cross_entropy", lambda nn: nn.CrossEntropyLoss(),
               _pair(normal((6, 4)), ints((6,), 4))),
    ModuleCase("cross_entropy_weighted_smoothed_ignoring",
               lambda nn: nn.CrossEntropyLoss(weight=_weight(W4)(nn), ignore_index=2,
                                              label_smoothing=0.1, reduction="sum"),
               _pair(normal((6, 4, 3)), _classes_with_ignored((6, 3), 4, 2))),
    ModuleCase("cross_entropy_probabilities", lambda nn: nn.CrossEntropyLoss(reduction="none"),
               _pair(normal((5, 4)), _probabilities((5, 4)))),
    ModuleCase("nll_loss", lambda nn: nn.NLLLoss(weight=_weight(W4)(nn)),
               _pair(normal((6, 4)), _classes_with_ignored((6,), 4, -100))),
    ModuleCase("mse_loss", lambda nn: nn.MSELoss(), _pair(normal((4, 3)), normal((4, 3)))),
    ModuleCase("l1_loss", lambda nn: nn.L1Loss(reduction="sum"),
               _pair(normal((4, 3)), normal((4, 3)))),
    ModuleCase("smooth_l1_loss", lambda nn: nn.SmoothL1Loss(beta=0.5),
               _pair(normal((4, 3)), normal((4, 3)))),
    ModuleCase("huber_loss", lambda nn: nn.HuberLoss(delta=0.7, reduction="none"),
               _pair(normal((4, 3)), normal((4, 3)))),
    ModuleCase("bce_loss", lambda nn: nn.BCELoss(weight=_weight([0.5, 1.0, 2.0])(nn)),
               _pair(_uniform((4, 3), 0.05, 0.95), _uniform((4, 3), 0.0, 1.0))),
    ModuleCase("bce_with_logits_loss",
               lambda nn: nn.BCEWithLogitsLoss(pos_weight=_weight([0.5, 1.0, 3.0])(nn)),
               _pair(normal((4, 3)), _uniform((4, 3), 0.0, 1.0))),
    ModuleCase("kl_div_loss", lambda nn: nn.KLDivLoss(reduction="batchmean", log_target=True),
               _pair(lambda rng: np.log(_probabilities((4, 5))(rng)),
                     lambda rng: np.log(_probabilities((4, 5))(rng)))),
    ModuleCase("poisson_nll_loss", lambda nn: nn.PoissonNLLLoss(full=True),
               _pair(normal((4, 3)), _uniform((4, 3), 0.5, 4.0))),
    ModuleCase("gaussian_nll_loss", lambda nn: nn.GaussianNLLLoss(full=True),
               lambda rng: (rng.standard_normal((4, 3)), rng.standard_normal((4, 3)),
                            rng.uniform(0.2, 2.0, (4, 1)))),
    ModuleCase("margin_ranking_loss", lambda nn: nn.MarginRankingLoss(margin=0.3),
               lambda rng: (rng.standard_normal(6), rng.standard_normal(6),
                            _signs(6)(rng))),
    ModuleCase("hinge_embedding_loss", lambda nn: nn.HingeEmbeddingLoss(margin=0.8),
               _pair(_uniform((4, 3), 0.05, 1.5), _signs((4, 3))), grad=True),
    ModuleCase("soft_margin_loss", lambda nn: nn.SoftMarginLoss(),
               lambda rng: (rng.standard_normal((4, 3)), _signs((4, 3))(rng).astype(np.int64)),
               grad=True),
    ModuleCase("multilabel_soft_margin_loss",
               lambda nn: nn.MultiLabelSoftMarginLoss(weight=_weight([0.5, 1.0, 2.0])(nn)),
               _pair(normal((4, 3)), lambda rng: (rng.uniform(0, 1, (4, 3)) > 0.5) * 1.0)),
    ModuleCase("multi_margin_loss",
               lambda nn: nn.MultiMarginLoss(p=2, margin=0.7, weight=_weight(W4)(nn)),
               _pair(normal((5, 4)), ints((5,), 4))),
    ModuleCase("cosine_embedding_loss", lambda nn: nn.CosineEmbeddingLoss(margin=0.2),
               lambda rng: (rng.standard_normal((5, 4)), rng.standard_normal((5, 4)),
                            _signs(5)(rng).astype(np.int64))),
    ModuleCase("triplet_margin_loss", lambda nn: nn.TripletMarginLoss(p=1.0, swap=True),
               lambda rng: tuple(rng.standard_normal((5, 4)) for _ in range(3))),
    ModuleCase("triplet_margin_with_distance_loss",
               lambda nn: nn.TripletMarginWithDistanceLoss(
                   distance_function=nn.PairwiseDistance(p=3.0), margin=0.5),
               lambda rng: tuple(rng.standard_normal((5, 4)) for _ in range(3))),
    ModuleCase("pairwise_distance", lambda nn: nn.PairwiseDistance(p=1.0, keepdim=True),
               _pair(normal((5, 4)), normal((5, 4)))),
    ModuleCase("cosine_similarity", lambda nn: nn.CosineSimilarity(dim=0),
               _pair(normal((5, 4)), normal((5, 4)))),
]
