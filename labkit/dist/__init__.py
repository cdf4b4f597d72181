"""Distributed labkit: start workers from a notebook cell, collectives on tensors, and
synchronous data-parallel training.

Real engines do the work: ipyparallel starts, supervises and talks to the workers; MPI (mpi4py,
with the Open MPI wheel from PyPI) carries collectives on CPU tensors; NCCL (through CuPy)
carries them on GPU tensors.

- ``launch(fn, *args, n=...)``: run ``fn`` on n fresh workers, stream their output, return the
  results; ``Cluster(n=...)`` keeps workers across cells (``cluster.run(fn, *args)``).
- ``rank()``, ``world_size()``, ``local_rank()``, ``device()``, ``is_initialized()``.
- Script mode: ``python -m labkit.dist.run -n 4 train.py`` (or ``mpiexec -n 4 python
  train.py``) starts the ranks; ``init()`` in the script joins them into the process group.
- ``allreduce`` (sum, mean, max, min, prod), ``broadcast``, ``allgather``, ``reduce_scatter``,
  ``barrier``; each takes ``group=`` (a sub-group). ``labkit.distributed`` spells them as
  ``torch.distributed`` does.
- ``%%lk_dist``: a cell magic (registered when a Cluster is created in IPython) that runs the
  cell on every worker of a kept Cluster.
- ``DataParallel(module)``: parameters broadcast from rank 0, gradients averaged in buckets.
- ``ParameterServer(model_fn, optimizer_fn, num_ps, mode, backup_workers, straggler)``:
  parameter servers, asynchronous or synchronous with backup workers; sparse embedding rows.
- ``train_with_checkpoints(make_state, step_fn, steps, path, every=k, n=...)``: periodic
  checkpoints; a run that resumes from the last one when a worker dies.
- ``merge_profiles(profiles)``: each rank's ``lk.profile()`` as one profile, a track per rank,
  for ``lk.viz.timeline``.
- ``labkit.dist.testing``: two hosts (``start_hosts``) or a Slurm cluster (``start_slurm``)
  made on this machine, to try what follows without a cluster.
- ``hosts=["[user@]name[:port]", ...]`` (launch, Cluster): one MPI world over several hosts,
  reached over SSH; ``launcher="slurm"`` (or "pbs"): the workers as one batch job.

Install with ``pip install 'labkit[dist]'``. Outside a launched worker the world has one rank,
so the same code runs in a single process:

>>> import labkit as lk
>>> lk.dist.world_size(), lk.dist.allreduce(lk.tensor([2.0]), op="sum").tolist()
(1, [2.0])
"""
from .cluster import Cluster
from .collectives import allgather, allreduce, barrier, broadcast, reduce_scatter
from .data_parallel import DataParallel
from .errors import DistError, WorkerError
from .fault import TrainingRun, train_with_checkpoints
from .launcher import launch
from .parameter_server import ParameterServer
from .profiles import merge_profiles
from .runtime import device, is_initialized, local_rank, rank, world_size
from .script import init

__all__ = ["launch", "Cluster", "DataParallel", "allreduce", "broadcast", "allgather",
           "reduce_scatter", "barrier", "rank", "world_size", "local_rank", "device",
           "is_initialized", "DistError", "WorkerError", "train_with_checkpoints", "TrainingRun",
           "ParameterServer", "init", "merge_profiles"]
