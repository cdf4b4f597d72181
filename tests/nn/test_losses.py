"""Every loss of ``lk.nn.functional`` against PyTorch's: values and the gradients of every
floating-point input, in float64, for each reduction, class weights, ``ignore_index``, label
smoothing, probability targets, the legacy ``size_average`` / ``reduce``, edge values (saturated
probabilities, huge logits, ignored targets everywhere) and the errors. The loss modules are
checked against PyTorch's by ``test_modules_against_torch.py`` (cases in ``cases/loss.py``)."""
import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import labkit as lk
import labkit.nn.functional as LF

REDUCTIONS = ["mean", "sum", "none"]


def _lib(F):
    return torch if F is TF else lk


def _tensor(lib, a, grad):
    if not isinstance(a, np.ndarray):
        return a
    t = lib.tensor(a)
    return t.requires_grad_() if grad and a.dtype.kind == "f" else t


def compare(call, arrays, grad=True, rtol=1e-10, atol=1e-12, seed=1):
    """``call(F, *tensors)`` with F = torch's or labkit's functional: values, then gradients of
    the floating-point array inputs (every one, or those at the positions ``grad`` lists) for
    one random cotangent."""
    outs, ins = [], []
    for F in (TF, LF):
        lib = _lib(F)
        inputs = [_tensor(lib, a, grad is True or (grad and i in grad))
                  for i, a in enumerate(arrays)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = call(F, *inputs)
        outs.append(out)
        ins.append(inputs)
    theirs, ours = outs
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=rtol,
                               atol=atol)
    if not grad or not theirs.requires_grad:
        return
    cot = np.random.default_rng(seed).standard_normal(tuple(theirs.shape))
    (theirs * torch.tensor(cot)).sum().backward()
    (ours * lk.tensor(cot)).sum().backward()
    for i, (t, l) in enumerate(zip(*ins)):
        if isinstance(t, torch.Tensor) and t.grad is not None:
            assert l.grad is not None, f"no gradient for input {i}"
            np.testing.assert_allclose(l.grad.numpy(), t.grad.numpy(), rtol=max(rtol, 1e-9),
                                       atol=max(atol, 1e-11), err_msg=f"gradient of input {i}")


def rng():
    return np.random.default_rng(0)


def normal(*shape):
    return rng().standard_normal(shape)


def classes(high, *shape, seed=0):
    return np.random.default_rng(seed).integers(0, high, shape)


def probabilities(*shape, axis=1):
    e = np.exp(normal(*shape))
    return e / e.sum(axis=axis, keepdims=True)


def _w(F, a):
    return None if a is None else _lib(F).tensor(a)


# ---- cross_entropy and nll_loss -------------------------------------------------------------
CE_SHAPES = [((6, 4), (6,)), ((2, 3, 4, 5), (2, 4, 5)), ((4,), ())]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shapes", CE_SHAPES, ids=["NC", "NCHW", "C"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_class_targets(reduction, shapes, weighted, smoothing):
    x_shape, t_shape = shapes
    c = x_shape[1] if len(x_shape) > 1 else x_shape[0]
    target = classes(c, *t_shape)
    weight = np.random.default_rng(3).uniform(0.5, 2.0, c) if weighted else None
    compare(lambda F, x, t: F.cross_entropy(x, t, weight=_w(F, weight), reduction=reduction,
                                            label_smoothing=smoothing),
            [normal(*x_shape) * 3, target])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("ignore_index", [-100, 1])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_ignore_index(reduction, ignore_index, weighted, smoothing):
    target = classes(4, 8, 3)
    target[[0, 3, 5], [1, 0, 2]] = ignore_index
    weight = np.random.default_rng(3).uniform(0.5, 2.0, 4) if weighted else None
    compare(lambda F, x, t: F.cross_entropy(x, t, weight=_w(F, weight), reduction=reduction,
                                            ignore_index=ignore_index,
                                            label_smoothing=smoothing),
            [normal(8, 4, 3), target])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4), (4,)])
def test_cross_entropy_probability_targets(reduction, weighted, smoothing, shape):
    target = probabilities(*shape, axis=1 if len(shape) > 1 else 0)
    weight = np.random.default_rng(3).uniform(0.5, 2.0, shape[1 if len(shape) > 1 else 0]) \
        if weighted else None
    compare(lambda F, x, t: F.cross_entropy(x, t, weight=_w(F, weight), reduction=reduction,
                                            label_smoothing=smoothing),
            [normal(*shape), target])


