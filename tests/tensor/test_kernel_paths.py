"""Kernels that take a faster route for some sizes and layouts agree with NumPy there.

Convolutions build their im2col matrix a few images (or rows of one) at a time, image by image
or with the images side by side; the tests below make both routes run over several chunks.

The op-case table (op_cases.py) draws sides of at most 3, below where these routes start:
sums of a matrix's columns or short rows as BLAS matrix-vector products, max/min over many
short rows through a transposed copy, and softmax's normaliser and max, which use them.
"""
import itertools

import numpy as np
import pytest

import labkit as lk
from labkit.tensor.ops import reduce

SHAPES = [(128, 10), (64, 2), (40, 3, 10), (32, 32), (100, 33), (16, 10), (500, 128)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
@pytest.mark.parametrize("name", ["max", "min", "sum"])
def test_reductions_over_rows_and_columns_match_numpy(shape, dtype, name):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape) * 10
    x = (x > 0) if dtype is np.bool_ else x.astype(dtype)
    for dim in (-1, 0, x.ndim - 1):
        for keepdim in (False, True):
            got = getattr(reduce, name).kernel(np, x, dim=dim, keepdim=keepdim)
            want = getattr(np, name)(x, axis=dim, keepdims=keepdim)
            assert got.shape == want.shape and got.dtype == want.dtype, (dim, keepdim)
            # sums round differently (BLAS adds in another order): a bound of the terms' scale
            tol = 1e-5 if dtype == np.float32 else 1e-12
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(x).max() * 10)


def test_max_of_short_rows_propagates_nan():
    x = np.zeros((64, 10), np.float32)
    x[5, 3] = np.nan
    got = reduce.max.kernel(np, x, dim=1)
    assert np.isnan(got[5]) and not np.isnan(np.delete(got, 5)).any()


