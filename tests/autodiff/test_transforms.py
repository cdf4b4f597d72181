"""Functional transforms: grad, value_and_grad, vjp, jvp, custom_vjp, gradcheck."""
import numpy as np
import pytest

import labkit as lk
from labkit.autodiff import numerical_vjp


def _rand(rng, shape, device):
    return lk.tensor(rng.standard_normal(shape), device=device)


def _two_cpu_devices():
    """Split the host into (at least) two virtual CPU devices; returns the count to restore."""
    before = sum(d.type == "cpu" for d in lk.devices())
    lk.devices.configure(cpus=max(before, 2))
    return before


def _inner(a, b):
    return float(np.sum(a.numpy() * b.numpy()))


FUNCTIONS = [
    ("elementwise", lambda x, y: (x * y).tanh() + x.exp() * 0.5, [(3, 4), (4,)]),
    ("matmul", lambda a, b: a @ b, [(2, 3, 4), (4, 5)]),
    ("softmax", lambda x, w: lk.softmax(x * w, dim=0), [(4, 3), (1, 3)]),
    ("reductions", lambda x, y: lk.stack([lk.max(x, dim=1).values, lk.mean(y, dim=0),
                                          lk.logsumexp(x, dim=-1)]), [(3, 2), (5, 3)]),
    ("indexing", lambda x, y: x[lk.tensor([2, 0, 2]), 1:] * y, [(3, 4), (3,)]),
    ("conv2d", lambda x, w: lk.conv2d(x, w, padding=1, stride=(1, 2)),
     [(1, 2, 4, 5), (3, 2, 3, 3)]),
    ("concat and where", lambda x, y: lk.where(lk.concat(x, y) > 0, lk.concat(x, y) ** 2, y.sum()),
     [(2, 3), (1, 3)]),
]


@pytest.mark.parametrize("name,f,shapes", FUNCTIONS, ids=[s[0] for s in FUNCTIONS])
def test_jvp_is_the_transpose_of_vjp(name, f, shapes, device):
    """<u, J v> == <J^T u, v> for random directions u, v."""
    rng = np.random.default_rng(0)
    for _ in range(3):
        primals = [_rand(rng, s, device) for s in shapes]
        v = [_rand(rng, s, device) for s in shapes]
        out, jv = lk.jvp(f, primals, v)
        out2, vjp_fn = lk.vjp(f, *primals)
        np.testing.assert_allclose(out.numpy(), out2.numpy())
        u = _rand(rng, out.shape, device)
        jtu = vjp_fn(u)
        assert len(jtu) == len(primals)
        assert jv.shape == out.shape
        lhs = _inner(u, jv)
        rhs = sum(_inner(g, vi) for g, vi in zip(jtu, v))
        assert abs(lhs - rhs) <= 1e-9 * max(1.0, abs(lhs))


def test_jvp_matches_finite_differences(device):
    rng = np.random.default_rng(1)
    x, v = _rand(rng, (3, 2), device), _rand(rng, (3, 2), device)
    f = lambda x: lk.softmax(x.tanh() @ x.T, dim=-1)          # noqa: E731
    _, jv = lk.jvp(f, (x,), (v,))
    eps = 1e-6
    fd = (f(x + v * eps).numpy() - f(x - v * eps).numpy()) / (2 * eps)
    np.testing.assert_allclose(jv.numpy(), fd, atol=1e-8)


def test_jvp_of_constant_and_linear(device):
    x = lk.tensor([1.0, 2.0], dtype="float64", device=device)
    out, jv = lk.jvp(lambda x: lk.ones(3, dtype="float64", device=device), (x,), (x,))
    np.testing.assert_allclose(jv.numpy(), np.zeros(3))
    out, jv = lk.jvp(lambda x: x * 3.0 + 1.0, (x,), (lk.tensor([1.0, -1.0], dtype="float64",
                                                               device=device),))
    np.testing.assert_allclose(jv.numpy(), [3.0, -3.0])
    with pytest.raises(lk.GradError, match="tangent"):
        lk.jvp(lambda x: x, (x,), (lk.ones(3, dtype="float64", device=device),))


def test_vjp_function_can_be_called_twice(device):
    x = lk.tensor([1.0, 2.0], dtype="float64", device=device)
    out, vjp_fn = lk.vjp(lambda x: x ** 2, x)
    assert not out.requires_grad
    (g1,) = vjp_fn(lk.ones(2, dtype="float64", device=device))
    (g2,) = vjp_fn(lk.tensor([1.0, 0.0], dtype="float64", device=device))
    np.testing.assert_allclose(g1.numpy(), [2.0, 4.0])
    np.testing.assert_allclose(g2.numpy(), [2.0, 0.0])
    with pytest.raises(lk.GradError, match="cotangent"):
        vjp_fn(lk.ones(3, dtype="float64", device=device))


