"""Script mode: ``python -m labkit.dist.run``, plain ``mpiexec`` and ``lk.dist.init()``.

The data-parallel example (examples/dist/train_dp.py) gives the single-process result under the
launcher, under mpiexec and on workers launched from a cell; a failing rank's exit code and
traceback reach the launcher's caller; Ctrl-C ends every rank and leaves no process. The
launcher's arguments, the launchers' environments and ``init`` in one process need no workers.
"""
import importlib.util
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import labkit as lk
from labkit.dist import launch_env, procs, run
from labkit.dist.cluster import _is_open_mpi, find_mpiexec
from labkit.dist.runtime import worker_seed

from .conftest import wait_until_gone

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "dist", "train_dp.py")
STEPS, BATCH = 6, 32
dist = pytest.mark.dist


def _example():
    spec = importlib.util.spec_from_file_location("train_dp", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example():
    return _example()


@pytest.fixture(scope="module")
def single_process(example):
    """The example trained in this process: a world of one on the whole global batch."""
    return example.train(STEPS, BATCH, log=False)


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    return env


def _launcher(*args, **kw):
    return subprocess.run([sys.executable, "-m", "labkit.dist.run", *map(str, args)],
                          capture_output=True, text=True, env=_env(), timeout=180, **kw)


def _assert_same_training(saved, single_process):
    losses, params = single_process
    np.testing.assert_allclose(saved["losses"], losses, rtol=0, atol=1e-6)
    for i, want in enumerate(params):
        np.testing.assert_allclose(saved[f"arr_{i}"], want, rtol=0, atol=1e-6)
    assert losses[-1] < losses[0]


def _processes_naming(text):
    """Live (not zombie) processes whose command line contains ``text``."""
    import psutil
    found = []
    for p in psutil.process_iter():
        try:
            if any(text in part for part in p.cmdline()) and \
                    p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            pass
    return found


def _marked_by(launcher_pid):
    return procs.marked(prefix=f"{launcher_pid}-")


# ---- the same training: one process, the launcher, mpiexec, a cell --------------------------
@dist
def test_launcher_trains_like_one_process(tmp_path, single_process):
    saved = tmp_path / "run.npz"
    done = _launcher("-n", 2, EXAMPLE, "--steps", STEPS, "--batch-size", BATCH, "--save", saved)
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]     # only rank 0 logs
    assert [line[:4] for line in lines] == [["[rank", "0]", "step", str(s)] for s in range(STEPS)]
    np.testing.assert_allclose([float(line[5]) for line in lines], single_process[0], atol=1e-4)
    _assert_same_training(np.load(saved), single_process)


@dist
def test_plain_mpiexec_runs_the_same_script(tmp_path, single_process):
    mpiexec = find_mpiexec()
    env = _env()
    if hasattr(os, "geteuid") and os.geteuid() == 0:     # Open MPI refuses root without these
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env[procs.MARKER] = f"{os.getpid()}-mpiexec"          # the leftover check after each test
    saved = tmp_path / "mpiexec.npz"
    cmd = ([mpiexec, "-n", "2"] + (["--bind-to", "none"] if _is_open_mpi(mpiexec) else []) +
           [sys.executable, EXAMPLE, "--steps", str(STEPS), "--batch-size", str(BATCH),
            "--save", str(saved)])
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180)
    assert done.returncode == 0, done.stderr
    _assert_same_training(np.load(saved), single_process)


@dist
def test_cell_launch_runs_the_same_training_function(cluster, example, single_process):
    for losses, params in cluster.run(example.train, STEPS, BATCH, 0.1, 0, False):
        _assert_same_training({"losses": losses, **{f"arr_{i}": p for i, p in
                                                     enumerate(params)}}, single_process)


# ---- failures and Ctrl-C --------------------------------------------------------------------
FAILING = """
import sys, traceback
import labkit as lk
lk.manual_seed(5)
info = lk.dist.init()
print("started", info.rank, "of", info.world_size, lk.rand(2).tolist())
lk.dist.barrier()
if info.rank == 1:
    try:
        raise ValueError("rank one cannot go on")
    except ValueError:
        traceback.print_exc()
        sys.exit(3)
lk.dist.allreduce(lk.ones(2))      # rank 0 waits here for rank 1, which never comes
"""

HANGING = """
import time
import labkit as lk
info = lk.dist.init()
print("ready", flush=True)
if info.rank == 0:
    time.sleep(600)
lk.dist.barrier()    # rank 1 waits inside MPI, where a SIGINT does not reach Python
"""


@dist
def test_a_failing_rank_gives_its_exit_code_and_traceback(tmp_path):
    script = tmp_path / "failing.py"
    script.write_text(FAILING)
    done = _launcher("-n", 2, script)
    assert done.returncode == 3, done.stderr
    draws = []                 # each rank's generator is seeded as a launched worker's would be
    for rank in (0, 1):
        lk.manual_seed(worker_seed(5, rank))
        draws.append(lk.rand(2).tolist())
    assert draws[0] != draws[1]
    assert sorted(done.stdout.splitlines()) == [f"[rank {r}] started {r} of 2 {draws[r]}"
                                                for r in (0, 1)]
    assert "[rank 1] ValueError: rank one cannot go on" in done.stderr
    report = done.stderr[done.stderr.index("lk.dist.run: "):]
    assert report.startswith("lk.dist.run: rank 1 of 2 failed with exit code 3; the other "
                             "ranks were stopped.")
    assert "    ValueError: rank one cannot go on" in report
    assert 'failing.py", line 10, in <module>' in report
    assert not _processes_naming(str(script))


