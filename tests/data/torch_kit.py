"""Comparing lk.data's outputs with torch.utils.data's: nested batches as plain structures."""
import collections.abc

import numpy as np
import pytest

import labkit as lk

torch = pytest.importorskip("torch")


def plain(x):
    """A batch as comparable plain data: tensors as ("tensor", dtype name, shape, values), the
    container types kept by name (a dict stays a dict, a namedtuple its class name)."""
    if isinstance(x, lk.Tensor):
        return ("tensor", x.dtype.name.rstrip("_"), tuple(x.shape), x.numpy().tolist())
    if isinstance(x, torch.Tensor):
        return ("tensor", str(x.dtype).replace("torch.", ""), tuple(x.shape), x.numpy().tolist())
    if isinstance(x, np.ndarray):
        return ("ndarray", x.dtype.str, x.tolist())
    if isinstance(x, collections.abc.Mapping):
        return (type(x).__name__, {k: plain(v) for k, v in x.items()})
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [plain(v) for v in x])
    return x


def to_torch(x):
    """A sample with lk tensors replaced by torch tensors (for torch's collate)."""
    if isinstance(x, lk.Tensor):
        return torch.from_numpy(x.numpy().copy())
    if isinstance(x, collections.abc.Mapping):
        return type(x)({k: to_torch(v) for k, v in x.items()})
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(to_torch(v) for v in x))
    if isinstance(x, (list, tuple)):
        return type(x)(to_torch(v) for v in x)
    return x


def batches(loader):
    return [plain(b) for b in loader]
