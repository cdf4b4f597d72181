"""``lk.distributions`` against ``torch.distributions``: for each distribution, on the same
float64 parameters (batched), every statistic, ``log_prob`` / ``cdf`` / ``icdf`` on values, and
the gradients of ``log_prob`` and ``entropy`` with respect to the parameters; ``kl_divergence``
of every registered pair with its gradients; shapes and supports. Samples are compared by their
statistics (labkit's random stream is its own), and ``rsample``'s gradients by finite
differences with the same random draws.
"""
import numpy as np
import pytest
import torch
import torch.distributions as TD

import labkit as lk
import labkit.distributions as LD

rng = np.random.default_rng(0)


def _pos(*shape):
    return rng.uniform(0.5, 2.0, shape)


def _probs(*shape):
    p = rng.uniform(0.1, 1.0, shape)
    return p / p.sum(-1, keepdims=True)


def _spd(*batch, n=3):
    a = rng.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


# name -> (class name, parameters as NumPy arrays, values to evaluate log_prob at)
SPECS = {
    "normal": ("Normal", dict(loc=rng.standard_normal((2, 3)), scale=_pos(3)),
               rng.standard_normal((4, 2, 3))),
    "uniform": ("Uniform", dict(low=-_pos(2, 3), high=_pos(2, 3)),
                rng.uniform(-0.4, 0.4, (4, 2, 3))),
    "bernoulli_probs": ("Bernoulli", dict(probs=rng.uniform(0.1, 0.9, (2, 3))),
                        rng.integers(0, 2, (4, 2, 3)).astype(np.float64)),
    "bernoulli_logits": ("Bernoulli", dict(logits=rng.standard_normal((3,)) * 3),
                         rng.integers(0, 2, (5, 3)).astype(np.float64)),
    "categorical_probs": ("Categorical", dict(probs=_probs(2, 4)), rng.integers(0, 4, (5, 2))),
    "categorical_logits": ("Categorical", dict(logits=rng.standard_normal((3, 4))),
                           rng.integers(0, 4, (3,))),
    "one_hot_categorical": ("OneHotCategorical", dict(probs=_probs(2, 3)),
                            np.eye(3)[rng.integers(0, 3, (4, 2))]),
    "mvn_covariance": ("MultivariateNormal", dict(loc=rng.standard_normal((2, 3)),
                                                  covariance_matrix=_spd()),
                       rng.standard_normal((4, 2, 3))),
    "mvn_scale_tril": ("MultivariateNormal", dict(loc=rng.standard_normal(3),
                                                  scale_tril=np.linalg.cholesky(_spd(2))),
                       rng.standard_normal((2, 3))),
    "mvn_precision": ("MultivariateNormal", dict(loc=rng.standard_normal(3),
                                                 precision_matrix=_spd()),
                      rng.standard_normal((5, 3))),
}
CONTINUOUS_PARAMS = {"loc", "scale", "low", "high", "probs", "logits", "covariance_matrix",
                     "scale_tril", "precision_matrix"}


def _make(spec, grad=False):
    """The labkit and PyTorch distributions of ``spec``, and their parameter tensors."""
    cls, params, _ = SPECS[spec]
    lp = {k: lk.tensor(v, requires_grad=grad and v.dtype.kind == "f") for k, v in params.items()}
    tp = {k: torch.tensor(v, requires_grad=grad and v.dtype.kind == "f")
          for k, v in params.items()}
    return getattr(LD, cls)(**lp), getattr(TD, cls)(**tp), lp, tp


def _close(got, expected, what, rtol=1e-10, atol=1e-12):
    expected = expected.detach().numpy() if isinstance(expected, torch.Tensor) else expected
    assert tuple(got.shape) == tuple(np.shape(expected)), f"{what}: shape {got.shape} vs " \
                                                          f"{np.shape(expected)}"
    np.testing.assert_allclose(got.detach().numpy(), expected, rtol=rtol, atol=atol,
                               equal_nan=True, err_msg=what)


