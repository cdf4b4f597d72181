"""Creation functions against PyTorch: values and dtypes of the deterministic ones (linspace,
logspace, arange, full_like, eye, tril/triu_indices, *_like), shapes and dtypes of the random
ones, and loose, seeded statistical checks of their distributions."""
import math

import numpy as np
import pytest
import torch

import labkit as lk

DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64,
          "int32": torch.int32}


def same(got, expected, exact=True, rtol=0.0):
    """``got`` (labkit) has PyTorch's ``expected`` shape, dtype and values."""
    want = expected.numpy()
    assert got.shape == tuple(expected.shape), (got.shape, tuple(expected.shape))
    assert got.dtype.np == want.dtype, (got.dtype, expected.dtype)
    if exact:
        np.testing.assert_array_equal(got.numpy(), want)
    else:
        np.testing.assert_allclose(got.numpy(), want, rtol=rtol, atol=0)


# ---- ranges -------------------------------------------------------------------------------------
LINSPACE = [(0, 10, 4), (-3, 7, 7), (10, 0, 4), (-4, 6, 7), (-7, 5, 11), (0.5, 3.7, 5),
            (-9, 4, 11), (1, 1, 3), (0, 1, 1), (0, 1, 0), (2.5, -1.25, 6), (0, 1, 100),
            (-1e3, 1e3, 37)]


@pytest.mark.parametrize("start, end, steps", LINSPACE)
@pytest.mark.parametrize("dtype", [None, "float64", "int64", "int32"])
def test_linspace_matches_pytorch(start, end, steps, dtype):
    kw = {} if dtype is None else {"dtype": DTYPES[dtype]}
    lkw = {} if dtype is None else {"dtype": dtype}
    same(lk.linspace(start, end, steps, **lkw), torch.linspace(start, end, steps, **kw))


def test_linspace_random_bounds_match_pytorch_exactly():
    rng = np.random.default_rng(0)
    for _ in range(300):
        a, b = (float(v) for v in rng.normal(size=2) * 10)
        n = int(rng.integers(1, 60))
        same(lk.linspace(a, b, n), torch.linspace(a, b, n))
        same(lk.linspace(a, b, n, dtype=lk.float64), torch.linspace(a, b, n, dtype=torch.float64))
        ia, ib = int(a), int(b)
        same(lk.linspace(ia, ib, n, dtype=lk.int64),
             torch.linspace(ia, ib, n, dtype=torch.int64))


def test_linspace_takes_0d_tensors_and_refuses_negative_steps():
    same(lk.linspace(lk.tensor(1.0), lk.tensor(2.0), 3), torch.linspace(1.0, 2.0, 3))
    with pytest.raises(lk.ShapeError, match="steps"):
        lk.linspace(0, 1, -1)


@pytest.mark.parametrize("start, end, steps, base", [(0, 3, 4, 10.0), (0, 1, 5, 2.0),
                                                     (0, 2, 3, 3.0), (-2, 2, 11, 10.0),
                                                     (-2.7, 2.0, 11, 10.0), (1.5, -1, 6, 2.0),
                                                     (-0.7, -3.0, 1, 10.0), (0, 1, 0, 10.0)])
@pytest.mark.parametrize("dtype", [None, "float64", "int64"])
def test_logspace_matches_pytorch(start, end, steps, base, dtype):
    kw = {} if dtype is None else {"dtype": DTYPES[dtype]}
    got = lk.logspace(start, end, steps, base=base, **({} if dtype is None else {"dtype": dtype}))
    expected = torch.logspace(start, end, steps, base=base, **kw)
    if dtype == "int64":
        same(got, expected)
    else:
        same(got, expected, exact=False, rtol=1e-13 if dtype else 1e-5)


ARANGE = [((5,), {}), ((1, 5), {}), ((1, 10, 3), {}), ((10, 0, -3), {}), ((0, 1, 0.1), {}),
          ((5.0,), {}), ((1, 2.5, 0.5), {}), ((0, -1, -0.3), {}), ((0, 5.5), {"dtype": "int64"}),
          ((0.5, 5.2, 1.5), {"dtype": "int64"}), ((5,), {"dtype": "float64"}),
          ((3, 3), {}), ((-1.5, 2.25, 0.25), {"dtype": "float64"}), ((0, 1, 1 / 3), {}),
          ((1.728, 20.51, 0.33), {})]


