"""Edges of the shape and indexing ops that the op cases (cases/shape.py, cases/index.py)
do not reach, each against PyTorch: the layout of mixed basic and advanced indices, gradients
through ties and zeros of scatter_reduce, repeated indices, dtype conversions of fill values, the
gradient's fast path through indexing, capture of data-dependent shapes, and the errors."""
import numpy as np
import pytest
import torch

import labkit as lk
import labkit.nn.functional as F
from labkit.tensor.ops import index as ops_index


def _pair(array, requires_grad=False):
    return (lk.tensor(array, requires_grad=requires_grad),
            torch.tensor(array, requires_grad=requires_grad))


# ---- PyTorch's layout of mixed indices -------------------------------------------------------
X = np.arange(24.0).reshape(2, 3, 4)


@pytest.mark.parametrize("index", [
    (0, slice(None), [0, 1]),                  # NumPy: (2, 3); PyTorch: (3, 2)
    (None, 0, slice(None), [0, 1]),
    (1, Ellipsis, [3, 0]),
    ([1, 0], slice(None), 2),
    (0, slice(None), [[0, 1], [1, 2]]),
    (slice(None), 0, [0, 1]),
    ((0, 1), slice(None), 0),
    (0, slice(None), True),
    (True, 1, slice(None), [2]),
])
def test_mixed_indices_have_pytorch_layout_values_and_gradients(index):
    x, t = _pair(X, requires_grad=True)
    got, want = x[index], t[index]
    assert got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    cot = np.random.default_rng(0).standard_normal(got.shape)
    (got * lk.tensor(cot)).sum().backward()          # the engine's in-place fast path
    want.backward(torch.tensor(cot))
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())
    g, = lk.autodiff.gradients(x[index], [x], grad_outputs=lk.tensor(cot), create_graph=True)
    np.testing.assert_array_equal(g.numpy(), t.grad.numpy())   # the recorded vjp


def test_a_0d_integer_tensor_index_selects_like_an_int():
    x, t = _pair(X)
    for i in (lk.tensor(1), 1):
        assert x[i, :, [0, 1]].shape == tuple(t[torch.tensor(1), :, [0, 1]].shape) == (3, 2)


def test_bool_indices_add_a_dimension():
    x, t = _pair(X)
    for index in (True, False, (Ellipsis, True), (0, False)):
        assert x[index].shape == tuple(t[index].shape)


@pytest.mark.parametrize("values", [np.arange(6.0).reshape(3, 2), np.array([7.0, 8.0]),
                                    np.array([[7.0], [8.0], [9.0]])])
def test_setting_at_a_mixed_index_uses_the_same_layout(values):
    x, t = _pair(X)
    spec, idx = ops_index.split_index(x, (0, slice(None), lk.tensor([2, 0])))
    for op, accumulate in ((ops_index.index_put, False), (ops_index.index_add, True)):
        got = op(x, lk.tensor(values), *idx, spec=spec)
        want = t.index_put((torch.tensor(0), torch.arange(3)[:, None], torch.tensor([2, 0])),
                           torch.tensor(values), accumulate=accumulate)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_mixed_indices_after_a_data_dependent_shape_under_capture():
    x = lk.tensor(X)

    @lk.function
    def f(x):
        rows = lk.nonzero(x[:, :, 0] > 4, as_tuple=True)
        return x[0, :, rows[1]]

    np.testing.assert_array_equal(f(x).numpy(), X[0][:, [2, 0, 1, 2]])


# ---- scatter_reduce at ties and zeros --------------------------------------------------------
@pytest.mark.parametrize("reduce", ["amax", "amin", "prod", "mean"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_gradients_at_ties_and_zeros_match_pytorch(reduce, include_self):
    x0 = np.array([[1.0, 0.0, 2.0], [2.0, 2.0, -1.0]])
    src0 = np.array([[2.0, 0.0, 2.0], [1.0, 0.0, -1.0], [2.0, 3.0, 0.0]])
    index = np.array([[0, 1, 0], [1, 0, 0], [0, 1, 1]])
    (x, tx), (src, tsrc) = _pair(x0, True), _pair(src0, True)
    cot = np.random.default_rng(1).standard_normal(x0.shape)
    out = x.scatter_reduce(0, lk.tensor(index), src, reduce, include_self=include_self)
    want = tx.scatter_reduce(0, torch.tensor(index), tsrc, reduce, include_self=include_self)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy())
    gx, gs = lk.autodiff.gradients(out, [x, src], grad_outputs=lk.tensor(cot))
    tgx, tgs = torch.autograd.grad(want, [tx, tsrc], torch.tensor(cot))
    np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gs.numpy(), tgs.numpy(), rtol=1e-12)


