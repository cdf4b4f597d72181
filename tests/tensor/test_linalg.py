"""Linear algebra beyond the op harness (tests/tensor/cases/linalg.py): errors, PyTorch's
gradients where the harness cannot use finite differences (repeated eigen- and singular values,
norms at zero), the triangle that eigh and cholesky read, and the namespace."""
import math

import numpy as np
import pytest
import torch

import labkit as lk
from labkit.autodiff import gradients

from .case_kit import assert_clear_error


def _t(*shape, dtype="float32", device="cpu:0"):
    return lk.zeros(*shape, dtype=dtype, device=device)


def _err_cases(device):
    t = lambda *s, dtype="float32": _t(*s, dtype=dtype, device=device)   # noqa: E731
    return [
        ("mm", lk.ShapeError, lambda: lk.mm(t(2, 3, 4), t(4, 2)), "(2, 3, 4)", "lk.bmm"),
        ("bmm", lk.ShapeError, lambda: lk.bmm(t(2, 3), t(3, 2)), "(2, 3)", "lk.mm"),
        ("bmm", lk.ShapeError, lambda: lk.bmm(t(2, 3, 4), t(3, 4, 2)), "(2, 3, 4)",
         "lk.matmul"),
        ("mv", lk.ShapeError, lambda: lk.mv(t(2, 2), t(2, 1)), "(2, 1)", "lk.mm"),
        ("dot", lk.ShapeError, lambda: lk.dot(t(2, 2), t(2)), "(2, 2)", "lk.inner"),
        ("dot", lk.ShapeError, lambda: lk.dot(t(3), t(2)), "(3,)", "lengths"),
        ("outer", lk.ShapeError, lambda: lk.outer(t(2, 2), t(2)), "(2, 2)", "flatten"),
        ("inner", lk.ShapeError, lambda: lk.inner(t(2, 3), t(2)), "(2, 3)", "last"),
        ("addmm", lk.ShapeError, lambda: lk.addmm(t(3), t(2, 3), t(3, 2)), "(3,)",
         "broadcast"),
        ("matmul", lk.ShapeError, lambda: lk.mm(t(2, 3), t(2, 3)), "(2, 3)", "transpose"),
        ("tensordot", lk.ShapeError, lambda: lk.tensordot(t(2, 3), t(2, 3), dims=([1], [0])),
         "(2, 3)", "match"),
        ("trace", lk.ShapeError, lambda: lk.trace(t(2, 2, 2)), "(2, 2, 2)", "einsum"),
        ("cross", lk.ShapeError, lambda: lk.cross(t(2, 3), t(2, 3), dim=0), "(2, 3)", "size 3"),
        ("cdist", lk.ShapeError, lambda: lk.cdist(t(2, 3), t(2, 4)), "(2, 4)", "one length"),
        ("einsum", lk.ShapeError, lambda: lk.einsum("ij,jk->ik", t(2, 3), t(4, 2)), "(4, 2)",
         "equal"),
        ("einsum", lk.ShapeError, lambda: lk.einsum("ij->ij", t(2, 3, 4)), "(2, 3, 4)",
         "dimension"),
        ("einsum", lk.ShapeError, lambda: lk.einsum("ii->i", t(2, 3)), "(2, 3)", "diagonal"),
        ("linalg.inv", lk.ShapeError, lambda: lk.linalg.inv(t(2, 3)), "(2, 3)", "square"),
        ("linalg.inv", lk.DTypeError, lambda: lk.linalg.inv(t(2, 2, dtype="int64")), "(2, 2)",
         "x.double()"),
        ("linalg.det", lk.ShapeError, lambda: lk.linalg.det(t(3)), "(3,)", "matrix"),
        ("linalg.solve", lk.ShapeError, lambda: lk.linalg.solve(t(2, 2), t(3, 1)), "(3, 1)",
         "rows"),
        ("linalg.cholesky", lk.DTypeError,
         lambda: lk.linalg.cholesky(t(2, 2, dtype="float16")), "(2, 2)", "x.float()"),
        ("linalg.vector_norm", lk.DTypeError,
         lambda: lk.linalg.vector_norm(t(3, dtype="int64")), "(3,)", "x.float()"),
        ("linalg.vector_norm", lk.ShapeError,
         lambda: lk.linalg.vector_norm(t(0, 3), ord=math.inf, dim=0), "(0, 3)", "finite ord"),
        ("linalg.matrix_norm", lk.ShapeError,
         lambda: lk.linalg.matrix_norm(t(2, 3), dim=(0, 0)), "(2, 3)", "twice"),
        ("linalg.norm", lk.ShapeError, lambda: lk.linalg.norm(t(2, 2, 2), ord=1), "(2, 2, 2)",
         "dim="),
        ("linalg.eigh", lk.ShapeError, lambda: lk.linalg.eigh(t(2, 3)), "(2, 3)", "square"),
    ]


def test_errors_name_op_shapes_dtypes_and_a_remedy(device):
    for name, kind, call, shape_text, remedy in _err_cases(device):
        msg = assert_clear_error(kind, call, name, shape_text, device)
        assert remedy in msg, f"{name}: error does not say {remedy!r}: {msg}"


