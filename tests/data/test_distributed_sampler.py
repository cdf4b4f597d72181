"""DistributedSampler against torch.utils.data.DistributedSampler: unshuffled index lists exactly;
shuffled ones (torch's permutation comes from torch's generator) by what must hold: the same
order on every rank for one seed and epoch, a new one per epoch, shares that partition the
dataset (plus the same padding torch adds), and lengths equal to torch's."""
import collections

import pytest

import labkit as lk
from labkit import data

from .torch_kit import torch

tdata = torch.utils.data
CASES = [(n, replicas, drop_last) for n in (0, 1, 5, 8, 10, 11) for replicas in (1, 2, 3, 4)
         for drop_last in (False, True)]


def shares(make, n, replicas, **kw):
    return [list(make(range(n), num_replicas=replicas, rank=r, **kw)) for r in range(replicas)]


@pytest.mark.parametrize("n, replicas, drop_last", CASES)
def test_unshuffled_shares_equal_torch(n, replicas, drop_last):
    ours = shares(data.DistributedSampler, n, replicas, shuffle=False, drop_last=drop_last)
    theirs = shares(tdata.DistributedSampler, n, replicas, shuffle=False, drop_last=drop_last)
    assert ours == theirs
    assert [len(data.DistributedSampler(range(n), replicas, r, drop_last=drop_last))
            for r in range(replicas)] == [len(s) for s in theirs]


@pytest.mark.parametrize("n, replicas, drop_last", CASES)
def test_shuffled_shares_partition_like_torch(n, replicas, drop_last):
    def make(cls):
        samplers = [cls(range(n), replicas, r, seed=5, drop_last=drop_last)
                    for r in range(replicas)]
        for s in samplers:
            s.set_epoch(epoch)
        return [list(s) for s in samplers]

    for epoch in (0, 3):
        ours, theirs = make(data.DistributedSampler), make(tdata.DistributedSampler)
        assert ours == make(data.DistributedSampler)           # the same seed, the same shares
        assert [len(s) for s in ours] == [len(s) for s in theirs]
        # how often each index is visited: each once, padding repeats the order's first ones
        count = collections.Counter(i for s in ours for i in s)
        assert sorted(count.values()) == sorted(collections.Counter(
            i for s in theirs for i in s).values())
        if drop_last:
            assert set(count) <= set(range(n)) and max(count.values(), default=1) == 1
        else:
            assert set(count) == set(range(n))
        # the whole order, read back from the shares, is a permutation padded with its own head
        order = [ours[k % replicas][k // replicas] for k in range(sum(map(len, ours)))]
        if not drop_last and n:
            assert sorted(order[:n]) == list(range(n))
            assert order[n:] == (order * len(order))[:len(order) - n]

def test_shuffled_order_follows_seed_plus_epoch():
    def order(seed, epoch):
        s = data.DistributedSampler(range(50), num_replicas=1, rank=0, seed=seed)
        s.set_epoch(epoch)
        return list(s)
    assert order(3, 2) == order(5, 0) == order(4, 1)          # only seed + epoch counts
    assert order(3, 0) != order(3, 1) and sorted(order(3, 0)) == list(range(50))
    assert order(3, 2) == lk.randperm(50, generator=lk.Generator().manual_seed(5)).tolist()


def test_defaults_and_errors():
    s = data.DistributedSampler(range(7))                    # a world of one: rank 0 of 1
    assert (s.num_replicas, s.rank, s.shuffle, s.seed, s.drop_last, s.epoch) == \
        (1, 0, True, 0, False, 0)
    assert sorted(s) == list(range(7))
    for replicas, rank in ((2, 2), (2, -1), (3, 5)):
        with pytest.raises(ValueError, match=rf"Invalid rank {rank}, rank should be in the "
                                             rf"interval \[0, {replicas - 1}\]"):
            data.DistributedSampler(range(4), num_replicas=replicas, rank=rank)
        with pytest.raises(ValueError, match="Invalid rank"):
            tdata.DistributedSampler(range(4), num_replicas=replicas, rank=rank)
    with pytest.raises(ValueError, match="num_replicas should be a positive integer"):
        data.DistributedSampler(range(4), num_replicas=0, rank=0)


def test_with_data_loader():
    ds = data.TensorDataset(lk.arange(10).float())
    sampler = data.DistributedSampler(ds, num_replicas=2, rank=1, shuffle=False)
    batches = [b[0].tolist() for b in data.DataLoader(ds, batch_size=2, sampler=sampler)]
    assert batches == [[1.0, 3.0], [5.0, 7.0], [9.0]]
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        data.DataLoader(ds, sampler=sampler, shuffle=True)