@pytest.mark.parametrize("shape", [(128, 10), (40, 3, 10), (64, 2), (16, 10), (64, 100)])
@pytest.mark.parametrize("dim", [-1, 0])
def test_softmax_and_log_softmax_of_a_batch_match_numpy(shape, dim):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape) * 30
    shifted = x - x.max(axis=dim, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))
    np.testing.assert_allclose(lk.log_softmax(lk.tensor(x), dim=dim).numpy(), log_p,
                               rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(lk.softmax(lk.tensor(x), dim=dim).numpy(), np.exp(log_p),
                               rtol=1e-12, atol=1e-300)
    got = lk.log_softmax(lk.tensor(x.astype(np.float32)), dim=dim)
    assert got.dtype is lk.float32 and got.numpy().flags.c_contiguous
    np.testing.assert_allclose(got.numpy(), log_p, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad", [-1, 10, -(2 ** 40)])
def test_a_target_out_of_range_is_named(bad):
    target = np.arange(128) % 10
    target[77] = bad
    with pytest.raises(lk.ShapeError, match=f"target holds class {bad}, but the input has 10"):
        lk.nn.functional.cross_entropy(lk.zeros((128, 10)), lk.tensor(target))


@pytest.mark.parametrize("dims", [(0, 1), (1, 2), (-2, -1), (0,), (2,), (0, 1, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sums_over_leading_or_trailing_dimensions_match_numpy(dims, keepdim):
    # a layer's bias gradient (leading dimensions) and LayerNorm's row statistics (trailing)
    x = np.random.default_rng(2).standard_normal((16, 9, 24)).astype(np.float32)
    got = reduce.sum.kernel(np, x, dim=dims, keepdim=keepdim)
    want = x.sum(axis=dims, keepdims=keepdim)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(reduce.row_sums(np, x, 2), x.sum(axis=(1, 2), keepdims=True),
                               rtol=1e-5)


@pytest.mark.parametrize("dim", [1, (1,), (np.int64(1),), [np.int32(1)], -1, (0, 1)])
def test_sum_takes_a_dim_of_any_integer_kind(dim):
    # the fast paths' quick test for one int must hand NumPy's integers to the general one
    x = np.random.default_rng(6).standard_normal((40, 12))
    want = x.sum(axis=tuple(np.atleast_1d(dim).tolist()))
    np.testing.assert_allclose(lk.sum(lk.tensor(x), dim=dim).numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(reduce.sum.kernel(np, x, dim=dim), want, rtol=1e-12)


@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("float64", "float64"),
                                    ("float32", "float64"), ("int64", "int64")])
@pytest.mark.parametrize("shapes", [((97, 1), (1, 204)), ((3, 5, 1), (1, 4)), ((1, 1), (1, 1))])
def test_an_inner_dimension_of_one_is_numpys_product_bit_for_bit(shapes, dtypes):
    # (m, 1) @ (1, n) runs as a broadcast multiply where OpenBLAS's GEMM is slow: the same
    # products, each rounded once, in any layout and into a given array
    from labkit.tensor.ops import linalg
    rng = np.random.default_rng(5)
    a = (rng.standard_normal(shapes[0]) * 4).astype(dtypes[0])
    b = (rng.standard_normal(shapes[1]) * 4).astype(dtypes[1])
    want = a @ b
    for bt in (b, np.asfortranarray(b.T).T):
        got = linalg.matmul.kernel(np, a, bt)
        assert got.dtype == want.dtype and np.array_equal(got, want)
    out = np.empty(want.shape, want.dtype)
    assert linalg._matmul_into(np, False, True)(a, np.ascontiguousarray(b.T), out=out) is out
    assert np.array_equal(out, want)


@pytest.mark.parametrize("shapes", [((4, 6, 8), (8, 5)), ((2, 3, 4, 8), (8, 5)),
                                    ((6, 8), (8, 5)), ((3, 6, 8), (3, 8, 5))])
@pytest.mark.parametrize("flags", [(False, False), (True, False), (False, True)])
def test_a_stack_of_rows_times_a_matrix_matches_numpy(shapes, flags):
    # (..., m, k) @ (k, n) is one GEMM over all the rows; into= writes a given array
    from labkit.tensor.ops import linalg
    rng = np.random.default_rng(3)
    ta, tb = flags
    sa, sb = shapes
    a = rng.standard_normal(sa[:-2] + (sa[-1], sa[-2]) if ta else sa)
    b = rng.standard_normal(sb[:-2] + (sb[-1], sb[-2]) if tb else sb)
    want = (np.swapaxes(a, -1, -2) if ta else a) @ (np.swapaxes(b, -1, -2) if tb else b)
    got = linalg.matmul.kernel(np, a, b, transpose_a=ta, transpose_b=tb)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    out = np.empty_like(want)
    assert linalg._matmul_into(np, ta, tb)(a, b, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-12)
    # and its gradients, through the vjp's one product over the rows
    la, lb = lk.tensor(a, requires_grad=True), lk.tensor(b, requires_grad=True)
    lk.matmul(la.mT if ta else la, lb.mT if tb else lb).sum().backward()
    g = np.ones_like(want)
    ga = g @ np.swapaxes(b if not tb else np.swapaxes(b, -1, -2), -1, -2)
    np.testing.assert_allclose((la.grad.mT if ta else la.grad).numpy(), ga, rtol=1e-12)
    a_eff = np.swapaxes(a, -1, -2) if ta else a
    gb = np.swapaxes(a_eff, -1, -2) @ g
    if gb.ndim > len(sb):
        gb = gb.sum(axis=tuple(range(gb.ndim - len(sb))))
    np.testing.assert_allclose((lb.grad.mT if tb else lb.grad).numpy(), gb, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adding_many_rows_at_repeated_indices_matches_add_at(dtype):
    # an embedding's gradient: rows of values added at token ids, repeated and negative ones
    rng = np.random.default_rng(4)
    rows = rng.integers(-50, 50, (32, 64))
    values = rng.standard_normal((32, 64, 16)).astype(dtype)
    got = np.zeros((50, 16), dtype)
    from labkit.tensor.ops.index import add_at
    add_at(np, got, (rows,), values)
    want = np.zeros((50, 16), dtype)
    np.add.at(want, (rows,), values)
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-5)
    rows[3, 7] = 50
    before = got.copy()
    with pytest.raises(IndexError):
        add_at(np, got, (rows,), values)
    np.testing.assert_array_equal(got, before)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reductions_over_a_short_axis_match_numpy(dtype, name):
    # a max-pool's windows: positions compared one after another, ties to the first
    rng = np.random.default_rng(5)
    x = rng.integers(-3, 4, (16, 3, 4, 9, 11)).astype(dtype)      # many ties
    for dim, keepdim in ((2, True), (1, False), (-3, False), (0, True)):
        got = getattr(reduce, name).kernel(np, x, dim=dim, keepdim=keepdim)
        want = getattr(np, name)(x, axis=dim, keepdims=keepdim)
        assert got.dtype == np.int64 and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    if dtype in (np.float32, np.float64):
        x[3, 1, 2, 4, 5] = np.nan        # the first NaN's position, as NumPy (and PyTorch)
        np.testing.assert_array_equal(getattr(reduce, name).kernel(np, x, dim=2),
                                      getattr(np, name)(x, axis=2))


def test_scatter_add_of_one_position_per_line_matches_numpy():
    # the gradient of a max-pool's window maximum (gather's vjp)
    from labkit.tensor.ops import index as index_ops
    rng = np.random.default_rng(6)
    x = rng.standard_normal((8, 5, 4, 7, 6))
    where = rng.integers(0, 4, (8, 5, 1, 7, 6))
    src = rng.standard_normal(where.shape)
    want = x.copy()
    np.add.at(want, index_ops._along_axis_index(np, where, 2), src)
    np.testing.assert_array_equal(index_ops._scatter_add.kernel(np, x, where, src, dim=2), want)
    src[0, 0, 0, 0, 0] = np.inf          # inf * 0 would be NaN elsewhere: the general path
    want = x.copy()
    np.add.at(want, index_ops._along_axis_index(np, where, 2), src)
    np.testing.assert_array_equal(index_ops._scatter_add.kernel(np, x, where, src, dim=2), want)
    where[1, 1, 0, 1, 1] = 4
    with pytest.raises(IndexError):
        index_ops._scatter_add.kernel(np, x, where, src, dim=2)


def test_max_pool_gradient_goes_to_the_first_maximum_of_each_window():
    x = np.zeros((4, 8, 16, 16), np.float32)
    x[:, :, :, 1::2] = 1.0               # two equal maxima per 2x2 window, one above the other
    t = lk.tensor(x, requires_grad=True)
    lk.max_pool2d(t, 2).sum().backward()
    want = np.zeros_like(x)
    want[:, :, ::2, 1::2] = 1.0
    np.testing.assert_array_equal(t.grad.numpy(), want)


def _channels_first(a):
    """``a`` (N, C, ...) laid out channels first in memory, as a convolution's output is."""
    return np.ascontiguousarray(np.swapaxes(a, 0, 1)).swapaxes(0, 1)


@pytest.mark.parametrize("shape", [(16, 8, 2, 2), (4, 3, 20, 20), (1, 4, 3, 3), (5, 1, 4, 4),
                                   (3, 2, 300)])
@pytest.mark.parametrize("layouts", ["cc", "ct", "tc", "tt"])
def test_batch_norm_kernels_match_torch_in_every_layout(shape, layouts):
    # per-channel sums over (example, channel) rows of positions, read in place where the array
    # is laid out channels first, then added over the batch; x's gradient is the backward op's
    # share plus the moments' (1/n and 2 (x - mean)/n per channel, channel_moments' vjp)
    torch = pytest.importorskip("torch")
    from labkit.tensor.ops import channel_norm as K
    rng = np.random.default_rng(1)
    x, g = rng.standard_normal(shape) * 3 + 2, rng.standard_normal(shape)
    w, b = rng.standard_normal(shape[1]), rng.standard_normal(shape[1])
    x = _channels_first(x) if layouts[0] == "t" else x
    g = _channels_first(g) if layouts[1] == "t" else g
    tx = torch.tensor(np.ascontiguousarray(x), requires_grad=True)
    tw, tb = (torch.tensor(v, requires_grad=True) for v in (w, b))
    y = torch.nn.functional.batch_norm(tx, None, None, tw, tb, training=True, eps=1e-5)
    y.backward(torch.tensor(np.ascontiguousarray(g)))
    axes = (0,) + tuple(range(2, x.ndim))
    c, n = shape[1], x.size // shape[1]
    per = (c,) + (1,) * (x.ndim - 2)
    for dtype, tol in ((np.float64, 1e-10), (np.float32, 1e-4)):
        xd, gd, wd, bd = (a.astype(dtype) for a in (x, g, w, b))
        moments = K.channel_moments.kernel(np, xd)
        out = K.batch_norm.kernel(np, xd, moments[0], moments[1], wd, bd, eps=1e-5,
                                  weight=True, bias=True)
        packed = K.batch_norm_backward.kernel(np, gd, xd, moments[0], moments[1], wd, eps=1e-5,
                                              weight=True, bias=True, stats=True)
        assert out.dtype == moments.dtype == packed.dtype == dtype
        dmean, dvar, dw, db = packed[x.size:].reshape(4, c)
        dx = packed[:x.size].reshape(shape) + (dmean.reshape(per) + 2 * dvar.reshape(per) * (
            xd - moments[0].reshape(per))) / n
        np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=tol, atol=tol)
        np.testing.assert_allclose(dw, tw.grad.numpy(), rtol=tol, atol=tol)
        np.testing.assert_allclose(db, tb.grad.numpy(), rtol=tol, atol=tol)
        np.testing.assert_allclose(out, y.detach().numpy(), rtol=tol, atol=tol)
        np.testing.assert_allclose(moments, np.stack([x.mean(axes), x.var(axes)]), rtol=tol,
                                   atol=tol)


def _layouts(a):
    """``a`` C-ordered, channels first, in Fortran order and as a strided view."""
    wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    wide[..., ::2] = a
    return {"C": a, "channels first": _channels_first(a), "F": np.asfortranarray(a),
            "strided": wide[..., ::2]}


@pytest.mark.parametrize("bad, error, words", [
    (dict(mean=lk.ones(1)), "ShapeError", "the mean"),
    (dict(var=lk.ones(3, dtype=lk.float64)), "DTypeError", "the variance"),
    (dict(params=(lk.ones(1),), weight=True), "ShapeError", "the weight"),
    (dict(params=(lk.ones(3), lk.ones(3)), weight=True), "ShapeError", "got 2 tensors")])
@pytest.mark.parametrize("captured", [False, True])
def test_batch_norm_op_names_bad_statistics_eager_and_captured(bad, error, words, captured):
    # NumPy would broadcast a (1,) vector and drop a wider dtype: the kernel checks, as the rule
    from labkit.tensor.ops import channel_norm as K
    x = lk.ones(2, 3)
    args = dict(mean=lk.zeros(3), var=lk.ones(3), params=(), weight=False)
    args.update(bad)

    def run(x):
        return K.batch_norm(x, args["mean"], args["var"], *args["params"], eps=1e-5,
                            weight=args["weight"])
    with pytest.raises(Exception) as info:
        (lk.function(run) if captured else run)(x)
    assert type(info.value).__name__ == error and words in str(info.value)
    assert "batch_norm" in str(info.value)


def test_batch_norm_of_a_half_input_with_float32_parameters():
    # a mixed-precision network: float16 activations, BatchNorm's weights and statistics in
    # float32 (as PyTorch's); computed in float32, the result and x's gradient in float16
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    xv = (rng.standard_normal((4, 3, 5, 5)) * 2 + 1).astype(np.float16)
    gv = rng.standard_normal(xv.shape).astype(np.float16)
    bn, tbn = lk.nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    x, tx = lk.tensor(xv, requires_grad=True), torch.tensor(xv.astype(np.float32),
                                                            requires_grad=True)
    y, ty = bn(x), tbn(tx)
    y.backward(lk.tensor(gv))
    ty.backward(torch.tensor(gv.astype(np.float32)))
    assert y.dtype == x.grad.dtype == lk.float16 and bn.weight.grad.dtype == lk.float32
    np.testing.assert_allclose(y.detach().numpy().astype(np.float32), ty.detach().numpy(),
                               atol=4e-3)
    np.testing.assert_allclose(x.grad.numpy().astype(np.float32), tx.grad.numpy(), atol=4e-3)
    np.testing.assert_allclose(bn.weight.grad.numpy(), tbn.weight.grad.numpy(), rtol=1e-3,
                               atol=1e-3)
    np.testing.assert_allclose(bn.running_var.numpy(), tbn.running_var.numpy(), rtol=1e-3)


@pytest.mark.parametrize("shape", [(16, 8, 2, 2), (32, 8, 8, 8), (6, 3, 11, 13), (9, 2, 150),
                                   (2, 4, 16, 16), (7, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batch_norm_kernels_give_the_same_bits_in_every_layout(shape, dtype):
    # A captured plan writes into C-ordered buffers where eager ops keep their input's layout:
    # sums that followed the layout would make a captured training run drift from eager's
    from labkit.tensor.ops import channel_norm as K
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(shape) * 3 + 2).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(shape[1]).astype(dtype)

    def kernels(x, g):
        m = K.channel_moments.kernel(np, x)
        return (m, K.batch_norm.kernel(np, x, m[0], m[1], w, w, eps=1e-5, weight=True,
                                       bias=True),
                K.batch_norm_backward.kernel(np, g, x, m[0], m[1], w, eps=1e-5, weight=True,
                                             bias=True, stats=True))
    want = kernels(x, g)
    for (x_name, xs), (g_name, gs) in itertools.product(_layouts(x).items(),
                                                        _layouts(g).items()):
        for name, a, b in zip(("channel_moments", "batch_norm", "backward"), want,
                              kernels(xs, gs)):
            np.testing.assert_array_equal(b, a, err_msg=f"{name}: x {x_name}, g {g_name}")


@pytest.mark.parametrize("shape", [(32, 16, 4, 4), (4, 2, 3, 3), (3, 4, 5, 6), (2, 1, 9, 1),
                                   (10, 9), (9, 20), (12, 3, 2), (9, 3, 20, 20), (10, 4, 12)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_sum_gives_the_same_bits_in_every_layout(shape, dtype):
    # the windows of pooling (at most 16 per result) are folded in NumPy's order of the C copy,
    # channels-first arrays summed over their positions (and batch) row by row in that order;
    # anything else strided is summed as its C-ordered copy (BLAS rows and columns included)
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(shape) * 10).astype(dtype)
    orders = list(itertools.permutations(range(x.ndim)))[1:]
    dims = [None] + [d for k in range(1, x.ndim + 1)
                     for d in itertools.combinations(range(x.ndim), k)]
    for dim, keepdim in itertools.product(dims, (False, True)):
        want = reduce.sum.kernel(np, x, dim=dim, keepdim=keepdim)
        for order in orders:
            laid_out = np.ascontiguousarray(x.transpose(order)).transpose(np.argsort(order))
            got = reduce.sum.kernel(np, laid_out, dim=dim, keepdim=keepdim)
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_equal(got, want, err_msg=f"dim={dim}, order {order}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_slice_whose_rows_lie_apart_is_summed_in_place_with_its_copys_bits(dtype):
    # an LSTM's gate gradients (L, N, 4H) are columns of a (L, N, 5H) array: their bias
    # gradient is read where they lie, with the bits of their C-ordered copy
    rng = np.random.default_rng(5)
    whole = (rng.standard_normal((35, 20, 1000)) * 10).astype(dtype)
    for cols in (slice(0, 800), slice(3, 803), slice(200, None)):
        x = whole[:, :, cols]
        view = reduce._as_matrix(x, 2)
        assert view.shape == (700, x.shape[2]) and np.shares_memory(view, whole)
        copy = np.ascontiguousarray(x)
        for dim in ((0, 1), (0,)):
            np.testing.assert_array_equal(reduce.sum.kernel(np, x, dim=dim, keepdim=False),
                                          reduce.sum.kernel(np, copy, dim=dim, keepdim=False))
        np.testing.assert_array_equal(reduce.row_sums(np, x[:, :, :100]),
                                      reduce.row_sums(np, np.ascontiguousarray(x[:, :, :100])))
    # every other row is still a matrix; no such view: rows of two steps that do not merge,
    # columns not a unit step apart, reversed rows, steps in another order
    assert reduce._as_matrix(whole[:, ::2, :800], 2).strides == (2 * whole.strides[1],
                                                                   whole.itemsize)
    assert reduce._as_matrix(whole[:, :10, :800], 2) is None
    assert reduce._as_matrix(whole[:, :, ::2], 2) is None
    assert reduce._as_matrix(whole[::-1, :, :800], 1) is None
    assert reduce._as_matrix(whole[:, :, :800].transpose(1, 0, 2), 2) is None


@pytest.mark.parametrize("layout", ["c", "t"])
def test_leaky_relu_backward_matches_a_select(layout):
    from labkit.tensor.ops import nn_kernels as K
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3, 5, 5)).astype(np.float32)
    x[0, 0, 0, :3] = [0.0, np.nan, -0.0]
    g = rng.standard_normal(x.shape).astype(np.float32)
    g[1, 1, 1, :2] = [np.inf, np.nan]
    g = _channels_first(g) if layout == "t" else g
    for slope in (0.2, 0.0, 1.5):
        got = K.leaky_relu_backward.kernel(np, g, x, negative_slope=slope)
        want = np.where(x > 0, g, g * np.float32(slope))
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want)


# ---- convolutions: im2col a few images at a time, image by image or images side by side -----
@pytest.fixture(autouse=True)
def _numpy_convolution_routes(monkeypatch):
    """The routes below are labkit's own: oneDNN's kernels (tests/devices/test_host_dnnl.py)
    would serve some of these float32 cases before them."""
    from labkit.tensor.ops import conv
    monkeypatch.setattr(conv, "_direct", lambda *a: False)


def _conv_reference(x, w, stride, padding, groups):
    """float64 direct convolution (loops over the kernel's taps), groups split by hand."""
    (sh, sw), (ph, pw) = stride, padding
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh, ow = (h + 2 * ph - kh) // sh + 1, (wd + 2 * pw - kw) // sw + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for gi in range(groups):
        xs, ws = xp[:, gi * cg:(gi + 1) * cg], w[gi * og:(gi + 1) * og]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
                out[:, gi * og:(gi + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    return out


# chunks: how many chunks the forward (and the input gradient) and the weight gradient take
@pytest.mark.parametrize("shape, out_channels, kernel, stride, padding, groups, chunks", [
    ((37, 3, 20, 20), 5, 3, 1, 1, 1, (37, 37)),   # 400 positions, a small weight: side by side
    ((3, 16, 18, 18), 32, 3, 1, 1, 1, (6, 6)),     # 324 positions, 32x144 weight: image by
                                                  # image, in rows
    ((2, 16, 34, 34), 128, 3, 2, 1, 2, (4, 4)),    # 289 positions, grouped 64x72: image by image
    ((9, 16, 17, 17), 64, 3, 2, 1, 2, (3, 3)),     # 81 positions, grouped: side by side
    ((41, 4, 6, 6), 6, 3, 2, 1, 2, (2, 1)),       # 9 positions: the images side by side, grouped
    ((9, 8, 2, 2), 4, 1, 1, 0, 1, (1, 1)),        # 1x1 kernel, 4 positions: one chunk
])
def test_convolution_routes_match_a_direct_convolution(shape, out_channels, kernel, stride,
                                                       padding, groups, chunks, monkeypatch):
    from labkit.tensor.ops import conv
    monkeypatch.setattr(conv, "_CHUNK", 4096)        # several chunks even at these sizes
    monkeypatch.setattr(conv, "_BY_PHASES", 0.0)     # the input gradient by fold (the other
    monkeypatch.setattr(conv, "_by_taps", lambda *a: False)   # routes below)
    monkeypatch.setattr(conv, "_weight_by_taps", lambda *a: False)
    taken = []
    monkeypatch.setattr(conv, "_blocks", lambda *a, blocks=conv._blocks, **k:
                        taken.append(len(blocks(*a, **k))) or blocks(*a, **k))
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    w = rng.standard_normal((out_channels, shape[1] // groups, kernel, kernel))
    geo = dict(stride=(stride, stride), padding=(padding, padding), dilation=(1, 1),
               groups=groups)
    y = conv.convolution.kernel(np, x, w, **geo)
    np.testing.assert_allclose(y, _conv_reference(x, w, geo["stride"], geo["padding"], groups),
                               rtol=1e-12, atol=1e-12)
    # the two gradients are the adjoints of the convolution: for any g, <g, conv(x, w)> is
    # <dx, x> and <dw, w> (a wrong route gives another number for random g)
    for seed in (2, 3):
        g = np.random.default_rng(seed).standard_normal(y.shape)
        dx = conv.conv2d_input_grad.kernel(np, g, w, image_shape=x.shape, **geo)
        dw = conv.conv2d_weight_grad.kernel(np, g, x, weight_shape=w.shape, **geo)
        assert dx.shape == x.shape and dw.shape == w.shape
        assert np.isclose((g * y).sum(), (dx * x).sum(), rtol=1e-10)
        assert np.isclose((g * y).sum(), (dw * w).sum(), rtol=1e-10)
    forward, weight = chunks
    assert taken == [forward] + [forward, weight] * 2


# (n, c, h, w), out channels, kernel, stride, padding, groups
_TRANSPOSED = [
    ((2, 3, 9, 9), 4, (3, 3), (1, 1), (1, 1), 1),      # stride 1: one phase, the kernel flipped
    ((2, 3, 7, 8), 5, (3, 2), (1, 1), (0, 1), 1),      # no padding on one side: more on g's
    ((1, 2, 6, 6), 2, (2, 2), (1, 1), (2, 2), 1),      # padding > k - 1: g is cropped
    ((2, 4, 8, 8), 6, (4, 4), (2, 2), (1, 1), 2),      # DCGAN's 4x4 stride 2, grouped
    ((2, 3, 9, 7), 2, (3, 3), (2, 3), (1, 0), 1),      # phases of 2 and 1 taps, stride 3
    ((1, 2, 7, 7), 3, (1, 1), (3, 3), (0, 0), 1),      # 1x1, stride 3: phases without taps
    ((3, 6, 5, 5), 6, (3, 3), (2, 2), (1, 1), 3),      # depthwise-like, odd size
]


def _phases_with_taps(kernel, stride, padding, size):
    """How many phases (row and column residues mod the stride) of an image some tap reaches."""
    count = 1
    for k, s, p, n in zip(kernel, stride, padding, size):
        count *= sum(len(range((r + p) % s, k, s)) > 0 for r in range(min(s, n)))
    return count


@pytest.mark.parametrize("shape, out_channels, kernel, stride, padding, groups", _TRANSPOSED)
def test_transposed_convolution_by_phases_matches_the_fold_route(shape, out_channels, kernel,
                                                                 stride, padding, groups,
                                                                 monkeypatch):
    from labkit.tensor.ops import conv
    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape)
    w = rng.standard_normal((out_channels, shape[1] // groups) + kernel)
    geo = dict(stride=stride, padding=padding, dilation=(1, 1), groups=groups)
    y = _conv_reference(x, w, stride, padding, groups)
    g = rng.standard_normal(y.shape)
    routes = {}
    for route, factor in (("fold", 0.0), ("phases", 1e9), ("taps", 0.0)):
        if route == "taps" and groups > 1:
            continue
        monkeypatch.setattr(conv, "_BY_PHASES", factor)
        monkeypatch.setattr(conv, "_by_taps", lambda *a, on=route == "taps": on)
        phases = []
        monkeypatch.setattr(conv, "_correlate", lambda *a, f=conv._correlate, **k:
                            phases.append(a[1].shape) or f(*a, **k))
        routes[route] = conv.conv2d_input_grad.kernel(np, g, w, image_shape=x.shape, **geo)
        monkeypatch.undo()
        # the phase route is one correlation per phase that has taps; the fold route none
        assert len(phases) == (_phases_with_taps(kernel, stride, padding, shape[2:])
                               if route == "phases" else 0)
    np.testing.assert_allclose(routes["phases"], routes["fold"], rtol=1e-12, atol=1e-12)
    if "taps" in routes:
        np.testing.assert_allclose(routes["taps"], routes["fold"], rtol=1e-12, atol=1e-12)
    # and both are the adjoint of the convolution
    assert np.isclose((g * y).sum(), (routes["phases"] * x).sum(), rtol=1e-10)


def _random_geometries(seed, count=300, largest_kernel=5):
    """``count`` draws of (kernel, stride, padding, image size, output size) that fit: padding
    up to k + 1, images 1 to 11 pixels a side."""
    from labkit.tensor.ops import conv
    rng = np.random.default_rng(seed)
    for _ in range(count):
        kernel = tuple(int(v) for v in rng.integers(1, largest_kernel + 1, 2))
        stride = tuple(int(v) for v in rng.integers(1, 4, 2))
        padding = tuple(int(rng.integers(0, k + 2)) for k in kernel)
        size = tuple(int(v) for v in rng.integers(1, 12, 2))
        out = tuple(conv.out_size(*a, 1) for a in zip(size, kernel, stride, padding))
        if min(out) > 0:
            yield rng, kernel, stride, padding, size, out


def test_transposed_convolution_routes_agree_on_random_geometries(monkeypatch):
    from labkit.tensor.ops import conv
    for rng, kernel, stride, padding, size, out in _random_geometries(5):
        groups = int(rng.choice([1, 1, 2, 3]))
        cg, og = (int(v) for v in rng.integers(1, 4, 2))
        w = rng.standard_normal((og * groups, cg) + kernel)
        g = rng.standard_normal((2, og * groups) + out)
        geo = dict(image_shape=(2, cg * groups) + size, stride=stride, padding=padding,
                   dilation=(1, 1), groups=groups)
        monkeypatch.setattr(conv, "_by_taps", lambda *a: False)
        monkeypatch.setattr(conv, "_BY_PHASES", 0.0)
        folded = conv.conv2d_input_grad.kernel(np, g, w, **geo)
        monkeypatch.setattr(conv, "_BY_PHASES", 1e9)
        by_phases = conv.conv2d_input_grad.kernel(np, g, w, **geo)
        np.testing.assert_allclose(by_phases, folded, rtol=1e-12, atol=1e-12,
                                   err_msg=str((w.shape, g.shape, geo)))
        if groups == 1:
            monkeypatch.setattr(conv, "_by_taps", lambda *a: True)
            by_taps = conv.conv2d_input_grad.kernel(np, g, w, **geo)
            np.testing.assert_allclose(by_taps, folded, rtol=1e-12, atol=1e-12,
                                       err_msg=str((w.shape, g.shape, geo)))


@pytest.mark.parametrize("image, out_channels, kernel, stride, padding, route", [
    ((4, 64, 85, 85), 64, 3, 1, 1, "phases"),   # super_resolution: as many channels out as in
    ((4, 32, 85, 85), 9, 3, 1, 1, "phases"),    # fewer out: far fewer elements to copy
    ((64, 32, 26, 26), 64, 3, 1, 0, "fold"),    # mnist: twice the channels out, no padding
    ((16, 512, 2, 2), 512, 3, 1, 1, "fold"),    # 2x2 images: the weight outweighs them
    ((16, 256, 4, 4), 256, 3, 1, 1, "taps"),    # 4x4 images, channels last
    ((16, 64, 16, 16), 128, 3, 2, 1, "taps"),   # stride 2 (ResNet's), channels last
    ((16, 64, 16, 16), 128, 4, 2, 1, "taps"),   # DCGAN's 4x4 stride 2
    ((16, 3, 64, 64), 32, 4, 2, 1, "fold"),     # 3 channels: a GEMM 3 columns wide
    ((16, 64, 16, 16), 128, 1, 2, 0, "fold"),   # 1x1: no windows to add up
])
def test_the_transposed_convolution_route_follows_the_elements_it_moves(
        image, out_channels, kernel, stride, padding, route, monkeypatch):
    from labkit.tensor.ops import conv
    took = []
    for name in ("phases", "taps"):
        monkeypatch.setattr(conv, f"_transposed_by_{name}", lambda *a, name=name:
                            took.append(name) or np.zeros(a[3]))
    g = np.zeros((image[0], out_channels) +
                 tuple(conv.out_size(s, kernel, stride, padding, 1) for s in image[2:]),
                 np.float32)
    w = np.zeros((out_channels, image[1], kernel, kernel), np.float32)
    conv.conv2d_input_grad.kernel(np, g, w, image_shape=image, stride=(stride, stride),
                                  padding=(padding, padding), dilation=(1, 1), groups=1)
    assert (took[0] if took else "fold") == route


def test_the_weight_gradient_by_taps_matches_im2col_on_random_geometries(monkeypatch):
    from labkit.tensor.ops import conv
    for rng, kernel, stride, padding, size, out in _random_geometries(9, largest_kernel=4):
        c, o = (int(v) for v in rng.integers(1, 5, 2))
        x, g = rng.standard_normal((2, c) + size), rng.standard_normal((2, o) + out)
        geo = dict(weight_shape=(o, c) + kernel, stride=stride, padding=padding,
                   dilation=(1, 1), groups=1)
        routes = []
        for on in (False, True):
            monkeypatch.setattr(conv, "_weight_by_taps", lambda *a, on=on: on)
            routes.append(conv.conv2d_weight_grad.kernel(np, g, x, **geo))
        np.testing.assert_allclose(routes[1], routes[0], rtol=1e-12, atol=1e-12,
                                   err_msg=str((x.shape, g.shape, geo)))


@pytest.mark.parametrize("image, out_channels, kernel, stride, padding, taps", [
    ((16, 32, 32, 32), 64, 4, 2, 1, True),      # DCGAN's 4x4 stride 2
    ((16, 64, 16, 16), 64, 3, 1, 1, True),      # ResNet's 16x16
    ((16, 512, 2, 2), 512, 3, 1, 1, True),
    ((4, 32, 85, 85), 9, 3, 1, 1, True),        # super_resolution's last: 9 channels out
    ((4, 64, 85, 85), 64, 3, 1, 1, False),      # large images, 64 channels out: im2col
    ((64, 32, 26, 26), 64, 3, 1, 0, False),     # mnist's 24x24
    ((16, 3, 64, 64), 32, 4, 2, 1, False),      # 3 input channels: (positions, 3) copies
    ((16, 64, 16, 16), 128, 1, 2, 0, False),    # 1x1
])
def test_the_weight_gradient_route(image, out_channels, kernel, stride, padding, taps,
                                   monkeypatch):
    from labkit.tensor.ops import conv
    took = []
    monkeypatch.setattr(conv, "_weight_grad_by_taps", lambda *a: took.append(a) or
                        np.zeros(a[3]))
    g = np.zeros((image[0], out_channels) +
                 tuple(conv.out_size(s, kernel, stride, padding, 1) for s in image[2:]),
                 np.float32)
    conv.conv2d_weight_grad.kernel(np, g, np.zeros(image, np.float32),
                                   weight_shape=(out_channels, image[1], kernel, kernel),
                                   stride=(stride, stride), padding=(padding, padding),
                                   dilation=(1, 1), groups=1)
    assert bool(took) == taps


@pytest.mark.parametrize("g_shape", [(1, 2, 4, 3), (2, 2, 3, 3), (1, 3, 3, 3)])
def test_convolution_gradients_of_the_wrong_shape_are_refused(g_shape):
    from labkit.tensor.ops import conv
    geo = dict(stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1)
    g = lk.ones(*g_shape)
    with pytest.raises(lk.ShapeError, match=r"conv2d_input_grad: the gradient .* does not match "
                                            r"the output \(1, 2, 3, 3\)"):
        conv.conv2d_input_grad(g, lk.ones(2, 1, 3, 3), image_shape=(1, 1, 5, 5), **geo)
    with pytest.raises(lk.ShapeError, match=r"conv2d_weight_grad: the gradient .* does not match "
                                            r"the output \(1, 2, 3, 3\)"):
        conv.conv2d_weight_grad(g, lk.ones(1, 1, 5, 5), weight_shape=(2, 1, 3, 3), **geo)


def test_a_captured_convolution_is_one_op_with_two_gradient_ops():
    x = lk.randn(2, 3, 8, 8, requires_grad=True)
    w = lk.randn(4, 3, 3, 3, requires_grad=True)

    @lk.function
    def step(x, w):
        return lk.grad(lambda x, w: lk.conv2d(x, w, padding=1).sum(), argnums=(0, 1))(x, w)
    ops = [n.op.name for n in step.graph(x, w, passes=[]).nodes if n.kind == "op"]
    assert ops.count("conv2d") == 1 and "unfold" not in ops and "fold" not in ops
    assert ops.count("conv2d_input_grad") == 1 and ops.count("conv2d_weight_grad") == 1


# ---- gelu's backward: Phi(x) from the forward's output when nothing is recorded -----------------
def _gelu_kernels_called(monkeypatch):
    from labkit.tensor.ops import nn_kernels
    called = []
    for name in ("gelu_backward", "gelu_backward_from_output"):
        op_ = getattr(nn_kernels, name)
        monkeypatch.setattr(op_, "kernel", lambda *a, _k=op_.kernel, _n=name, **kw:
                            called.append(_n) or _k(*a, **kw))
    return called


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gelu_backward_reads_phi_from_the_output(dtype, monkeypatch):
    import torch
    called = _gelu_kernels_called(monkeypatch)
    rng = np.random.default_rng(6)
    xv = (rng.standard_normal((8, 33)) * 3).astype(dtype)
    xv[0, :3] = [0.0, -0.0, 1e-20]                  # Phi(0) = 1/2 where out / x is 0 / 0
    gv = rng.standard_normal(xv.shape).astype(dtype)
    x = lk.tensor(xv, requires_grad=True)
    lk.nn.functional.gelu(x).backward(lk.tensor(gv))
    assert called == ["gelu_backward_from_output"]
    tx = torch.tensor(xv.astype(np.float64), requires_grad=True)
    torch.nn.functional.gelu(tx).backward(torch.tensor(gv.astype(np.float64)))
    tol = dict(rtol=2e-6, atol=2e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **tol)


def test_a_recorded_gelu_backward_computes_from_x_and_has_a_gradient(monkeypatch):
    import torch
    called = _gelu_kernels_called(monkeypatch)
    xv = np.random.default_rng(7).standard_normal(17) * 2
    x = lk.tensor(xv, requires_grad=True)
    lk.nn.functional.gelu(x).sum().backward(create_graph=True)
    assert called == ["gelu_backward"]              # the recorded backward: differentiable
    first = x.grad
    x.grad = None
    first.sum().backward()
    second = x.grad
    tx = torch.tensor(xv, requires_grad=True)
    (first,) = torch.autograd.grad(torch.nn.functional.gelu(tx).sum(), tx, create_graph=True)
    (want,) = torch.autograd.grad(first.sum(), tx)
    np.testing.assert_allclose(second.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)


def test_gelu_backward_of_half_precision_computes_from_x(monkeypatch):
    called = _gelu_kernels_called(monkeypatch)
    x = lk.tensor(np.linspace(-3, 3, 11), dtype=lk.float16, requires_grad=True)
    lk.nn.functional.gelu(x).sum().backward()
    assert called == ["gelu_backward"]        # out / x in float16 would lose Phi's precision


def test_a_captured_gelu_step_equals_eager():
    rng = np.random.default_rng(8)
    w0 = rng.standard_normal((16, 16)).astype(np.float32)
    xv = rng.standard_normal((4, 16)).astype(np.float32)

    def step(w, x):
        return lk.grad(lambda w: lk.nn.functional.gelu(x @ w).square().sum())(w)
    eager = step(lk.tensor(w0), lk.tensor(xv))
    captured = lk.function(step)(lk.tensor(w0), lk.tensor(xv))
    np.testing.assert_array_equal(captured.numpy(), eager.numpy())
