"""Reductions and scans at their edges, against PyTorch: ties (gradients shared evenly, or sent to
the returned index), zeros in prod and cumprod, the lower median, the NaN of a one-element std,
reductions over no elements; and the errors these ops raise.

Each check runs one PyTorch spelling twice, with ``m = labkit`` and with ``m = torch``.
"""
import math

import numpy as np
import pytest

import labkit as lk

torch = pytest.importorskip("torch")


def _value_and_grads(m, f, data, create_graph=False):
    """``f(m, x)`` and the gradient of ``(f * w).sum()`` by ``x``, in float64, for ``m`` labkit or
    torch; with ``create_graph``, also the gradient of the sum of that gradient (second order)."""
    x = m.tensor(data, dtype=m.float64, requires_grad=True)
    out = f(m, x)
    w = m.tensor(np.linspace(1.0, 2.0, max(math.prod(out.shape), 1))[:math.prod(out.shape)]
                 .reshape(tuple(out.shape)), dtype=m.float64)
    if m is torch:
        g, = torch.autograd.grad((out * w).sum(), x, create_graph=create_graph)
        second = torch.autograd.grad(g.sum(), x)[0] if create_graph else None
        return out.detach().numpy(), g.detach().numpy(), second
    with lk.enable_grad():
        g, = lk.autodiff.gradients((out * w).sum(), [x], create_graph=create_graph)
        second = lk.autodiff.gradients(g.sum(), [x])[0] if create_graph else None
    return out.detach().numpy(), g.detach().numpy(), None if second is None else second.detach().numpy()


def same_as_torch(f, data, second_order=False):
    got = _value_and_grads(lk, f, data, second_order)
    want = _value_and_grads(torch, f, data, second_order)
    for name, a, b in zip(("value", "gradient", "second-order gradient"), got, want):
        if b is not None:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, equal_nan=True,
                                       err_msg=f"{name} differs from PyTorch's")


TIES = [[3.0, 1.0, 3.0, 3.0], [[2.0, 5.0, 5.0], [5.0, 0.0, 1.0]], [[1.0, 1.0], [1.0, 1.0]]]


# ---- ties ----------------------------------------------------------------------------------
@pytest.mark.parametrize("data", TIES)
@pytest.mark.parametrize("f", [lambda m, x: x.max(), lambda m, x: x.min(),
                               lambda m, x: m.amax(x), lambda m, x: m.amin(x, -1),
                               lambda m, x: m.amax(x, (0, -1)) if x.ndim == 2 else m.amax(x, 0),
                               lambda m, x: m.aminmax(x).max,
                               lambda m, x: x.median(), lambda m, x: x.nanmedian()],
                         ids=["max", "min", "amax", "amin_dim", "amax_dims", "aminmax", "median",
                              "nanmedian"])
def test_ties_share_the_gradient_evenly(f, data):
    same_as_torch(f, data)


@pytest.mark.parametrize("f", [lambda m, x: x.max(-1).values, lambda m, x: x.min(0).values,
                               lambda m, x: x.median(-1).values,
                               lambda m, x: x.sort(dim=-1, stable=True).values,
                               lambda m, x: x.cummax(-1).values, lambda m, x: x.cummin(0).values],
                         ids=["max_dim", "min_dim", "median_dim", "sort", "cummax",
                              "cummin"])
def test_ties_along_a_dim_send_the_gradient_to_the_index(f):
    same_as_torch(f, [[2.0, 5.0, 5.0, 1.0], [5.0, 5.0, 0.0, 5.0]])


# ---- zeros in products -----------------------------------------------------------------------
@pytest.mark.parametrize("data", [[2.0, 0.0, 3.0, 4.0], [2.0, 0.0, 3.0, 0.0], [0.0, 0.0, 0.0],
                                  [[1.5, 0.0], [0.0, 2.0], [3.0, -1.0]]])
@pytest.mark.parametrize("f", [lambda m, x: x.prod(), lambda m, x: m.prod(x, 0),
                               lambda m, x: m.prod(x, -1, keepdim=True)],
                         ids=["all", "dim0", "last_keepdim"])
def test_prod_with_zeros(f, data):
    same_as_torch(f, data, second_order=True)


@pytest.mark.parametrize("data", [[2.0, 0.0, 3.0, 0.0, 5.0], [0.0, 2.0, 3.0], [1.0, 2.0, 0.0],
                                  [[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]]])
@pytest.mark.parametrize("dim", [0, -1])
def test_cumprod_with_zeros(data, dim):
    same_as_torch(lambda m, x: m.cumprod(x, dim), data)


