"""Host BLAS gemm (``c = alpha * a @ b + beta * c`` in place): values against NumPy for every
layout it takes, and a refusal that leaves ``c`` alone for everything else."""
import numpy as np
import pytest

from labkit.devices import host_blas

needs_blas = pytest.mark.skipif(host_blas.available() is None,
                                reason="no CBLAS library found next to NumPy")


def _layouts(rng, rows, cols, dtype):
    """The same values row-major, column-major (a transposed view), and each as a slice of a
    larger array (leading dimension larger than the matrix)."""
    base = rng.standard_normal((rows, cols)).astype(dtype)
    wide = np.zeros((rows, cols + 3), dtype)
    wide[:, :cols] = base
    tall = np.zeros((rows + 3, cols), dtype, order="F")
    tall[:rows] = base
    return {"C": base.copy(), "F": np.ascontiguousarray(base.T).T, "C sliced": wide[:, :cols],
            "F sliced": tall[:rows]}


@needs_blas
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(5, 4, 3), (1, 4, 3), (5, 1, 3), (5, 4, 1), (33, 17, 9)])
def test_gemm_matches_numpy_in_every_layout(dtype, shape):
    m, k, n = shape
    rng = np.random.default_rng(0)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    for la, a in _layouts(rng, m, k, dtype).items():
        for lb, b in _layouts(rng, k, n, dtype).items():
            for lc, c in _layouts(rng, m, n, dtype).items():
                want = 0.5 * c + (-1.5) * (a.astype(np.float64) @ b)
                assert host_blas.gemm(c, a, b, alpha=-1.5, beta=0.5), (la, lb, lc)
                np.testing.assert_allclose(c, want, **tol, err_msg=f"a {la}, b {lb}, c {lc}")


@needs_blas
def test_gemm_writes_into_c_itself():
    rng = np.random.default_rng(1)
    c = rng.standard_normal((40, 30)).astype(np.float32)
    view, a, b = c[5:25], rng.standard_normal((20, 8)), rng.standard_normal((8, 30))
    a, b = a.astype(np.float32), b.astype(np.float32)
    before = c.copy()
    assert host_blas.gemm(view, a, b)
    np.testing.assert_allclose(c[5:25], before[5:25] + a @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(c[:5], before[:5])          # rows outside the view untouched
    np.testing.assert_array_equal(c[25:], before[25:])


def _refused(c, a, b):
    before = np.array(c, copy=True)
    assert host_blas.gemm(c, a, b) is False
    np.testing.assert_array_equal(c, before)


def test_gemm_refuses_what_it_cannot_do_and_leaves_c_alone():
    f32 = np.ones((4, 4), np.float32)
    _refused(np.ones((4, 4), np.int64), np.ones((4, 4), np.int64), np.ones((4, 4), np.int64))
    _refused(f32.copy(), f32, np.ones((4, 4), np.float64))                     # mixed dtypes
    _refused(np.ones((4, 4), np.float16), np.ones((4, 4), np.float16), np.ones((4, 4), np.float16))
    _refused(np.ones((2, 4, 4), np.float32), f32, f32)                         # not 2-D
    _refused(f32.copy(), np.ones((4, 3), np.float32), f32)                     # inner dims differ
    _refused(np.ones((4, 0), np.float32), f32, np.ones((4, 0), np.float32))   # empty
    _refused(f32.copy(), np.ones((4, 8), np.float32)[:, ::2], f32)             # strided columns
    shared = np.ones((4, 8), np.float32)
    _refused(shared[:, :4], shared[:, 4:], f32)                                # c overlaps a
    frozen = f32.copy()
    frozen.flags.writeable = False
    _refused(frozen, f32, f32)


def test_a_library_that_computes_wrong_is_not_used():
    def wrong(*args):
        return None                 # leaves c as it was
    assert not host_blas._agrees({np.dtype(np.float32): wrong})


# ---- axpby: y = alpha * x + beta * y in one pass ----------------------------------------------
def _has_axpby():
    host_blas.available()                   # looks the library up
    return bool(host_blas._state["axpby"])


needs_axpby = pytest.mark.skipif(not _has_axpby(), reason="the BLAS library next to NumPy has "
                                                          "no axpby")


@needs_axpby
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1 << 14,), (130, 257), (3, 64, 129)])
def test_axpby_matches_numpy(dtype, shape):
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)
    want = float(np.float32(0.9)) * y.astype(np.float64) - 0.25 * x
    assert host_blas.axpby(y, x, -0.25, np.float32(0.9))
    tol = dict(rtol=1e-6, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(y, want, **tol)


def _axpby_refused(y, x, alpha=0.5, beta=2.0):
    before = np.array(y, copy=True)
    assert host_blas.axpby(y, x, alpha, beta) is False
    np.testing.assert_array_equal(y, before)


def test_axpby_refuses_what_it_cannot_do_and_leaves_y_alone():
    n = host_blas._AXPBY_MIN
    f32 = np.ones(n, np.float32)
    _axpby_refused(np.ones(n, np.float64), f32)                        # mixed dtypes
    _axpby_refused(np.ones(n, np.int64), np.ones(n, np.int64))        # not float
    _axpby_refused(np.ones(n - 1, np.float32), np.ones(n - 1, np.float32))   # small: NumPy's
    _axpby_refused(np.ones(2 * n, np.float32)[::2], f32)              # strided
    _axpby_refused(f32.copy(), np.ones(2 * n, np.float32)[::2])
    _axpby_refused(np.ones((2, n), np.float32), np.ones((2, n), np.float32).T.copy().T)  # F order
    shared = np.ones(2 * n, np.float32)
    _axpby_refused(shared[:n], shared[n // 2:n // 2 + n])              # overlapping
    # a factor of 0: BLAS would not read that operand, so a NaN in it would be lost
    nan = np.full(n, np.nan, np.float32)
    _axpby_refused(f32.copy(), nan, alpha=0.0)
    _axpby_refused(nan.copy(), f32, beta=0.0)
    frozen = f32.copy()
    frozen.flags.writeable = False
    _axpby_refused(frozen, f32)


@needs_axpby
def test_assign_axpby_through_blas_equals_numpys_two_passes(monkeypatch):
    import labkit as lk
    from labkit.tensor.ops.state import assign_axpby
    rng = np.random.default_rng(3)
    through = []
    monkeypatch.setattr(host_blas, "axpby", lambda *a, f=host_blas.axpby: through.append(
        f(*a)) or through[-1])
    for n, blas in ((100, False), (host_blas._AXPBY_MIN * 4, True)):   # NumPy's, then BLAS's
        t, v = rng.standard_normal(n), rng.standard_normal(n)
        target = lk.tensor(t)
        through.clear()
        out = assign_axpby(target, lk.tensor(v), 0.9, -0.1)
        assert through == [blas]
        np.testing.assert_allclose(target.numpy(), 0.9 * t - 0.1 * v, rtol=1e-14, atol=1e-15)
        np.testing.assert_array_equal(out.numpy(), target.numpy())
