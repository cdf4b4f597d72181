"""The process group a worker belongs to: its rank, the world size, its device and communicators.

A launched worker is an MPI process (ipyparallel starts the engines through ``mpiexec``), so its
rank is its MPI rank. ``init_worker`` runs once on every worker right after the launcher starts
it; afterwards ``rank()``, ``world_size()`` and the collectives read the group set here.

Outside a launched worker (in the notebook itself) there is a world of one: ``rank()`` is 0,
``world_size()`` is 1 and every collective returns its input's values, so code written for
workers also runs, unchanged, in a single process.

>>> import labkit as lk
>>> lk.dist.rank(), lk.dist.world_size(), lk.dist.is_initialized()
(0, 1, False)
"""
import os
import sys

import numpy as np

from ..data import distributed as _data_distributed
from ..devices import get_device, gpu_count
from ..tensor.random import manual_seed


class Group:
    """Rank, size and communicators of this worker. Created by ``init_worker``."""

    def __init__(self, comm, local_comm, device, backend):
        self.comm = comm                  # an MPI communicator of our own (a Dup of COMM_WORLD)
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.local_rank = local_comm.Get_rank()
        self.local_size = local_comm.Get_size()
        self.device = device
        self.backend = backend            # "auto", "mpi" or "nccl"
        self._nccl = None                 # the NCCL communicator, built on first GPU collective
        self._nccl_ok = None              # whether NCCL can be used here (checked once)

    def nccl(self):
        """The NCCL communicator (all ranks must call this together: it is made collectively)."""
        if self._nccl is None:
            from cupy.cuda import nccl
            uid = nccl.get_unique_id() if self.rank == 0 else None
            uid = self.comm.bcast(uid, root=0)
            with self.device.activate():
                self._nccl = nccl.NcclCommunicator(self.size, uid, self.rank)
        return self._nccl

    def subgroup(self, ranks):
        """A Group of ``ranks`` (ranks of this group, in that order) on the ranks among them, None
        on the others. Every rank of this group must call it, with the same ``ranks``."""
        from mpi4py import MPI
        member = self.rank in ranks
        comm = self.comm.Split(0 if member else MPI.UNDEFINED,
                               key=ranks.index(self.rank) if member else 0)
        if not member:
            return None
        local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
        return Group(comm, local, self.device, self.backend)

    def free(self):
        """Release the communicators (the group cannot be used afterwards)."""
        self.comm.Free()
        self._nccl = None

    def use_nccl(self, device):
        """Whether collectives on tensors of ``device`` go through NCCL (else through MPI)."""
        if device.type != "gpu" or self.backend == "mpi":
            return False
        if self._nccl_ok is None:
            self._nccl_ok = nccl_usable(self.local_size)
        return self._nccl_ok


_group = None


def nccl_usable(local_size):
    """True when CuPy has NCCL and every worker on this host has a GPU of its own."""
    try:
        from cupy.cuda import nccl
    except Exception:
        return False
    return bool(getattr(nccl, "available", True)) and local_size <= gpu_count()


def group():
    """This worker's Group, or None outside a launched worker."""
    return _group


def init_worker(spec):
    """Join the process group; called once on every worker by the launcher. Returns facts about
    this worker (rank, pid, host, device) for the launcher to keep."""
    import socket
    for path in spec.get("sys_path", ()):      # so modules the caller imports resolve here too
        if path not in sys.path:
            sys.path.append(path)
    group = join(spec.get("backend", "auto"))
    if "seed" in spec:
        manual_seed(worker_seed(spec["seed"], group.rank))
    return {"rank": group.rank, "size": group.size, "local_rank": group.local_rank,
            "pid": os.getpid(), "host": socket.gethostname(), "device": group.device.name}


def join(backend="auto"):
    """Make this process's Group from MPI's world (each rank its own device) and return it."""
    global _group
    from mpi4py import MPI
    comm = MPI.COMM_WORLD.Dup()
    local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    gpus = gpu_count()
    device = get_device(f"gpu:{local.Get_rank() % gpus}") if gpus else get_device("cpu:0")
    if backend == "nccl" and device.type == "gpu" and not nccl_usable(local.Get_size()):
        raise RuntimeError(
            f"backend='nccl' needs CuPy built with NCCL and one GPU per worker; this host runs "
            f"{local.Get_size()} workers on {gpus} GPU(s). Use backend='auto' or 'mpi'.")
    if device.type == "gpu":
        device.xp.cuda.Device(device.index).use()     # raw CuPy calls go to this GPU too
    _group = Group(comm, local, device, backend)
    return _group


def leave():
    """Undo ``join``: free this process's Group; afterwards it is a world of one again."""
    global _group
    group, _group = _group, None
    if group is not None:
        group.free()


def worker_seed(seed, rank):
    """The seed of rank ``rank``'s default generator in a cluster started from a notebook whose
    generator was seeded with ``seed``: reproducible, and a stream of its own for every rank (a
    program that wants the same numbers on every rank, e.g. to initialise replicas alike, calls
    ``lk.manual_seed`` itself)."""
    return int(np.random.SeedSequence([int(seed) % 2 ** 63, int(rank)]).generate_state(1,
                                                                                     np.uint64)[0])


def is_initialized():
    """Whether this process belongs to a process group: a launched worker (inside
    ``lk.dist.launch`` or a ``Cluster``), or a script's rank after ``lk.dist.init()``."""
    return _group is not None


def rank():
    """This worker's rank, 0 .. world_size() - 1 (0 outside a launched worker).

    >>> import labkit as lk
    >>> lk.dist.rank()
    0
    """
    return _group.rank if _group is not None else 0


def world_size():
    """How many workers run the launched function (1 outside a launched worker).

    >>> import labkit as lk
    >>> lk.dist.world_size()
    1
    """
    return _group.size if _group is not None else 1


def local_rank():
    """This worker's index among the workers on its host (it picks the GPU: ``gpu:local_rank``)."""
    return _group.local_rank if _group is not None else 0


def device():
    """The device of this worker: ``gpu:k`` when the host has GPUs, else ``cpu:0``. Inside a
    launched function new tensors go there by default.

    >>> import labkit as lk
    >>> lk.dist.device()
    Device('cpu:0')
    """
    return _group.device if _group is not None else get_device("cpu:0")


def _rank_and_size():
    return rank(), world_size()


_data_distributed.world = _rank_and_size      # DistributedSampler's default rank and size