def test_cumprod_second_order_without_zeros():
    same_as_torch(lambda m, x: m.cumprod(x, -1), [[1.5, -2.0, 0.5], [3.0, 0.25, -1.0]],
                  second_order=True)


# ---- medians, std, empties ----------------------------------------------------------------------
@pytest.mark.parametrize("data", [[4.0, 1.0, 3.0, 2.0], [[7.0, 1.0], [3.0, 5.0]], [2.0, 2.0]])
def test_median_of_an_even_count_is_the_lower_one(data):
    same_as_torch(lambda m, x: x.median(), data)
    same_as_torch(lambda m, x: x.median(-1).values, data)
    assert lk.median(lk.tensor([4.0, 1.0, 3.0, 2.0])).item() == 2.0


def test_std_of_one_element_is_nan():
    for f in (lambda m: m.std(m.tensor([1.5])), lambda m: m.tensor([[1.5, 2.0]]).std(0),
              lambda m: m.var(m.tensor(3.0)), lambda m: m.std_mean(m.tensor([2.0]))[0]):
        with np.errstate(all="ignore"), pytest.warns(UserWarning):
            want = f(torch).numpy()
        with np.errstate(all="ignore"):
            got = f(lk).numpy()
        np.testing.assert_array_equal(got, want)
        assert np.isnan(got).all()


def test_reductions_over_no_elements():
    for f in (lambda m, x: m.sum(x), lambda m, x: m.prod(x), lambda m, x: x.prod(0),
              lambda m, x: m.all(x), lambda m, x: m.any(x), lambda m, x: x.all(1),
              lambda m, x: x.any(0), lambda m, x: m.count_nonzero(x), lambda m, x: x.nansum(),
              lambda m, x: m.amax(x, 1), lambda m, x: m.cumsum(x, 0),
              lambda m, x: m.logsumexp(x, 0), lambda m, x: m.median(x)):
        x = np.zeros((0, 2))
        want = f(torch, torch.tensor(x)).numpy()
        with np.errstate(divide="ignore"):                 # logsumexp: log(0)
            got = f(lk, lk.tensor(x)).numpy()
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    assert lk.prod(lk.zeros(0)).item() == 1.0 and lk.sum(lk.zeros(0)).item() == 0.0
    assert lk.all(lk.zeros(0)).item() is True and lk.any(lk.zeros(0)).item() is False


@pytest.mark.parametrize("name, call", [
    ("amax", lambda x: lk.amax(x)), ("amin", lambda x: x.amin(0)),
    ("aminmax", lambda x: lk.aminmax(x)), ("max", lambda x: x.max(0)),
    ("median", lambda x: x.median(0)), ("nanmedian", lambda x: x.nanmedian(0)),
    ("mode", lambda x: x.mode(0)), ("kthvalue", lambda x: x.kthvalue(1, 0))])
def test_extrema_over_no_elements_are_errors_naming_the_op(name, call):
    with pytest.raises(lk.ShapeError) as info:
        call(lk.zeros(0, 2))
    assert f"{name}:" in str(info.value) and "(0, 2)" in str(info.value)


# ---- PyTorch's argument forms ------------------------------------------------------------------
def test_var_and_std_take_pytorchs_argument_forms():
    data = np.random.default_rng(0).standard_normal((3, 4))
    forms = [lambda m, x: m.var(x), lambda m, x: m.var(x, 1), lambda m, x: m.var(x, 1, False),
             lambda m, x: m.var(x, 0, True, True), lambda m, x: m.var(x, False),
             lambda m, x: m.var(x, [0, 1], keepdim=True, correction=0),
             lambda m, x: x.var(dim=1, correction=2), lambda m, x: x.std(unbiased=False),
             lambda m, x: m.std(x, 1, keepdim=True, correction=0.5),
             lambda m, x: m.var_mean(x, 1, unbiased=False)[0],
             lambda m, x: m.std_mean(x, dim=0, correction=0)[1]]
    for f in forms:
        np.testing.assert_allclose(f(lk, lk.tensor(data)).numpy(),
                                   f(torch, torch.tensor(data)).numpy(), rtol=1e-12)
    assert isinstance(lk.var_mean(lk.tensor(data)), tuple)


def test_named_results_and_int64_indices():
    x = lk.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    for r, fields in ((x.sort(), ("values", "indices")), (x.topk(1), ("values", "indices")),
                      (x.kthvalue(1), ("values", "indices")), (x.median(1), ("values", "indices")),
                      (x.mode(1), ("values", "indices")), (x.cummax(1), ("values", "indices")),
                      (lk.aminmax(x), ("min", "max"))):
        assert r._fields == fields and type(r).__name__ in ("sort", "topk", "kthvalue", "median",
                                                            "mode", "cummax", "aminmax")
    assert x.argsort().dtype is lk.int64 and x.sort().indices.dtype is lk.int64
    assert lk.cumsum(lk.tensor([True, True]), 0).dtype is lk.int64
    assert lk.all(x > 0).dtype is lk.bool_ and bool(x.any())


