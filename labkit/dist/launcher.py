"""``launch``: run a function on fresh workers from a notebook cell, and end them afterwards."""
import time

from .cluster import Cluster
from .errors import DistError, WorkerTimeout

START_TIMEOUT = 120      # seconds the workers get to start when the call has no time limit


def launch(fn, *args, n=None, hosts=None, backend="auto", output="auto", timeout=None,
           ssh_options=None, network=None, python=None, workdir=None, launcher="mpi",
           batch_options=()):
    """Start ``n`` workers, run ``fn(*args)`` on every one, return the results in rank order,
    and end the workers. ``fn`` may be defined in the notebook itself.

    - ``n``: workers to start (default: one per GPU where there are GPUs, else one per core).
    - ``hosts``: None (this machine), or hosts ``"[user@]name[:port]"`` reached over SSH, with
      ``ssh_options`` (extra ``ssh`` arguments, e.g. ``["-i", key_file]``) and ``network``
      (the subnet between them); the ``n`` workers are spread over the hosts and form one
      MPI world; their output streams back and they end with the call, as local ones do.
    - ``python``, ``workdir``: the workers' Python and working directory (see ``Cluster``).
    - ``launcher``: "mpi", or "slurm" / "pbs" to run the workers as one batch job, with
      ``batch_options`` (see ``Cluster``).
    - ``backend``: "auto", "mpi" or "nccl" (see ``lk.dist.Cluster``).
    - ``output``: the workers' prints, live: a tab per rank in a notebook ("auto"/"widget"),
      ``[rank r]``-prefixed lines elsewhere ("text"), or "none".
    - ``timeout``: seconds the whole call may take, start included: workers that have not
      returned by then are ended and ``lk.dist.WorkerTimeout`` is raised (None: no limit, and
      the workers get 120 s to start).

    Inside ``fn``: ``lk.dist.rank()``, ``lk.dist.world_size()``, the collectives and
    ``lk.dist.DataParallel``. A worker's exception is raised here as ``lk.dist.WorkerError``
    with its rank and traceback, after the other workers are stopped; interrupting the cell
    (KeyboardInterrupt) stops every worker. No worker process outlives the call: keep an
    ``lk.dist.Cluster`` to reuse workers across cells.

    >>> import labkit as lk
    >>> def total():
    ...     mine = lk.tensor([float(lk.dist.rank())])
    ...     return lk.dist.allreduce(mine).item()
    >>> lk.dist.launch(total, n=2)                       # doctest: +SKIP
    [1.0, 1.0]
    """
    if timeout is not None and (isinstance(timeout, bool) or
                                not isinstance(timeout, (int, float)) or not timeout > 0):
        raise DistError(f"lk.dist.launch: timeout must be a positive number of seconds (or "
                        f"None for no limit), got {timeout!r}")
    start = time.monotonic()
    with Cluster(n=n, hosts=hosts, backend=backend, output=output,
                 timeout=START_TIMEOUT if timeout is None else timeout,
                 ssh_options=ssh_options, network=network, python=python,
                 workdir=workdir, launcher=launcher, batch_options=batch_options) as cluster:
        left = None if timeout is None else max(timeout - (time.monotonic() - start), 1e-3)
        try:
            return cluster._run(fn, args, kill=True, timeout=left)
        except WorkerTimeout as exc:    # name the whole call's limit, not what was left of it
            raise WorkerTimeout(exc.ranks, exc.world_size, timeout, exc.note) from None