# ---- grad / value_and_grad ------------------------------------------------------------------
def test_value_and_grad_with_argnums_tuple_and_aux(device):
    a = lk.tensor([1.0, 2.0], dtype="float64", device=device)
    b = lk.tensor([3.0, 5.0], dtype="float64", device=device)
    c = lk.tensor([7.0, 11.0], dtype="float64", device=device)

    def f(a, b, c):
        loss = (a * b * c).sum()
        return loss, {"prod": a * b, "note": "aux can be anything"}

    (value, aux), (ga, gc) = lk.value_and_grad(f, argnums=(0, 2), has_aux=True)(a, b, c)
    np.testing.assert_allclose(value.item(), 1 * 3 * 7 + 2 * 5 * 11)
    assert not value.requires_grad
    np.testing.assert_allclose(aux["prod"].numpy(), [3.0, 10.0])
    assert not aux["prod"].requires_grad and aux["prod"].is_leaf   # holds no tape
    assert aux["note"] == "aux can be anything"
    np.testing.assert_allclose(ga.numpy(), [21.0, 55.0])
    np.testing.assert_allclose(gc.numpy(), [3.0, 10.0])
    assert a.grad is None and not a.requires_grad      # transforms leave the inputs alone

    g, aux = lk.grad(f, argnums=1, has_aux=True)(a, b, c)
    np.testing.assert_allclose(g.numpy(), [7.0, 22.0])
    (gb,) = lk.grad(lambda a, b, c: f(a, b, c)[0], argnums=(-2,))(a, b, c)
    np.testing.assert_allclose(gb.numpy(), [7.0, 22.0])


def test_grad_errors(device):
    x = lk.tensor([1.0, 2.0], dtype="float64", device=device)
    with pytest.raises(lk.GradError, match="argnums"):
        lk.grad(lambda x: x.sum(), argnums=1)(x)
    with pytest.raises(lk.GradError, match=r"single value.*\(2,\)"):
        lk.grad(lambda x: x * 2.0)(x)
    with pytest.raises(lk.GradError, match="float"):
        lk.grad(lambda x: 3.0)(x)


def test_grad_of_python_number_and_unused_input(device):
    assert lk.grad(lambda x: x * x)(3.0).item() == 6.0
    x = lk.tensor([1.0, 2.0], dtype="float64", device=device)
    y = lk.tensor([5.0], dtype="float64", device=device)
    gx, gy = lk.grad(lambda x, y: (x * 2.0).sum(), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gy.numpy(), [0.0])
    assert gy.shape == y.shape
    with lk.no_grad():                 # transforms differentiate even inside no_grad
        np.testing.assert_allclose(lk.grad(lambda x: (x * x).sum())(x).numpy(), [2.0, 4.0])


def test_no_grad_inside_the_function_blocks_the_path(device):
    x = lk.tensor([1.0, 2.0], dtype="float64", device=device)

    def f(x):
        with lk.no_grad():
            c = x * x
        return (c * x).sum()

    np.testing.assert_allclose(lk.grad(f)(x).numpy(), [1.0, 4.0])


def test_grad_of_value_and_grad_nests(device):
    x = lk.tensor(1.5, dtype="float64", device=device)
    inner = lk.value_and_grad(lambda x: x ** 4)
    outer = lk.grad(lambda x: inner(x)[1] + inner(x)[0])
    np.testing.assert_allclose(outer(x).item(), 12 * 1.5 ** 2 + 4 * 1.5 ** 3)


# ---- custom_vjp ------------------------------------------------------------------------------
def test_custom_vjp_replaces_the_gradient(device):
    @lk.custom_vjp
    def clipped_identity(x):
        return x

    clipped_identity.defvjp(lambda x: (x, None), lambda res, g: (g.clip(-1.0, 1.0),))
    x = lk.tensor([1.0, 2.0], dtype="float64", device=device)
    y = clipped_identity(x)
    np.testing.assert_allclose(y.numpy(), x.numpy())
    g = lk.grad(lambda x: (clipped_identity(x) * 5.0).sum())(x)
    np.testing.assert_allclose(g.numpy(), [1.0, 1.0])
    assert "clipped_identity" in repr(clipped_identity)


