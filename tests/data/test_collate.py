"""default_collate and default_convert against torch.utils.data's: nested tuples, lists, dicts,
namedtuples of tensors, NumPy arrays and scalars, Python numbers, bools and strings; the
containers and dtypes of the result; the errors."""
import collections

import numpy as np
import pytest

import labkit as lk
from labkit.data import default_collate, default_convert

from .torch_kit import plain, to_torch, torch

Point = collections.namedtuple("Point", "x y")


class Record(dict):
    pass


SAMPLES = {
    "tensors": [lk.tensor([1.0, 2.0]), lk.tensor([3.0, 4.0])],
    "int tensors 0-d": [lk.tensor(1), lk.tensor(2)],
    "float32 arrays": [np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32)],
    "float64 arrays": [np.arange(3.0), np.arange(3.0) * 2],
    "int32 arrays": [np.arange(2, dtype=np.int32), np.arange(2, dtype=np.int32)],
    "0-d arrays": [np.array(1.5), np.array(2.5)],
    "floats": [0.5, 1.5, 2.0],
    "ints": [1, 2, 3],
    "bools": [True, False],
    "numpy float32 scalars": [np.float32(1.5), np.float32(2.5)],
    "numpy int32 scalars": [np.int32(1), np.int32(7)],
    "numpy bools": [np.bool_(True), np.bool_(False)],
    "strings": ["a", "bc"],
    "bytes": [b"a", b"b"],
    "tuples": [(lk.tensor([1.0]), 1, "a"), (lk.tensor([2.0]), 2, "b")],
    "lists": [[1.0, 2], [3.0, 4]],
    "dicts": [{"image": np.zeros(2, np.float32), "label": 3, "meta": {"id": "x"}},
              {"image": np.ones(2, np.float32), "label": 4, "meta": {"id": "y"}}],
    "ordered dicts": [collections.OrderedDict(b=1, a=2.0), collections.OrderedDict(b=3, a=4.0)],
    "dict subclass": [Record(x=1), Record(x=2)],
    "namedtuples": [Point(lk.tensor(1.0), 2), Point(lk.tensor(3.0), 4)],
    "deep nesting": [([{"a": (1, [2.0])}], np.float64(1)), ([{"a": (3, [4.0])}], np.float64(2))],
}


@pytest.mark.parametrize("name", SAMPLES)
def test_default_collate_matches_torch(name):
    samples = SAMPLES[name]
    ours = default_collate(samples)
    theirs = torch.utils.data.default_collate(to_torch(samples))
    assert plain(ours) == plain(theirs)


@pytest.mark.parametrize("name", SAMPLES)
def test_default_convert_matches_torch(name):
    for sample in SAMPLES[name]:
        ours = default_convert(sample)
        theirs = torch.utils.data.default_convert(to_torch(sample))
        assert plain(ours) == plain(theirs)


def test_default_convert_leaves_string_arrays():
    words = np.array(["a", "b"])
    assert default_convert(words) is words
    assert default_convert(3) == 3 and default_convert("s") == "s"


def test_collated_tensors_are_new_memory_and_keep_gradients():
    base = lk.zeros(2)
    batch = default_collate([base, base])
    batch += 1.0
    assert base.tolist() == [0.0, 0.0]
    w = lk.tensor([1.0, 2.0], requires_grad=True)
    stacked = default_collate([w, w * 2])
    stacked.sum().backward()
    assert w.grad.tolist() == [3.0, 3.0]


def test_collate_errors():
    with pytest.raises(lk.ShapeError, match=r"different shapes \[\(2,\), \(3,\)\]"):
        default_collate([lk.zeros(2), lk.zeros(3)])
    with pytest.raises(lk.ShapeError, match="different shapes"):
        default_collate([np.zeros(2), np.zeros(3)])
    with pytest.raises(lk.ShapeError, match="equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="found object.*collate_fn"):
        default_collate([object(), object()])
    with pytest.raises(TypeError, match="numpy arrays"):
        default_collate([np.array(["a"]), np.array(["b"])])
    for bad in ([object(), object()], [np.array(["a"]), np.array(["b"])]):
        with pytest.raises(TypeError):
            torch.utils.data.default_collate(bad)


def test_custom_collate_map_extends_the_walk():
    from labkit.data.collate import collate, default_collate_fn_map

    class Box:
        def __init__(self, v):
            self.v = v

    table = {**default_collate_fn_map, Box: lambda batch, **_: sum(b.v for b in batch)}
    assert collate([(Box(1), 1.0), (Box(2), 2.0)], collate_fn_map=table)[0] == 3
