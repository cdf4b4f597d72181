"""Which rank this process is, as the program that started it says in its environment.

- ``mpiexec`` of Open MPI (also under ``python -m labkit.dist.run``): ``OMPI_COMM_WORLD_RANK``,
  ``OMPI_COMM_WORLD_SIZE``, ``OMPI_COMM_WORLD_LOCAL_RANK``;
- ``mpiexec`` of MPICH: ``PMI_RANK``, ``PMI_SIZE``, ``MPI_LOCALRANKID``;
- Slurm's ``srun``: ``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``, read only inside a job
  step (``SLURM_STEP_ID`` set): a batch script itself also carries ``SLURM_PROCID=0`` and the
  job's ``SLURM_NTASKS``, and is not rank 0 of a world;
- torchrun-style ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``.

The first that is present wins. This file imports nothing of labkit: the rank bootstrap of
``labkit.dist.run`` loads it by path before the user's script runs.

>>> from_environ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4",
...               "OMPI_COMM_WORLD_LOCAL_RANK": "1"})
LaunchEnv(rank=1, world_size=4, local_rank=1, launcher='mpiexec')
>>> from_environ({}) is None
True
"""
import collections
import os

LaunchEnv = collections.namedtuple("LaunchEnv", "rank world_size local_rank launcher")

SOURCES = (   # launcher, rank, world size, local rank, a variable that must be set too
    ("mpiexec", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     None),
    ("mpiexec", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", None),
    ("srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_STEP_ID"),
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", None),
)


def _number(environ, name, default=None):
    text = environ.get(name)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"the environment variable {name}={text!r} should be a whole number "
                         f"(the launcher sets it; unset it if you set it by hand)") from None


def from_environ(environ=None):
    """This process's ``LaunchEnv(rank, world_size, local_rank, launcher)``, or None when no
    launcher's variables are set (a plain ``python script.py``). ``local_rank`` is None when
    the launcher does not say."""
    environ = os.environ if environ is None else environ
    for launcher, rank, size, local, needed in SOURCES:
        if rank in environ and size in environ and (needed is None or needed in environ):
            env = LaunchEnv(_number(environ, rank), _number(environ, size),
                            _number(environ, local), launcher)
            if env.world_size < 1 or not 0 <= env.rank < env.world_size:
                raise ValueError(f"the environment says rank {env.rank} of a world of "
                                 f"{env.world_size} ({rank}, {size}): not a valid rank")
            return env
    return None
