"""``torch.multiprocessing``'s spelling: Python's ``multiprocessing``, plus ``spawn`` and
``start_processes``, which start ``nprocs`` processes running ``fn(i, *args)`` and raise in the
parent, naming the process and its traceback, when one fails.

Everything of the standard ``multiprocessing`` module is here under its own name (``Process``,
``Queue``, ``get_context``, ``set_start_method``...), so ``import torch.multiprocessing as mp``
ports by its import line. labkit tensors cross processes by pickling (a copy), not through
shared memory as PyTorch's do.

>>> import labkit.multiprocessing as mp
>>> mp.Queue is __import__("multiprocessing").Queue, callable(mp.spawn)
(True, True)
"""
import multiprocessing
from multiprocessing import *  # noqa: F401,F403

from .spawn import (ProcessContext, ProcessException, ProcessExitedException,
                    ProcessRaisedException, spawn, start_processes)

__all__ = list(multiprocessing.__all__) + [
    "ProcessContext", "ProcessException", "ProcessExitedException", "ProcessRaisedException",
    "spawn", "start_processes"]
