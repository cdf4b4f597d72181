"""Samplers, dataset combinators, random_split and the single-process DataLoader against
torch.utils.data where the result is deterministic (fixed orders, sizes, lengths, batches,
errors); random samplers by their properties and their reproducibility."""
import collections
import warnings

import numpy as np
import pytest

import labkit as lk
from labkit import data

from .torch_kit import batches, plain, to_torch, torch

tdata = torch.utils.data


def test_sequential_and_batch_samplers_match_torch():
    for n in (0, 1, 7, 8):
        assert list(data.SequentialSampler(range(n))) == list(tdata.SequentialSampler(range(n)))
        for size in (1, 3, 8):
            for drop in (False, True):
                ours = data.BatchSampler(data.SequentialSampler(range(n)), size, drop)
                theirs = tdata.BatchSampler(tdata.SequentialSampler(range(n)), size, drop)
                assert list(ours) == list(theirs) and len(ours) == len(theirs)
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="positive integer"):
            data.BatchSampler(range(3), bad, False)
        with pytest.raises(ValueError):
            tdata.BatchSampler(range(3), bad, False)
    with pytest.raises(ValueError, match="boolean"):
        data.BatchSampler(range(3), 2, 1)


def test_random_sampler_orders():
    g = lk.Generator().manual_seed(3)
    epochs = [list(data.RandomSampler(range(10), generator=g)) for _ in range(2)]
    assert all(sorted(e) == list(range(10)) for e in epochs) and epochs[0] != epochs[1]
    again = lk.Generator().manual_seed(3)
    assert [list(data.RandomSampler(range(10), generator=again)) for _ in range(2)] == epochs
    lk.manual_seed(1)
    a = list(data.RandomSampler(range(10)))
    lk.manual_seed(1)
    assert list(data.RandomSampler(range(10))) == a
    more = list(data.RandomSampler(range(4), num_samples=10))      # 2 permutations and a half
    assert len(more) == 10 and sorted(more[:4]) == sorted(more[4:8]) == [0, 1, 2, 3]
    assert len(set(more[8:])) == 2
    drawn = data.RandomSampler(range(3), replacement=True, num_samples=50)
    values = list(drawn)
    assert len(drawn) == 50 and len(values) == 50 and set(values) == {0, 1, 2}
    for ours, theirs in ((data.RandomSampler(range(5), num_samples=3),
                          tdata.RandomSampler(range(5), num_samples=3)),
                         (data.RandomSampler(range(5)), tdata.RandomSampler(range(5)))):
        assert len(ours) == len(theirs) == ours.num_samples == theirs.num_samples
    for bad in (0, -2, 1.5):
        with pytest.raises(ValueError, match="num_samples should be a positive integer"):
            data.RandomSampler(range(3), num_samples=bad)
    with pytest.raises(ValueError, match="num_samples"):
        data.RandomSampler([])
    with pytest.raises(TypeError, match="replacement should be a boolean"):
        data.RandomSampler(range(3), replacement=1)
    with pytest.raises(TypeError):
        tdata.RandomSampler(range(3), replacement=1)


def test_subset_and_weighted_samplers():
    sub = data.SubsetRandomSampler([10, 20, 30], generator=lk.Generator().manual_seed(0))
    assert sorted(sub) == [10, 20, 30] and len(sub) == 3
    weights = [0.0, 1.0, 3.0, 0.0]
    w = data.WeightedRandomSampler(weights, 4000, generator=lk.Generator().manual_seed(0))
    counts = np.bincount(list(w), minlength=4)
    assert len(w) == 4000 and counts[0] == counts[3] == 0
    assert 2.6 < counts[2] / counts[1] < 3.4
    assert w.weights.dtype is lk.float64
    once = list(data.WeightedRandomSampler(weights, 2, replacement=False))
    assert sorted(once) == [1, 2]
    assert list(data.WeightedRandomSampler(lk.tensor([0.0, 2.0]), 3)) == [1, 1, 1]
    with pytest.raises(ValueError, match="1d sequence"):
        data.WeightedRandomSampler([[1.0, 2.0]], 2)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        data.WeightedRandomSampler(weights, 0)
    with pytest.raises(ValueError, match="replacement should be a boolean"):
        data.WeightedRandomSampler(weights, 2, replacement=None)
    with pytest.raises(ValueError, match="non-negative"):
        data.WeightedRandomSampler([1.0, -1.0], 2)
    with pytest.raises(ValueError, match="without replacement from 2 non-zero"):
        data.WeightedRandomSampler(weights, 3, replacement=False)
    for bad in ([[1.0, 2.0]], 2), (weights, 0), (weights, 2, None):
        with pytest.raises(ValueError):
            tdata.WeightedRandomSampler(*bad)


