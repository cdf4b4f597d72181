"""``python -m labkit.dist.run -n 4 train.py [args...]``: a script as several ranks, as torchrun.

It takes torchrun's options too (``--nproc_per_node``, ``--standalone``, ``--nnodes=1``...) and
gives each rank torchrun's environment (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), so a script written for torchrun runs
as it is, with ``labkit.distributed.init_process_group()``.

The ranks are one MPI world, started by ``mpiexec`` (the one beside this Python, as for
``lk.dist.Cluster``); in the script, ``lk.dist.init()`` joins them into labkit's process group.
Every line a rank prints comes out labelled ``[rank r]`` (stdout to stdout, stderr to stderr).
When a rank fails, the others are stopped, the launcher names the rank that failed first with
the end of its traceback, and exits with that rank's exit code. Ctrl-C (SIGINT, or SIGTERM) stops
every rank within a few seconds; every process of the run carries a mark and is ended by it, and
a small reaper ends them even if the launcher itself is killed.

    $ python -m labkit.dist.run -n 2 examples/dist/train_dp.py --steps 20
    [rank 0] step 0 loss 2.3052
    ...
"""
import argparse
import codecs
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import procs, reaper
from .cluster import _cores, _default_n, _is_open_mpi, _worker_env, find_mpiexec
from .errors import DistError
from .output import TextOutput

ERROR_GRACE = 0.5        # after a rank fails, how long the others get to report their own failure
INTERRUPT_GRACE = 2.0    # after Ctrl-C, how long ranks get to stop by themselves
TAIL_LINES = 15          # lines of the failed rank's stderr repeated in the report
POLL = 0.02
HERE = os.path.dirname(os.path.abspath(__file__))

DESCRIPTION = """\
Start a Python script as NPROC ranks of one MPI world on this machine, as torchrun does.
In the script, lk.dist.init() joins the ranks into labkit's process group (rank, world size,
collectives, lk.dist.DataParallel); lk.data.DistributedSampler gives each rank its share.
Each rank also gets torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
MASTER_ADDR, MASTER_PORT), and torchrun's options are accepted, so a script written for
torchrun runs as it is: labkit.distributed.init_process_group() joins the ranks there.

Each line a rank prints is labelled with its rank. When a rank fails, the other ranks are
stopped, the rank that failed first is named with the end of its traceback, and the launcher
exits with its exit code. Ctrl-C stops every rank.
"""
EPILOG = """\
examples:
  python -m labkit.dist.run -n 4 train.py --epochs 3
  python -m labkit.dist.run --standalone --nproc_per_node=2 train.py    # torchrun's spelling
  python -m labkit.dist.run -n 2 -m mypackage.train

The same script also runs as `mpiexec -n 4 python train.py`, under Slurm's srun, and as a
single process (`python train.py`, a world of one). For several machines, start it with
mpiexec or srun directly.
"""


def _nproc(text):
    """``--nproc_per_node``: a number, or torchrun's "auto" (one per GPU, else per core), "gpu"
    or "cpu"."""
    if text in ("auto", "gpu", "cpu"):
        from ..devices import gpu_count
        if text == "gpu" and not gpu_count():
            raise argparse.ArgumentTypeError("'gpu' asks for one rank per GPU, and there is none")
        return gpu_count() if text == "gpu" else _cores() if text == "cpu" else _default_n(None)
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of ranks, or auto, gpu, cpu; got "
                                         f"{text!r}") from None


