"""Argument validation as PyTorch's (on by default, ``validate_args=False`` and
``Distribution.set_default_validate_args`` turn it off), and distributions inside ``lk.function``
and ``lk.vmap``: captured values and gradients equal eager ones, checks run on every call, and
samples are fresh draws on each call.
"""
import numpy as np
import pytest
import torch

import labkit as lk
import labkit.distributions as LD


@pytest.mark.parametrize("make, match", [
    (lambda: LD.Normal(lk.tensor([0.0]), lk.tensor([-1.0])),
     r"parameter scale .* to satisfy the constraint GreaterThan\(lower_bound=0.0\)"),
    (lambda: LD.Normal(lk.tensor([np.nan]), 1.0), "parameter loc .* Real()"),
    (lambda: LD.Bernoulli(probs=lk.tensor([1.5])), "parameter probs .* Interval"),
    (lambda: LD.Categorical(probs=lk.tensor([-0.5, 1.5])), "parameter probs .* Simplex"),
    (lambda: LD.Uniform(1.0, 0.0), "low >= high"),
    (lambda: LD.MultivariateNormal(lk.zeros(2), scale_tril=lk.tensor([[1.0, 1.0], [0.0, 1.0]])),
     "LowerCholesky"),
])
def test_invalid_parameters_raise_value_error_as_pytorch(make, match):
    with pytest.raises(ValueError, match=match) as info:
        make()
    assert isinstance(info.value, lk.ConstraintError) and "invalid values" in str(info.value)


@pytest.mark.parametrize("dist, value, match", [
    (lambda: LD.Bernoulli(probs=lk.tensor([0.5])), [0.5], "support"),
    (lambda: LD.Categorical(probs=lk.tensor([0.5, 0.5])), [2], "IntegerInterval"),
    (lambda: LD.Uniform(0.0, 1.0), [1.5], "Interval"),
    (lambda: LD.Normal(0.0, 1.0), [np.nan], "Real"),
])
def test_values_outside_the_support_raise(dist, value, match):
    with pytest.raises(ValueError, match=match):
        dist().log_prob(lk.tensor(value))


def test_value_shape_must_fit():
    with pytest.raises(ValueError, match="not broadcastable"):
        LD.Normal(lk.zeros(3), 1.0).log_prob(lk.zeros(2))
    with pytest.raises(ValueError, match="event_shape"):
        LD.MultivariateNormal(lk.zeros(3), lk.eye(3)).log_prob(lk.zeros(2))


def test_validation_can_be_switched_off_as_in_pytorch():
    d = LD.Normal(0.0, lk.tensor(-1.0), validate_args=False)
    with np.errstate(invalid="ignore"):
        assert np.isnan(d.log_prob(lk.tensor(0.0)).item())    # log of a negative scale
    LD.Distribution.set_default_validate_args(False)
    try:
        LD.Bernoulli(probs=lk.tensor([2.0]))
        assert LD.Uniform(0.0, 1.0).log_prob(lk.tensor(2.0)).item() == -np.inf
    finally:
        LD.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        LD.Bernoulli(probs=lk.tensor([2.0]))


def test_probs_and_logits_are_one_or_the_other():
    for cls in (LD.Bernoulli, LD.Categorical, LD.OneHotCategorical):
        with pytest.raises(ValueError, match="not both"):
            cls(probs=lk.tensor([0.5, 0.5]), logits=lk.tensor([0.0, 0.0]))
        with pytest.raises(ValueError, match="not both"):
            cls()
    with pytest.raises(ValueError, match="one-dimensional"):
        LD.Categorical(probs=lk.tensor(1.0))
    with pytest.raises(ValueError, match="Exactly one"):
        LD.MultivariateNormal(lk.zeros(2))


def test_repr_names_parameters_as_pytorch():
    assert repr(LD.Normal(lk.zeros(2), 1.0)) == "Normal(loc: (2,), scale: (2,))"
    assert repr(LD.Independent(LD.Bernoulli(logits=lk.zeros(3)), 1)) == \
        "Independent(Bernoulli(logits: (3,)), 1)"