@pytest.mark.parametrize("n, lengths", [
    (10, [3, 7]), (10, [0.5, 0.5]), (10, [0.7, 0.2, 0.1]), (11, [0.3, 0.3, 0.4]),
    (7, [1 / 3, 1 / 3, 1 / 3]), (5, [0.1, 0.9]), (3, [0.25, 0.25, 0.25, 0.25]), (1, [1, 0]),
    (0, [0, 0])])
def test_random_split_sizes_match_torch(n, lengths):
    with warnings.catch_warnings(record=True) as ours_warned:
        warnings.simplefilter("always")
        ours = data.random_split(range(n), lengths, generator=lk.Generator().manual_seed(0))
    with warnings.catch_warnings(record=True) as theirs_warned:
        warnings.simplefilter("always")
        theirs = tdata.random_split(range(n), lengths, generator=torch.Generator().manual_seed(0))
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    assert len(ours_warned) == len(theirs_warned)
    assert sorted(i for s in ours for i in s.indices) == list(range(n))
    assert all(isinstance(s, data.Subset) and s.dataset == range(n) for s in ours)


def test_random_split_draws_and_errors():
    ds = data.TensorDataset(lk.arange(20))
    first = [s.indices for s in data.random_split(ds, [5, 15],
                                                  generator=lk.Generator().manual_seed(4))]
    again = [s.indices for s in data.random_split(ds, [5, 15],
                                                  generator=lk.Generator().manual_seed(4))]
    assert first == again
    lk.manual_seed(2)
    a = [s.indices for s in data.random_split(ds, [0.5, 0.5])]
    lk.manual_seed(2)
    assert [s.indices for s in data.random_split(ds, [0.5, 0.5])] == a
    train, _ = data.random_split(ds, [5, 15], generator=lk.Generator().manual_seed(4))
    assert [train[i][0].item() for i in range(5)] == first[0]
    with pytest.raises(ValueError, match="sum to 19, but the dataset has 20"):
        data.random_split(ds, [4, 15])
    with pytest.raises(ValueError):
        tdata.random_split(range(20), [4, 15])
    with pytest.raises(ValueError, match="fraction at index 0 .*got 1.5"):
        data.random_split(ds, [1.5, -0.5])


def test_dataset_combinators_match_torch():
    a, b = [10, 11], [20, 21, 22]
    ours, theirs = data.ConcatDataset([a, b]), tdata.ConcatDataset([a, b])
    assert ours.cumulative_sizes == theirs.cumulative_sizes and len(ours) == len(theirs)
    assert [ours[i] for i in range(-5, 5)] == [theirs[i] for i in range(-5, 5)]
    with pytest.raises(IndexError):
        ours[5]
    with pytest.raises(IndexError, match="out of range"):
        ours[-6]
    with pytest.raises(ValueError, match="empty"):
        data.ConcatDataset([])
    sub = data.Subset(data.TensorDataset(lk.arange(6) * 10), [5, 1, 3])
    assert [sub[i][0].item() for i in range(3)] == [50, 10, 30] and len(sub) == 3
    assert [s[0].item() for s in sub.__getitems__([2, 0])] == [30, 50]
    listed = data.Subset(list(range(100, 110)), [9, 0])
    theirs = tdata.Subset(list(range(100, 110)), [9, 0])
    assert listed.__getitems__([0, 1]) == theirs.__getitems__([0, 1])
    stacked = data.StackDataset(data.TensorDataset(lk.arange(3)), ["a", "b", "c"])
    assert stacked[1][1] == "b" and len(stacked) == 3
    assert data.StackDataset(x=[1, 2], y=[3, 4])[0] == tdata.StackDataset(x=[1, 2], y=[3, 4])[0]
    with pytest.raises(lk.ShapeError, match="one length"):
        data.StackDataset([1], [1, 2])
    both = data.TensorDataset(lk.arange(2)) + data.TensorDataset(lk.arange(3))
    assert isinstance(both, data.ConcatDataset) and len(both) == 5

    class Stream(data.IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n))

        def __len__(self):
            return self.n
    chained = Stream(2) + Stream(3)
    assert isinstance(chained, data.ChainDataset) and list(chained) == [0, 1, 0, 1, 2]
    assert len(chained) == 5
    with pytest.raises(TypeError, match="IterableDataset"):
        data.ConcatDataset([Stream(2)])
    with pytest.raises(NotImplementedError, match="__getitem__"):
        data.Dataset()[0]
    with pytest.raises(TypeError):
        len(data.Dataset())          # as PyTorch: a Dataset has no length of its own


class Pairs(data.Dataset):
    def __len__(self):
        return 7

    def __getitem__(self, i):
        return {"x": np.full(2, i, np.float32), "y": i, "name": f"s{i}"}


class Stream(data.IterableDataset):
    def __iter__(self):
        return iter((np.float32(i), i) for i in range(7))


class TorchStream(tdata.IterableDataset):
    def __iter__(self):
        return iter((np.float32(i), i) for i in range(7))


