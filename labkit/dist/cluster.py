"""``Cluster``: a set of worker processes kept alive across cells, and the engine under ``launch``.

ipyparallel starts and supervises the workers and carries calls and their output; the workers
are started by ``mpiexec`` (ipyparallel's MPI launcher), so they form one MPI world and their
ranks are their MPI ranks. labkit adds: cloudpickled calls (functions from a notebook or a test
file work), rank-labelled live output, exceptions raised with the worker's rank and traceback,
Ctrl-C that stops the workers, and process hygiene: every process of a cluster carries a mark in
its environment and is ended by that mark on ``close()``, at interpreter exit, on garbage
collection, and (by a small reaper process) when the owning kernel dies.

>>> import labkit as lk
>>> def hello():
...     return f"rank {lk.dist.rank()} of {lk.dist.world_size()}"
>>> with lk.dist.Cluster(n=2, output="none") as cluster:       # doctest: +SKIP
...     cluster.run(hello)
['rank 0 of 2', 'rank 1 of 2']
"""
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref

from ..tensor.random import initial_seed
from . import batch, loopback, procs, reaper, remote, runtime, worker
from .errors import DistError, WorkerError, WorkerTimeout
from .output import MODES as OUTPUT_MODES, make_output

BACKENDS = ("auto", "mpi", "nccl")
LAUNCHERS = ("mpi", "slurm", "pbs")
_LABKIT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_INSTALL_HINT = ("install labkit's distributed extra: pip install 'labkit[dist]' (ipyparallel, "
                 "mpi4py, the Open MPI wheel, cloudpickle, psutil)")
ERROR_GRACE = 0.5        # after a worker fails, how long to wait for others' own failures
INTERRUPT_GRACE = 3.0    # after SIGINT, how long workers get to return before a restart
POLL = 0.02


# ---- environment of the workers ------------------------------------------------------------
def _require_packages():
    missing = []
    for name in ("ipyparallel", "mpi4py", "cloudpickle", "psutil"):
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise DistError(f"lk.dist needs {', '.join(missing)}, not installed here: "
                        f"{_INSTALL_HINT}")