def test_methods_replace_the_old_all_and_any():
    x = lk.tensor([[1.0, 0.0], [2.0, 3.0]])
    assert x.all(1).tolist() == [False, True] and x.any(0, keepdim=True).tolist() == [[True, True]]
    assert x.all((0, 1)).item() is False and lk.tensor(2.0).all(0).item() is True


# ---- errors --------------------------------------------------------------------------------
@pytest.mark.parametrize("kind, call, words", [
    (lk.ShapeError, lambda x: lk.prod(x, (0, 1)), ["prod", "(2, 3)", "one int"]),
    (lk.ShapeError, lambda x: x.prod(2), ["prod", "(2, 3)", "dim=2"]),
    (lk.ShapeError, lambda x: lk.cumsum(x, 2), ["cumsum", "(2, 3)"]),
    (lk.ShapeError, lambda x: x.cumprod(-3), ["cumprod", "(2, 3)"]),
    (lk.ShapeError, lambda x: x.cummax(5), ["cummax", "(2, 3)"]),
    (lk.ShapeError, lambda x: lk.all(x, 3), ["all", "(2, 3)"]),
    (lk.ShapeError, lambda x: x.median(2), ["median", "(2, 3)"]),
    (lk.ShapeError, lambda x: lk.logsumexp(x, (0, 2)), ["logsumexp", "(2, 3)"]),
    (lk.DTypeError, lambda x: lk.var(x.long()), ["var", "int64", "x.float()"]),
    (lk.DTypeError, lambda x: x.long().std(1), ["std", "int64", "x.float()"]),
    (lk.DTypeError, lambda x: lk.nanmean(x.long()), ["nanmean", "int64", "x.float()"]),
    (TypeError, lambda x: lk.var(x, 1, True, correction=0), ["var", "correction"]),
    (TypeError, lambda x: x.median(keepdim=True), ["median", "dim"]),
])
def test_errors_name_the_op_and_say_what_works(kind, call, words):
    with pytest.raises(kind) as info:
        call(lk.zeros(2, 3))
    for w in words:
        assert w in str(info.value), f"{w!r} missing from: {info.value}"


# ---- the running max/min without NumPy's accumulate (CuPy has none) -------------------------
@pytest.mark.parametrize("shape, axis", [((7,), 0), ((3, 5), 1), ((4, 2, 3), 0), ((0, 3), 0),
                                         ((2, 1), 1), ((9, 2), -2)])
def test_doubling_scan_is_the_running_extremum(shape, axis):
    from labkit.tensor.ops.scan import doubling_scan
    x = np.random.default_rng(1).integers(-3, 4, shape).astype(float)
    x[x == 3] = np.nan
    for fn in (np.maximum, np.minimum):
        np.testing.assert_array_equal(doubling_scan(np, fn, x, axis % len(shape)),
                                      fn.accumulate(x, axis=axis))


def test_a_pytorch_program_runs_unchanged():
    def program(torch, logits, labels):
        top2 = logits.topk(2, dim=1).indices
        hit = (top2 == labels.unsqueeze(1)).any(dim=1).double().mean()
        z = (logits - logits.mean(0, keepdim=True)) / logits.std(0, keepdim=True)
        lse = torch.logsumexp(z, dim=1)
        values, counts = torch.unique(labels, return_counts=True)
        low, high = torch.aminmax(lse)
        edges = torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64)
        return (hit, z.var(dim=0, unbiased=False), torch.argsort(lse, descending=True),
                torch.median(lse), lse.cumsum(0).cummax(0).values, counts, high - low,
                torch.bucketize(lse, edges), z.prod(1), torch.nanmean(z, 0), z.amax((0, 1)),
                z.kthvalue(2, 0).indices, z.sort(1).values, z.all(), torch.var_mean(z, 1)[0])

    rng = np.random.default_rng(3)
    logits, labels = rng.standard_normal((6, 4)), rng.integers(0, 4, 6)
    got = program(lk, lk.tensor(logits), lk.tensor(labels))
    want = program(torch, torch.tensor(logits), torch.tensor(labels))
    for g, w in zip(got, want):
        assert g.dtype.np == w.numpy().dtype and g.shape == tuple(w.shape)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12, atol=1e-12)
