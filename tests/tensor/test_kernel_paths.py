"""Kernels that take a faster route for some sizes and layouts agree with NumPy there.

The op-case table (op_cases.py) draws sides of at most 3, below where these routes start:
sums of a matrix's columns or short rows as BLAS matrix-vector products, max/min over many
short rows through a transposed copy, and softmax's normaliser and max, which use them.
"""
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
