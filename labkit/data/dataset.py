"""Datasets, as ``torch.utils.data``: ``Dataset`` (map-style: ``ds[i]``) and ``IterableDataset``
(a stream: ``iter(ds)``), ``TensorDataset`` (tensors sliced along dim 0), ``StackDataset``,
``ConcatDataset``, ``ChainDataset``, ``Subset`` and ``random_split``."""
import bisect
import math
import numbers
import warnings

import numpy as np

from ..devices import get_device, transfer
from ..errors import ShapeError, describe
from ..tensor.creation import tensor as _tensor
from ..tensor.random import randperm
from ..tensor.tensor import Tensor


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__(i)`` (one sample, e.g. an ``(image,
    label)`` tuple) and usually ``__len__``. ``DataLoader`` batches them; ``a + b`` concatenates.

    >>> import labkit as lk
    >>> class Squares(lk.data.Dataset):
    ...     def __len__(self):
    ...         return 4
    ...     def __getitem__(self, i):
    ...         return float(i), float(i * i)
    >>> [y.tolist() for _, y in lk.data.DataLoader(Squares(), batch_size=2)]
    [[0.0, 1.0], [4.0, 9.0]]
    """

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__(self, i), "
                                  f"returning the sample at index i")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream: subclasses define ``__iter__``. In a ``DataLoader`` with
    ``num_workers > 0`` every worker iterates its own copy, so a dataset that should not be
    repeated splits the work with ``lk.data.get_worker_info()`` (``id``, ``num_workers``).
    ``a + b`` chains two streams.

    >>> import labkit as lk
    >>> class Count(lk.data.IterableDataset):
    ...     def __iter__(self):
    ...         info = lk.data.get_worker_info()      # None in the main process
    ...         first, step = (0, 1) if info is None else (info.id, info.num_workers)
    ...         return iter(range(first, 6, step))
    >>> [b.tolist() for b in lk.data.DataLoader(Count(), batch_size=4)]
    [[0, 1, 2, 3], [4, 5]]
    """

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__(self)")

    def __add__(self, other):
        return ChainDataset([self, other])


def _rows(index):
    """An index into the rows of a tensor dataset: an int stays an int, the rest an int64
    array (lists, tensors, slices, arrays)."""
    if isinstance(index, numbers.Integral):
        return int(index)
    if isinstance(index, Tensor):
        index = index.numpy(force=True)
    return np.asarray(index, dtype=np.int64)


class TensorDataset(Dataset):
    """Samples are rows of tensors sharing their first dimension: ``ds[i]`` is
    ``(t0[i], t1[i], ...)``. NumPy arrays are accepted and converted.

    >>> import labkit as lk
    >>> ds = lk.data.TensorDataset(lk.zeros(5, 3), lk.arange(5))
    >>> len(ds), ds[2][1].item()
    (5, 2)
    """

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        tensors = tuple(t if isinstance(t, Tensor) else _tensor(t) for t in tensors)
        n = tensors[0].shape[0] if tensors[0].ndim else None
        for t in tensors:
            if t.ndim == 0 or t.shape[0] != n:
                raise ShapeError(
                    f"TensorDataset: every tensor must have the same size in dimension 0 (one "
                    f"row per sample); got {', '.join(describe(x) for x in tensors)}")
        self.tensors = tensors

    def __len__(self):
        return self.tensors[0].shape[0]

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def get_batch(self, index):
        """The samples at ``index`` (a slice, or a sequence or array of ints), batched: a list
        of one new tensor per field, what ``default_collate`` makes of those samples. Used by
        DataLoader: no per-sample Python loop, no autodiff history."""
        if isinstance(index, slice):
            index = np.arange(len(self), dtype=np.int64)[index]
        index = _rows(index)
        out = []
        for t in self.tensors:
            idx = index
            if t.device.type != "cpu" and not isinstance(index, int):
                idx = transfer(index, get_device("cpu:0"), t.device)
            out.append(Tensor._make(t._data[idx], t.device))
        return out

    def __repr__(self):
        fields = ", ".join(f"{tuple(t.shape[1:])} {t.dtype.name}" for t in self.tensors)
        where = f" on {self.tensors[0].device}" if self.tensors[0].device.name != "cpu:0" else ""
        return f"TensorDataset({len(self)} samples: {fields}{where})"