def test_einsum_equation_errors():
    a = lk.ones(2, 3)
    for equation, text in (("ij,jk->ik", "2 operand"), ("ij->k", "appears in no operand"),
                           ("ij->ii", "more than once"), ("i$j", "letters"),
                           ("i..j", "'.'")):
        with pytest.raises(lk.ShapeError, match=text):
            lk.einsum(equation, a)
    with pytest.raises(TypeError, match="operand 1"):
        lk.einsum("ij,jk", a, [[1.0]])


def test_singular_and_indefinite_matrices_raise_linalg_errors():
    with pytest.raises(lk.linalg.LinAlgError, match="singular.*pinv"):
        lk.linalg.inv(lk.zeros(2, 2))
    with pytest.raises(lk.linalg.LinAlgError, match="singular"):
        lk.linalg.solve(lk.zeros(2, 2), lk.ones(2))
    with pytest.raises(lk.linalg.LinAlgError, match="positive-definite"):
        lk.linalg.cholesky(-lk.eye(2))
    assert issubclass(lk.linalg.LinAlgError, (lk.LabkitError, RuntimeError))
    # a singular matrix still has a determinant
    assert lk.linalg.det(lk.ones(2, 2)).item() == 0.0
    sign, logabsdet = lk.linalg.slogdet(lk.ones(2, 2))
    assert sign.item() == 0.0 and logabsdet.item() == -math.inf


def test_qr_gradients_that_pytorch_refuses():
    x = lk.tensor(np.random.default_rng(0).standard_normal((3, 2)), requires_grad=True)
    with pytest.raises(lk.GradError, match="mode='reduced'"):
        lk.linalg.qr(x, mode="r").R.sum().backward()
    with pytest.raises(lk.GradError, match="mode='complete'"):
        lk.linalg.qr(x, mode="complete").Q.sum().backward()


def _grad_vs_torch(fn, tfn, a):
    x = lk.tensor(a, requires_grad=True)
    (g,) = gradients(fn(x), [x])
    t = torch.tensor(a, requires_grad=True)
    (tg,) = torch.autograd.grad(tfn(t), [t])
    assert np.all(np.isfinite(g.numpy()))
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["svdvals", "eigvalsh", "nuclear_norm"])
def test_gradients_at_repeated_values_match_pytorch(name):
    w = np.arange(1.0, 4.0)
    fns = {"svdvals": (lambda x: (lk.linalg.svdvals(x) * lk.tensor(w)).sum(),
                       lambda x: (torch.linalg.svdvals(x) * torch.tensor(w)).sum()),
           "eigvalsh": (lambda x: lk.linalg.eigvalsh(x).sum(),
                        lambda x: torch.linalg.eigvalsh(x).sum()),
           "nuclear_norm": (lambda x: lk.linalg.matrix_norm(x, "nuc"),
                            lambda x: torch.linalg.matrix_norm(x, "nuc"))}
    fn, tfn = fns[name]
    _grad_vs_torch(fn, tfn, np.eye(3) * 2.0)


def test_svd_s_alone_has_a_finite_gradient_at_repeated_values():
    _grad_vs_torch(lambda x: lk.linalg.svd(x).S.sum(), lambda x: torch.linalg.svd(x).S.sum(),
                   np.diag([2.0, 2.0, 1.0]))
    _grad_vs_torch(lambda x: lk.linalg.eigh(x).eigenvalues.sum(),
                   lambda x: torch.linalg.eigh(x).eigenvalues.sum(), np.eye(2))


@pytest.mark.parametrize("ord", [2.0, 1.0, 3.0, 0.5, math.inf, -1.0])
def test_vector_norm_gradient_at_zero_is_pytorchs(ord):
    a = np.array([[0.0, 0.0, 0.0], [3.0, -4.0, 0.0]])
    _grad_vs_torch(lambda x: lk.linalg.vector_norm(x, ord=ord, dim=1).sum(),
                   lambda x: torch.linalg.vector_norm(x, ord=ord, dim=1).sum(), a)


def test_cdist_gradient_at_zero_distance_is_zero():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    x = lk.tensor(a, requires_grad=True)
    (g,) = gradients(lk.cdist(x, x).sum(), [x])
    t = torch.tensor(a, requires_grad=True)
    (tg,) = torch.autograd.grad(torch.cdist(t, t).sum(), [t])
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-12)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_reads_one_triangle_as_pytorch(uplo):
    a = np.random.default_rng(1).standard_normal((2, 3, 3))      # not symmetric
    w, v = lk.linalg.eigh(lk.tensor(a), UPLO=uplo)
    tw, tv = torch.linalg.eigh(torch.tensor(a), UPLO=uplo)
    np.testing.assert_allclose(w.numpy(), tw.numpy(), rtol=1e-10)
    np.testing.assert_allclose(np.abs(v.numpy()), np.abs(tv.numpy()), rtol=1e-8)