def find_mpiexec():
    """The ``mpiexec`` next to this Python (the MPI wheel's), else the first on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(here, os.X_OK):
        return here
    found = shutil.which("mpiexec")
    if found is None:
        raise DistError(f"lk.dist starts workers with mpiexec, and none was found (not next to "
                        f"{sys.executable}, not on PATH): {_INSTALL_HINT}")
    return found


_MPI_FLAVOUR = {}


def _is_open_mpi(mpiexec):
    if mpiexec not in _MPI_FLAVOUR:
        try:
            out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        _MPI_FLAVOUR[mpiexec] = "Open MPI" in out or "OpenRTE" in out or "prte" in out.lower()
    return _MPI_FLAVOUR[mpiexec]


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _worker_env(n, cluster_id, ipython_dir, local_folder=None):
    """The environment of a cluster's MPI processes; ``local_folder``: where a cluster of this
    machine alone builds what keeps it on loopback (``labkit.dist.loopback``)."""
    env = {procs.MARKER: cluster_id, "IPYTHONDIR": ipython_dir,
           "PYTHONPATH": os.pathsep.join(p for p in (_LABKIT_ROOT, os.environ.get("PYTHONPATH"))
                                         if p)}
    if local_folder is not None:
        env.update(loopback.local_env(local_folder))
    if hasattr(os, "geteuid") and os.geteuid() == 0:      # Open MPI refuses root without these
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cores = _cores()
    if n >= cores:             # waiting ranks yield their core instead of spinning on it
        env["OMPI_MCA_mpi_yield_when_idle"] = "1"
    if n > cores:
        env["PRTE_MCA_rmaps_default_mapping_policy"] = ":oversubscribe"
    if "OMPI_MCA_coll_libnbc_iallreduce_algorithm" not in os.environ:
        # DataParallel's Iallreduce: libnbc's default choice runs 1.5-3x slower than the
        # blocking Allreduce on large buffers; its ring algorithm is as fast
        env["OMPI_MCA_coll_libnbc_iallreduce_algorithm"] = "1"
    threads = str(max(1, cores // n))
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        if var not in os.environ:                 # one BLAS thread pool per core, not per worker
            env[var] = threads
    return env


def _default_n(hosts):
    """One worker per host where hosts are given, else one per GPU, else one per core."""
    hosts = _check_hosts(hosts)
    if hosts:
        return len(hosts)
    from ..devices import gpu_count
    return gpu_count() or _cores()


def _check_hosts(hosts):
    if hosts is None:
        return None
    if isinstance(hosts, str):
        hosts = [hosts]
    return list(hosts)


# Open MPI start-up failures that say nothing about the program or the machine's setup and pass
# on a second try: the launcher's PMIx server could not start its listener (seen on CI machines)
_START_FLAKES = ("PMIx server's listener thread failed to start",)


def _ended(engine_set, mpiexec):
    """Whether an engine set has ended, and with ``mpiexec`` (the engines run by an mpiexec
    started here, not by a batch job) whether that mpiexec has. ipyparallel records an exit on
    its event loop, which runs only inside its own calls: an mpiexec that fails after
    ``start_engines_sync`` returned would stay "running" until the timeout, so its process is
    asked directly as well."""
    if not engine_set.running:
        return True
    process = getattr(engine_set, "process", None) if mpiexec else None
    if process is None:
        return False
    import psutil
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:          # as dead_ranks: a process psutil cannot ask is gone
        return True


class _StartFlake(DistError):
    """mpiexec stopped with one of ``_START_FLAKES`` before any worker started (a local start
    retries once)."""


# ---- one set of running workers ------------------------------------------------------------
class _Workers:
    """The processes of one start of a cluster: controller, mpiexec, engines and the reaper."""

    def __init__(self, n, backend, plan=None, python=None, workdir=None, launcher="mpi",
                 batch_options=()):
        self.n = n
        self.backend = backend
        self.plan = plan               # a remote.HostPlan when workers run on other hosts
        self.launcher = launcher       # "mpi" (mpiexec here) or a batch system's name
        self.batch_options = list(batch_options)
        self.python = python or sys.executable
        self.workdir = workdir
        self.cluster_id = f"{os.getpid()}-{secrets.token_hex(4)}"
        self.tmp = tempfile.mkdtemp(prefix="labkit-dist-")
        self.closed = False
        self.client = None
        self.ipp_cluster = None
        self.reaper = None
        self.info = []             # per rank: {"rank", "pid", "host", "device", ...}
        self.engine_ids = []       # per rank: the ipyparallel engine id

    @property
    def remote(self):
        """True when workers may run on other machines (other hosts, or a batch system's)."""
        return self.launcher != "mpi" or (self.plan is not None and self.plan.remote)

    def start(self, timeout):
        import logging

        import ipyparallel as ipp
        from traitlets.config import Config
        ipython_dir = os.path.join(self.tmp, "ipython")
        profile_dir = os.path.join(ipython_dir, "profile_labkit")
        os.makedirs(profile_dir)
        self.reaper = reaper.start(self.cluster_id, self.tmp,
                                   cancel=batch.cancel_command(self.launcher, self.cluster_id))
        mpiexec = find_mpiexec()
        env = _worker_env(self.n, self.cluster_id, ipython_dir,
                          local_folder=None if self.remote else self.tmp)
        config = Config()
        config.LocalControllerLauncher.environment = env
        launcher = config[batch.LAUNCHERS.get(self.launcher, "MPIEngineSetLauncher")]
        launcher.environment = env
        launcher.engine_cmd = [self.python, "-m", "ipyparallel.engine"]
        # no nanny process per engine where labkit signals engines itself (this machine);
        # on other hosts the nanny is how an interrupt reaches a worker
        launcher.engine_args = [f"--IPEngine.enable_nanny={self.remote}"]
        mpi_args = self._mpi_args(mpiexec, env)
        if self.launcher == "mpi":
            launcher.mpi_cmd = [mpiexec]
            launcher.mpi_args = mpi_args
        else:      # a batch job that runs mpiexec in its allocation
            launcher.batch_file_name = os.path.join(self.tmp, f"engines.{self.launcher}")
            launcher.batch_template = batch.script(self.launcher, [mpiexec] + mpi_args,
                                                   self.batch_options)
        controller_args = ["--HeartMonitor.period=500", "--usethreads", "--nodb"]
        if self.remote:              # messages to other machines are encrypted (CurveZMQ)
            controller_args.append("--IPController.enable_curve=True")
        if self.plan is not None and self.plan.remote:
            controller_ip, location = self.plan.controller_address()
        elif self.launcher != "mpi":     # the allocation's nodes are not known in advance
            controller_ip, location = "0.0.0.0", socket.getfqdn()
        else:
            controller_ip, location = "127.0.0.1", None
        self.ipp_cluster = ipp.Cluster(
            n=self.n, engines=self.launcher, profile_dir=profile_dir,
            cluster_id=self.cluster_id,
            controller_ip=controller_ip, controller_location=location or "",
            # schedulers as threads of one controller process (not nine processes)
            # and no database of past results (nothing reads it; it would only grow)
            controller_args=controller_args,
            log_level=logging.CRITICAL,
            shutdown_atexit=False, engine_timeout=int(timeout), config=config)
        self.ipp_cluster.start_controller_sync()
        deadline = time.monotonic() + timeout
        self.ipp_cluster.start_engines_sync(self.n)
        self.client = self._connect()
        try:
            self._wait_for_engines(timeout)
        except _StartFlake:       # once: Open MPI's start-up failed before any worker ran
            self.ipp_cluster.stop_engines_sync()
            self.ipp_cluster.start_engines_sync(self.n)
            self._wait_for_engines(max(deadline - time.monotonic(), 1.0))
        spec = {"backend": self.backend, "seed": initial_seed(),
                "sys_path": [p for p in sys.path if p and os.path.isdir(p)]}
        ids = sorted(self.client.ids)[:self.n]
        try:
            infos = self.client[ids].apply_sync(runtime.init_worker, spec)
        except Exception as exc:
            raise DistError(f"lk.dist: the workers started but could not join the process "
                            f"group:\n{_remote_text(exc)}") from None
        order = sorted(range(self.n), key=lambda i: infos[i]["rank"])
        self.info = [infos[i] for i in order]
        self.engine_ids = [ids[i] for i in order]

    def _connect(self):
        if not self.remote:
            return self.ipp_cluster.connect_client_sync()
        import logging
        # with CurveZMQ, ipyparallel turns the (now redundant) message signatures off, and the
        # client's session warns that signing is off: not so, curve authenticates every message
        log = logging.getLogger("traitlets")
        level = log.level
        log.setLevel(logging.ERROR)
        try:
            return self.ipp_cluster.connect_client_sync()
        finally:
            log.setLevel(level)

    def _mpi_args(self, mpiexec, env):
        args = ["--bind-to", "none"] if _is_open_mpi(mpiexec) else []
        if self.workdir:
            args += ["--wdir", self.workdir]
        if self.plan is not None:
            if not _is_open_mpi(mpiexec):
                raise DistError(f"lk.dist: workers on several hosts need Open MPI's mpiexec "
                                f"(its --host and ssh launch); {mpiexec} is another MPI")
            forwarded = sorted(set(env) | {"IPP_CONNECTION_INFO"})
            args += self.plan.mpi_args(os.path.join(self.tmp, "ssh_config"), forwarded)
        return args

    def _wait_for_engines(self, timeout):
        deadline = time.monotonic() + timeout
        next_ask = time.monotonic() + 1.0
        while len(self.client.ids) < self.n:
            engine_sets = list(self.ipp_cluster.engines.values())
            if any(_ended(es, self.launcher == "mpi") for es in engine_sets):
                where = (f" on {', '.join(str(h) for h, _ in self.plan.hosts)}"
                         if self.plan is not None else "")
                output = self._output(engine_sets)
                error = _StartFlake if self.launcher == "mpi" and self.plan is None and \
                    any(m in output for m in _START_FLAKES) else DistError
                raise error(f"lk.dist: mpiexec stopped before the {self.n} workers{where} "
                            f"started. Its output:\n{output}")
            if self.launcher != "mpi" and time.monotonic() >= next_ask:
                job, next_ask = batch.job_state(self.launcher, self.cluster_id), next_ask + 1.0
                if batch.job_ended(job) and len(self.client.ids) < self.n:
                    raise DistError(f"lk.dist: {batch.describe(self.launcher, job)} and only "
                                    f"{len(self.client.ids)} of {self.n} workers registered. "
                                    f"The job's output:\n{self._output(engine_sets)}")
            if time.monotonic() > deadline:
                if self.launcher == "mpi":
                    raise DistError(f"lk.dist: only {len(self.client.ids)} of {self.n} workers "
                                    f"registered within {timeout} s. The machine may be "
                                    f"overloaded; pass a larger timeout= or a smaller n=.")
                job = batch.job_state(self.launcher, self.cluster_id)
                raise DistError(f"lk.dist: only {len(self.client.ids)} of {self.n} workers "
                                f"registered within {timeout} s; "
                                f"{batch.describe(self.launcher, job) or 'the job state is unknown'}"
                                f". A job still waiting for nodes needs a larger timeout= or "
                                f"other batch_options=; a running one whose workers never "
                                f"registered may not reach this machine as "
                                f"{socket.getfqdn()!r}. The job's output:\n"
                                f"{self._output(engine_sets)}")
            time.sleep(0.05)

    @staticmethod
    def _output(engine_sets, limit=3000):
        output = "".join(es.get_output(remove=False) for es in engine_sets)
        return output[-limit:] or "(none)"

    # -- running --
    def death_report(self, wait=2.0):
        """``(rank, how)`` of the first worker whose process ended on its own, as the MPI
        launcher reports it ("exit code 3", "signal 9 (Killed)"), or None; waits up to ``wait``
        seconds for the report (the launcher notices a death a moment after labkit does)."""
        if self.ipp_cluster is None:
            return None
        deadline = time.monotonic() + wait
        while True:
            found = death_report(self._output(list(self.ipp_cluster.engines.values()),
                                              limit=20000))
            if found is not None or time.monotonic() > deadline:
                return found
            time.sleep(0.05)

    def dead_ranks(self):
        if self.remote:                      # remote pids mean nothing here: ask the controller
            engine_sets = self.ipp_cluster.engines.values()
            if any(_ended(es, self.launcher == "mpi") for es in engine_sets):
                return list(range(len(self.info)))
            alive = set(self.client.ids)
            return [r for r, eid in enumerate(self.engine_ids) if eid not in alive]
        import psutil
        dead = []
        for r, info in enumerate(self.info):
            try:
                if psutil.Process(info["pid"]).status() == psutil.STATUS_ZOMBIE:
                    dead.append(r)
            except psutil.Error:
                dead.append(r)
        return dead

    def forget(self, results):
        """Drop the client's copies of finished calls (it keeps every result otherwise)."""
        if self.closed:
            return
        try:
            self.client.purge_local_results(jobs=[ar for ar in results if ar.ready()])
        except Exception:
            pass

    def signal(self, ranks, signum):
        if self.remote:                  # through each worker's nanny, over the controller
            try:
                self.client.send_signal(int(signum), [self.engine_ids[r] for r in ranks],
                                        block=False)
            except Exception:
                pass
            return
        for r in ranks:
            try:
                os.kill(self.info[r]["pid"], signum)
            except OSError:
                pass

    # -- ending --
    def close(self):
        if self.closed:
            return
        self.closed = True
        interrupted = None
        for step in (self._close_client, self._end_processes, self._release_reaper,
                     self._remove_files):
            try:
                step()
            except KeyboardInterrupt as exc:     # finish cleaning up, then let it through
                interrupted = exc
            except Exception:
                pass
        if interrupted is not None:
            raise interrupted

    def _close_client(self):
        if self.client is not None:
            self.client.close(linger=0)

    def _end_processes(self):
        if self.launcher != "mpi" and self.ipp_cluster is not None:
            for engine_set in self.ipp_cluster.engines.values():
                try:                   # the batch job ends (scancel / qdel), where it runs
                    engine_set.stop()
                except Exception:
                    pass
        # mpiexec carries the mark: when it ends, Open MPI's daemon on each remote host loses
        # its line to it and ends that host's workers
        procs.end_cluster(self.cluster_id)
        if self.ipp_cluster is not None:       # forget launchers whose processes are gone
            self.ipp_cluster.controller = None
            self.ipp_cluster.engines = {}

    def _release_reaper(self):
        reaper.release(self.reaper)

    def _remove_files(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def _remote_text(exc):
    """The traceback text of an ipyparallel RemoteError (or the exception's own text)."""
    tb = getattr(exc, "traceback", None)
    if tb:
        return _strip_ansi(tb)
    return f"{type(exc).__name__}: {exc}"


def _strip_ansi(text):
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _close_workers(holder):
    workers = holder.get("workers")
    if workers is not None:
        workers.close()


# ---- the public class -----------------------------------------------------------------------
class Cluster:
    """``n`` worker processes that stay alive across cells; ``run(fn, *args)`` runs ``fn`` on
    every worker and returns the list of results, in rank order.

    - ``n``: how many workers (default: one per GPU where there are GPUs, else one per core).
    - ``backend``: "auto" (NCCL for GPU tensors when each worker has its own GPU, MPI otherwise),
      "mpi" (everything through MPI) or "nccl".
    - ``output``: where workers' prints go while ``run`` waits: "auto" (a tab per rank in a
      live notebook, ``[rank r]``-prefixed lines elsewhere), "widget", "text" or "none".
    - ``hosts``: where the workers run: None for this machine, or a list of hosts
      ``"[user@]name[:port]"`` reached over SSH; the ``n`` workers are spread over them in
      order, as evenly as they divide (ranks 0, 1 on the first of two hosts with n=4), and
      form one MPI world (see ``labkit.dist.remote``). ``ssh_options``: extra ``ssh``
      arguments, e.g. ``["-i", "~/.ssh/lab_key"]``. ``network``: the subnet Open MPI uses
      between hosts, e.g. ``"10.1.0.0/16"`` (default: Open MPI's choice).
    - ``launcher``: "mpi" (``mpiexec`` started here) or "slurm" / "pbs": the workers run as one
      batch job (ipyparallel's Slurm or PBS launcher) whose script runs ``mpiexec`` in its
      allocation; the job ends when the cluster does. ``batch_options``: extra lines of the
      job's options, e.g. ``["--partition=debug", "--time=10"]`` (see ``labkit.dist.batch``).
    - ``python``: the Python that runs the workers (default: this one's path; on other hosts
      it must exist at that path). ``workdir``: the workers' working directory.

    Inside ``fn``, ``lk.dist.rank()``, ``lk.dist.world_size()`` and the collectives work, and
    new tensors go to the worker's device. Workers keep their Python state between runs.
    A worker's exception is raised here as ``lk.dist.WorkerError`` with its rank and traceback;
    Ctrl-C (interrupting the cell) stops every worker. Workers that do not stop (one blocked in
    a collective, or one that died) are replaced by a fresh set, so the cluster stays usable.

    The workers end on ``close()`` (or leaving a ``with`` block), when the Cluster is garbage
    collected, when Python exits, and when the process holding the Cluster dies.

    >>> import labkit as lk
    >>> cluster = lk.dist.Cluster(n=2)                                   # doctest: +SKIP
    >>> cluster.run(lambda: lk.dist.allreduce(lk.ones(2)).tolist())      # doctest: +SKIP
    [[2.0, 2.0], [2.0, 2.0]]
    >>> cluster.close()                                                  # doctest: +SKIP
    """

    def __init__(self, n=None, hosts=None, backend="auto", output="auto", timeout=120,
                 ssh_options=None, network=None, python=None, workdir=None, launcher="mpi",
                 batch_options=()):
        _require_packages()
        if n is None:
            n = _default_n(hosts)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise DistError(f"lk.dist: n must be a positive number of workers, got {n!r}")
        plan = remote.plan_hosts(hosts, n, ssh_options, network)
        if launcher not in LAUNCHERS:
            raise DistError(f"lk.dist: launcher={launcher!r} is not one of "
                            f"{', '.join(map(repr, LAUNCHERS))}")
        if launcher != "mpi" and hosts is not None:
            raise DistError(f"lk.dist: launcher={launcher!r} places the workers where the "
                            f"batch system allocates them; leave hosts=None with it")
        if plan is not None and plan.remote:
            plan.controller_address()        # an unknown host is an error before any start
        if backend not in BACKENDS:
            raise DistError(f"lk.dist: backend={backend!r} is not one of "
                            f"{', '.join(map(repr, BACKENDS))}")
        if backend == "nccl":
            from ..devices import gpu_count
            if gpu_count() == 0:
                raise DistError("lk.dist: backend='nccl' needs CuPy and a CUDA GPU for each "
                                "worker, and this machine has none; use backend='auto' or 'mpi'")
        if output not in OUTPUT_MODES:
            raise ValueError(f"lk.dist: output={output!r} is not one of "
                             f"{', '.join(map(repr, OUTPUT_MODES))}")
        self.n = n
        self.backend = backend
        self.output = output
        self.timeout = timeout
        self.hosts = None if plan is None else [str(h) for h, _ in plan.hosts]
        self._where = {"plan": plan, "python": python, "workdir": workdir,
                       "launcher": launcher, "batch_options": batch_options}
        self._holder = {"workers": None}
        self._finalizer = weakref.finalize(self, _close_workers, self._holder)
        self._start()
        from . import magic
        magic.remember(self)      # the default target of %%lk_dist cells

    # -- lifecycle --
    def _start(self):
        workers = self._holder["workers"] = _Workers(self.n, self.backend, **self._where)
        try:
            workers.start(self.timeout)
        except BaseException:          # a failed or interrupted start leaves nothing running
            workers.close()
            raise

    @property
    def _workers(self):
        workers = self._holder["workers"]
        if workers is None or workers.closed:
            raise DistError("this lk.dist.Cluster is closed; create a new one: "
                            "lk.dist.Cluster(n=...)")
        return workers

    @property
    def closed(self):
        workers = self._holder["workers"]
        return workers is None or workers.closed

    def restart(self):
        """End the workers and start a fresh set (new processes, new MPI world)."""
        workers = self._holder["workers"]
        if workers is not None:
            workers.close()
        self._holder["workers"] = None
        self._start()

    def close(self):
        """End every worker process (idempotent)."""
        workers = self._holder["workers"]
        if workers is not None:
            workers.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        if self.closed:
            return f"Cluster(n={self.n}, backend={self.backend!r}, closed)"
        devices = sorted({i["device"] for i in self._workers.info})
        return (f"Cluster(n={self.n}, backend={self.backend!r}, devices={devices}, "
                f"pids={[i['pid'] for i in self._workers.info]})")

    @property
    def pids(self):
        """Process ids of the workers, in rank order."""
        return [i["pid"] for i in self._workers.info]

    @property
    def devices(self):
        """Each worker's device name, in rank order."""
        return [i["device"] for i in self._workers.info]

    # -- running --
    def run(self, fn, *args, timeout=None):
        """Run ``fn(*args)`` on every worker; return the results in rank order.

        Tensors in the results come back detached and on the CPU. Raises ``WorkerError`` if a
        worker raises or dies (the other workers are stopped; a worker that died is named with
        its exit code or signal), ``KeyboardInterrupt`` if interrupted (every worker is
        stopped), and ``WorkerTimeout`` if ``timeout`` seconds pass before every worker has
        returned (those still running are interrupted, and the workers replaced if they do
        not stop).
        """
        return self._run(fn, args, kill=False, timeout=timeout)

    def _run(self, fn, args, kill, timeout=None):
        if not callable(fn):
            raise TypeError(f"lk.dist: the first argument must be a function to run on each "
                            f"worker, got {type(fn).__name__}")
        workers = self._workers
        if workers.dead_ranks():
            self.restart()
            workers = self._workers
        if timeout is not None and (isinstance(timeout, bool) or
                                    not isinstance(timeout, (int, float)) or not timeout > 0):
            raise DistError(f"lk.dist: timeout must be a positive number of seconds (or None "
                            f"for no limit), got {timeout!r}")
        payload = worker.dumps_call(fn, args)
        sink = make_output(self.n, self.output)
        try:
            return self._supervise(workers, payload, sink, kill, timeout)
        finally:
            sink.close()

    def _supervise(self, workers, payload, sink, kill, timeout=None):
        """Submit the call to every rank and wait, streaming output, until all are done or one
        failed; stop the others on failure, Ctrl-C or timeout."""
        client = workers.client
        deadline = None if timeout is None else time.monotonic() + timeout
        results = [client[eid].apply_async(worker.run_task, payload)
                   for eid in workers.engine_ids]
        try:
            return self._wait(workers, results, sink, kill, deadline, timeout)
        finally:
            workers.forget(results)

    def _wait(self, workers, results, sink, kill, deadline=None, timeout=None):
        n = self.n
        stream = _Stream(results, sink)
        outcomes, pending = {}, set(range(n))
        first_failure, next_liveness = None, time.monotonic() + 0.5
        try:
            while pending:
                stream.pump()
                now = time.monotonic()
                if deadline is not None and now > deadline and first_failure is None:
                    late = sorted(pending)
                    note = self._stop(workers, results, pending, stream, kill, "They")
                    raise WorkerTimeout(late, n, timeout, note) from None
                for r in sorted(pending):
                    if results[r].ready():
                        pending.discard(r)
                        outcomes[r] = _outcome(results[r])
                        if outcomes[r][0] == "error" and first_failure is None:
                            first_failure = now
                if pending and now > next_liveness:
                    next_liveness = now + 0.5
                    for r in set(workers.dead_ranks()) & pending:
                        pending.discard(r)
                        outcomes[r] = ("error", _died(r))
                        first_failure = first_failure or now
                if first_failure is not None and now - first_failure > ERROR_GRACE:
                    break
                if pending:
                    time.sleep(POLL)
        except KeyboardInterrupt:
            self._stop(workers, results, pending, stream, kill)
            raise
        stream.pump()
        if first_failure is None:
            stream.finish()
            return [outcomes[r][1] for r in range(n)]
        report = None
        if any(o[0] == "error" and o[1].get("type") in DEATHS for o in outcomes.values()):
            report = workers.death_report()        # which rank died first, and how
        note = self._stop(workers, results, pending, stream, kill)
        raise _worker_error(outcomes, n, note, report) from None

    def _stop(self, workers, results, pending, stream, kill, who="The other workers"):
        """Stop the ranks still running: end the processes (launch), or interrupt them and
        replace the set if some do not return in time (a kept Cluster). Returns a sentence
        saying what became of them (``who``)."""
        if not pending:
            return f"{who} had finished."
        if kill:
            workers.close()
            return f"{who} were stopped, and every worker process ended."
        workers.signal(sorted(pending), signal.SIGINT)
        deadline = time.monotonic() + INTERRUPT_GRACE
        while time.monotonic() < deadline and not all(results[r].ready() for r in pending):
            stream.pump()
            time.sleep(POLL)
        stream.pump()
        stuck = [r for r in pending if not results[r].ready()]
        if stuck:
            print(f"lk.dist: rank(s) {', '.join(map(str, sorted(stuck)))} did not stop within "
                  f"{INTERRUPT_GRACE:.0f} s of an interrupt (blocked in a collective?); "
                  f"restarting the workers.", file=sys.stderr)
            self.restart()
            return f"{who} were stopped, and the cluster restarted."
        return f"{who} were interrupted."


class _Stream:
    """Copies new stdout/stderr text of each rank's AsyncResult to the output sink."""

    def __init__(self, results, sink):
        self.results = results
        self.sink = sink
        self.seen = [{"stdout": 0, "stderr": 0} for _ in results]

    def pump(self):
        for r, ar in enumerate(self.results):
            md = ar.metadata
            for name in ("stdout", "stderr"):
                text = md.get(name) or ""
                start = self.seen[r][name]
                if len(text) > start:
                    self.seen[r][name] = len(text)
                    self.sink.write(r, name, text[start:])
        self.sink.tick()

    def finish(self):
        for ar in self.results:          # output still in flight when the result arrived
            try:
                ar.wait_for_output(timeout=1)
            except Exception:
                pass
        self.pump()


def _outcome(ar):
    """("ok", value) or ("error", details) from a finished AsyncResult of ``run_task``."""
    import cloudpickle
    try:
        status, data = ar.get(0)
    except Exception as exc:        # ipyparallel could not run run_task at all
        return ("error", {"type": getattr(exc, "ename", type(exc).__name__),
                          "message": getattr(exc, "evalue", str(exc)),
                          "traceback": _remote_text(exc), "exception": None,
                          "interrupted": False})
    if status == "ok":
        return ("ok", cloudpickle.loads(data))
    return ("error", data)


# how a worker's death reads: labkit's liveness check found its process gone ("WorkerDied"), or
# ipyparallel's controller saw its engine stop while running the call ("EngineError"; how the
# death of a worker on another host, or one MPI ended with it, usually arrives)
DEATHS = ("WorkerDied", "EngineError")


def _died(rank):
    return {"type": "WorkerDied", "message": f"the process of rank {rank} ended while running "
            f"the function (killed, out of memory, or a crash in native code)",
            "traceback": "", "exception": None, "interrupted": False}


# Open MPI's launcher names the first process that ended on its own: by an exit status
# ("Process name: [prterun-host-123@1,1]  Exit code: 3", the job id and rank after the "@"),
# or by a signal ("process rank 1 with PID 77 on node vm exited on signal 9 (Killed)")
_EXIT_REPORT = re.compile(r"Process name:\s*\[[^\]]*@\d+,(\d+)\]\s*Exit code:\s*(-?\d+)")
_SIGNAL_REPORT = re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on\s+signal "
                            r"(\d+)(?: \(([^)]*)\))?")


def death_report(output):
    """``(rank, how)`` from the MPI launcher's ``output`` when it reports a process that ended
    on its own, else None.

    >>> death_report("Process name: [prterun-vm-20114@1,1]\\n   Exit code:    3")
    (1, 'exit code 3')
    >>> death_report("process rank 0 with PID 7 on node vm exited on\\nsignal 9 (Killed).")
    (0, 'signal 9 (Killed)')
    """
    found = []
    for match in _EXIT_REPORT.finditer(output):
        found.append((match.start(), int(match.group(1)), f"exit code {match.group(2)}"))
    for match in _SIGNAL_REPORT.finditer(output):
        name = f" ({match.group(3)})" if match.group(3) else ""
        found.append((match.start(), int(match.group(1)), f"signal {match.group(2)}{name}"))
    if not found:
        return None
    _, rank, how = min(found)
    return rank, how


def _worker_error(outcomes, n, note, report=None):
    import cloudpickle
    failed = sorted(r for r, o in outcomes.items() if o[0] == "error"
                    and not o[1].get("interrupted"))
    if not failed:           # only interrupts (e.g. a worker raised KeyboardInterrupt itself)
        failed = sorted(r for r, o in outcomes.items() if o[0] == "error")
    rank = failed[0]
    if report is not None and report[0] in outcomes and report[0] < n:
        rank, how = report         # the rank that died first, not the others MPI ended then
        others = [r for r in failed if r != rank and outcomes[r][1].get("type") in DEATHS]
        outcomes[rank] = ("error", {
            "type": "WorkerDied", "traceback": "", "exception": None, "interrupted": False,
            "message": f"the process of rank {rank} ended with {how} while running the "
                       f"function" + (f" (Open MPI then ended rank(s) "
                                      f"{', '.join(map(str, others))})" if others else "")})
        failed = [rank] + [r for r in failed if r != rank]
    info = outcomes[rank][1]
    exception = None
    if info.get("exception") is not None:
        try:
            exception = cloudpickle.loads(info["exception"])
        except Exception:
            exception = None
    error = WorkerError(rank, n, info["type"], info["message"], info["traceback"],
                        exception=exception, failed_ranks=failed, note=note)
    # how the first rank that died ended: ("exit code 3", "signal 9 (Killed)"), else None
    error.death = report[1] if report is not None and report[0] == rank else None
    # the ranks whose process ended (not an exception): train_with_checkpoints resumes on those
    error.died_ranks = sorted(r for r, o in outcomes.items()
                              if o[0] == "error" and o[1].get("type") in DEATHS)
    return error

