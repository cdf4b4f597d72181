"""Datasets and loaders: ``Dataset``, ``TensorDataset``, ``DataLoader`` and the ``digits()`` set.

>>> import labkit as lk
>>> train, test = lk.data.digits()
>>> images, labels = next(iter(lk.data.DataLoader(train, batch_size=32, shuffle=True, seed=0)))
>>> images.shape, labels.shape
((32, 1, 8, 8), (32,))
"""
from .dataset import Dataset, TensorDataset
from .digits import digits
from .loader import DataLoader, default_collate

__all__ = ["Dataset", "TensorDataset", "DataLoader", "default_collate", "digits"]