@pytest.mark.parametrize("spec", sorted(SPECS))
def test_statistics_and_shapes_match_pytorch(spec):
    d, t, _, _ = _make(spec)
    assert d.batch_shape == tuple(t.batch_shape) and d.event_shape == tuple(t.event_shape)
    for name in ("mean", "mode", "variance", "stddev"):
        _close(getattr(d, name), getattr(t, name), f"{spec}.{name}")
    _close(d.entropy(), t.entropy(), f"{spec}.entropy()")
    _close(d.perplexity(), t.perplexity(), f"{spec}.perplexity()")
    assert d.has_rsample == t.has_rsample
    assert d.has_enumerate_support == t.has_enumerate_support


@pytest.mark.parametrize("spec", sorted(SPECS))
def test_log_prob_matches_pytorch(spec):
    d, t, _, _ = _make(spec)
    value = SPECS[spec][2]
    _close(d.log_prob(lk.tensor(value)), t.log_prob(torch.tensor(value)), f"{spec}.log_prob")


@pytest.mark.parametrize("spec", ["normal", "uniform"])
def test_cdf_and_icdf_match_pytorch(spec):
    d, t, _, _ = _make(spec)
    value = SPECS[spec][2]
    _close(d.cdf(lk.tensor(value)), t.cdf(torch.tensor(value)), f"{spec}.cdf")
    q = rng.uniform(0.05, 0.95, (4, 2, 3))
    _close(d.icdf(lk.tensor(q)), t.icdf(torch.tensor(q)), f"{spec}.icdf")