class StackDataset(Dataset):
    """Samples of several datasets of one length side by side: ``StackDataset(a, b)[i]`` is
    ``(a[i], b[i])``, ``StackDataset(image=a, label=b)[i]`` is ``{"image": a[i], "label": b[i]}``.

    >>> import labkit as lk
    >>> lk.data.StackDataset(x=[1, 2], y=["a", "b"])[1]
    {'x': 2, 'y': 'b'}
    """

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("StackDataset takes datasets as positional arguments (samples are "
                             "tuples) or as keywords (samples are dicts), not both")
        if not args and not kwargs:
            raise ValueError("StackDataset needs at least one dataset")
        parts = args or tuple(kwargs.values())
        lengths = [len(d) for d in parts]
        if len(set(lengths)) != 1:
            raise ShapeError(f"StackDataset: the datasets must have one length; got {lengths}")
        self._length = lengths[0]
        self.datasets = args if args else kwargs

    def __len__(self):
        return self._length

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)


class ConcatDataset(Dataset):
    """Several map-style datasets one after another (``a + b`` is ``ConcatDataset([a, b])``);
    ``cumulative_sizes`` holds the running totals.

    >>> import labkit as lk
    >>> ds = lk.data.ConcatDataset([[10, 11], [20, 21, 22]])
    >>> len(ds), ds[2], ds[-1], ds.cumulative_sizes
    (5, 20, 22, [2, 5])
    """

    @staticmethod
    def cumsum(sequence):
        out, total = [], 0
        for d in sequence:
            total += len(d)
            out.append(total)
        return out

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset; chain streams "
                                "with lk.data.ChainDataset (or a + b)")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        if index < 0:
            if -index > len(self):
                raise IndexError(f"ConcatDataset: index {index} is out of range for "
                                 f"{len(self)} samples")
            index = len(self) + index
        which = bisect.bisect_right(self.cumulative_sizes, index)
        if which == len(self.datasets):
            raise IndexError(f"ConcatDataset: index {index} is out of range for {len(self)} "
                             f"samples")
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]


class ChainDataset(IterableDataset):
    """Several iterable datasets one after another (``a + b`` is ``ChainDataset([a, b])``)."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(f"ChainDataset only chains IterableDatasets, got "
                                f"{type(d).__name__}; concatenate map-style datasets with "
                                f"lk.data.ConcatDataset")
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order: ``Subset(ds, [4, 0])[1]`` is
    ``ds[0]``.

    >>> import labkit as lk
    >>> sub = lk.data.Subset(lk.data.TensorDataset(lk.arange(10) * 10), [7, 3])
    >>> len(sub), sub[0][0].item()
    (2, 70)
    """

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __getitems__(self, indices):
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)


def batch_getter(dataset):
    """A function from an int64 index array to a whole collated batch, for datasets that can
    cut one without a per-sample loop (a ``TensorDataset``, and Subsets of one); else None."""
    if isinstance(dataset, TensorDataset):
        return dataset.get_batch
    if isinstance(dataset, Subset):
        inner = batch_getter(dataset.dataset)
        if inner is not None:
            rows = np.asarray(dataset.indices, dtype=np.int64)
            return lambda index: inner(rows[_rows(index)])
    return None


def _split_lengths(n, lengths):
    """``lengths`` as counts: fractions summing to 1 become counts as PyTorch makes them
    (floors, then one more to each split in turn until all ``n`` are placed)."""
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        for i, frac in enumerate(lengths):
            if not 0 <= frac <= 1:
                raise ValueError(f"random_split: fraction at index {i} is not between 0 and 1 "
                                 f"(got {frac})")
        counts = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        for i, count in enumerate(counts):
            if count == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an "
                              f"empty dataset.", stacklevel=3)
        return counts
    if sum(lengths) != n:
        raise ValueError(f"random_split: the lengths sum to {sum(lengths)}, but the dataset has "
                         f"{n} samples; give counts summing to {n}, or fractions summing to 1")
    return [int(x) for x in lengths]


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` into non-overlapping ``Subset``\\ s of random samples: ``lengths`` are
    counts summing to ``len(dataset)``, or fractions summing to 1 (``[0.8, 0.2]``; what does
    not divide evenly goes one each to the first splits, as in PyTorch). ``generator``: an
    ``lk.Generator`` for a split of its own; without it the draw follows ``lk.manual_seed``.

    >>> import labkit as lk
    >>> g = lk.Generator().manual_seed(0)
    >>> train, val = lk.data.random_split(range(10), [0.7, 0.3], generator=g)
    >>> len(train), len(val), sorted(train.indices + val.indices) == list(range(10))
    (7, 3, True)
    """
    counts = _split_lengths(len(dataset), lengths)
    order = randperm(sum(counts), generator=generator).tolist()
    out, offset = [], 0
    for count in counts:
        out.append(Subset(dataset, order[offset:offset + count]))
        offset += count
    return out