def test_cross_entropy_one_hot_probabilities_equal_class_targets():
    x, t = lk.tensor(normal(6, 4)), classes(4, 6)
    hard = LF.cross_entropy(x, lk.tensor(t))
    soft = LF.cross_entropy(x, lk.tensor(np.eye(4)[t]))
    assert abs(hard.item() - soft.item()) < 1e-12


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [-100, 0])
@pytest.mark.parametrize("shapes", CE_SHAPES, ids=["NC", "NCHW", "C"])
def test_nll_loss(reduction, weighted, ignore_index, shapes):
    x_shape, t_shape = shapes
    c = x_shape[1] if len(x_shape) > 1 else x_shape[0]
    target = classes(c, *t_shape, seed=5)
    if len(t_shape):
        target.reshape(-1)[::3] = ignore_index
    weight = np.random.default_rng(3).uniform(0.5, 2.0, c) if weighted else None
    compare(lambda F, x, t: F.nll_loss(x, t, weight=_w(F, weight), reduction=reduction,
                                       ignore_index=ignore_index),
            [normal(*x_shape), target])


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_every_target_ignored_gives_nan_mean_and_zero_gradients(smoothing):
    compare(lambda F, x, t: F.cross_entropy(x, t, label_smoothing=smoothing),
            [normal(3, 4), np.full(3, -100)])
    compare(lambda F, x, t: F.cross_entropy(x, t, reduction="none", label_smoothing=smoothing),
            [normal(3, 4), np.full(3, -100)])


def test_zero_total_weight_and_empty_batch_follow_pytorch():
    weight = np.array([1.0, 0.0, 2.0])
    compare(lambda F, x, t: F.nll_loss(x, t, weight=_w(F, weight)),
            [normal(2, 3), np.array([1, 1])])
    compare(lambda F, x, t: F.cross_entropy(x, t), [np.zeros((0, 3)), np.zeros(0, np.int64)])
    compare(lambda F, x, t: F.cross_entropy(x, t, reduction="sum"),
            [np.zeros((0, 3)), np.zeros(0, np.int64)])


def test_cross_entropy_is_stable_for_huge_logits():
    x = np.array([[1e4, 0.0, -1e4], [-1e4, 1e4, 1e4]])
    compare(lambda F, x, t: F.cross_entropy(x, t, label_smoothing=0.1), [x, np.array([0, 1])])


def test_legacy_size_average_and_reduce():
    for size_average, reduce in [(False, None), (None, False), (True, True), (False, True)]:
        compare(lambda F, x, t: F.cross_entropy(x, t, size_average=size_average, reduce=reduce),
                [normal(4, 3), classes(3, 4)])
        compare(lambda F, x, t: F.mse_loss(x, t, size_average=size_average, reduce=reduce),
                [normal(4, 3), normal(4, 3) + 1])


def test_class_target_errors_name_the_fix():
    x = lk.tensor(normal(6, 4))
    with pytest.raises(lk.DTypeError, match=r"integer class indices.*long\(\)"):
        LF.cross_entropy(x, lk.tensor(np.arange(6.0) % 4))
    with pytest.raises(lk.ShapeError, match=r"holds class 4, but the input has 4 classes.*"
                                            r"ignore_index"):
        LF.cross_entropy(x, lk.tensor([0, 1, 2, 3, 4, 0]))
    with pytest.raises(lk.ShapeError, match="holds class -1"):
        LF.nll_loss(x, lk.tensor([0, 1, 2, 3, -1, 0]))
    with pytest.raises(lk.ShapeError, match=r"weight.*shape \(4,\)"):
        LF.cross_entropy(x, lk.tensor([0] * 6), weight=lk.ones(3))
    with pytest.raises(ValueError, match="label_smoothing"):
        LF.cross_entropy(x, lk.tensor([0] * 6), label_smoothing=1.5)
    with pytest.raises(ValueError, match="ignore_index is not supported"):
        LF.cross_entropy(x, lk.tensor(probabilities(6, 4)), ignore_index=1)
    with pytest.raises(ValueError, match="reduction='avg'"):
        LF.cross_entropy(x, lk.tensor([0] * 6), reduction="avg")