def _flag(parser, name, **kw):
    """An option spelled with underscores and with dashes, as torchrun takes both."""
    spellings = [f"--{name}"] + ([f"--{name.replace('_', '-')}"] if "_" in name else [])
    parser.add_argument(*spellings, dest=name, **kw)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python -m labkit.dist.run", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--nproc-per-node", "--nproc_per_node", dest="nproc", type=_nproc,
                        default=None, metavar="NPROC",
                        help="number of ranks to start (default: one per GPU where there are "
                             "GPUs, else one per CPU core; torchrun's auto, gpu, cpu too)")
    parser.add_argument("-m", "--module", action="store_true",
                        help="interpret training_script as a Python module, executing with the "
                             "same behaviour as 'python -m'")
    torchrun = parser.add_argument_group(
        "torchrun's options", "accepted so that a torchrun command line works; the ranks always "
        "run on this machine")
    torchrun.add_argument("--standalone", action="store_true",
                          help="one machine (what this launcher always does)")
    _flag(torchrun, "nnodes", default="1", help="must be 1 (or 1:1)")
    _flag(torchrun, "node_rank", type=int, default=0, help="must be 0")
    _flag(torchrun, "master_addr", default="127.0.0.1",
          help="MASTER_ADDR for the script (labkit's ranks do not use it)")
    _flag(torchrun, "master_port", type=int, default=None,
          help="MASTER_PORT for the script (default: a free port)")
    _flag(torchrun, "rdzv_backend", default=None, help="ignored on one machine")
    _flag(torchrun, "rdzv_endpoint", default=None, help="ignored on one machine")
    _flag(torchrun, "rdzv_id", default=None, help="TORCHELASTIC_RUN_ID for the script")
    _flag(torchrun, "max_restarts", type=int, default=0, help="must be 0")
    parser.add_argument("training_script",
                        help="the script (or, with -m, module) to run on every rank, followed "
                             "by its arguments")
    parser.add_argument("training_script_args", nargs=argparse.REMAINDER,
                        help="arguments passed to the script")
    args = parser.parse_args(argv)
    if args.nproc is None:
        args.nproc = _default_n(None)
    if args.nproc < 1:
        parser.error(f"-n must be a positive number of ranks, got {args.nproc}")
    if args.nnodes not in ("1", "1:1") or args.node_rank != 0:
        parser.error(f"--nnodes={args.nnodes} --node_rank={args.node_rank}: this launcher "
                     f"starts the ranks on this machine only; for several machines start the "
                     f"script with mpiexec or srun (lk.dist.Cluster(hosts=...) from a notebook)")
    if args.max_restarts:
        parser.error(f"--max_restarts={args.max_restarts}: labkit's launcher does not restart "
                     f"ranks; a failing rank stops the run (lk.dist.train_with_checkpoints "
                     f"resumes from checkpoints)")
    if not args.module and not os.path.isfile(args.training_script):
        parser.error(f"no such script: {args.training_script!r}")
    return args


def _free_port(address):
    import socket
    with socket.socket() as s:
        try:
            s.bind((address, 0))
        except OSError:
            s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_env(n, master_addr="127.0.0.1", master_port=None, run_id=None):
    """torchrun's variables that are the same on every rank (``rank_bootstrap`` adds ``RANK``,
    ``LOCAL_RANK``, ``ROLE_RANK`` per rank).

    >>> env = torchrun_env(2, master_port=29500)
    >>> env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"], env["MASTER_ADDR"], env["MASTER_PORT"]
    ('2', '2', '127.0.0.1', '29500')
    """
    port = master_port if master_port is not None else _free_port(master_addr)
    return {"WORLD_SIZE": str(n), "LOCAL_WORLD_SIZE": str(n), "MASTER_ADDR": master_addr,
            "MASTER_PORT": str(port), "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1",
            "ROLE_NAME": "default", "ROLE_WORLD_SIZE": str(n),
            "TORCHELASTIC_RUN_ID": run_id or "none", "TORCHELASTIC_RESTART_COUNT": "0",
            "TORCHELASTIC_MAX_RESTARTS": "0"}


class _Tail:
    """Reads what each rank has written to its output files since the last call, and hands it
    to a ``TextOutput`` (labelled lines)."""

    def __init__(self, folder, n, sink):
        self.folder = folder
        self.sink = sink
        self.files = {}
        self.decoders = {(r, s): codecs.getincrementaldecoder("utf-8")("replace")
                         for r in range(n) for s in ("stdout", "stderr")}

    def pump(self):
        for (rank, stream), decoder in self.decoders.items():
            f = self.files.get((rank, stream))
            if f is None:
                try:
                    f = self.files[(rank, stream)] = open(
                        os.path.join(self.folder, f"{rank}.{stream}"), "rb")
                except FileNotFoundError:
                    continue
            data = f.read()
            if data:
                self.sink.write(rank, stream, decoder.decode(data))

    def close(self):
        self.pump()
        self.sink.close()
        for f in self.files.values():
            f.close()