@pytest.mark.parametrize("args, kw", ARANGE)
def test_arange_matches_pytorch(args, kw):
    got = lk.arange(*args, **kw)
    expected = torch.arange(*args, **{k: DTYPES[v] for k, v in kw.items()})
    same(got, expected, exact=not got.dtype.is_floating, rtol=1e-6)


def test_arange_dtype_rules_and_errors():
    assert lk.arange(5).dtype is lk.int64 and lk.arange(5.0).dtype is lk.float32
    assert lk.arange(0, 5, 1.0).dtype is lk.float32
    assert lk.arange(lk.tensor(1), lk.tensor(4.0)).tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(lk.ShapeError, match="step must be nonzero"):
        lk.arange(0, 5, 0)
    with pytest.raises(lk.ShapeError, match="sign of step"):
        lk.arange(0, 5, -1)
    with pytest.raises(RuntimeError):
        torch.arange(0, 5, -1)


# ---- filled and shaped like ---------------------------------------------------------------------
def test_full_like_empty_and_likes(device):
    x = lk.zeros(2, 3, dtype=lk.int32, device=device)
    for fn, tfn in ((lk.zeros_like, torch.zeros_like), (lk.ones_like, torch.ones_like)):
        same(fn(x), tfn(torch.zeros(2, 3, dtype=torch.int32)))
        same(fn(x, dtype=lk.float64), tfn(torch.zeros(2, 3), dtype=torch.float64))
    same(lk.full_like(x, 7), torch.full_like(torch.zeros(2, 3, dtype=torch.int32), 7))
    same(lk.full_like(x, 2.5, dtype=lk.float32),
         torch.full_like(torch.zeros(2, 3), 2.5, dtype=torch.float32))
    assert lk.full_like(x, 1).device.name == lk.devices.get_device(device).name
    e = lk.empty(2, 3, device=device)
    assert e.shape == (2, 3) and e.dtype is lk.float32
    assert lk.empty((4,), dtype=lk.int64).dtype is lk.int64
    assert lk.empty_like(x).shape == (2, 3) and lk.empty_like(x).dtype is lk.int32
    assert lk.empty(2, requires_grad=True).requires_grad
    assert lk.full_like(lk.zeros(2), 1.0, requires_grad=True).requires_grad


@pytest.mark.parametrize("fill", [1.5, 3, True])
def test_full_infers_pytorchs_dtype(fill):
    same(lk.full((2, 2), fill), torch.full((2, 2), fill))


@pytest.mark.parametrize("n, m", [(3, None), (2, 4), (4, 2), (0, 3), (1, 1)])
def test_eye_matches_pytorch(n, m):
    args = (n,) if m is None else (n, m)
    same(lk.eye(*args), torch.eye(*args))
    same(lk.eye(*args, dtype=lk.int64), torch.eye(*args, dtype=torch.int64))


@pytest.mark.parametrize("row, col, offset", [(3, 3, 0), (3, 4, 1), (4, 3, -1), (4, 3, 2),
                                              (0, 3, 0), (3, 3, -5), (3, 3, 5), (1, 5, 0)])
def test_tril_triu_indices_match_pytorch(row, col, offset):
    same(lk.tril_indices(row, col, offset), torch.tril_indices(row, col, offset))
    same(lk.triu_indices(row, col, offset), torch.triu_indices(row, col, offset))
    same(lk.tril_indices(row, col, offset, dtype=lk.int32),
         torch.tril_indices(row, col, offset, dtype=torch.int32))


