"""Turning samples into batches, as ``torch.utils.data``: ``default_collate`` (a list of samples
into one batch) and ``default_convert`` (one sample's NumPy values into tensors, for loaders
without batching).

Both walk nested samples the same way: mappings field by field (keeping the mapping's type where
it can be rebuilt), namedtuples as namedtuples, other tuples as lists, other sequences as their
own type. ``collate(batch, collate_fn_map=...)`` is the walk with a table of leaf functions by
type, which a custom ``collate_fn`` can extend as in PyTorch.
"""
import collections.abc
import copy
import re

import numpy as np

from ..errors import ShapeError, describe
from ..tensor.creation import tensor as _tensor
from ..tensor.dtypes import float64
from ..tensor.ops.composite import stack as _stack
from ..tensor.tensor import Tensor

_STRINGS_OR_OBJECTS = re.compile(r"[SaUO]")   # NumPy dtype codes a tensor cannot hold

_UNSUPPORTED = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
                "lists; found {}. Return those from the dataset's __getitem__, or pass "
                "collate_fn=... to build batches yourself")


def _rebuild(elem, values):
    """``values`` (a dict, or a list in order) in the container type of ``elem`` when it can be
    rebuilt, else as a plain dict or list (PyTorch's rule)."""
    try:
        if isinstance(elem, (collections.abc.MutableMapping, collections.abc.MutableSequence)):
            clone = copy.copy(elem)
            if isinstance(elem, collections.abc.MutableMapping):
                clone.update(values)
            else:
                for i, v in enumerate(values):
                    clone[i] = v
            return clone
        return type(elem)(values)
    except TypeError:
        return values


def collate(batch, *, collate_fn_map=None):
    """Collate ``batch`` (a list of samples of one structure): leaves by the first entry of
    ``collate_fn_map`` (type -> ``fn(batch, *, collate_fn_map)``) that the first sample's leaf
    is an instance of; mappings, namedtuples and sequences field by field."""
    elem = batch[0]
    if collate_fn_map is not None:
        fn = collate_fn_map.get(type(elem))
        if fn is None:
            fn = next((f for t, f in collate_fn_map.items() if isinstance(elem, t)), None)
        if fn is not None:
            return fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        return _rebuild(elem, {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map)
                               for key in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(collate(field, collate_fn_map=collate_fn_map)
                            for field in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(sample) != size for sample in batch):
            raise ShapeError(f"default_collate: each element in list of batch should be of equal "
                             f"size; got lengths {sorted({len(s) for s in batch})}. Pad them to "
                             f"one length, or pass collate_fn=... to build batches yourself")
        fields = [collate(field, collate_fn_map=collate_fn_map) for field in zip(*batch)]
        return fields if isinstance(elem, tuple) else _rebuild(elem, fields)
    raise TypeError(_UNSUPPORTED.format(type(elem).__name__))


def _collate_tensors(batch, *, collate_fn_map=None):
    first = batch[0]
    if any(s.shape != first.shape for s in batch):
        shapes = sorted({tuple(s.shape) for s in batch})
        raise ShapeError(f"DataLoader cannot stack samples of different shapes {shapes} into one "
                         f"batch; pad them to one shape, or pass collate_fn=... to build batches "
                         f"yourself")
    if any(s.device != first.device for s in batch):
        raise ShapeError(f"DataLoader cannot stack samples on different devices into one batch "
                         f"({describe(first)} and "
                         f"{describe(next(s for s in batch if s.device != first.device))}); "
                         f"move them to one device in the dataset")
    if any(s.requires_grad for s in batch):
        return _stack(list(batch), 0)
    return Tensor._make(first.device.xp.stack([s._data for s in batch]), first.device)


def _collate_arrays(batch, *, collate_fn_map=None):
    if _STRINGS_OR_OBJECTS.search(batch[0].dtype.str):
        raise TypeError(_UNSUPPORTED.format(batch[0].dtype))
    if all(b.shape == batch[0].shape for b in batch):
        return _tensor(np.stack(batch))
    return collate([_tensor(b) for b in batch], collate_fn_map=collate_fn_map)   # names shapes


def _collate_numpy_scalars(batch, *, collate_fn_map=None):
    return _tensor(np.array(batch))


def _collate_floats(batch, *, collate_fn_map=None):
    return _tensor(batch, dtype=float64)


def _collate_ints(batch, *, collate_fn_map=None):
    return _tensor(batch)


def _collate_strings(batch, *, collate_fn_map=None):
    return batch


default_collate_fn_map = {
    Tensor: _collate_tensors,
    np.ndarray: _collate_arrays,
    (np.bool_, np.number, np.object_): _collate_numpy_scalars,
    float: _collate_floats,
    int: _collate_ints,
    str: _collate_strings,
    bytes: _collate_strings,
}


def default_collate(batch):
    """Stack a list of samples into a batch, as PyTorch's: tensors and NumPy arrays along a new
    dim 0 (arrays become tensors of their dtype), Python floats into a float64 tensor, ints into
    int64 (bools into bool), NumPy scalars into a tensor of their dtype, strings left as they
    come (a list; a tuple inside tuple samples); dicts key by key, namedtuples field by field,
    tuples and lists into a list of batched fields.

    >>> import labkit as lk
    >>> x, y = lk.data.default_collate([(lk.zeros(2), 1), (lk.ones(2), 0)])
    >>> x.shape, y.tolist(), y.dtype
    ((2, 2), [1, 0], lk.int64)
    >>> lk.data.default_collate([{"w": 0.5, "name": "a"}, {"w": 1.5, "name": "b"}])
    {'w': tensor([0.5, 1.5], dtype=lk.float64), 'name': ['a', 'b']}
    """
    return collate(batch, collate_fn_map=default_collate_fn_map)


def default_convert(data):
    """One sample's NumPy arrays and NumPy scalars as tensors, walking mappings and sequences as
    ``default_collate`` does (tuples become lists); tensors, numbers and strings stay as they
    are. The ``collate_fn`` of a loader with ``batch_size=None``.

    >>> import labkit as lk, numpy as np
    >>> lk.data.default_convert((np.zeros(2, np.float32), 3))
    [tensor([0., 0.]), 3]
    """
    if isinstance(data, Tensor):
        return data
    if isinstance(data, (np.ndarray, np.generic)) and not isinstance(data, (np.str_, np.bytes_)):
        if isinstance(data, np.ndarray) and _STRINGS_OR_OBJECTS.search(data.dtype.str):
            return data
        return _tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild(data, [default_convert(d) for d in data])
    return data
