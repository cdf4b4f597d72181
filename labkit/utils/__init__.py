"""``torch.utils``'s path to what labkit has of it: ``lk.utils.data`` is ``lk.data`` (so
``torch.utils.data.DataLoader`` and ``from labkit.utils.data import DataLoader`` both work), and
``lk.utils.checkpoint`` is activation checkpointing (``checkpoint``, ``checkpoint_sequential``).

>>> import labkit as lk
>>> lk.utils.data.DataLoader is lk.data.DataLoader
True
"""
import sys

from .. import data
from . import checkpoint
from ..data import dataset, distributed, loader, sampler

# the same module objects under PyTorch's names, never second copies of them
sys.modules[f"{__name__}.data"] = data
sys.modules[f"{__name__}.data.dataset"] = dataset
sys.modules[f"{__name__}.data.sampler"] = sampler
sys.modules[f"{__name__}.data.dataloader"] = loader
sys.modules[f"{__name__}.data.distributed"] = distributed     # DistributedSampler's module

__all__ = ["data", "checkpoint"]