# ---- random: shapes, dtypes, forms ---------------------------------------------------------------
def test_randint_forms():
    lk.manual_seed(0)
    for x in (lk.randint(10, (3, 2)), lk.randint(2, 10, (3, 2)), lk.randint(0, 10, size=(3, 2)),
              lk.randint(low=2, high=10, size=(3, 2))):
        assert x.shape == (3, 2) and x.dtype is lk.int64
        assert 0 <= int(x.min()) and int(x.max()) < 10
    assert lk.randint(2, 3, (5,)).tolist() == [2] * 5
    assert lk.randint(0, 5, 4).shape == (4,)                      # an int size is taken too
    assert lk.randint(5, (2,), dtype=lk.int32).dtype is lk.int32
    with pytest.raises(lk.ShapeError, match="less than"):
        lk.randint(5, 5, (2,))
    x = lk.zeros(2, 3)
    assert lk.randint_like(x, 4).dtype is lk.float32 and lk.randint_like(x, 4).shape == (2, 3)
    assert set(lk.randint_like(x, 3, 5, dtype=lk.int64).flatten().tolist()) <= {3, 4}


def test_rand_like_and_randn_like_follow_the_input():
    x = lk.zeros(2, 3, dtype=lk.float64)
    for fn in (lk.rand_like, lk.randn_like):
        assert fn(x).dtype is lk.float64 and fn(x).shape == (2, 3)
        assert fn(x, dtype=lk.float32).dtype is lk.float32
        with pytest.raises(lk.DTypeError, match="float dtype"):
            fn(lk.zeros(2, dtype=lk.int64))
    with pytest.raises(lk.DTypeError):
        lk.rand(2, dtype=lk.int64)


def test_randperm_is_a_permutation():
    p = lk.randperm(50)
    assert p.dtype is lk.int64 and sorted(p.tolist()) == list(range(50))
    assert lk.randperm(4, dtype=lk.int32).dtype is lk.int32
    assert lk.randperm(0).shape == (0,)


def test_draws_are_reproducible_with_manual_seed():
    def draw():
        lk.manual_seed(123)
        return (lk.rand(3).tolist(), lk.randint(9, (3,)).tolist(), lk.randperm(5).tolist(),
                lk.normal(0.0, 1.0, (2,)).tolist(), lk.bernoulli(lk.full((4,), 0.5)).tolist(),
                lk.multinomial(lk.ones(5), 3).tolist())
    assert draw() == draw()


# ---- random: distributions (seeded, loose) -------------------------------------------------------
N = 20000


def test_uniform_normal_and_integer_distributions():
    lk.manual_seed(1)
    u = lk.rand(N).numpy()
    assert abs(u.mean() - 0.5) < 0.01 and u.min() >= 0 and u.max() < 1
    z = lk.randn(N).numpy()
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03
    k = lk.randint(3, 8, (N,)).numpy()
    counts = np.bincount(k, minlength=8)[3:]
    assert counts.sum() == N and np.all(np.abs(counts / N - 0.2) < 0.02)


def test_normal_forms_and_moments():
    lk.manual_seed(2)
    x = lk.normal(3.0, 2.0, (N,))
    assert x.dtype is lk.float32 and abs(x.numpy().mean() - 3) < 0.06
    assert abs(x.numpy().std() - 2) < 0.06
    mean = lk.tensor([[-5.0], [5.0]], dtype=lk.float64)
    std = lk.tensor([0.1, 1.0, 3.0], dtype=lk.float64)
    y = lk.normal(mean, std)
    assert y.shape == (2, 3) and y.dtype is lk.float64
    draws = np.stack([lk.normal(mean, std).numpy() for _ in range(2000)])
    np.testing.assert_allclose(draws.mean(0), np.broadcast_to([[-5.0], [5.0]], (2, 3)),
                               atol=0.25)
    np.testing.assert_allclose(draws.std(0), np.broadcast_to([0.1, 1.0, 3.0], (2, 3)),
                               rtol=0.1)
    assert lk.normal(mean).shape == (2, 1) and lk.normal(0.0, std).shape == (3,)
    with pytest.raises(lk.ShapeError, match="std"):
        lk.normal(0.0, -1.0, (2,))
    with pytest.raises(TypeError, match="size"):
        lk.normal(0.0, 1.0)