LOADERS = {
    "batches": dict(batch_size=3),
    "drop_last": dict(batch_size=3, drop_last=True),
    "unbatched": dict(batch_size=None),
    "sampler": dict(batch_size=2, sampler=[6, 0, 3, 3]),
    "batch_sampler": dict(batch_sampler=[[1, 2], [6], [0, 0, 5]]),
    "collate_fn": dict(batch_size=4, collate_fn=lambda s: [d["y"] for d in s]),
}


@pytest.mark.parametrize("name", LOADERS)
def test_loader_batches_match_torch(name):
    kwargs = LOADERS[name]
    ours, theirs = data.DataLoader(Pairs(), **kwargs), tdata.DataLoader(Pairs(), **kwargs)
    assert batches(ours) == batches(theirs)
    if name != "sampler":
        assert len(ours) == len(theirs)


@pytest.mark.parametrize("kwargs", [dict(batch_size=3), dict(batch_size=3, drop_last=True),
                                    dict(batch_size=None)])
def test_iterable_loader_matches_torch(kwargs):
    assert batches(data.DataLoader(Stream(), **kwargs)) == batches(
        tdata.DataLoader(TorchStream(), **kwargs))
    with pytest.raises(TypeError):
        len(data.DataLoader(Stream(), **kwargs))


def test_tensor_dataset_batches_match_torch():
    x, y = lk.randn(9, 2), lk.arange(9)
    order = [4, 0, 8, 8, 2, 1, 7]
    for sampler in (None, order):
        ours = data.DataLoader(data.TensorDataset(x, y), batch_size=3, sampler=sampler)
        theirs = tdata.DataLoader(tdata.TensorDataset(*to_torch((x, y))), batch_size=3,
                                  sampler=sampler)
        assert batches(ours) == batches(theirs)
    subset = data.Subset(data.TensorDataset(x, y), [3, 1, 4, 1, 5])
    ours = data.DataLoader(subset, batch_size=2)
    theirs = tdata.DataLoader(tdata.Subset(tdata.TensorDataset(*to_torch((x, y))),
                                           [3, 1, 4, 1, 5]), batch_size=2)
    assert batches(ours) == batches(theirs)
    first = next(iter(data.DataLoader(data.TensorDataset(x), batch_size=3)))[0]
    first += 100.0                                     # a batch is new memory
    assert float(x.max()) < 100.0


def test_loader_option_errors_match_torch():
    cases = [dict(batch_size=2, batch_sampler=[[0]]), dict(shuffle=True, batch_sampler=[[0]]),
             dict(sampler=[0], shuffle=True), dict(batch_size=None, drop_last=True),
             dict(num_workers=-1), dict(timeout=-1), dict(prefetch_factor=2),
             dict(persistent_workers=True), dict(multiprocessing_context="fork")]
    for kwargs in cases:
        with pytest.raises(ValueError) as ours:
            data.DataLoader(Pairs(), **kwargs)
        with pytest.raises(ValueError) as theirs:
            tdata.DataLoader(Pairs(), **kwargs)
        assert str(ours.value).split(";")[0][:40] == str(theirs.value).split(";")[0][:40]
    for kwargs in (dict(shuffle=True), dict(sampler=[0]), dict(batch_sampler=[[0]])):
        with pytest.raises(ValueError, match="expected unspecified"):
            data.DataLoader(Stream(), **kwargs)
    with pytest.raises(ValueError, match="valid start method"):
        data.DataLoader(Pairs(), num_workers=1, multiprocessing_context="nope")
    loader = data.DataLoader(Pairs())
    with pytest.raises(ValueError, match="should not be set after"):
        loader.batch_size = 4
    loader.num_workers = 0                         # other attributes may change, as in PyTorch


def test_labkit_path_names_are_torch_utils_data():
    from labkit.utils.data import DataLoader
    from labkit.utils.data.sampler import Sampler
    from labkit.utils.data.distributed import DistributedSampler   # DDP scripts import this
    assert DataLoader is lk.utils.data.DataLoader is data.DataLoader
    assert Sampler is data.Sampler and DistributedSampler is data.DistributedSampler
    for name in ("Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset",
                 "ChainDataset", "StackDataset", "random_split", "default_collate",
                 "default_convert", "SequentialSampler", "RandomSampler", "BatchSampler",
                 "WeightedRandomSampler", "SubsetRandomSampler", "get_worker_info"):
        assert hasattr(tdata, name) and hasattr(lk.utils.data, name)


def test_namedtuple_samples_through_a_loader():
    Row = collections.namedtuple("Row", "a b")

    class Rows(data.Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return Row(float(i), np.int64(i))
    out = list(data.DataLoader(Rows(), batch_size=2))
    assert isinstance(out[0], Row) and plain(out[0]) == plain(
        next(iter(tdata.DataLoader(Rows(), batch_size=2))))
