"""jacrev, jacfwd and hessian against torch.func on a small network: one argument and several
(argnums), tuple outputs, has_aux, dicts of parameters; and under lk.function and lk.vmap."""
import numpy as np
import pytest
import torch

import labkit as lk

RNG = np.random.default_rng(0)
W1, B1, W2 = RNG.standard_normal((4, 3)), RNG.standard_normal(4), RNG.standard_normal((2, 4))
X = RNG.standard_normal(3)


def net(lib, x, w1, b1, w2):
    """The same two-layer network in labkit or torch (``lib``)."""
    return w2 @ lib.tanh(w1 @ x + b1)


def loss(lib, x, w1, b1, w2):
    out = net(lib, x, w1, b1, w2)
    return (out * out).sum() + (x ** 3).sum()


def _args(lib):
    make = lk.tensor if lib is lk else torch.tensor
    return [make(a) for a in (X, W1, B1, W2)]


def _same(got, want):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert got.shape == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("argnums", [0, 1, (0, 2), (1, 2, 3)])
def test_jacobian_of_a_network(kind, argnums):
    got = getattr(lk, kind)(lambda *a: net(lk, *a), argnums=argnums)(*_args(lk))
    want = getattr(torch.func, kind)(lambda *a: net(torch, *a), argnums=argnums)(*_args(torch))
    _same(got, want)


@pytest.mark.parametrize("argnums", [0, 3, (0, 1)])
def test_hessian_of_a_loss(argnums):
    got = lk.hessian(lambda *a: loss(lk, *a), argnums=argnums)(*_args(lk))
    want = torch.func.hessian(lambda *a: loss(torch, *a), argnums=argnums)(*_args(torch))
    _same(got, want)
    got = lk.func.hessian(lambda *a: loss(lk, *a), argnums=argnums)(*_args(lk))
    _same(got, want)


def test_tuple_outputs_and_has_aux():
    def f(lib, x, w1):
        h = lib.tanh(w1 @ x)
        return (h, h.sum() * x), x.sum()
    for kind in ("jacrev", "jacfwd"):
        (jac, aux) = getattr(lk, kind)(lambda x, w: f(lk, x, w), argnums=(0, 1),
                                       has_aux=True)(lk.tensor(X), lk.tensor(W1))
        (want, want_aux) = getattr(torch.func, kind)(lambda x, w: f(torch, x, w), argnums=(0, 1),
                                                     has_aux=True)(torch.tensor(X),
                                                                   torch.tensor(W1))
        _same(jac, want)
        assert aux.item() == pytest.approx(want_aux.item())


def test_jacobian_with_respect_to_a_dict_of_parameters():
    params = {"w1": lk.tensor(W1), "b1": lk.tensor(B1)}

    def f(p, x):
        return lk.tanh(p["w1"] @ x + p["b1"])
    got = lk.jacrev(f)(params, lk.tensor(X))
    tparams = {"w1": torch.tensor(W1), "b1": torch.tensor(B1)}
    want = torch.func.jacrev(lambda p, x: torch.tanh(p["w1"] @ x + p["b1"]))(tparams,
                                                                             torch.tensor(X))
    assert set(got) == {"w1", "b1"}
    for k in got:
        _same(got[k], want[k])
    _same(lk.jacfwd(f)(params, lk.tensor(X))["w1"], want["w1"])


def test_outputs_that_do_not_depend_on_the_input_get_zeros():
    for kind in ("jacrev", "jacfwd"):
        jac = getattr(lk, kind)(lambda x: (x * 2.0, lk.ones(2, dtype="float64")))(lk.tensor(X))
        assert jac[1].shape == (2, 3) and not jac[1].numpy().any()
        np.testing.assert_allclose(jac[0].numpy(), 2 * np.eye(3))


def test_jacobian_of_a_0d_output_and_input():
    assert lk.jacrev(lambda x: x ** 2)(lk.tensor(3.0)).item() == 6.0
    assert lk.jacfwd(lambda x: x ** 2)(lk.tensor(3.0)).item() == 6.0
    assert lk.hessian(lambda x: x ** 3)(lk.tensor(2.0)).item() == 12.0


def test_jacobians_captured_and_batched():
    f = lambda x: net(lk, x, *_args(lk)[1:])   # noqa: E731
    eager = lk.jacrev(f)(lk.tensor(X))
    np.testing.assert_allclose(lk.function(lk.jacrev(f))(lk.tensor(X)).numpy(), eager.numpy(),
                               rtol=1e-12)
    np.testing.assert_allclose(lk.function(lk.hessian(lambda x: loss(lk, x, *_args(lk)[1:])))(
        lk.tensor(X)).numpy(), lk.hessian(lambda x: loss(lk, x, *_args(lk)[1:]))(
        lk.tensor(X)).numpy(), rtol=1e-12)
    xs = lk.tensor(RNG.standard_normal((5, 3)))
    batched = lk.vmap(lk.jacfwd(f))(xs)
    for i in range(5):
        np.testing.assert_allclose(batched[i].numpy(), lk.jacrev(f)(xs[i]).numpy(), rtol=1e-10)


def test_jacobian_of_jacobian_and_gradients_through_a_jacobian():
    x = lk.tensor(X)
    second = lk.jacrev(lk.jacrev(lambda x: loss(lk, x, *_args(lk)[1:])))(x)
    np.testing.assert_allclose(second.numpy(),
                               lk.hessian(lambda x: loss(lk, x, *_args(lk)[1:]))(x).numpy(),
                               rtol=1e-10)
    # the trace of the Jacobian, differentiated
    g = lk.grad(lambda x: (lk.jacrev(lambda y: lk.tanh(y) * y)(x) * lk.eye(3, dtype="float64"))
                .sum())(x)
    tx = torch.tensor(X, requires_grad=True)
    want = torch.autograd.grad(torch.func.jacrev(lambda y: torch.tanh(y) * y)(tx).trace(), tx)[0]
    np.testing.assert_allclose(g.numpy(), want.numpy(), rtol=1e-10)
