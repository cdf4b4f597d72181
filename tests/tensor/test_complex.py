"""Complex tensors as PyTorch has them, beyond the op harness (tests/tensor/cases/complex.py):
creation and promotion, views of the parts, PyTorch's gradient convention (compared with
torch.autograd), refusals where PyTorch refuses, printing, conversions and checkpoints.
"""
import numpy as np
import pytest
import torch

import labkit as lk


def test_python_complex_numbers_follow_the_default_dtype():
    assert lk.tensor([1 + 2j]).dtype is lk.complex64
    assert lk.tensor(1j).dtype is lk.complex64 and str(torch.tensor(1j).dtype) == "torch.complex64"
    assert (lk.ones(2) * 1j).dtype is lk.complex64
    assert (lk.ones(2, dtype=lk.int64) + 1j).dtype is lk.complex64
    lk.set_default_dtype(lk.float64)
    try:
        assert lk.tensor([1 + 2j]).dtype is lk.complex128
        assert (lk.ones(2, dtype=lk.int64) + 1j).dtype is lk.complex128
    finally:
        lk.set_default_dtype(lk.float32)


@pytest.mark.parametrize("a, b", [("float32", "complex128"), ("float64", "complex64"),
                                  ("int64", "complex64"), ("complex64", "complex128"),
                                  ("float16", "complex64"), ("bool", "complex128")])
def test_promotion_of_complex_matches_pytorch(a, b):
    assert lk.promote_types(a if a != "bool" else "bool_", b).name == \
        str(torch.promote_types(getattr(torch, a), getattr(torch, b))).split(".")[1]
    # a 0-d complex operand keeps a float tensor's precision (PyTorch's categories)
    x = lk.ones(2, dtype=lk.float32) * lk.tensor(1j, dtype=lk.complex128)
    assert x.dtype is lk.complex64


def test_dtype_attributes():
    assert lk.complex64.is_complex and not lk.complex64.is_floating_point
    assert lk.complex64.to_real() is lk.float32 and lk.float64.to_complex() is lk.complex128
    assert lk.cfloat is lk.complex64 and lk.cdouble is lk.complex128
    z = lk.tensor([1 + 1j])
    assert z.is_complex() and lk.is_complex(z) and not z.is_floating_point()
    assert not lk.tensor([1.0]).is_complex()


def test_real_and_imag_are_views_that_write_through():
    z = lk.tensor([1 + 2j, 3 - 4j])
    z.real.mul_(10)
    z.imag = lk.tensor([7.0, 8.0])
    np.testing.assert_array_equal(z.numpy(), np.array([10 + 7j, 30 + 8j], np.complex64))
    pairs = lk.view_as_real(z)
    pairs[0, 1] = -1.0
    assert z[0].item() == 10 - 1j
    x = lk.tensor([1.0, 2.0])
    assert x.real is x
    with pytest.raises(lk.DTypeError, match="imag"):
        x.imag


def test_view_as_complex_views_adjacent_pairs_and_copies_others():
    x = lk.tensor([[1.0, 2.0], [3.0, 4.0]])
    z = lk.view_as_complex(x)
    assert z.tolist() == [1 + 2j, 3 + 4j]
    x[0, 0] = 9.0
    assert z[0].item() == 9 + 2j                 # a view
    strided = lk.view_as_complex(lk.tensor([[1.0, 3.0], [2.0, 4.0]]).T)
    assert strided.tolist() == [1 + 2j, 3 + 4j]  # pairs not adjacent: a copy
    with pytest.raises(lk.ShapeError, match="last dimension of size 2"):
        lk.view_as_complex(lk.ones(3))


def _torch_grads(fn, *arrays):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    fn(*ts).backward()
    return [None if t.grad is None else t.grad.numpy() for t in ts]


def _lk_grads(fn, *arrays):
    xs = [lk.tensor(a, requires_grad=True) for a in arrays]
    fn(*xs).backward()
    return [x.grad for x in xs]


@pytest.mark.parametrize("name, fn", [
    ("abs_squared", lambda z, r: (z.abs() ** 2).sum()),
    ("product_with_real", lambda z, r: (z * r).abs().sum()),
    ("real_part_of_exp", lambda z, r: lk.real(lk.exp(z * r)).sum() if isinstance(z, lk.Tensor)
     else torch.real(torch.exp(z * r)).sum()),
    ("angle", lambda z, r: (z.angle() * r).sum()),
    ("matmul", lambda z, r: (z.reshape(2, 1) @ z.reshape(1, 2)).abs().sum()),
])
def test_gradients_follow_pytorchs_convention(name, fn):
    rng = np.random.default_rng(0)
    z = rng.standard_normal(2) + 1j * rng.standard_normal(2)
    r = rng.standard_normal(2)
    got = _lk_grads(fn, z, r)
    expected = _torch_grads(fn, z, r)
    for g, e in zip(got, expected):
        if e is None:                              # an input the function does not use
            assert g is None
            continue
        assert g.dtype.np == e.dtype               # a real input gets a real gradient
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-12)


