"""Nested structures through lk.function and control flow: namedtuples, dicts, lists and Python
values go in and come out as they were; what a graph cannot hand back is refused when traced."""
import collections

import numpy as np
import pytest

import labkit as lk
from labkit.autodiff import trees

Pair = collections.namedtuple("Pair", "a b")


def test_function_returns_namedtuples_dicts_and_python_values():
    @lk.function
    def f(x, opts):
        return {"pair": Pair(x * opts["k"], [x + 1.0, None]), "tag": opts["tag"]}

    for _ in range(2):                              # the trace, then the plan
        out = f(lk.ones(2), {"k": 3.0, "tag": "run"})
        assert type(out["pair"]) is Pair and out["tag"] == "run"
        np.testing.assert_allclose(out["pair"].a.numpy(), [3.0, 3.0])
        assert out["pair"].b[1] is None and isinstance(out["pair"].b, list)
    assert len(f.traces) == 1


def test_function_refuses_to_return_an_object_it_would_hand_back_unchanged():
    @lk.function
    def f(x):
        return x * 2.0, np.zeros(2)

    with pytest.raises(lk.LabkitError, match="returns a ndarray, which a captured graph"):
        f(lk.ones(2))


def test_a_changed_python_argument_is_named_in_the_retrace_reason():
    @lk.function
    def f(x, scale, mode="a"):
        return x * scale

    f(lk.ones(2), 2.0)
    f(lk.ones(2), 3.0, mode="b")
    f(lk.ones(2), 3.0, "b", )
    assert "scale: Python value 2.0 -> Python value 3.0" in f.traces[1].reason
    assert "mode: (absent) -> Python value 'b'" in f.traces[1].reason
    assert "number of positional arguments 2 -> 3" in f.traces[2].reason


def test_scan_carries_a_namedtuple():
    def step(c, x):
        return Pair(c.a + x, c.b * 2.0), c.a

    @lk.function
    def run(xs):
        return lk.scan(step, Pair(lk.zeros(()), lk.ones(())), xs)

    carry, ys = run(lk.tensor([1.0, 2.0, 3.0]))
    assert type(carry) is Pair
    assert carry.a.item() == 6.0 and carry.b.item() == 8.0
    np.testing.assert_allclose(ys.numpy(), [0.0, 1.0, 3.0])


def test_flatten_and_unflatten_round_trip():
    leaves = []
    obj = (Pair(1, [2, {"z": 3}]), None)
    spec = trees.flatten_into(obj, leaves, lambda o: isinstance(o, int), trees.value)
    assert leaves == [1, 2, 3]
    assert trees.unflatten(spec, [10, 20, 30]) == (Pair(10, [20, {"z": 30}]), None)
    assert trees.text(spec) == "((tensor, [tensor, {'z': tensor}]), None)"
    hash(spec)
