"""Datasets, samplers and loaders, as ``torch.utils.data`` (also reachable as
``lk.utils.data``), and the ``digits()`` set.

>>> import labkit as lk
>>> train, test = lk.data.digits()
>>> images, labels = next(iter(lk.data.DataLoader(train, batch_size=32, shuffle=True, seed=0)))
>>> images.shape, labels.shape
((32, 1, 8, 8), (32,))
"""
from .collate import default_collate, default_convert
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset,
                      Subset, TensorDataset, random_split)
from .digits import digits
from .distributed import DistributedSampler
from .loader import DataLoader
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                      SubsetRandomSampler, WeightedRandomSampler)
from .worker import WorkerInfo, get_worker_info

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset",
           "ChainDataset", "Subset", "random_split", "default_collate", "default_convert",
           "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler", "DistributedSampler", "DataLoader",
           "WorkerInfo", "get_worker_info", "digits"]
