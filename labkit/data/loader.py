"""``DataLoader``: batches of a dataset, optionally shuffled (reproducibly) and with a progress
bar that draws as a widget in Jupyter and as text in a terminal (``tqdm.auto``)."""
import math
import numbers

import numpy as np

from ..errors import ShapeError
from ..tensor import random as _random
from ..tensor.creation import tensor as _tensor
from ..tensor.tensor import Tensor


def default_collate(samples):
    """Stack a list of samples into a batch: tensors and arrays along a new dim 0, numbers into
    a 1-d tensor, tuples / lists / dicts field by field.

    >>> import labkit as lk
    >>> x, y = lk.data.default_collate([(lk.zeros(2), 1), (lk.ones(2), 0)])
    >>> x.shape, y.tolist()
    ((2, 2), [1, 0])
    """
    first = samples[0]
    if isinstance(first, Tensor):
        shapes = {tuple(s.shape) for s in samples}
        if len(shapes) > 1:
            raise ShapeError(f"DataLoader cannot stack samples of different shapes "
                             f"{sorted(shapes)} into one batch; pad them to one shape, or pass "
                             f"collate_fn=... to build batches yourself")
        xp = first.device.xp
        return Tensor._make(xp.stack([s._data for s in samples]), first.device)
    if isinstance(first, np.ndarray):
        return _tensor(np.stack(samples))
    if isinstance(first, (numbers.Number, np.generic)):
        return _tensor(np.array(samples))
    if isinstance(first, dict):
        return {k: default_collate([s[k] for s in samples]) for k in first}
    if isinstance(first, (tuple, list)):
        return tuple(default_collate(list(field)) for field in zip(*samples))
    raise TypeError(f"DataLoader does not know how to batch samples of type "
                    f"{type(first).__name__}; return tensors, arrays, numbers or tuples of them "
                    f"from __getitem__, or pass collate_fn=...")


class DataLoader:
    """Iterate over ``dataset`` in batches.

    - ``batch_size``: samples per batch; the last batch may be smaller unless ``drop_last``.
    - ``shuffle``: a new order every epoch (every ``for`` loop over the loader). With ``seed``
      the sequence of orders is fixed by that seed; without it, by ``lk.manual_seed``.
    - ``progress``: True (or a text label) shows a tqdm bar, a widget in Jupyter.
    - ``collate_fn``: turns a list of samples into a batch (default: ``default_collate``).

    A ``TensorDataset`` is batched by indexing each tensor once per batch.

    >>> import labkit as lk
    >>> ds = lk.data.TensorDataset(lk.arange(10).float(), lk.arange(10))
    >>> loader = lk.data.DataLoader(ds, batch_size=4, shuffle=True, seed=0)
    >>> len(loader), [y.shape for _, y in loader]
    (3, [(4,), (4,), (2,)])
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, seed=None, drop_last=False,
                 progress=False, collate_fn=None):
        if not isinstance(batch_size, numbers.Integral) or batch_size < 1:
            raise ValueError(f"DataLoader: batch_size must be a positive integer, got "
                             f"{batch_size!r}")
        if not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
            raise TypeError(f"DataLoader needs a dataset with __len__ and __getitem__ (e.g. an "
                            f"lk.data.TensorDataset), got {type(dataset).__name__}")
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.seed = seed
        self.drop_last = bool(drop_last)
        self.progress = progress
        self.collate_fn = collate_fn
        self._rng = np.random.default_rng(seed) if seed is not None else None

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def _order(self, n):
        if not self.shuffle:
            return None
        rng = self._rng if self._rng is not None else _random.generator()
        return rng.permutation(n).astype(np.int64)

    def _batches(self):
        n = len(self.dataset)
        order = self._order(n)
        fast = self.collate_fn is None and hasattr(self.dataset, "get_batch")
        for b in range(len(self)):
            lo, hi = b * self.batch_size, min((b + 1) * self.batch_size, n)
            index = slice(lo, hi) if order is None else order[lo:hi]
            if fast:
                yield self.dataset.get_batch(index)
            else:
                ids = range(lo, hi) if order is None else order[lo:hi].tolist()
                samples = [self.dataset[i] for i in ids]
                yield (self.collate_fn or default_collate)(samples)

    def __iter__(self):
        batches = self._batches()
        if self.progress:
            from tqdm.auto import tqdm
            desc = self.progress if isinstance(self.progress, str) else None
            return iter(tqdm(batches, total=len(self), desc=desc, unit="batch"))
        return batches

    def __repr__(self):
        return (f"DataLoader({type(self.dataset).__name__} of {len(self.dataset)}, "
                f"batch_size={self.batch_size}, shuffle={self.shuffle}, {len(self)} batches)")