def test_bernoulli_frequencies():
    lk.manual_seed(3)
    p = lk.tensor([0.0, 0.2, 0.5, 0.9, 1.0])
    draws = np.stack([lk.bernoulli(p).numpy() for _ in range(4000)])
    assert draws.dtype == np.float32 and set(np.unique(draws)) <= {0.0, 1.0}
    np.testing.assert_allclose(draws.mean(0), p.numpy(), atol=0.03)
    x = lk.zeros(N, dtype=lk.float64)
    b = lk.bernoulli(x, 0.3)
    assert b.dtype is lk.float64 and abs(b.numpy().mean() - 0.3) < 0.02
    assert abs(x.bernoulli(0.7).numpy().mean() - 0.7) < 0.02
    with pytest.raises(lk.ShapeError, match=r"\[0, 1\]"):
        lk.bernoulli(lk.tensor([1.5]))
    with pytest.raises(lk.DTypeError):
        lk.bernoulli(lk.tensor([1]))


def test_multinomial_with_replacement_follows_the_weights():
    lk.manual_seed(4)
    w = lk.tensor([[1.0, 2.0, 0.0, 7.0], [0.0, 0.0, 5.0, 5.0]])
    s = lk.multinomial(w, N, replacement=True)
    assert s.shape == (2, N) and s.dtype is lk.int64
    freq = np.stack([np.bincount(r, minlength=4) for r in s.numpy()]) / N
    np.testing.assert_allclose(freq, [[0.1, 0.2, 0.0, 0.7], [0.0, 0.0, 0.5, 0.5]], atol=0.015)
    assert lk.multinomial(lk.tensor([0.0, 3.0]), 5, replacement=True).tolist() == [1] * 5


def test_multinomial_without_replacement():
    lk.manual_seed(5)
    w = lk.tensor([1.0, 2.0, 3.0, 4.0])
    draws = np.stack([lk.multinomial(w, 3).numpy() for _ in range(5000)])
    assert all(len(set(r)) == 3 for r in draws)              # no category twice
    first = np.bincount(draws[:, 0], minlength=4) / len(draws)
    np.testing.assert_allclose(first, [0.1, 0.2, 0.3, 0.4], atol=0.03)
    # the second draw is from what is left: P(second = 0 | first = 3) = 1 / 6
    after3 = draws[draws[:, 0] == 3, 1]
    assert abs(np.mean(after3 == 0) - 1 / 6) < 0.04
    # categories of weight 0 come last, lowest index first (PyTorch's CPU behaviour)
    assert lk.multinomial(lk.tensor([[1.0, 2.0, 0.0], [0.0, 0.0, 3.0]]), 2)[1].tolist() == [2, 0]
    assert lk.multinomial(w, 4).shape == (4,) and w.multinomial(2).shape == (2,)
    with pytest.raises(lk.ShapeError, match="replacement=True"):
        lk.multinomial(w, 5)
    with pytest.raises(lk.ShapeError, match="negative"):
        lk.multinomial(lk.tensor([1.0, -1.0]), 1)
    with pytest.raises(lk.ShapeError, match="sums to 0"):
        lk.multinomial(lk.tensor([0.0, 0.0]), 1)


def test_creation_lands_on_the_device(device):
    for x in (lk.linspace(0, 1, 3, device=device), lk.logspace(0, 1, 3, device=device),
              lk.arange(3, device=device), lk.eye(2, device=device),
              lk.tril_indices(2, 2, device=device), lk.randperm(3, device=device),
              lk.randint(3, (2,), device=device), lk.normal(0.0, 1.0, (2,), device=device)):
        assert x.device.name == lk.devices.get_device(device).name
    assert math.isclose(lk.linspace(0, 1, 3, device=device)[1].item(), 0.5)


def test_to_with_copy_true_copies_even_when_nothing_changes():
    x = lk.ones(2)
    for y in (x.to(copy=True), x.to(lk.float32, copy=True), x.to("cpu", copy=True)):
        y.add_(1.0)
        assert x.tolist() == [1.0, 1.0] and y.tolist() == [2.0, 2.0]
    assert x.to(lk.float32) is x or x.to(lk.float32)._data is x._data     # no copy asked: none
