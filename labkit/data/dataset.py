"""Datasets: ``Dataset`` (the protocol) and ``TensorDataset`` (tensors sliced along dim 0)."""
import numpy as np

from ..devices import get_device, transfer
from ..errors import ShapeError, describe
from ..tensor.creation import tensor as _tensor
from ..tensor.tensor import Tensor


class Dataset:
    """A map-style dataset: subclasses define ``__len__`` and ``__getitem__(i)`` (one sample,
    e.g. an ``(image, label)`` tuple). ``DataLoader`` batches them.

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
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__(self, i)")

    def __len__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __len__(self)")


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
        """The samples at ``index`` (a slice or an int64 NumPy array), batched: one tensor per
        field. Used by DataLoader; no per-sample Python loop, no autodiff history."""
        out = []
        for t in self.tensors:
            idx = index
            if isinstance(index, np.ndarray) and t.device.type != "cpu":
                idx = transfer(index, get_device("cpu:0"), t.device)
            out.append(Tensor._make(t._data[idx], t.device))
        return tuple(out)

    def __repr__(self):
        fields = ", ".join(f"{tuple(t.shape[1:])} {t.dtype.name}" for t in self.tensors)
        where = f" on {self.tensors[0].device}" if self.tensors[0].device.name != "cpu:0" else ""
        return f"TensorDataset({len(self)} samples: {fields}{where})"
