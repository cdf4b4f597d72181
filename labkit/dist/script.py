"""Script mode: ``lk.dist.init()`` joins the process group of a script started as several ranks
(``python -m labkit.dist.run -n 4 train.py``, ``mpiexec -n 4 python train.py``, ``srun``), so
the collectives, ``DataParallel`` and the rest work there exactly as in a worker started from a
notebook cell.
"""
import collections

from ..tensor.random import initial_seed, manual_seed
from . import runtime
from .errors import DistError
from .launch_env import from_environ

RankInfo = collections.namedtuple("RankInfo", "rank world_size local_rank")
BACKENDS = ("auto", "mpi", "nccl")


def _info():
    return RankInfo(runtime.rank(), runtime.world_size(), runtime.local_rank())


def init(backend="auto"):
    """Join the process group of the ranks started with this script; returns
    ``RankInfo(rank, world_size, local_rank)`` (also ``lk.dist.rank()``, ``world_size()``,
    ``local_rank()`` afterwards).

    The rank and world size come from the launcher's environment: ``mpiexec`` (Open MPI's
    ``OMPI_COMM_WORLD_RANK`` / ``_SIZE`` / ``_LOCAL_RANK``, which ``python -m labkit.dist.run``
    uses too, or MPICH's ``PMI_RANK`` / ``PMI_SIZE``), ``srun`` (``SLURM_PROCID`` /
    ``SLURM_NTASKS`` / ``SLURM_LOCALID``) or torchrun-style ``RANK`` / ``WORLD_SIZE`` /
    ``LOCAL_RANK``. The ranks talk over MPI, so they must be one MPI world: started by
    ``mpiexec`` or ``labkit.dist.run`` (or ``srun --mpi=pmix``); ranks started otherwise are an
    error that says so.

    What it sets up is what a worker started by ``lk.dist.launch`` gets: an MPI communicator of
    its own, the rank's device (``gpu:local_rank`` where there are GPUs, else ``cpu:0``) as the
    default device, and the default generator seeded for this rank from rank 0's seed (call
    ``lk.manual_seed(s)`` before ``init()`` and rank r draws the numbers rank r of a launch from
    a notebook seeded with s draws; seed again after ``init()`` for the same numbers on every
    rank). ``backend``: "auto", "mpi" or "nccl", as for ``lk.dist.Cluster``.

    - In a single process (no launcher's variables) it sets nothing up and returns
      ``RankInfo(0, 1, 0)``: the world of one, where collectives return their input and
      ``DataParallel`` trains plainly, so the same script runs with ``python train.py``.
    - Called again, or inside a worker started by ``lk.dist.launch`` / ``Cluster``, it returns
      the group already joined, so a training function may call it wherever it runs.

    >>> import labkit as lk
    >>> lk.dist.init()                   # python train.py: a world of one
    RankInfo(rank=0, world_size=1, local_rank=0)
    """
    if backend not in BACKENDS:
        raise DistError(f"lk.dist.init: backend={backend!r} is not one of "
                        f"{', '.join(map(repr, BACKENDS))}")
    if runtime.is_initialized():
        return _info()
    group = join_started_ranks(backend, "lk.dist.init")
    if group is None:
        return _info()
    seed = group.comm.bcast(initial_seed(), root=0)
    manual_seed(runtime.worker_seed(seed, group.rank))
    group.device.__enter__()       # new tensors go to the rank's device, as in a launched worker
    return _info()


def join_started_ranks(backend, caller):
    """Join the MPI world of the ranks a launcher started (``mpiexec``, ``labkit.dist.run``,
    ``srun``), after checking it against the launcher's environment; return the ``Group``, or
    None when no launcher's variables are set (a plain ``python script.py``). ``caller`` names
    the function the person called, for the errors. Sets nothing else up (``init`` seeds the
    rank's generator and makes its device the default; ``labkit.distributed`` does not)."""
    env = from_environ()
    if env is None:
        return None
    try:
        from mpi4py import MPI
    except ImportError:
        raise DistError(f"{caller}: this process is rank {env.rank} of {env.world_size} "
                        f"(started by {env.launcher}), and the ranks talk over MPI, which is "
                        f"not installed: pip install 'labkit[dist]'") from None
    if MPI.COMM_WORLD.Get_size() != env.world_size or MPI.COMM_WORLD.Get_rank() != env.rank:
        raise DistError(
            f"{caller}: {env.launcher}'s environment says this process is rank {env.rank} "
            f"of {env.world_size}, but MPI sees rank {MPI.COMM_WORLD.Get_rank()} of "
            f"{MPI.COMM_WORLD.Get_size()}: the processes were not started as one MPI world, "
            f"which labkit's collectives need. Start them with "
            f"`python -m labkit.dist.run -n {env.world_size} script.py` or "
            f"`mpiexec -n {env.world_size} python script.py` (under Slurm: "
            f"`srun --mpi=pmix ...`).")
    return runtime.join(backend)
