"""Sorting and searching at their edges, against PyTorch: NaN's place, stable order of ties,
unique's results (also captured, where their size is known only at run time), searchsorted's
forms; and the errors these ops raise."""
import numpy as np
import pytest

import labkit as lk

torch = pytest.importorskip("torch")

NAN = float("nan")


def _same(f, *data):
    """``f(m, *tensors)`` gives PyTorch's result (a tensor or a tuple of them) with labkit."""
    got = f(lk, *[lk.tensor(d) for d in data])
    want = f(torch, *[torch.tensor(d) for d in data])
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = w.numpy()
        assert g.dtype.np == w.dtype and g.shape == w.shape, (g, w)
        np.testing.assert_array_equal(g.numpy(), w)


@pytest.mark.parametrize("f", [
    lambda m, x: m.sort(x), lambda m, x: x.sort(descending=True),
    lambda m, x: m.sort(x, dim=0, stable=True), lambda m, x: x.argsort(dim=0, descending=True,
                                                                   stable=True),
    lambda m, x: m.topk(x, 2), lambda m, x: x.topk(1, 0, largest=False),
    lambda m, x: m.kthvalue(x, 3), lambda m, x: m.msort(x)],
    ids=["sort", "descending", "stable", "argsort", "topk", "topk_smallest", "kthvalue", "msort"])
def test_nan_sorts_after_every_number(f):
    _same(f, [[3.0, NAN, 1.0], [NAN, 2.0, 2.0]])


def test_ties_keep_their_order_in_stable_sorts():
    x = [2.0, 1.0, 2.0, 1.0, 2.0]
    _same(lambda m, x: x.sort(dim=0, stable=True), x)
    _same(lambda m, x: x.sort(dim=0, descending=True, stable=True), x)
    _same(lambda m, x: m.argsort(x, dim=0, descending=True, stable=True), x)


def test_unique_results():
    x = [[1, 3], [1, 3], [0, 7]]
    _same(lambda m, x: m.unique(x), x)
    _same(lambda m, x: x.unique(return_inverse=True), x)
    _same(lambda m, x: m.unique(x, return_counts=True, return_inverse=True), x)
    _same(lambda m, x: m.unique(x, dim=0, return_inverse=True, return_counts=True), x)
    _same(lambda m, x: m.unique(x, sorted=False, dim=1), x)
    _same(lambda m, x: x.unique_consecutive(return_counts=True), [1, 1, 2, 2, 3, 1, 1, 2])
    _same(lambda m, x: m.unique_consecutive(x, return_inverse=True, dim=0), x)


def test_unique_captured_knows_its_size_when_it_runs():
    @lk.function
    def f(x):
        values, counts = lk.unique(x, return_counts=True)
        assert values.shape == (None,) and counts.shape == (None,)
        return values, counts

    for data in ([3, 1, 3], [5, 5, 5, 5, 2, 0]):
        values, counts = f(lk.tensor(data))
        want = torch.unique(torch.tensor(data), return_counts=True)
        assert values.tolist() == want[0].tolist() and counts.tolist() == want[1].tolist()


def test_searchsorted_and_bucketize_forms():
    seq, values = [1.0, 3.0, 3.0, 5.0], [[3.0, 0.0], [6.0, 4.0]]
    _same(lambda m, s, v: m.searchsorted(s, v), seq, values)
    _same(lambda m, s, v: m.searchsorted(s, v, right=True), seq, values)
    _same(lambda m, s, v: m.searchsorted(s, v, side="right", out_int32=True), seq, values)
    _same(lambda m, s, v: m.searchsorted(s, 3.0), seq, values)
    _same(lambda m, s, v: m.searchsorted(s, v), [[1.0, 3.0], [2.0, 6.0]], values)
    _same(lambda m, s, v, order: m.searchsorted(s, v, sorter=order), [5.0, 1.0, 3.0], values,
          [1, 2, 0])
    _same(lambda m, s, v: m.bucketize(v, s), seq, values)
    _same(lambda m, s, v: m.bucketize(v, s, right=True, out_int32=True), seq, values)


@pytest.mark.parametrize("kind, call, words", [
    (lk.ShapeError, lambda x: x.topk(4), ["topk", "k=4", "(2, 3)", "0..3"]),
    (lk.ShapeError, lambda x: lk.kthvalue(x, 0, 0), ["kthvalue", "k=0", "(2, 3)", "1..2"]),
    (lk.IndexingError, lambda x: x.sort(2), ["sort", "dim=2", "(2, 3)"]),
    (lk.ArgumentError, lambda x: lk.argsort(x, (0, 1)), ["argsort", "one int", "(2, 3)"]),
    (lk.ShapeError, lambda x: x.mode(-3), ["mode", "(2, 3)"]),
    (lk.ShapeError, lambda x: lk.searchsorted(x, lk.zeros(3, 2)),
     ["searchsorted", "(2, 3)", "(3, 2)", "leading dimensions"]),
    (lk.ShapeError, lambda x: lk.searchsorted(x, 1.0), ["searchsorted", "(2, 3)", "1-D"]),
    (lk.ShapeError, lambda x: lk.bucketize(lk.zeros(2), x), ["bucketize", "(2, 3)", "1-D",
                                                              "searchsorted"]),
    (lk.ShapeError, lambda x: lk.unique(lk.zeros(0, 3), dim=1), ["unique", "(0, 3)"]),
    (ValueError, lambda x: lk.searchsorted(x[0], x, side="left", right=True),
     ["side", "right"]),
    (ValueError, lambda x: lk.searchsorted(x[0], x, side="up"), ["side", "'up'"]),
])
def test_errors_name_the_op_and_say_what_works(kind, call, words):
    with pytest.raises(kind) as info:
        call(lk.zeros(2, 3))
    for w in words:
        assert w in str(info.value), f"{w!r} missing from: {info.value}"