def test_cross_entropy_second_order_and_capture():
    x = lk.randn(3, 5, dtype=lk.float64)
    w = lk.tensor([1.0, 2.0, 0.5, 1.0, 3.0], dtype=lk.float64)
    t = lk.tensor([4, -100, 2])

    def loss(x):
        return LF.cross_entropy(x, t, weight=w, label_smoothing=0.1)
    assert lk.gradcheck(loss, [x])
    assert lk.gradcheck(lambda x: lk.grad(loss)(x), [x])
    f = lk.function(loss)
    np.testing.assert_allclose(f(x).item(), loss(x).item(), rtol=1e-14)
    g = lk.function(lk.grad(loss))
    np.testing.assert_allclose(g(x).numpy(), lk.grad(loss)(x).numpy(), rtol=1e-13)


def test_nll_loss_under_vmap_matches_each_example():
    x = lk.tensor(normal(3, 4, 5))              # 3 examples of (4, 5) scores
    t = classes(5, 3, 4)
    t[0, 1] = t[2, :] = -100
    w = lk.tensor(np.random.default_rng(3).uniform(0.5, 2.0, 5))
    for reduction in REDUCTIONS:
        batched = lk.vmap(lambda x, t: LF.nll_loss(x, t, weight=w, reduction=reduction))(
            x, lk.tensor(t))
        each = [LF.nll_loss(x[i], lk.tensor(t[i]), weight=w, reduction=reduction).numpy()
                for i in range(3)]
        np.testing.assert_allclose(batched.numpy(), np.stack(each), rtol=1e-12)
        grads = lk.vmap(lk.grad(lambda x, t: LF.nll_loss(x, t, weight=w,
                                                         reduction=reduction).sum()))(
            x, lk.tensor(t))
        for i in range(3):
            gi = lk.grad(lambda x: LF.nll_loss(x, lk.tensor(t[i]), weight=w,
                                               reduction=reduction).sum())(x[i])
            np.testing.assert_allclose(grads[i].numpy(), gi.numpy(), rtol=1e-12)


# ---- regression losses ------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss"])
@pytest.mark.parametrize("weighted", [False, True])
def test_mse_and_l1(reduction, name, weighted):
    weight = np.random.default_rng(4).uniform(0.1, 2.0, (4, 3)) if weighted else None
    compare(lambda F, x, y: getattr(F, name)(x, y, reduction=reduction, weight=_w(F, weight)),
            [normal(4, 3), normal(4, 3) * 2 + 0.3])


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
def test_a_target_of_another_shape_broadcasts_with_pytorchs_warning(name):
    with pytest.warns(UserWarning, match="different to the input size"):
        getattr(LF, name)(lk.ones(4, 1), lk.zeros(4))
    compare(lambda F, x, y: getattr(F, name)(x, y), [normal(4, 1), normal(4)])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("beta", [1.0, 0.5, 0.0])
def test_smooth_l1(reduction, beta):
    x = np.array([-3.0, -0.8, -0.3, 0.0, 0.2, 0.45, 0.7, 2.0, 5.0])
    compare(lambda F, x, y: F.smooth_l1_loss(x, y, reduction=reduction, beta=beta),
            [x, np.zeros_like(x) + 0.1])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("delta", [1.0, 2.5])
@pytest.mark.parametrize("weighted", [False, True])
def test_huber(reduction, delta, weighted):
    x = np.array([[-4.0, -1.5, -0.3, 0.0], [0.2, 0.9, 2.0, 6.0]])
    weight = np.random.default_rng(4).uniform(0.1, 2.0, x.shape) if weighted else None
    compare(lambda F, x, y: F.huber_loss(x, y, reduction=reduction, delta=delta,
                                         weight=_w(F, weight)),
            [x, np.full_like(x, 0.1)])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("log_input", [True, False])
@pytest.mark.parametrize("full", [False, True])
def test_poisson_nll(reduction, log_input, full):
    x = np.random.default_rng(2).uniform(0.1, 3.0, (4, 3))
    t = np.array([[0.25, 1.0, 2.0], [3.0, 0.5, 5.0], [1.0, 7.0, 0.75], [2.5, 1.5, 4.0]])
    compare(lambda F, x, t: F.poisson_nll_loss(x, t, log_input=log_input, full=full,
                                               reduction=reduction), [x, t])
    # a target of exactly 0: the same values; the target's gradient is 0 there (PyTorch's is
    # NaN, from 0 * d log(t)/dt through the masked Stirling term)
    t[0, 0] = 0.0
    compare(lambda F, x, t: F.poisson_nll_loss(x, t, log_input=log_input, full=full,
                                               reduction=reduction), [x, t], grad=False)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("var_shape", [(4, 3), (4,), (4, 1)])
