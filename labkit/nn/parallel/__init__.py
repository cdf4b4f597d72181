"""``torch.nn.parallel``'s names: ``DataParallel`` and ``data_parallel`` (one process, one or
several devices) and ``DistributedDataParallel`` (one process per rank).

``DistributedDataParallel`` needs process groups, which live in ``labkit.distributed``, a layer
above this one; importing labkit puts it here (``labkit/distributed/data_parallel.py``).

>>> import labkit as lk
>>> from labkit.nn.parallel import DataParallel, DistributedDataParallel
>>> DataParallel(lk.nn.Linear(2, 1))(lk.ones(4, 2)).shape       # one device: the module
(4, 1)
"""
from .data_parallel import DataParallel, data_parallel

__all__ = ["DataParallel", "data_parallel", "DistributedDataParallel"]