@pytest.mark.parametrize("spec", sorted(SPECS))
def test_gradients_of_log_prob_and_entropy_match_pytorch(spec):
    d, t, lp, tp = _make(spec, grad=True)
    value = SPECS[spec][2]
    weights = rng.standard_normal(t.log_prob(torch.tensor(value)).shape)
    loss = (d.log_prob(lk.tensor(value)) * lk.tensor(weights)).sum() + d.entropy().sum()
    loss.backward()
    (t.log_prob(torch.tensor(value)) * torch.tensor(weights)).sum().add(
        t.entropy().sum()).backward()
    for k in lp:
        if lp[k].requires_grad:
            _close(lp[k].grad, tp[k].grad, f"{spec}: gradient of {k}", rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("spec", ["bernoulli_probs", "categorical_logits",
                                  "one_hot_categorical"])
def test_enumerate_support_matches_pytorch(spec):
    d, t, _, _ = _make(spec)
    for expand in (True, False):
        got, expected = d.enumerate_support(expand), t.enumerate_support(expand)
        assert got.dtype.np == expected.numpy().dtype
        _close(got, expected, f"{spec}.enumerate_support({expand})")


# ---- samples --------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", sorted(SPECS))
def test_samples_have_the_shape_and_the_moments(spec):
    lk.manual_seed(0)
    d, t, _, _ = _make(spec)
    n = 40000
    x = d.sample((n,))
    assert x.shape == tuple(t.sample((n,)).shape) and not x.requires_grad
    assert x.dtype.np == t.sample().numpy().dtype
    if spec.startswith("categorical"):
        freq = np.stack([(x.numpy() == k).mean(0) for k in range(d.param_shape[-1])], -1)
        np.testing.assert_allclose(freq, t.probs.numpy(), atol=0.02)
        return
    a = x.numpy()
    np.testing.assert_allclose(a.mean(0), t.mean.numpy(), atol=0.05)
    np.testing.assert_allclose(a.var(0), t.variance.numpy(), rtol=0.06, atol=0.01)
    if spec.startswith("mvn"):
        centred = a - a.mean(0)
        cov = np.einsum("n...i,n...j->...ij", centred, centred) / n
        np.testing.assert_allclose(cov, t.covariance_matrix.numpy(), atol=0.12)


@pytest.mark.parametrize("spec", ["normal", "uniform", "mvn_covariance", "mvn_scale_tril"])
def test_rsample_gradients_are_reparameterised(spec):
    """The gradient of a function of ``rsample`` with respect to every parameter, against
    central differences with the same draws (reseeded before each), in float64."""
    cls, params, _ = SPECS[spec]
    names = sorted(params)

    def f(*xs):
        lk.manual_seed(3)
        kw = dict(zip(names, xs))
        if "scale_tril" in kw:
            kw["scale_tril"] = lk.tril(kw["scale_tril"])
        if "covariance_matrix" in kw:
            c = kw["covariance_matrix"]
            kw["covariance_matrix"] = (c + c.mT) * 0.5
        return (getattr(LD, cls)(**kw).rsample((3,)) ** 2).sum((0,)).sin()
    assert lk.gradcheck(f, [lk.tensor(params[k]) for k in names], eps=1e-6, atol=1e-5)


def test_sample_has_no_gradient_and_rsample_is_refused_where_pytorch_refuses():
    loc = lk.tensor([0.0], requires_grad=True)
    assert not LD.Normal(loc, 1.0).sample().requires_grad
    with pytest.raises(NotImplementedError, match="rsample"):
        LD.Bernoulli(probs=lk.tensor([0.5])).rsample()


# ---- KL divergence ----------------------------------------------------------------------------------
KL_PAIRS = [("normal", "normal"), ("uniform", "uniform"), ("bernoulli_probs", "bernoulli_probs"),
            ("categorical_probs", "categorical_probs"),
            ("categorical_logits", "categorical_logits"),
            ("one_hot_categorical", "one_hot_categorical"),
            ("mvn_covariance", "mvn_scale_tril"), ("mvn_precision", "mvn_covariance"),
            ("uniform", "normal"), ("normal", "uniform")]


def _second(spec):
    """Another distribution of ``spec``'s family, with parameters drawn anew."""
    cls, params, value = SPECS[spec]
    new = {}
    for k, v in params.items():
        if k in ("covariance_matrix", "precision_matrix"):
            new[k] = _spd(*v.shape[:-2], n=v.shape[-1])
        elif k == "scale_tril":
            new[k] = np.linalg.cholesky(_spd(*v.shape[:-2], n=v.shape[-1]))
        elif k == "probs":
            new[k] = _probs(*v.shape) if cls != "Bernoulli" else rng.uniform(0.1, 0.9, v.shape)
        elif k in ("scale", "high"):
            new[k] = v * rng.uniform(1.1, 1.5, v.shape)
        elif k == "low":
            new[k] = v * rng.uniform(1.1, 1.5, v.shape)       # lower still: q covers p
        else:
            new[k] = v + 0.3 * rng.standard_normal(v.shape)
    SPECS[spec + "_q"] = (cls, new, value)
    return spec + "_q"


@pytest.mark.parametrize("p_spec, q_spec", KL_PAIRS)
def test_kl_divergence_and_its_gradients_match_pytorch(p_spec, q_spec):
    if p_spec == q_spec:
        q_spec = _second(q_spec)
    p, tp, p_params, tp_params = _make(p_spec, grad=True)
    q, tq, q_params, tq_params = _make(q_spec, grad=True)
    kl = LD.kl_divergence(p, q)
    expected = TD.kl_divergence(tp, tq)
    _close(kl, expected, f"KL({p_spec} || {q_spec})", rtol=1e-9, atol=1e-11)
    if not np.isfinite(expected.detach().numpy()).all():
        return
    kl.sum().backward()
    expected.sum().backward()
    for ours, theirs in ((p_params, tp_params), (q_params, tq_params)):
        for k in ours:
            if ours[k].requires_grad and theirs[k].grad is not None:
                _close(ours[k].grad, theirs[k].grad, f"KL gradient of {k}", rtol=1e-7,
                       atol=1e-10)


def test_kl_of_independent_normals_sums_over_the_event():
    p = LD.Independent(LD.Normal(lk.zeros(2, 3), lk.ones(2, 3)), 1)
    q = LD.Independent(LD.Normal(lk.ones(2, 3), lk.ones(2, 3) * 2), 1)
    tp = TD.Independent(TD.Normal(torch.zeros(2, 3), torch.ones(2, 3)), 1)
    tq = TD.Independent(TD.Normal(torch.ones(2, 3), torch.ones(2, 3) * 2), 1)
    _close(LD.kl_divergence(p, q), TD.kl_divergence(tp, tq), "KL(Independent)", rtol=1e-6)


def test_kl_without_a_rule_and_register_kl():
    with pytest.raises(NotImplementedError, match="No KL"):
        LD.kl_divergence(LD.Bernoulli(probs=lk.tensor(0.5)), LD.Normal(0.0, 1.0))

    class Wide(LD.Normal):
        pass
    # a subclass pair uses its parents' rule until one of its own is registered
    assert LD.kl_divergence(Wide(0.0, 1.0), Wide(0.0, 1.0)).item() == 0.0

    @LD.register_kl(Wide, LD.Normal)
    def _wide(p, q):
        return lk.tensor(7.0)
    assert LD.kl_divergence(Wide(0.0, 1.0), LD.Normal(0.0, 1.0)).item() == 7.0
    assert LD.kl_divergence(LD.Normal(0.0, 1.0), Wide(0.0, 1.0)).item() == 0.0


# ---- Independent ---------------------------------------------------------------------------------
def test_independent_matches_pytorch():
    loc, scale = rng.standard_normal((2, 3, 4)), _pos(2, 3, 4)
    value = rng.standard_normal((5, 2, 3, 4))
    for n in (0, 1, 2):
        d = LD.Independent(LD.Normal(lk.tensor(loc), lk.tensor(scale)), n)
        t = TD.Independent(TD.Normal(torch.tensor(loc), torch.tensor(scale)), n)
        assert d.batch_shape == tuple(t.batch_shape) and d.event_shape == tuple(t.event_shape)
        _close(d.log_prob(lk.tensor(value)), t.log_prob(torch.tensor(value)), f"n={n} log_prob")
        _close(d.entropy(), t.entropy(), f"n={n} entropy")
        _close(d.mean, t.mean, f"n={n} mean")
        assert d.rsample((7,)).shape == tuple(t.rsample((7,)).shape)
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims"):
        LD.Independent(LD.Normal(lk.zeros(2), 1.0), 2)


def test_constraints_agree_with_pytorch():
    from torch.distributions import constraints as TC
    from labkit.distributions import constraints as C
    values = {"real": [0.0, np.nan, np.inf], "positive": [1.0, 0.0, -1.0],
              "unit_interval": [0.0, 0.5, 1.5], "nonnegative": [0.0, -0.1, 3.0],
              "boolean": [0.0, 1.0, 0.5], "nonnegative_integer": [0.0, 2.0, 1.5, -1.0],
              "simplex": [[0.3, 0.7], [0.5, 0.6], [-0.1, 1.1]],
              "lower_cholesky": [[[1.0, 0.0], [2.0, 1.0]], [[1.0, 1.0], [0.0, 1.0]],
                                 [[-1.0, 0.0], [0.0, 1.0]]],
              "positive_definite": [[[2.0, 1.0], [1.0, 2.0]], [[1.0, 2.0], [2.0, 1.0]]],
              "real_vector": [[1.0, np.nan], [1.0, 2.0]]}
    for name, v in values.items():
        v = np.array(v)
        got = getattr(C, name).check(lk.tensor(v)).numpy()
        expected = getattr(TC, name).check(torch.tensor(v)).numpy()
        np.testing.assert_array_equal(got, expected, err_msg=name)
        assert getattr(C, name).event_dim == getattr(TC, name).event_dim, name


@pytest.mark.parametrize("spec", sorted(k for k in SPECS if not k.endswith("_q")))
def test_expand_matches_pytorch(spec):
    d, t, _, _ = _make(spec)
    shape = (5,) + d.batch_shape
    e, te = d.expand(shape), t.expand(shape)
    assert e.batch_shape == tuple(te.batch_shape) and e.event_shape == tuple(te.event_shape)
    value = SPECS[spec][2]
    _close(e.log_prob(lk.tensor(value[:1])), te.log_prob(torch.tensor(value[:1])),
           f"{spec}.expand log_prob")
    _close(e.mean, te.mean, f"{spec}.expand mean")