def test_gaussian_nll(reduction, full, var_shape):
    var = np.random.default_rng(2).uniform(0.1, 2.0, var_shape)
    var.reshape(-1)[0] = 1e-9             # clamped to eps, its gradient kept
    compare(lambda F, x, t, v: F.gaussian_nll_loss(x, t, v, full=full, reduction=reduction),
            [normal(4, 3), normal(4, 3) + 0.5, var])


def test_gaussian_nll_with_a_number_and_errors():
    compare(lambda F, x, t: F.gaussian_nll_loss(x, t, 0.5), [normal(4, 3), normal(4, 3)])
    with pytest.raises(ValueError, match="negative"):
        LF.gaussian_nll_loss(lk.ones(2), lk.ones(2), lk.tensor([1.0, -1.0]))
    with pytest.raises(lk.ShapeError, match="var is of incorrect size"):
        LF.gaussian_nll_loss(lk.ones(4, 3), lk.ones(4, 3), lk.ones(2))


# ---- binary losses --------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weight_shape", [None, (3,), (4, 3)])
def test_binary_cross_entropy(reduction, weight_shape):
    x = np.random.default_rng(2).uniform(0.05, 0.95, (4, 3))
    t = np.random.default_rng(3).uniform(0, 1, (4, 3))
    weight = None if weight_shape is None else \
        np.random.default_rng(4).uniform(0.5, 2.0, weight_shape)
    compare(lambda F, x, t: F.binary_cross_entropy(x, t, weight=_w(F, weight),
                                                   reduction=reduction), [x, t])


def test_binary_cross_entropy_at_saturated_probabilities():
    x = np.array([0.0, 1.0, 0.0, 1.0, 1e-30, 0.5])
    t = np.array([0.0, 1.0, 1.0, 0.0, 0.3, 0.5])
    compare(lambda F, x, t: F.binary_cross_entropy(x, t, reduction="none"), [x, t],
            grad=False)
    compare(lambda F, x, t: F.binary_cross_entropy(x, t, reduction="sum"), [x[:2], t[:2]])
    x = lk.tensor([0.0, 1.0], requires_grad=True)
    LF.binary_cross_entropy(x, lk.tensor([0.2, 0.7]), reduction="sum").backward()
    assert np.isfinite(x.grad.numpy()).all()


def test_binary_cross_entropy_errors():
    with pytest.raises(ValueError, match="between 0 and 1"):
        LF.binary_cross_entropy(lk.tensor([1.5]), lk.tensor([1.0]))
    with pytest.raises(ValueError, match="between 0 and 1"):
        LF.binary_cross_entropy(lk.tensor([float("nan")]), lk.tensor([1.0]))
    with pytest.raises(lk.ShapeError, match="same size"):
        LF.binary_cross_entropy(lk.tensor([[0.5]]), lk.tensor([1.0]))
    with pytest.raises(lk.ShapeError, match="must be the same as input size"):
        LF.binary_cross_entropy_with_logits(lk.tensor([[0.5]]), lk.tensor([1.0]))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("pos_weighted", [False, True])
def test_binary_cross_entropy_with_logits(reduction, weighted, pos_weighted):
    x = np.array([[-100.0, -3.0, 0.0], [0.5, 20.0, 100.0], [-0.7, 0.0, 4.0]])
    t = np.random.default_rng(3).uniform(0, 1, (3, 3))
    weight = np.random.default_rng(4).uniform(0.5, 2.0, (3, 3)) if weighted else None
    pos = np.array([0.5, 2.0, 3.0]) if pos_weighted else None
    compare(lambda F, x, t: F.binary_cross_entropy_with_logits(
        x, t, weight=_w(F, weight), reduction=reduction, pos_weight=_w(F, pos)), [x, t])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_multilabel_soft_margin(reduction, weighted):
    t = (np.random.default_rng(3).uniform(0, 1, (4, 3)) > 0.5).astype(float)
    weight = np.array([0.5, 1.0, 2.0]) if weighted else None
    compare(lambda F, x, t: F.multilabel_soft_margin_loss(x, t, weight=_w(F, weight),
                                                          reduction=reduction),
            [normal(4, 3) * 3, t])


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_soft_margin(reduction):
    t = np.where(np.random.default_rng(3).uniform(0, 1, (4, 3)) > 0.5, 1.0, -1.0)
    compare(lambda F, x, t: F.soft_margin_loss(x, t, reduction=reduction), [normal(4, 3), t],
            grad=(0,))