def test_gradient_of_abs_squared_is_twice_z():
    z = lk.tensor([3 + 4j, -1 + 0.5j], dtype=lk.complex128, requires_grad=True)
    (z * z.conj()).real.sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), 2 * z.detach().numpy())


def test_backward_of_a_complex_value_needs_a_gradient():
    z = lk.tensor([1 + 1j], requires_grad=True)
    with pytest.raises(lk.GradError, match="complex"):
        (z * z).sum().backward()
    (z * z).sum().backward(gradient=lk.tensor(1 + 0j))
    np.testing.assert_allclose(z.grad.numpy(), [2 - 2j])      # g * conj(2z)


def test_gradcheck_checks_complex_inputs_and_catches_a_missing_conjugate():
    from labkit.tensor.op import REGISTRY
    from labkit.tensor.shape_rules import elementwise
    z = lk.tensor([1 + 2j, -0.5 + 1j])
    assert lk.gradcheck(lambda z: lk.log(z) * z.conj(), [z])
    wrong = lk.op("mul_without_conj", shape=elementwise(np.multiply, "mul_without_conj"),
                  vjp=lambda g, out, a, b: (g * b, g * a))(lambda xp, a, b: a * b)
    try:
        assert not lk.gradcheck(lambda a: wrong(a, a), [z], raise_exception=False)
    finally:
        del REGISTRY["mul_without_conj"]


@pytest.mark.parametrize("call, match", [
    (lambda z: z < z, "no order"), (lambda z: lk.maximum(z, z), "no order"),
    (lambda z: lk.sign(z), "sgn"), (lambda z: lk.relu(z), "relu"),
    (lambda z: lk.complex(lk.ones(1), lk.ones(1, dtype=lk.float64)), "float32 or two float64"),
    (lambda z: z.max(), "no order"), (lambda z: z.argmax(), "no order"),
    (lambda z: lk.sort(z), "no order"), (lambda z: lk.softmax(z, 0), "no order"),
    (lambda z: lk.clamp(z, min=0), "no order"), (lambda z: lk.cummax(z, 0), "no order"),
])
def test_refused_where_pytorch_refuses(call, match):
    with pytest.raises(lk.DTypeError, match=match):
        call(lk.tensor([1 + 1j]))


def test_logsumexp_and_vdot_of_complex_match_pytorch():
    z = np.array([1 + 2j, -0.5 + 1j, 3 - 1j])
    np.testing.assert_allclose(lk.logsumexp(lk.tensor(z), 0).numpy(),
                               torch.logsumexp(torch.tensor(z), 0).numpy())
    np.testing.assert_allclose(lk.vdot(lk.tensor(z), lk.tensor(z[::-1].copy())).numpy(),
                               torch.vdot(torch.tensor(z), torch.tensor(z[::-1].copy())).numpy())


def test_conversion_to_real_warns_and_keeps_the_real_part():
    z = lk.tensor([1.5 + 2j])
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        assert z.float().tolist() == [1.5]
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        assert z.to(lk.float64).dtype is lk.float64
    assert lk.tensor([2.0]).to(lk.complex64).tolist() == [2 + 0j]


def test_printing():
    assert repr(lk.tensor([1 + 2j])) == "tensor([1.+2.j])"
    assert "dtype=lk.complex128" in repr(lk.tensor([1 + 2j], dtype=lk.complex128))


def test_polar_and_complex_match_pytorch():
    a, t = np.array([1.0, 2.0]), np.array([0.3, -2.0])
    np.testing.assert_allclose(lk.polar(lk.tensor(a), lk.tensor(t)).numpy(),
                               torch.polar(torch.tensor(a), torch.tensor(t)).numpy())
    inf = lk.complex(lk.tensor([np.inf]), lk.tensor([1.0]))
    assert inf.real.item() == np.inf and inf.imag.item() == 1.0   # no 0 * inf = NaN


def test_complex_checkpoints_round_trip(tmp_path):
    state = {"a": lk.tensor([1 + 2j]), "b": lk.tensor([3 - 1j], dtype=lk.complex128,
                                                      requires_grad=True)}
    lk.save(state, tmp_path / "c.safetensors")
    back = lk.load(tmp_path / "c.safetensors")
    for k in state:
        assert back[k].dtype is state[k].dtype
        np.testing.assert_array_equal(back[k].numpy(), state[k].detach().numpy())
    assert back["b"].requires_grad


def test_captured_complex_function_equals_eager():
    def f(re, im):
        z = lk.complex(re, im)
        return lk.view_as_real(lk.exp(z) * z.conj()), (z.abs() ** 2).sum()

    re, im = lk.randn(3, dtype=lk.float64), lk.randn(3, dtype=lk.float64)
    eager = f(re, im)
    captured = lk.function(f)(re, im)
    for e, c in zip(eager, captured):
        np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=1e-12)