# ---- captured and vmapped --------------------------------------------------------------------------
def _loss(loc, log_scale, probs, x, k):
    normal = LD.Normal(loc, log_scale.exp())
    cat = LD.Categorical(probs=probs)
    mvn = LD.MultivariateNormal(loc, scale_tril=lk.diag_embed(log_scale.exp()))
    q = LD.Normal(lk.zeros_like(loc), 1.0)
    return (normal.log_prob(x).sum() + normal.entropy().sum() + cat.log_prob(k).sum()
            + cat.entropy() + mvn.log_prob(x).sum() + LD.kl_divergence(normal, q).sum())


def _inputs():
    rng = np.random.default_rng(0)
    return (lk.tensor(rng.standard_normal(3)), lk.tensor(rng.standard_normal(3) * 0.2),
            lk.tensor([0.2, 0.3, 0.5], dtype=lk.float64), lk.tensor(rng.standard_normal((4, 3))),
            lk.tensor([0, 2, 1]))


def test_captured_log_probs_and_gradients_equal_eager():
    def step(loc, log_scale, probs, x, k):
        return lk.value_and_grad(_loss, argnums=(0, 1, 2))(loc, log_scale, probs, x, k)

    args = _inputs()
    (value, grads) = step(*args)
    f = lk.function(step)
    (c_value, c_grads) = f(*args)
    np.testing.assert_allclose(c_value.numpy(), value.numpy(), rtol=1e-12)
    for c, e in zip(c_grads, grads):
        np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=1e-10)


def test_a_captured_function_checks_every_calls_values():
    f = lk.function(lambda scale, x: LD.Normal(0.0, scale).log_prob(x))
    assert np.isfinite(f(lk.tensor(1.0), lk.tensor(0.5)).item())
    with pytest.raises(ValueError, match="scale"):
        f(lk.tensor(-1.0), lk.tensor(0.5))
    with pytest.raises(ValueError, match="support"):
        lk.function(lambda p, x: LD.Bernoulli(probs=p).log_prob(x))(lk.tensor(0.5),
                                                                   lk.tensor(0.3))


def test_captured_samples_are_fresh_draws_from_the_same_stream_as_eager():
    def draw(loc):
        d = LD.Normal(loc, 1.0)
        return d.rsample((2,)), LD.Categorical(logits=lk.zeros(5)).sample((3,))

    loc = lk.zeros(4)
    lk.manual_seed(0)
    eager = [draw(loc) for _ in range(2)]
    f = lk.function(draw)
    lk.manual_seed(0)
    captured = [f(loc) for _ in range(2)]
    assert not np.array_equal(captured[0][0].numpy(), captured[1][0].numpy())
    for e, c in zip(eager, captured):
        np.testing.assert_array_equal(c[0].numpy(), e[0].numpy())
        np.testing.assert_array_equal(c[1].numpy(), e[1].numpy())


def test_per_example_log_prob_gradients_under_vmap():
    x = lk.tensor(np.random.default_rng(1).standard_normal((5, 3)))
    loc = lk.zeros(3, dtype=lk.float64)

    def nll(loc, x):
        return -LD.Normal(loc, 2.0).log_prob(x).sum()
    per_example = lk.vmap(lk.grad(nll), in_axes=(None, 0))(loc, x)
    np.testing.assert_allclose(per_example.numpy(), -(x.numpy() - 0.0) / 4.0, rtol=1e-12)


def test_reinforce_style_score_function_matches_pytorch():
    """A policy-gradient loss, as RL code writes it: log_prob of sampled actions times a
    return, its gradient with respect to the logits, against PyTorch on the same actions."""
    logits = np.array([[0.1, -0.3, 0.5], [1.0, 0.0, -1.0]])
    actions = np.array([2, 0])
    returns = np.array([1.5, -0.5])
    lg = lk.tensor(logits, requires_grad=True)
    (-(LD.Categorical(logits=lg).log_prob(lk.tensor(actions)) * lk.tensor(returns)).sum()
     ).backward()
    tg = torch.tensor(logits, requires_grad=True)
    (-(torch.distributions.Categorical(logits=tg).log_prob(torch.tensor(actions))
       * torch.tensor(returns)).sum()).backward()
    np.testing.assert_allclose(lg.grad.numpy(), tg.grad.numpy(), rtol=1e-12)
