"""Gradients of gradients: vjp rules are labkit ops, so differentiating them again is exact."""
import numpy as np
import pytest

import labkit as lk

X = np.array([-2.1, -0.7, 0.0, 0.4, 1.3, 2.5])


def _x(device):
    return lk.tensor(X, dtype="float64", device=device)


def _second(f, x):
    """d^2 f / dx^2 elementwise, for an elementwise f, by lk.grad of lk.grad."""
    return lk.grad(lambda x: lk.grad(lambda y: f(y).sum())(x).sum())(x)


SECOND_DERIVATIVES = [
    ("tanh", lambda x: x.tanh(), lambda x: -2 * np.tanh(x) * (1 - np.tanh(x) ** 2)),
    ("sigmoid", lambda x: x.sigmoid(),
     lambda x: (lambda s: s * (1 - s) * (1 - 2 * s))(1 / (1 + np.exp(-x)))),
    ("exp", lambda x: x.exp(), np.exp),
    ("cube", lambda x: x ** 3, lambda x: 6 * x),
    ("cube by mul", lambda x: x * x * x, lambda x: 6 * x),
    ("log", lambda x: (x * x + 1.0).log(), lambda x: 2 * (1 - x ** 2) / (1 + x ** 2) ** 2),
    ("sqrt", lambda x: (x * x + 1.0).sqrt(), lambda x: (1 + x ** 2) ** -1.5),
    ("div", lambda x: 1.0 / (x * x + 1.0), lambda x: (6 * x ** 2 - 2) / (1 + x ** 2) ** 3),
    ("pow tensor exponent", lambda x: lk.pow(2.0, x), lambda x: np.log(2) ** 2 * 2.0 ** x),
]


@pytest.mark.parametrize("name,f,d2", SECOND_DERIVATIVES, ids=[s[0] for s in SECOND_DERIVATIVES])
def test_grad_of_grad_matches_analytic(name, f, d2, device):
    got = _second(f, _x(device))
    assert got.dtype is lk.float64 and got.device is _x(device).device
    np.testing.assert_allclose(got.numpy(), d2(X), rtol=1e-10, atol=1e-12)


def test_third_derivatives(device):
    x = _x(device)
    d3 = lk.grad(lambda x: lk.grad(lambda x: lk.grad(lambda y: (y ** 3).sum())(x).sum())(x).sum())
    np.testing.assert_allclose(d3(x).numpy(), np.full(X.shape, 6.0))
    d3e = lk.grad(lambda x: lk.grad(lambda x: lk.grad(lambda y: y.exp().sum())(x).sum())(x).sum())
    np.testing.assert_allclose(d3e(x).numpy(), np.exp(X), rtol=1e-12)


def test_scalar_second_derivative_with_nested_grad(device):
    x = lk.tensor(0.5, dtype="float64", device=device)
    np.testing.assert_allclose(lk.grad(lk.grad(lambda x: x.tanh()))(x).item(),
                               -2 * np.tanh(0.5) * (1 - np.tanh(0.5) ** 2))
    np.testing.assert_allclose(lk.grad(lk.grad(lambda x: x ** 3))(x).item(), 3.0)


def _softmax_hessian(x, c):
    """Hessian of f(x) = <softmax(x), c>: H = J * (c - s.c)[:, None] - s (J c)^T."""
    e = np.exp(x - x.max())
    s = e / e.sum()
    jac = np.diag(s) - np.outer(s, s)
    return jac * (c - s @ c)[:, None] - np.outer(s, jac @ c)


def test_softmax_hessian(device):
    rng = np.random.default_rng(0)
    xv, c = rng.standard_normal(5), rng.standard_normal(5)
    x = lk.tensor(xv, device=device)
    ct = lk.tensor(c, device=device)
    f = lambda x: (lk.softmax(x) * ct).sum()                    # noqa: E731
    rows = []
    for j in range(5):
        e = lk.tensor(np.eye(5)[j], device=device)
        rows.append(lk.grad(lambda x: (lk.grad(f)(x) * e).sum())(x).numpy())
    np.testing.assert_allclose(np.stack(rows), _softmax_hessian(xv, c), atol=1e-12)
    # first derivative, too: J c
    s = np.exp(xv - xv.max()) / np.exp(xv - xv.max()).sum()
    np.testing.assert_allclose(lk.grad(f)(x).numpy(), (np.diag(s) - np.outer(s, s)) @ c,
                               atol=1e-12)


def test_softmax_along_a_dimension_second_order(device):
    rng = np.random.default_rng(1)
    x = lk.tensor(rng.standard_normal((2, 3)), device=device)
    c = lk.tensor(rng.standard_normal((2, 3)), device=device)
    assert lk.gradcheck(lambda x: lk.grad(lambda y: (lk.softmax(y, dim=0) * c).sum())(x), [x])
    assert lk.gradcheck(lambda x: lk.grad(lambda y: (lk.log_softmax(y) * c).sum())(x), [x])


def test_backward_with_create_graph(device):
    x = lk.tensor([0.3, -1.1], dtype="float64", device=device, requires_grad=True)
    y = (x.tanh() * x).sum()
    y.backward(create_graph=True)
    g = x.grad
    assert g.requires_grad and not g.is_leaf
    x.grad = None
    g.sum().backward()
    t = np.tanh([0.3, -1.1])
    xv = np.array([0.3, -1.1])
    # d/dx [tanh + x (1 - tanh^2)] = 2 (1 - tanh^2) - 2 x tanh (1 - tanh^2)
    np.testing.assert_allclose(x.grad.numpy(), 2 * (1 - t ** 2) - 2 * xv * t * (1 - t ** 2))


def test_hessian_of_matmul_quadratic_form(device):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 3))
    av = lk.tensor(a, device=device)
    x = lk.tensor(rng.standard_normal(3), device=device)
    f = lambda x: x @ (av @ x)                                   # noqa: E731
    rows = [lk.grad(lambda x: lk.grad(f)(x)[j])(x).numpy() for j in range(3)]
    np.testing.assert_allclose(np.stack(rows), a + a.T, atol=1e-12)


def test_second_order_through_max_and_relu(device):
    # piecewise-linear parts have zero second derivative; the quadratic part survives
    x = lk.tensor([0.5, -1.0, 2.0], dtype="float64", device=device)
    f = lambda x: (lk.relu(x) * x).sum() + lk.max(x) ** 2        # noqa: E731
    h = lk.grad(lambda x: lk.grad(f)(x).sum())(x)
    np.testing.assert_allclose(h.numpy(), [2.0, 0.0, 2.0 + 2.0])
