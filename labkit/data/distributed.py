"""``DistributedSampler``, as ``torch.utils.data.distributed``: each rank of a data-parallel run
visits its own share of a dataset, the shares together covering it once per epoch.

``num_replicas`` and ``rank`` default to the process group's world size and rank. labkit.data sits
below labkit.dist and does not import it: ``lk.dist`` fills in ``world`` (a function giving
``(rank, world_size)``) when it is imported; until then, and outside a launched or ``init``-ed
worker, the world has one rank.
"""
import math
import numbers

from ..tensor.random import Generator, randperm
from .sampler import Sampler


def _one_rank():
    return 0, 1


world = _one_rank       # replaced by lk.dist: () -> (rank, world_size) of this process


class DistributedSampler(Sampler):
    """The indices of ``dataset`` that rank ``rank`` of ``num_replicas`` visits this epoch.

    - ``shuffle``: a new permutation every epoch, the same on every rank: it is drawn from a
      generator seeded with ``seed + epoch``, so call ``set_epoch(epoch)`` at the start of each
      epoch (otherwise every epoch has the same order). Without shuffle, 0, 1, 2, ...
    - Rank ``r`` takes every ``num_replicas``-th index of that order, starting at ``r``.
    - ``drop_last=False``: the order is padded by repeating its first indices until it divides
      evenly, so every rank gets ``ceil(len / num_replicas)`` indices (a few samples are seen
      twice). ``drop_last=True``: the tail that does not divide evenly is dropped instead.
    - ``num_replicas`` / ``rank``: default to ``lk.dist.world_size()`` / ``lk.dist.rank()``
      (1 and 0 outside a launched or ``lk.dist.init()``-ed process, where PyTorch raises).

    Give it to a loader as ``lk.data.DataLoader(dataset, batch_size=b, sampler=sampler)``.

    >>> import labkit as lk
    >>> list(lk.data.DistributedSampler(range(5), num_replicas=2, rank=1, shuffle=False))
    [1, 3, 0]
    >>> shares = [lk.data.DistributedSampler(range(6), num_replicas=2, rank=r, seed=7)
    ...           for r in (0, 1)]
    >>> for s in shares:
    ...     s.set_epoch(1)
    >>> [len(s) for s in shares], sorted(list(shares[0]) + list(shares[1]))
    ([3, 3], [0, 1, 2, 3, 4, 5])
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        own_rank, own_size = world()
        if num_replicas is None:
            num_replicas = own_size
        if rank is None:
            rank = own_rank
        if not isinstance(num_replicas, numbers.Integral) or isinstance(num_replicas, bool) \
                or num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas should be a positive integer, "
                             f"got num_replicas={num_replicas!r}")
        if not isinstance(rank, numbers.Integral) or isinstance(rank, bool) or \
                not 0 <= rank < num_replicas:
            raise ValueError(f"Invalid rank {rank!r}, rank should be in the interval "
                             f"[0, {num_replicas - 1}] (num_replicas={num_replicas})")
        self.dataset = dataset
        self.num_replicas = int(num_replicas)
        self.rank = int(rank)
        self.epoch = 0
        self.drop_last = drop_last
        self.shuffle = shuffle
        self.seed = seed
        n = len(dataset)
        if drop_last and n % self.num_replicas != 0:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            g = Generator().manual_seed(self.seed + self.epoch)
            indices = randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding > 0:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Use the order of ``epoch`` (with ``shuffle``): call it before each epoch's loop, with
        the same epoch on every rank."""
        self.epoch = epoch