def test_cholesky_upper_reads_the_upper_triangle():
    a = np.array([[4.0, 2.0], [-100.0, 3.0]])
    np.testing.assert_allclose(lk.linalg.cholesky(lk.tensor(a), upper=True).numpy(),
                               torch.linalg.cholesky(torch.tensor(a), upper=True).numpy())
    np.testing.assert_allclose(lk.linalg.cholesky(lk.tensor(a.T)).numpy(),
                               torch.linalg.cholesky(torch.tensor(a.T)).numpy())


def test_torch_svd_returns_v_and_compute_uv_false():
    a = np.random.default_rng(2).standard_normal((4, 3))
    u, s, v = lk.svd(lk.tensor(a))
    assert u.shape == (4, 3) and v.shape == (3, 3)
    np.testing.assert_allclose((u.numpy() * s.numpy()) @ v.numpy().T, a, atol=1e-12)
    u, s, v = lk.svd(lk.tensor(a), some=False, compute_uv=False)
    tu, ts, tv = torch.svd(torch.tensor(a), some=False, compute_uv=False)
    assert u.shape == tuple(tu.shape) and v.shape == tuple(tv.shape)
    assert not u.numpy().any() and not v.numpy().any()
    np.testing.assert_allclose(s.numpy(), ts.numpy())


def test_results_are_named_as_pytorchs():
    a = lk.tensor([[2.0, 1.0], [1.0, 2.0]])
    assert type(lk.linalg.svd(a)).__name__ == "linalg_svd" and lk.linalg.svd(a).Vh.shape
    assert type(lk.svd(a)).__name__ == "svd" and lk.svd(a).V.shape
    assert lk.linalg.eigh(a).eigenvalues.tolist() == pytest.approx([1.0, 3.0])
    assert type(lk.linalg.slogdet(a)).__name__ == "linalg_slogdet"
    assert lk.slogdet(a).logabsdet.item() == pytest.approx(math.log(3.0))
    assert lk.linalg.qr(a).Q.shape == (2, 2) and lk.qr(a).R.shape == (2, 2)


def test_namespace_and_methods():
    for name in ("norm", "vector_norm", "matrix_norm", "inv", "solve", "det", "slogdet",
                 "cholesky", "qr", "svd", "svdvals", "eigh", "eigvalsh", "pinv", "matrix_rank",
                 "multi_dot", "matrix_power", "cross", "matmul", "vecdot", "LinAlgError"):
        assert hasattr(lk.linalg, name), name
    x = lk.tensor([[3.0, 0.0], [4.0, 1.0]])
    assert x.norm().item() == pytest.approx(math.sqrt(26.0))
    assert x.norm(p=1, dim=0).tolist() == [7.0, 1.0]
    assert x.det().item() == pytest.approx(3.0) and x.inverse().shape == (2, 2)
    assert x.trace().item() == 4.0 and x.mm(x).shape == (2, 2)
    assert x.matrix_power(2).tolist() == [[9.0, 0.0], [16.0, 1.0]]
    assert x.logdet().item() == pytest.approx(math.log(3.0))
    assert x.pinverse().shape == (2, 2)
    assert lk.logdet(-lk.eye(3)).isnan().item() if hasattr(lk.Tensor, "isnan") else \
        math.isnan(lk.logdet(-lk.eye(3)).item())


def test_addmm_with_beta_0_ignores_nan_in_the_input_but_keeps_its_gradient():
    nan = lk.full((2, 2), math.nan, requires_grad=True)
    out = lk.addmm(nan, lk.ones(2, 3), lk.ones(3, 2), beta=0)
    assert out.tolist() == [[3.0, 3.0], [3.0, 3.0]]
    out.sum().backward()
    assert nan.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_einsum_runs_two_operand_contractions_as_one_matmul():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((4, 5, 6)), rng.standard_normal((4, 6, 3))
    got = lk.einsum("bij,bjk->bik", lk.tensor(a), lk.tensor(b)).numpy()
    np.testing.assert_allclose(got, a @ b, rtol=1e-12)
    got = lk.einsum("bij,bkj,b->ik", lk.tensor(a), lk.tensor(b.swapaxes(1, 2)),
                    lk.tensor(np.ones(4))).numpy()
    np.testing.assert_allclose(got, np.einsum("bij,bjk->ik", a, b), rtol=1e-12)


def test_third_order_gradient_of_einsum():
    x = lk.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=lk.float64)

    def f(x):
        return lk.einsum("ij,jk,ki->", x, x, x)          # trace(x^3)
    g3 = lk.grad(lambda x: lk.grad(lambda y: lk.grad(lambda z: f(z))(y).sum())(x).sum())(x)
    t = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64, requires_grad=True)
    (g1,) = torch.autograd.grad(torch.einsum("ij,jk,ki->", t, t, t), [t], create_graph=True)
    (g2,) = torch.autograd.grad(g1.sum(), [t], create_graph=True)
    (tg3,) = torch.autograd.grad(g2.sum(), [t])
    np.testing.assert_allclose(g3.numpy(), tg3.numpy(), rtol=1e-12)