def test_integer_scatter_reduce_mean_floors():
    x = lk.tensor([-7, 7]).scatter_reduce(0, lk.tensor([0, 1]), lk.tensor([0, 0]), "mean")
    assert x.tolist() == torch.tensor([-7, 7]).scatter_reduce(
        0, torch.tensor([0, 1]), torch.tensor([0, 0]), "mean").tolist() == [-4, 3]


# ---- repeated indices ----------------------------------------------------------------------
def test_repeated_indices_accumulate():
    index = [0, 2, 0, 0]
    x, t = _pair(np.zeros(3))
    src = np.array([1.0, 2.0, 3.0, 4.0])
    assert x.index_add(0, lk.tensor(index), lk.tensor(src)).tolist() == \
        t.index_add(0, torch.tensor(index), torch.tensor(src)).tolist() == [8.0, 0.0, 2.0]
    assert x.index_put((lk.tensor(index),), lk.tensor(src), accumulate=True).tolist() == \
        t.index_put((torch.tensor(index),), torch.tensor(src), accumulate=True).tolist()
    assert x.scatter(0, lk.tensor(index), lk.tensor(src), reduce="add").tolist() == \
        t.scatter_add(0, torch.tensor(index), torch.tensor(src)).tolist()
    assert x.put(lk.tensor(index), lk.tensor(src), accumulate=True).tolist() == \
        t.put(torch.tensor(index), torch.tensor(src), accumulate=True).tolist()


def test_index_fill_counts_a_repeated_position_once_in_the_gradient():
    x, t = _pair(np.arange(6.0).reshape(2, 3), True)
    (v, tv) = _pair(np.array(-1.0), True)
    x.index_fill(1, lk.tensor([2, 2]), v).sum().backward()
    t.index_fill(1, torch.tensor([2, 2]), tv).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())
    assert v.grad.item() == tv.grad.item() == 2.0


# ---- values converted to the tensor's dtype --------------------------------------------------
def test_fill_values_take_the_tensors_dtype():
    ints, tints = _pair(np.arange(3))
    mask = [True, False, True]
    got = ints.masked_fill(lk.tensor(mask), 1.7)
    assert got.dtype is lk.int64
    assert got.tolist() == tints.masked_fill(torch.tensor(mask), 1.7).tolist()
    assert ints.masked_fill(lk.tensor(mask), lk.tensor(2.5)).tolist() == \
        tints.masked_fill(torch.tensor(mask), torch.tensor(2.5)).tolist()
    assert F.pad(ints, (1, 1), value=2.5).tolist() == \
        torch.nn.functional.pad(tints, (1, 1), value=2.5).tolist()
    assert ints.index_fill(0, lk.tensor([1]), 2.7).tolist() == \
        tints.index_fill(0, torch.tensor([1]), 2.7).tolist()


def test_where_forms():
    x = lk.tensor([[1.0, -2.0], [0.0, 3.0]])
    assert [t.tolist() for t in lk.where(x > 0)] == [[0, 1], [0, 1]]
    assert lk.where(x > 0, 1.0, 0.0).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert x.where(x > 0, lk.tensor(-9.0)).tolist() == [[1.0, -9.0], [-9.0, 3.0]]


def test_pad_and_one_hot_are_functional_only_as_in_pytorch():
    assert callable(F.pad) and callable(F.one_hot)
    assert not hasattr(lk, "pad") and not hasattr(lk, "one_hot")
    assert not hasattr(torch, "one_hot")