# ---- divergences and margins ----------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    lp = np.log(probabilities(4, 5))
    t = probabilities(4, 5) if not log_target else np.log(probabilities(4, 5))
    t2 = np.array(t)
    if not log_target:
        t2[0, 0] = 0.0                    # 0 * log 0 is 0
    compare(lambda F, x, t: F.kl_div(x, t, reduction=reduction, log_target=log_target),
            [lp, t2])
    if reduction == "mean":
        with pytest.warns(UserWarning, match="batchmean"):
            LF.kl_div(lk.tensor(lp), lk.tensor(t2), reduction="mean", log_target=log_target)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.5])
def test_margin_ranking(reduction, margin):
    t = np.where(np.random.default_rng(3).uniform(0, 1, 6) > 0.5, 1.0, -1.0)
    compare(lambda F, a, b, t: F.margin_ranking_loss(a, b, t, margin=margin,
                                                     reduction=reduction),
            [normal(6), normal(6) * 0.9 + 0.11, t])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [1.0, 0.3])
def test_hinge_embedding(reduction, margin):
    t = np.where(np.random.default_rng(3).uniform(0, 1, (4, 3)) > 0.5, 1.0, -1.0)
    compare(lambda F, x, t: F.hinge_embedding_loss(x, t, margin=margin, reduction=reduction),
            [np.abs(normal(4, 3)) + 0.05, t])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.4])
@pytest.mark.parametrize("batched", [True, False])
def test_cosine_embedding(reduction, margin, batched):
    shape, t = ((5, 4), np.array([1.0, -1.0, 1.0, -1.0, -1.0])) if batched else \
        ((4,), np.array(-1.0))
    compare(lambda F, a, b, t: F.cosine_embedding_loss(a, b, t, margin=margin,
                                                       reduction=reduction),
            [normal(*shape), normal(*shape) + 0.5, t])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p,margin,weighted", [(1, 1.0, False), (2, 0.5, True), (1, 2.0, True)])
def test_multi_margin(reduction, p, margin, weighted):
    weight = np.array([0.5, 1.0, 2.0, 1.5]) if weighted else None
    compare(lambda F, x, t: F.multi_margin_loss(x, t, p=p, margin=margin, weight=_w(F, weight),
                                                reduction=reduction),
            [normal(5, 4), classes(4, 5)])
    compare(lambda F, x, t: F.multi_margin_loss(x, t, p=p, margin=margin, weight=_w(F, weight),
                                                reduction=reduction),
            [normal(4), np.array(2)])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p,swap", [(2, False), (1, True), (3, False)])
@pytest.mark.parametrize("shape", [(5, 4), (4,)])
def test_triplet_margin(reduction, p, swap, shape):
    compare(lambda F, a, b, c: F.triplet_margin_loss(a, b, c, margin=1.5, p=p, swap=swap,
                                                     reduction=reduction),
            [normal(*shape), normal(*shape) * 0.5, normal(*shape) * 0.3 + 0.2])


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("cosine", [False, True])
def test_triplet_margin_with_distance(swap, cosine):
    def distance(F):
        return (lambda x, y: 1.0 - F.cosine_similarity(x, y)) if cosine else None
    compare(lambda F, a, b, c: F.triplet_margin_with_distance_loss(
        a, b, c, distance_function=distance(F), margin=0.7, swap=swap),
        [normal(5, 4), normal(5, 4) * 0.5, normal(5, 4) * 0.3 + 0.2])


def test_margin_errors():
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        LF.triplet_margin_loss(lk.ones(2, 3), lk.ones(2, 3), lk.ones(2, 3), margin=0)
    with pytest.raises(lk.ShapeError, match="same number of dimensions"):
        LF.triplet_margin_loss(lk.ones(2, 3), lk.ones(3), lk.ones(2, 3))
    with pytest.raises(lk.ShapeError, match="same dimension"):
        LF.margin_ranking_loss(lk.ones(2), lk.ones(2), lk.ones(2, 1))
    with pytest.raises(lk.ShapeError, match="1D target tensor expects 2D input"):
        LF.cosine_embedding_loss(lk.ones(3), lk.ones(3), lk.ones(3))
    with pytest.raises(ValueError, match="only p == 1 and p == 2"):
        LF.multi_margin_loss(lk.ones(2, 3), lk.tensor([0, 1]), p=3)
    with pytest.raises(lk.DTypeError, match="Integral"):
        LF.kl_div(lk.ones(2), lk.tensor([1, 2]))