class _Run:
    """One start of the ranks: the run folder, the reaper, mpiexec, and the ranks' records."""

    def __init__(self, n, target, extra_env=None):
        self.n = n
        self.run_id = f"{os.getpid()}-{secrets.token_hex(4)}"
        self.folder = tempfile.mkdtemp(prefix="labkit-run-")
        self.reaper = reaper.start(self.run_id, self.folder)
        mpiexec = find_mpiexec()
        env = dict(os.environ)
        env.update((k, v) for k, v in _worker_env(n, self.run_id, "").items()
                   if k != "IPYTHONDIR")
        env.update(extra_env or {})
        env.setdefault("PYTHONUNBUFFERED", "1")      # the ranks' prints appear as they happen
        cmd = ([mpiexec, "-n", str(n)] + (["--bind-to", "none"] if _is_open_mpi(mpiexec) else [])
               + [sys.executable, os.path.join(HERE, "rank_bootstrap.py"), self.folder]
               + target)
        self.mpiexec_log = open(os.path.join(self.folder, "mpiexec.log"), "wb")
        # a session of its own: a Ctrl-C in the terminal reaches the launcher only, which stops
        # the ranks itself (the same way as for a SIGINT sent to the launcher alone)
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                     stdout=self.mpiexec_log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def records(self, what):
        """{rank: text} of the ranks' ``what`` records ("pid" or "exit") written so far."""
        found = {}
        for rank in range(self.n):
            try:
                with open(os.path.join(self.folder, f"{rank}.{what}")) as f:
                    found[rank] = f.read()
            except FileNotFoundError:
                pass
        return found

    def failures(self):
        """[(time, rank, code)] of the ranks that exited with a non-zero code, first first."""
        out = []
        for rank, text in self.records("exit").items():
            code, when = text.split()
            if int(code) != 0:
                out.append((float(when), rank, int(code)))
        return sorted(out)

    def interrupt(self, tail):
        """Send SIGINT to every rank and give them INTERRUPT_GRACE seconds to stop."""
        for text in self.records("pid").values():
            try:
                os.kill(int(text), signal.SIGINT)
            except OSError:
                pass
        deadline = time.monotonic() + INTERRUPT_GRACE
        while self.proc.poll() is None and time.monotonic() < deadline:
            tail.pump()
            time.sleep(POLL)

    def end(self):
        """End every process of the run (mpiexec, its daemons, the ranks), then the reaper."""
        procs.end_cluster(self.run_id)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.mpiexec_log.close()
        reaper.release(self.reaper)

    def tail_of(self, name, lines):
        try:
            with open(os.path.join(self.folder, name), "rb") as f:
                text = f.read()[-20_000:].decode("utf-8", "replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.rstrip("\n").split("\n")[-lines:])

    def remove(self):
        shutil.rmtree(self.folder, ignore_errors=True)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _watch(run, tail):
    """Wait until mpiexec ends or a rank has failed (and the others had ERROR_GRACE seconds to
    report theirs), streaming the ranks' output."""
    first_failure = None
    while run.proc.poll() is None:
        tail.pump()
        if first_failure is None and run.failures():
            first_failure = time.monotonic()
        if first_failure is not None and time.monotonic() - first_failure > ERROR_GRACE:
            return
        time.sleep(POLL)


def _report(run, interrupted, err):
    """What happened, printed to ``err``; returns the launcher's exit code."""
    n = run.n
    if interrupted:
        print(f"lk.dist.run: interrupted; all {n} ranks were stopped.", file=err)
        return 130
    failures = run.failures()
    if failures:
        _, rank, code = failures[0]
        others = sorted(r for _, r, _ in failures[1:])
        also = f" (also failed: rank {', '.join(map(str, others))})" if others else ""
        print(f"lk.dist.run: rank {rank} of {n} failed with exit code {code}{also}; the other "
              f"ranks were stopped. The end of rank {rank}'s stderr:", file=err)
        print("\n".join(f"    {line}" for line in
                        run.tail_of(f"{rank}.stderr", TAIL_LINES).split("\n")), file=err)
        return code % 256 or 1
    code = run.proc.returncode
    if code == 0:
        return 0
    exited = run.records("exit")
    lost = [r for r in range(n) if r not in exited]
    which = (f"rank {', '.join(map(str, lost))} ended without exiting (killed by a signal, out "
             f"of memory, or a crash in native code)" if lost else "every rank exited with 0")
    print(f"lk.dist.run: mpiexec ended with code {code}: {which}. mpiexec said:\n"
          f"{run.tail_of('mpiexec.log', 30) or '(nothing)'}", file=err)
    return code if 0 < code < 256 else 1


def main(argv=None):
    """Run the launcher with command-line arguments ``argv`` (default: ``sys.argv[1:]``);
    returns its exit code."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    target = (["-m"] if args.module else []) + [args.training_script] + \
        list(args.training_script_args)
    previous_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        run = _Run(args.nproc, target, torchrun_env(args.nproc, args.master_addr,
                                                    args.master_port, args.rdzv_id))
    except DistError as exc:
        print(f"lk.dist.run: {exc}", file=sys.stderr)
        return 1
    tail = _Tail(run.folder, args.nproc, TextOutput(args.nproc))
    interrupted = False
    try:
        try:
            _watch(run, tail)
        except KeyboardInterrupt:
            interrupted = True
            signal.signal(signal.SIGINT, signal.SIG_IGN)     # stopping takes a few seconds
            run.interrupt(tail)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        run.end()
        tail.close()
        return _report(run, interrupted, sys.stderr)
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, previous_term)
        run.remove()


if __name__ == "__main__":
    sys.exit(main())
