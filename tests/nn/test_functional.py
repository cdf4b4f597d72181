"""nn.functional against NumPy: activations, softmax family, losses (values, gradients,
stability, reductions, errors), linear, embedding."""
import numpy as np
import pytest

import labkit as lk
import labkit.nn.functional as F


def np_log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


@pytest.fixture
def logits():
    return np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)


def test_activations_and_softmax(logits):
    x = lk.tensor(logits)
    np.testing.assert_array_equal(F.relu(x).numpy(), np.maximum(logits, 0))
    np.testing.assert_allclose(F.sigmoid(x).numpy(), 1 / (1 + np.exp(-logits)), rtol=1e-6)
    np.testing.assert_allclose(F.tanh(x).numpy(), np.tanh(logits), rtol=1e-6)
    np.testing.assert_allclose(F.log_softmax(x, dim=1).numpy(), np_log_softmax(logits, 1),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(F.softmax(x, dim=0).numpy(),
                               np.exp(np_log_softmax(logits, 0)), rtol=1e-5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_numpy(logits, reduction):
    target = np.array([0, 3, 1, 1, 2, 0])
    x = lk.tensor(logits, requires_grad=True)
    loss = F.cross_entropy(x, lk.tensor(target), reduction=reduction)
    per_row = -np_log_softmax(logits.astype(np.float64), 1)[np.arange(6), target]
    expected = {"mean": per_row.mean(), "sum": per_row.sum(), "none": per_row}[reduction]
    np.testing.assert_allclose(loss.detach().numpy(), expected, rtol=1e-5)
    loss.sum().backward()
    grad = np.exp(np_log_softmax(logits.astype(np.float64), 1))
    grad[np.arange(6), target] -= 1
    if reduction == "mean":
        grad /= 6
    np.testing.assert_allclose(x.grad.numpy(), grad, rtol=1e-5, atol=1e-7)


def test_cross_entropy_is_stable_and_differentiable_twice():
    huge = lk.tensor([[1e4, 0.0, -1e4], [-1e4, 1e4, 1e4]], requires_grad=True)
    loss = F.cross_entropy(huge, lk.tensor([0, 1]))
    assert np.isfinite(loss.item()) and abs(loss.item() - np.log(2) / 2) < 1e-3
    loss.backward()
    assert np.isfinite(huge.grad.numpy()).all()
    x = lk.randn(3, 5, dtype=lk.float64)
    assert lk.gradcheck(lambda x: F.cross_entropy(x, lk.tensor([4, 0, 2])), [x])
    assert lk.gradcheck(lambda x: lk.grad(lambda y: F.cross_entropy(y, lk.tensor([1, 1, 0])))(x),
                        [x])


def test_cross_entropy_spatial_and_single_sample():
    rng = np.random.default_rng(1)
    scores = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)     # (N, C, H, W)
    target = rng.integers(0, 3, (2, 4, 5))
    loss = F.cross_entropy(lk.tensor(scores), lk.tensor(target), reduction="none")
    lp = np_log_softmax(scores, 1)
    ref = -np.take_along_axis(lp, target[:, None], axis=1)[:, 0]
    np.testing.assert_allclose(loss.numpy(), ref, rtol=1e-5)
    one = F.cross_entropy(lk.tensor(scores[0, :, 0, 0]), lk.tensor(target[0, 0, 0]))
    np.testing.assert_allclose(one.item(), ref[0, 0, 0], rtol=1e-5)


def test_class_target_errors_explain_the_fix(logits):
    x = lk.tensor(logits)
    with pytest.raises(lk.DTypeError, match=r"integer class indices.*argmax\(dim=1\)"):
        F.cross_entropy(x, lk.tensor(np.eye(4)[[0, 1, 2, 3]]))       # not a row per example
    # a float target shaped like the input holds class probabilities, as in PyTorch
    soft = F.cross_entropy(x, lk.tensor(np.eye(4, dtype=np.float32)[[0, 1, 2, 3, 0, 1]]))
    hard = F.cross_entropy(x, lk.tensor([0, 1, 2, 3, 0, 1]))
    assert soft.item() == pytest.approx(hard.item(), rel=1e-6)
    with pytest.raises(lk.ShapeError, match=r"target of shape \(6,\)"):
        F.cross_entropy(x, lk.tensor([[0], [1], [2], [3], [0], [1]]))
    with pytest.raises(lk.ShapeError, match="holds class 4, but the input has 4 classes"):
        F.cross_entropy(x, lk.tensor([0, 1, 2, 3, 4, 0]))
    with pytest.raises(lk.ShapeError, match="holds class -1"):
        F.nll_loss(x, lk.tensor([0, 1, 2, 3, -1, 0]))
    with pytest.raises(ValueError, match="reduction='avg'"):
        F.cross_entropy(x, lk.tensor([0, 1, 2, 3, 0, 0]), reduction="avg")


def test_nll_loss(logits):
    lp = np_log_softmax(logits, 1)
    target = np.array([1, 1, 0, 3, 2, 2])
    out = F.nll_loss(lk.tensor(lp), lk.tensor(target), reduction="sum")
    np.testing.assert_allclose(out.item(), -lp[np.arange(6), target].sum(), rtol=1e-5)


def test_mse_loss():
    a = np.array([[1.0, 2.0], [3.0, 5.0]], np.float32)
    b = np.array([[0.0, 2.0], [1.0, 1.0]], np.float32)
    x = lk.tensor(a, requires_grad=True)
    loss = F.mse_loss(x, lk.tensor(b))
    assert loss.item() == pytest.approx(((a - b) ** 2).mean())
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (a - b) / 4)
    assert F.mse_loss(x, lk.tensor(b), reduction="sum").item() == pytest.approx(21.0)
    assert F.mse_loss(x, lk.tensor(b), reduction="none").shape == (2, 2)
    with pytest.warns(UserWarning, match="different to the input size.*squeeze"):
        assert F.mse_loss(lk.ones(4, 1), lk.ones(4)).item() == 0.0    # broadcast, as PyTorch


def test_linear_and_embedding_functional():
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    w = np.random.default_rng(3).standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(F.linear(lk.tensor(x), lk.tensor(w)).numpy(), x @ w.T, rtol=1e-5)
    np.testing.assert_allclose(F.linear(lk.tensor(x[0]), lk.tensor(w), lk.ones(2)).numpy(),
                               x[0] @ w.T + 1, rtol=1e-5)
    with pytest.raises(lk.ShapeError, match="2-d"):
        F.linear(lk.tensor(x), lk.ones(4))
    table = lk.tensor(w.T.copy())                                      # (4, 2)
    np.testing.assert_array_equal(F.embedding(lk.tensor([3, 0]), table).numpy(), w.T[[3, 0]])