def test_custom_vjp_with_residuals_and_two_arguments(device):
    @lk.custom_vjp
    def scaled_exp(x, s):
        return (x * s).exp()

    def fwd(x, s):
        e = (x * s).exp()
        return e, (e, x, s)

    def bwd(res, g):
        e, x, s = res
        return g * e * s, g * e * x

    scaled_exp.defvjp(fwd, bwd)
    rng = np.random.default_rng(0)
    x = lk.tensor(rng.standard_normal(3), device=device)
    s = lk.tensor(rng.standard_normal(3), device=device)
    assert lk.gradcheck(lambda x, s: scaled_exp(x, s), [x, s])
    # the rule is written in labkit ops: its gradient w.r.t. the cotangent is exact too
    out, vjp_fn = lk.vjp(lambda x: scaled_exp(x, s), x)
    u = lk.tensor(rng.standard_normal(3), device=device)
    _, jv = lk.jvp(lambda x: scaled_exp(x, s), (x,), (u,))
    np.testing.assert_allclose(jv.numpy(), (np.exp(x.numpy() * s.numpy()) * s.numpy() *
                                            u.numpy()), rtol=1e-12)


def test_custom_vjp_misuse_is_explained(device):
    @lk.custom_vjp
    def f(x):
        return x * 2.0

    with pytest.raises(lk.GradError, match="defvjp"):
        f(lk.ones(2, device=device))
    f.defvjp(lambda x: x * 2.0, lambda res, g: (g,))           # fwd forgot the residuals
    with pytest.raises(lk.GradError, match="pair"):
        f(lk.ones(2, device=device))
    f.defvjp(lambda x: (x * 2.0, None), lambda res, g: (g, g))  # one cotangent too many
    with pytest.raises(lk.GradError, match="2 cotangent"):
        lk.grad(lambda x: f(x).sum())(lk.ones(2, device=device))


def test_custom_vjp_keeps_a_virtual_device():
    before = _two_cpu_devices()
    try:
        @lk.custom_vjp
        def twice(x):
            return x * 2.0

        twice.defvjp(lambda x: (x * 2.0, x), lambda res, g: (g * res,))
        x = lk.tensor([1.0, 3.0], device="cpu:1")
        g = lk.grad(lambda x: twice(x).sum())(x)
        assert g.device.name == "cpu:1"
        np.testing.assert_allclose(g.numpy(), [1.0, 3.0])
    finally:
        lk.devices.configure(cpus=before)


# ---- gradients of scalar-operand ops keep their device -----------------------------------
def test_scalar_operand_gradients_stay_on_the_input_device():
    before = _two_cpu_devices()
    try:
        x = lk.tensor([1.0, 2.0], device="cpu:1")
        for f, expected in ((lambda x: x ** 3, [3.0, 12.0]),
                            (lambda x: 2.0 ** x, [2 * np.log(2), 4 * np.log(2)]),
                            (lambda x: 1.0 / x, [-1.0, -0.25]),
                            (lambda x: lk.clip(x, 1.5, None), [0.0, 1.0])):
            g = lk.grad(lambda x: f(x).sum())(x)
            assert g.device.name == "cpu:1" and g.dtype is lk.float32
            np.testing.assert_allclose(g.numpy(), expected, rtol=1e-6)
    finally:
        lk.devices.configure(cpus=before)


# ---- gradcheck itself ----------------------------------------------------------------------
def test_gradcheck_accepts_correct_and_names_the_wrong_input(device):
    rng = np.random.default_rng(0)
    a, b = _rand(rng, (2, 3), device), _rand(rng, (3,), device)
    assert lk.gradcheck(lambda a, b: (a * b).tanh(), [a, b])
    bad = lk.op("bad_mul", shape=lambda a, b: (np.broadcast_shapes(a.shape, b.shape), a.dtype),
                vjp=lambda g, out, a, b: (g * b, g), register=False)(lambda xp, a, b: a * b)
    with pytest.raises(lk.autodiff.GradcheckError, match="input 1"):
        lk.gradcheck(bad, [a, b])


def test_numerical_vjp_of_a_linear_map(device):
    m = np.arange(6.0).reshape(2, 3)
    mt = lk.tensor(m, device=device)
    x = lk.tensor(np.ones(3), device=device)
    cot = lk.tensor([1.0, -1.0], device=device)
    (g,) = numerical_vjp(lambda x: mt @ x, [x], cot)
    np.testing.assert_allclose(g, m.T @ np.array([1.0, -1.0]), atol=1e-8)