def test_one_hot_with_num_classes_from_the_data_under_capture():
    labels = lk.tensor([0, 3, 1])
    f = lk.function(lambda t: F.one_hot(t) * 2)
    np.testing.assert_array_equal(f(labels).numpy(),
                                  2 * torch.nn.functional.one_hot(torch.tensor([0, 3, 1])).numpy())


# ---- errors ----------------------------------------------------------------------------------
def _errors():
    t = lambda *s, dtype="float32": lk.zeros(*s, dtype=dtype)   # noqa: E731
    i = lambda *v: lk.tensor(list(v))                            # noqa: E731
    return [
        ("pad", lk.ShapeError, lambda: F.pad(t(2, 3), (1, 1, 1)), "(2, 3)"),
        ("pad", lk.ShapeError, lambda: F.pad(t(2, 2, 2, 2), (1, 1), mode="reflect"),
         "(2, 2, 2, 2)"),
        ("pad", lk.ShapeError, lambda: F.pad(t(1, 3), (3, 0), mode="reflect"), "(1, 3)"),
        ("pad", lk.ShapeError, lambda: F.pad(t(1, 3), (4, 0), mode="circular"), "(1, 3)"),
        ("pad", lk.ShapeError, lambda: F.pad(t(3), (1, 1), mode="replicate"), "(3,)"),
        ("pad", lk.ShapeError, lambda: F.pad(t(3), (-2, -2)), "(3,)"),
        ("pad", ValueError, lambda: F.pad(t(1, 3), (1, 1), mode="reflect", value=1.0), "value"),
        ("pad", ValueError, lambda: F.pad(t(1, 3), (1, 1), mode="wrap"), "circular"),
        ("repeat", lk.ShapeError, lambda: t(2, 3).repeat(2), "(2, 3)"),
        ("repeat_interleave", lk.ShapeError,
         lambda: t(2, 3).repeat_interleave(i(1, 2), dim=1), "(2, 3)"),
        ("fliplr", lk.ShapeError, lambda: lk.fliplr(t(3)), "(3,)"),
        ("flip", lk.ShapeError, lambda: t(2, 3).flip(2), "(2, 3)"),
        ("roll", lk.ShapeError, lambda: lk.roll(t(2, 3), (1, 2), 1), "dims"),
        ("tril", lk.ShapeError, lambda: lk.tril(t(3)), "(3,)"),
        ("diag", lk.ShapeError, lambda: lk.diag(t(2, 2, 2)), "(2, 2, 2)"),
        ("diagonal", lk.ShapeError, lambda: lk.diagonal(t(2, 3), 0, 1, 1), "(2, 3)"),
        ("diagonal_scatter", lk.ShapeError, lambda: lk.diagonal_scatter(t(2, 3), t(3)), "(3,)"),
        ("narrow", lk.ShapeError, lambda: t(2, 3).narrow(1, 2, 2), "(2, 3)"),
        ("unflatten", lk.ShapeError, lambda: t(2, 3).unflatten(1, (2, 2)), "(2, 3)"),
        ("movedim", lk.ShapeError, lambda: lk.movedim(t(2, 3), (0, 0), (0, 1)), "(2, 3)"),
        ("meshgrid", lk.ShapeError, lambda: lk.meshgrid(t(2, 2), t(2)), "(2, 2)"),
        ("meshgrid", lk.DTypeError, lambda: lk.meshgrid(t(2), t(2, dtype="int64")), "(2,)"),
        ("block_diag", lk.ShapeError, lambda: lk.block_diag(t(1, 1, 1)), "(1, 1, 1)"),
        ("index_select", lk.ShapeError, lambda: t(2, 3).index_select(1, i(0, 1)[None]), "(1, 2)"),
        ("index_select", lk.IndexingError, lambda: t(2, 3).index_select(1, t(2)), "(2,)"),
        ("index_add", lk.ShapeError, lambda: t(2, 3).index_add(0, i(1), t(3)), "(3,)"),
        ("index_add", lk.DTypeError,
         lambda: t(2, 3).index_add(0, i(1), t(1, 3, dtype="int64")), "(1, 3)"),
        ("index_copy", lk.ShapeError, lambda: t(2, 3).index_copy(1, i(0), t(2, 2)), "(2, 2)"),
        ("masked_fill", lk.DTypeError, lambda: t(3).masked_fill(i(1, 0, 1), 1.0), "(3,)"),
        ("masked_fill", lk.ShapeError, lambda: t(3).masked_fill(t(3) > 0, t(1)), "(1,)"),
        ("masked_select", lk.ShapeError, lambda: t(3).masked_select(t(2) > 0), "(2,)"),
        ("scatter", lk.DTypeError,
         lambda: t(3).scatter(0, i(0), t(1, dtype="int64")), "(1,)"),
        ("scatter", lk.ShapeError, lambda: t(2, 3).scatter(1, i(0, 1)[None], t(1, 1)), "(1, 1)"),
        ("scatter", ValueError, lambda: t(3).scatter(0, i(0), t(1), reduce="max"), "scatter_reduce"),
        ("scatter_reduce", ValueError, lambda: t(3).scatter_reduce(0, i(0), t(1), "max"), "amax"),
        ("index_put", lk.ShapeError,
         lambda: lk.index_put(t(2, 3), (i(0, 1),), t(2, 2)), "(2, 2)"),
        ("index_put", TypeError, lambda: lk.index_put(t(2, 3), (None, i(0)), t(1)), "slices"),
        ("put", lk.ShapeError, lambda: t(2, 3).put(i(0, 1), t(1)), "(1,)"),
        ("take_along_dim", lk.ShapeError,
         lambda: lk.take_along_dim(t(2, 3), i(0, 1), 1), "(2, 3)"),
        ("take_along_dim", lk.ShapeError,
         lambda: lk.take_along_dim(t(2, 3), i(0, 1)[None].repeat(3, 1), 1), "(3, 2)"),
        ("one_hot", lk.DTypeError, lambda: F.one_hot(t(3)), "(3,)"),
        ("one_hot", lk.ShapeError, lambda: F.one_hot(i(0, 5), 4), "0..3"),
        ("one_hot", lk.ShapeError, lambda: F.one_hot(i(-1), 4), "0..3"),
        ("getitem", lk.ShapeError, lambda: t(2, 3)[0, :, [0]], "(2, 3)"),
        ("getitem", lk.ShapeError, lambda: t(2, 3)[i(0, 1), i(0, 1, 2)], "(3,)"),
    ]