# ---- distances ------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, math.inf])
@pytest.mark.parametrize("keepdim", [False, True])
def test_pairwise_distance(p, keepdim):
    compare(lambda F, a, b: F.pairwise_distance(a, b, p=p, keepdim=keepdim),
            [normal(5, 4), normal(5, 4) * 0.5])
    compare(lambda F, a, b: F.pairwise_distance(a, b, p=p, keepdim=keepdim),
            [normal(5, 4), normal(4) * 0.5])


@pytest.mark.parametrize("dim", [1, 0, -1])
def test_cosine_similarity(dim):
    compare(lambda F, a, b: F.cosine_similarity(a, b, dim=dim), [normal(5, 4), normal(5, 4)])
    compare(lambda F, a, b: F.cosine_similarity(a, b, dim=dim), [normal(5, 4), normal(1, 4)])
    compare(lambda F, a, b: F.cosine_similarity(a, b, dim=dim),    # a zero row: eps clamps
            [np.vstack([np.zeros((1, 4)), normal(4, 4)]), normal(5, 4)])


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1)])
def test_normalize(p, dim):
    x = normal(4, 3)
    x[1] = 0.0
    compare(lambda F, x: F.normalize(x, p=p, dim=dim), [x])


# ---- captured equals eager ----------------------------------------------------------------------
CAPTURED = {
    "cross_entropy": (lambda x, t, w: LF.cross_entropy(x, t, weight=w, ignore_index=1,
                                                       label_smoothing=0.2),
                      lambda: (normal(6, 4), classes(4, 6), np.array([0.5, 1.0, 2.0, 1.5]))),
    "cross_entropy_soft": (lambda x, t: LF.cross_entropy(x, t, label_smoothing=0.1),
                           lambda: (normal(5, 4), probabilities(5, 4))),
    "nll_loss": (lambda x, t: LF.nll_loss(x, t, reduction="sum"),
                 lambda: (normal(2, 3, 4), classes(3, 2, 4))),
    "bce": (lambda x, t: LF.binary_cross_entropy(x.sigmoid(), t),
            lambda: (normal(4, 3), np.random.default_rng(2).uniform(0, 1, (4, 3)))),
    "bce_logits": (lambda x, t, pw: LF.binary_cross_entropy_with_logits(x, t, pos_weight=pw),
                   lambda: (normal(4, 3), np.random.default_rng(2).uniform(0, 1, (4, 3)),
                            np.array([1.0, 2.0, 0.5]))),
    "huber": (lambda x, y: LF.huber_loss(x, y, delta=0.5), lambda: (normal(4, 3), normal(3))),
    "kl_div": (lambda x, t: LF.kl_div(x.log_softmax(1), t, reduction="batchmean"),
               lambda: (normal(4, 5), probabilities(4, 5))),
    "gaussian_nll": (lambda x, t, v: LF.gaussian_nll_loss(x, t, v),
                     lambda: (normal(4, 3), normal(4, 3), np.full((4, 1), 0.5))),
    "triplet": (lambda a, p, n: LF.triplet_margin_loss(a, p, n, swap=True),
                lambda: (normal(5, 4), normal(5, 4) * 0.5, normal(5, 4) * 0.2)),
    "cosine_embedding": (lambda a, b, t: LF.cosine_embedding_loss(a, b, t, margin=0.1),
                         lambda: (normal(5, 4), normal(5, 4) + 0.3,
                                  np.array([1.0, -1.0, 1.0, -1.0, -1.0]))),
    "multi_margin": (lambda x, t: LF.multi_margin_loss(x, t, p=2),
                     lambda: (normal(5, 4), classes(4, 5))),
}


@pytest.mark.parametrize("name", list(CAPTURED))
def test_captured_loss_and_gradient_equal_eager(name):
    fn, make = CAPTURED[name]
    args = [lk.tensor(a) for a in make()]
    grad = lk.grad(fn)                          # with respect to the first input
    captured, captured_grad = lk.function(fn), lk.function(grad)
    np.testing.assert_allclose(captured(*args).numpy(), fn(*args).numpy(), rtol=1e-13)
    np.testing.assert_allclose(captured_grad(*args).numpy(), grad(*args).numpy(), rtol=1e-12,
                               atol=1e-15)
    assert len(captured.traces) == len(captured_grad.traces) == 1