@dist
def test_ctrl_c_ends_every_rank_and_leaves_no_process(tmp_path):
    script = tmp_path / "hanging.py"
    script.write_text(HANGING)
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with open(out, "w") as o, open(err, "w") as e:
        launcher = subprocess.Popen([sys.executable, "-m", "labkit.dist.run", "-n", "2",
                                     str(script)], stdout=o, stderr=e, env=_env())
    try:
        deadline = time.monotonic() + 120
        while out.read_text().count("ready") < 2:
            assert launcher.poll() is None, err.read_text()
            assert time.monotonic() < deadline, "the ranks did not start"
            time.sleep(0.05)
        ranks = [p for p in _processes_naming(str(script)) if "rank_bootstrap" in
                 " ".join(p.cmdline()) and "prterun" not in p.name()]
        assert len(ranks) >= 2
        start = time.monotonic()
        launcher.send_signal(signal.SIGINT)
        launcher.wait(timeout=15)
        took = time.monotonic() - start
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert took < 5, f"the launcher took {took:.1f} s to stop the ranks"
    assert launcher.returncode == 130
    assert "lk.dist.run: interrupted; all 2 ranks were stopped." in err.read_text()
    assert "[rank 0] KeyboardInterrupt" in err.read_text()   # rank 0 was interrupted in Python
    assert not _processes_naming(str(script))
    assert not wait_until_gone(lambda: _marked_by(launcher.pid), timeout=0.5)


@dist
def test_a_killed_launcher_leaves_no_process(tmp_path):
    script = tmp_path / "sleeping.py"
    script.write_text(HANGING.replace("if info.rank == 0:\n    ", ""))    # every rank sleeps
    launcher = subprocess.Popen([sys.executable, "-m", "labkit.dist.run", "-n", "2",
                                 str(script)], stdout=subprocess.PIPE, text=True, env=_env())
    try:
        lines = sorted(launcher.stdout.readline() for _ in range(2))
        assert lines == ["[rank 0] ready\n", "[rank 1] ready\n"]
        assert len(_processes_naming(str(script))) >= 3        # the launcher, mpiexec, ranks
    finally:
        launcher.kill()                # SIGKILL: only the reaper can end the ranks now
        launcher.wait()
        launcher.stdout.close()
    assert not wait_until_gone(lambda: _processes_naming(str(script)), timeout=5.0)


@dist
def test_init_refuses_ranks_that_are_not_one_mpi_world():
    env = _env()
    env.update(RANK="1", WORLD_SIZE="2", LOCAL_RANK="1")
    for name in list(env):
        if name.startswith(("OMPI_COMM_WORLD", "PMI_", "SLURM_")):
            del env[name]
    done = subprocess.run([sys.executable, "-c", "import labkit as lk; lk.dist.init()"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1
    assert ("lk.dist.init: torchrun's environment says this process is rank 1 of 2, but MPI "
            "sees rank 0 of 1") in done.stderr
    assert "python -m labkit.dist.run -n 2 script.py" in done.stderr


# ---- without workers ------------------------------------------------------------------------
def test_init_in_one_process_is_a_world_of_one():
    assert lk.dist.init() == (0, 1, 0)
    assert lk.dist.init().world_size == 1 and not lk.dist.is_initialized()
    with pytest.raises(lk.dist.DistError, match="backend='gloo' is not one of"):
        lk.dist.init(backend="gloo")


def test_launchers_environments():
    read = launch_env.from_environ
    assert read({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4",
                 "OMPI_COMM_WORLD_LOCAL_RANK": "0", "RANK": "0", "WORLD_SIZE": "1"}) == \
        (2, 4, 0, "mpiexec")                                 # mpiexec's wins over RANK
    assert read({"PMI_RANK": "1", "PMI_SIZE": "2"}) == (1, 2, None, "mpiexec")
    slurm = {"SLURM_PROCID": "3", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1"}
    assert read(slurm) is None                               # a batch script, not a step
    assert read({**slurm, "SLURM_STEP_ID": "0"}) == (3, 8, 1, "srun")
    assert read({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}) == (1, 2, 1, "torchrun")
    assert read({"RANK": "1"}) is None
    with pytest.raises(ValueError, match="WORLD_SIZE='two' should be a whole number"):
        read({"RANK": "1", "WORLD_SIZE": "two"})
    with pytest.raises(ValueError, match="rank 4 of a world of 4"):
        read({"RANK": "4", "WORLD_SIZE": "4"})


def test_launcher_help_and_argument_errors(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        run.main(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: python -m labkit.dist.run [-h] [-n NPROC] [-m] "
                           "[--standalone]")
    for part in ("--nproc-per-node NPROC, --nproc_per_node NPROC", "-m, --module",
                 "--master_port MASTER_PORT, --master-port MASTER_PORT", "RANK, LOCAL_RANK",
                 "lk.dist.init()", "mpiexec -n 4 python train.py"):
        assert part in text
    for argv, message in ((["-n", "0", EXAMPLE], "-n must be a positive number of ranks"),
                          ([str(tmp_path / "missing.py")], "no such script")):
        with pytest.raises(SystemExit) as exit_:
            run.main(argv)
        assert exit_.value.code == 2 and message in capsys.readouterr().err
    args = run.parse_args(["-n", "2", EXAMPLE, "-n", "3", "--steps", "1"])
    assert (args.nproc, args.training_script_args) == (2, ["-n", "3", "--steps", "1"])
