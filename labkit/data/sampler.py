"""Samplers, as ``torch.utils.data``: the order in which a ``DataLoader`` visits a map-style
dataset. A sampler is an iterable of indices (``BatchSampler``: of lists of indices); random ones
draw from ``generator`` (an ``lk.Generator``) or, without one, from the stream ``lk.manual_seed``
seeds, when an epoch starts."""
import numbers

import numpy as np

from ..tensor.creation import tensor as _tensor
from ..tensor.dtypes import float64
from ..tensor.random import multinomial, randint, randperm


def _positive_int(name, value):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={value!r}")
    return int(value)


def _boolean(name, value, error=TypeError):
    if not isinstance(value, bool):
        raise error(f"{name} should be a boolean value, but got {name}={value!r}")
    return value


class Sampler:
    """Base class of samplers: subclasses define ``__iter__`` (the indices of one epoch) and,
    when they know it, ``__len__``."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__(self)")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1.

    >>> import labkit as lk
    >>> list(lk.data.SequentialSampler(range(3)))
    [0, 1, 2]
    """

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


_CHUNK = 32


class RandomSampler(Sampler):
    """A new random order of ``data_source`` every epoch: a permutation, or with
    ``replacement=True`` independent draws; ``num_samples`` indices per epoch (default: the
    dataset's length; without replacement, more than that chains several permutations).

    >>> import labkit as lk
    >>> sorted(lk.data.RandomSampler(range(5), generator=lk.Generator().manual_seed(0)))
    [0, 1, 2, 3, 4]
    >>> len(list(lk.data.RandomSampler(range(5), replacement=True, num_samples=8)))
    8
    """

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = _boolean("replacement", replacement)
        self._num_samples = num_samples
        self.generator = generator
        _positive_int("num_samples", self.num_samples)

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, total = len(self.data_source), self.num_samples
        if self.replacement:     # drawn 32 at a time, as PyTorch's: num_samples may be huge
            for _ in range(total // _CHUNK):
                yield from randint(0, n, (_CHUNK,), generator=self.generator).tolist()
            if total % _CHUNK:
                yield from randint(0, n, (total % _CHUNK,), generator=self.generator).tolist()
            return
        for _ in range(total // n):
            yield from randperm(n, generator=self.generator).tolist()
        if total % n:
            yield from randperm(n, generator=self.generator).tolist()[:total % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a new random order every epoch.

    >>> import labkit as lk
    >>> sorted(lk.data.SubsetRandomSampler([7, 3, 5]))
    [3, 5, 7]
    """

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices in ``0..len(weights)-1`` drawn with probabilities proportional
    to ``weights`` (which need not sum to 1), with replacement unless ``replacement=False``.

    >>> import labkit as lk
    >>> list(lk.data.WeightedRandomSampler([0.0, 1.0, 0.0], 3))
    [1, 1, 1]
    """

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        self.num_samples = _positive_int("num_samples", num_samples)
        self.replacement = _boolean("replacement", replacement, ValueError)
        w = np.asarray(weights.numpy() if hasattr(weights, "numpy") else weights, np.float64)
        if w.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(w.shape)}")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError("WeightedRandomSampler: the weights must be finite, non-negative "
                             "and not all zero")
        if not replacement and num_samples > np.count_nonzero(w):
            raise ValueError(f"WeightedRandomSampler: cannot draw {num_samples} samples without "
                             f"replacement from {np.count_nonzero(w)} non-zero weights; pass "
                             f"replacement=True or fewer num_samples")
        self.weights = _tensor(w, dtype=float64)
        self.generator = generator

    def __iter__(self):
        yield from multinomial(self.weights, self.num_samples, self.replacement,
                               generator=self.generator).tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler``; the last one shorter unless
    ``drop_last``.

    >>> import labkit as lk
    >>> list(lk.data.BatchSampler(lk.data.SequentialSampler(range(5)), 2, drop_last=False))
    [[0, 1], [2, 3], [4]]
    """

    def __init__(self, sampler, batch_size, drop_last):
        self.batch_size = _positive_int("batch_size", batch_size)
        self.drop_last = _boolean("drop_last", drop_last, ValueError)
        self.sampler = sampler

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