@pytest.mark.parametrize("name, kind, call, text", _errors(),
                         ids=[f"{e[0]}-{n}" for n, e in enumerate(_errors())])
def test_errors_name_the_op_and_what_to_fix(name, kind, call, text):
    with pytest.raises(kind) as info:
        call()
    msg = str(info.value)
    assert name in msg, f"error does not name {name}: {msg}"
    assert text in msg, f"{name}: error does not show {text!r}: {msg}"
    if issubclass(kind, lk.LabkitError):
        assert isinstance(info.value, lk.LabkitError)


@pytest.mark.parametrize("source,target", [
    ((), (32, 1)), ((1,), (3, 4)), ((4,), (2, 3, 4)), ((3, 1), (3, 5)), ((1, 1), (2, 1)),
    ((2, 3), (2, 3)), ((1, 3), (0, 3)), ((0, 3), (2, 0, 3)), ((4, 6), (2, 4, 6))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_, np.complex64])
def test_broadcast_to_makes_numpys_view(source, target, dtype):
    from labkit.tensor.ops.shape import broadcast_to
    x = np.random.default_rng(0).standard_normal(source).astype(dtype)
    strided = x
    if x.ndim:                          # the same values, not C-contiguous
        strided = np.zeros(source[:-1] + (2 * source[-1],), dtype)[..., ::2]
        strided[...] = x
    for arr in (x, strided):
        got = broadcast_to.kernel(np, arr, shape=target)
        want = np.broadcast_to(arr, target)
        assert got.shape == want.shape and got.strides == want.strides
        assert not got.flags.writeable and (np.shares_memory(got, arr) or not got.size)
        np.testing.assert_array_equal(got, want)
    with pytest.raises(lk.ShapeError, match=r"broadcast_to: cannot broadcast .*\(3,\)"):
        lk.ones(3).broadcast_to((4,))
