"""Bad arguments raise, naming the function, the argument and the value, with a LabkitError that
is also the built-in class PyTorch raises for the same call; none returns garbage (the cases a
review found, each checked against PyTorch)."""
import numpy as np
import pytest
import torch

import labkit as lk

NAN = float("nan")


def _nan_into_int(lib):
    x = lib.zeros(2, dtype=lib.int64)
    x[0] = NAN
    return x


# (what, call with the library as argument, words the labkit error holds)
CASES = [
    ("split sizes with -1", lambda L: L.split(L.ones(10), [7, -1]), ["split", "-1"]),
    ("reshape to -2", lambda L: L.reshape(L.ones(2, 6), (-2, 6)), ["reshape", "-2"]),
    ("a string size", lambda L: L.zeros("3"), ["zeros", "'3'"]),
    ("a float size", lambda L: L.zeros(2.5), ["zeros", "2.5"]),
    ("a negative size", lambda L: L.ones(-1), ["ones", "-1"]),
    ("fill value None", lambda L: L.full((2, 3), None), ["full", "fill_value", "None"]),
    ("NaN into int64 (full)", lambda L: L.full((2,), NAN, dtype=L.int64), ["full", "nan"]),
    ("NaN into int64 (x[i] = nan)", _nan_into_int, ["setitem", "nan", "int64"]),
    ("gather with a negative index",
     lambda L: L.gather(L.ones(2, 3), 1, L.tensor([[-1], [0]])), ["gather", "-1"]),
    ("index_select with a negative index",
     lambda L: L.index_select(L.ones(2, 3), 1, L.tensor([-1])), ["index_select", "-1"]),
    ("conv2d dilation 0",
     lambda L: L.nn.functional.conv2d(L.ones(1, 1, 5, 5), L.ones(1, 1, 3, 3), dilation=0),
     ["conv2d", "dilation"]),
    ("interpolate scale 0",
     lambda L: L.nn.functional.interpolate(L.ones(1, 1, 4, 4), scale_factor=0.0),
     ["interpolate", "(0, 0)"]),
    ("None as a tensor", lambda L: L.exp(None), ["exp", "None"]),
    ("a dim of the wrong type", lambda L: L.sum(L.ones(2), "0"), ["sum", "'0'"]),
    ("a zero stride", lambda L: L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), 2, stride=0),
     ["max_pool2d", "stride"]),
    ("transpose of a 0-d tensor", lambda L: L.transpose(L.tensor(1.0), 0, 1),
     ["transpose", "dim=1"]),
    # issue 28, item 10
    ("take out of range", lambda L: L.take(L.ones(2, 3), L.tensor([7])),
     ["take", "7", "size 6"]),
    ("softmax of a 0-d tensor along dim 1", lambda L: L.softmax(L.tensor(1.0), 1),
     ["softmax", "dim=1"]),
    ("log_softmax of a 0-d tensor along dim 1",
     lambda L: L.log_softmax(L.tensor(1.0), dim=1), ["log_softmax", "dim=1"]),
]


def _builtin(error):
    return next(c for c in type(error).__mro__ if c.__module__ == "builtins")


@pytest.mark.parametrize("what,call,words", CASES, ids=[c[0] for c in CASES])
def test_a_bad_call_raises_as_pytorch_does_and_names_the_mistake(what, call, words):
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(lk.LabkitError) as ours:
        call(lk)
    assert isinstance(ours.value, _builtin(theirs.value)), (ours.value, theirs.value)
    for word in words:
        assert word in str(ours.value), (word, str(ours.value))


def test_a_captured_matmul_with_clashing_batch_dims_names_both_operands():
    f = lk.function(lambda a, b: a @ b)
    with pytest.raises(lk.ShapeError, match=r"matmul: \(2, 3, 4, 5\) @ \(3, 3, 5, 6\): the batch "
                                            r"dimensions \(2, 3\) and \(3, 3\).*Inputs: Tensor"):
        f(lk.ones(2, 3, 4, 5), lk.ones(3, 3, 5, 6))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_pools_of_integer_tensors_match_pytorch(dtype):
    x = np.arange(25).reshape(1, 1, 5, 5).astype(dtype) - (7 if dtype != np.uint8 else 0)
    for pool in ("max_pool2d", "avg_pool2d"):
        if pool == "avg_pool2d" and dtype != np.int64:
            continue                      # PyTorch's CPU average pool takes int64 only
        ours = getattr(lk.nn.functional, pool)(lk.tensor(x), 2, padding=1)
        theirs = getattr(torch.nn.functional, pool)(torch.tensor(x), 2, padding=1)
        assert ours.dtype.np == theirs.numpy().dtype
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_valid_calls_of_the_same_functions_still_work():
    assert lk.split(lk.arange(10), [7, 3])[1].tolist() == [7, 8, 9]
    assert lk.reshape(lk.ones(2, 6), (-1, 4)).shape == (3, 4)
    assert lk.zeros(np.int64(2), 3).shape == (2, 3)
    assert lk.take(lk.arange(6).reshape(2, 3), lk.tensor([-1])).tolist() == [5]
    assert lk.take_along_dim(lk.arange(6).reshape(2, 3), lk.tensor([[-1]]), 1).tolist() == \
        [[2], [5]]
    assert lk.softmax(lk.tensor(1.0), -1).item() == 1.0
    assert [p.shape for p in lk.split(lk.ones(0), 0)] == \
        [p.shape for p in torch.split(torch.ones(0), 0)]
