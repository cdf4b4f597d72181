"""launch and Cluster on real workers: results, live output, errors with rank and traceback,
Ctrl-C, functions defined here (not importable on the workers), and no process left behind."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import _thread

import numpy as np
import pytest

import labkit as lk
from labkit.dist import procs

from .conftest import own_worker_processes, wait_until_gone

pytestmark = pytest.mark.dist
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Scaler:
    """A class defined in this test module: instances must travel to the workers by value."""

    def __init__(self, factor):
        self.factor = factor

    def __call__(self, x):
        return x * self.factor


def _helper(rank):
    return f"helper saw rank {rank}"


def _greet(scaler, tag):
    rank = lk.dist.rank()
    print(f"hello from rank {rank} ({tag})")
    print(f"a warning from rank {rank}", file=sys.stderr)
    total = lk.dist.allreduce(scaler(lk.tensor([float(rank + 1)])))
    return rank, total.item(), _helper(rank), lk.tensor([rank])


def test_launch_runs_functions_of_this_module_and_streams_labelled_output(capfd):
    results = lk.dist.launch(_greet, Scaler(10.0), "hi", n=2, output="text")
    assert [r[:3] for r in results] == [(0, 30.0, "helper saw rank 0"),
                                        (1, 30.0, "helper saw rank 1")]
    assert [r[3].tolist() for r in results] == [[0], [1]]          # tensors come back too
    out, err = capfd.readouterr()
    assert "[rank 0] hello from rank 0 (hi)" in out and "[rank 1] hello from rank 1 (hi)" in out
    assert "[rank 0] a warning from rank 0" in err and "[rank 1] a warning from rank 1" in err


def _fail_on_rank_one():
    if lk.dist.rank() == 1:
        time.sleep(0.2)
        raise ValueError("rank one cannot go on")
    lk.dist.barrier()          # rank 0 would wait here forever: it must be stopped


def test_worker_exception_is_raised_with_rank_and_traceback():
    start = time.monotonic()
    with pytest.raises(lk.dist.WorkerError) as info:
        lk.dist.launch(_fail_on_rank_one, n=2, output="none")
    e = info.value
    assert (e.rank, e.world_size, e.remote_type) == (1, 2, "ValueError")
    assert e.failed_ranks == [1]
    assert isinstance(e.exception, ValueError) and str(e.exception) == "rank one cannot go on"
    assert "test_launch.py" in e.remote_traceback and "_fail_on_rank_one" in e.remote_traceback
    assert 'raise ValueError("rank one cannot go on")' in str(e)
    assert "The other workers were stopped" in str(e)
    assert time.monotonic() - start < 30
    assert not own_worker_processes()          # launch ends its workers before raising


def _hang_on_rank_one():
    if lk.dist.rank() == 1:
        time.sleep(1000)
    return "done"


def test_launch_with_a_hanging_worker_times_out_and_leaves_no_process():
    start = time.monotonic()
    with pytest.raises(lk.dist.WorkerTimeout) as info:
        lk.dist.launch(_hang_on_rank_one, n=2, output="none", timeout=5)
    assert time.monotonic() - start < 10
    e = info.value
    assert isinstance(e, TimeoutError) and isinstance(e, lk.LabkitError)
    assert 1 in e.ranks and e.timeout == 5     # (rank 0 too, if starting took most of 5 s)
    assert f"{e.ranks[-1]} (of 2) had not returned after 5 s (timeout=5)." in str(e)
    assert not wait_until_gone(own_worker_processes, timeout=2.0)


def test_a_kept_cluster_times_out_a_hanging_call_and_stays_usable(cluster):
    start = time.monotonic()
    with pytest.raises(lk.dist.WorkerTimeout, match=r"rank 1 \(of 2\) had not returned after "
                                                    r"2 s.* were interrupted"):
        cluster.run(_hang_on_rank_one, timeout=2)
    assert time.monotonic() - start < 8
    assert cluster.run(lk.dist.rank, timeout=60) == [0, 1]
    with pytest.raises(lk.dist.DistError, match="timeout must be a positive number"):
        cluster.run(lk.dist.rank, timeout=0)


def _exit_on_rank_one(how):
    if lk.dist.rank() == 1:
        time.sleep(0.2)
        if how == "exit":
            os._exit(3)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(30)


@pytest.mark.parametrize("how,death", [("exit", "exit code 3"), ("kill", "signal 9")])
def test_the_rank_that_died_is_named_with_its_exit_code_or_signal(how, death):
    with pytest.raises(lk.dist.WorkerError) as info:
        lk.dist.launch(_exit_on_rank_one, how, n=2, output="none")
    e = info.value
    assert e.rank == 1 and e.remote_type == "WorkerDied" and e.failed_ranks[0] == 1
    assert e.death.startswith(death)
    assert str(e).startswith(f"worker rank 1 (of 2) raised WorkerDied: the process of rank 1 "
                             f"ended with {death}")
    assert not wait_until_gone(own_worker_processes, timeout=5.0)


def _spin_forever(folder):
    open(os.path.join(folder, f"started-{lk.dist.rank()}"), "w").close()
    i = 0
    while True:
        i += 1


def _interrupt_when_started(folder, n, when):
    """From a thread: once every rank has started, deliver Ctrl-C to the main thread."""
    def watch():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if all(os.path.exists(os.path.join(folder, f"started-{r}")) for r in range(n)):
                time.sleep(0.3)
                when.append(time.monotonic())
                _thread.interrupt_main()
                return
            time.sleep(0.05)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_interrupting_launch_stops_every_worker_within_5_seconds(tmp_path):
    when = []
    _interrupt_when_started(str(tmp_path), 2, when)
    with pytest.raises(KeyboardInterrupt):
        lk.dist.launch(_spin_forever, str(tmp_path), n=2, output="none")
    assert when, "the workers never started"
    left = wait_until_gone(own_worker_processes, timeout=5.0 - (time.monotonic() - when[0]))
    assert not left
    assert time.monotonic() - when[0] < 5.0


def test_interrupting_a_kept_cluster_stops_the_run_and_keeps_the_workers(cluster, tmp_path):
    pids = cluster.pids
    when = []
    _interrupt_when_started(str(tmp_path), 2, when)
    with pytest.raises(KeyboardInterrupt):
        cluster.run(_spin_forever, str(tmp_path))
    assert time.monotonic() - when[0] < 5.0
    assert cluster.run(lk.dist.rank) == [0, 1]
    assert cluster.pids == pids                # interrupted, not restarted


def _remember(value):
    global _REMEMBERED
    _REMEMBERED = value * (lk.dist.rank() + 1)


def _recall():
    return _REMEMBERED


def _raise_on_rank_zero():
    if lk.dist.rank() == 0:
        raise KeyError("missing")
    return "fine"


def test_cluster_keeps_worker_state_and_survives_an_error(cluster):
    cluster.run(_remember, 21)
    assert cluster.run(_recall) == [21, 42]
    with pytest.raises(lk.dist.WorkerError) as info:
        cluster.run(_raise_on_rank_zero)
    assert info.value.rank == 0 and info.value.remote_type == "KeyError"
    assert cluster.run(_recall) == [21, 42]


def test_cluster_close_ends_its_processes_at_once():
    c = lk.dist.Cluster(n=2, output="none")
    assert "Cluster(n=2" in repr(c)
    mine = c._holder["workers"].cluster_id
    assert len(procs.marked(mine)) >= 3            # controller, mpiexec, engines
    assert np.allclose(c.run(lambda: lk.dist.allreduce(lk.ones(3)).numpy())[1], 2.0)
    c.close()
    assert procs.marked(mine) == []                # close() waits for them
    assert c.closed and "closed" in repr(c)
    with pytest.raises(lk.dist.DistError, match="is closed"):
        c.run(lk.dist.rank)
    c.close()                                      # idempotent


def _die_on_rank_one():
    if lk.dist.rank() == 1:
        os._exit(3)
    lk.dist.barrier()


def test_a_worker_that_dies_is_reported():
    with pytest.raises(lk.dist.WorkerError) as info:
        lk.dist.launch(_die_on_rank_one, n=2, output="none")
    assert info.value.remote_type == "WorkerDied"


OWNER = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {root!r})
    import labkit as lk
    cluster = lk.dist.Cluster(n=2, output="none")
    print(cluster._holder["workers"].cluster_id, cluster._holder["workers"].tmp, flush=True)
    if {killed}:
        os.kill(os.getpid(), signal.SIGKILL)    # the kernel dies without any cleanup
    # else: the kernel exits normally, never calling cluster.close()
""")


@pytest.mark.parametrize("killed", [True, False], ids=["owner-killed", "owner-exits"])
def test_workers_end_when_the_owning_process_dies_or_exits(killed):
    run = subprocess.run([sys.executable, "-c", OWNER.format(root=ROOT, killed=killed)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == (-signal.SIGKILL if killed else 0), run.stderr
    cluster_id, folder = run.stdout.split()
    left = wait_until_gone(lambda: procs.marked(cluster_id), timeout=10.0)
    assert not left, [p.cmdline()[:3] for p in left]
    assert not wait_until_gone(lambda: os.path.exists(folder), timeout=5.0)   # files too


def _draw():
    return lk.rand(4).numpy()


def test_ranks_draw_streams_of_their_own_reproducible_from_the_notebook_seed():
    lk.manual_seed(21)
    first = lk.dist.launch(_draw, n=2)
    lk.manual_seed(21)
    again = lk.dist.launch(_draw, n=2)
    assert not np.array_equal(first[0], first[1])          # each rank a stream of its own
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)                 # the same seed, the same streams


def _fake_mpiexec(tmp_path, message, failures):
    """An mpiexec that fails its first ``failures`` starts with ``message`` (as Open MPI prints
    a start-up failure), then runs the real one."""
    real = lk.dist.cluster.find_mpiexec()
    count = tmp_path / "starts"
    script = tmp_path / "mpiexec"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1" != "--version" ]; then
            echo x >> {str(count)!r}
            if [ "$(wc -l < {str(count)!r})" -le {failures} ]; then
                sleep 1
                echo "{message}" >&2
                exit 1
            fi
        fi
        exec {real!r} "$@"
        """))
    script.chmod(0o755)
    return str(script), count


@pytest.mark.parametrize("failures", [1, 2])
def test_a_start_that_open_mpi_fails_on_its_own_is_tried_once_more(tmp_path, monkeypatch,
                                                                    failures):
    flake = "The PMIx server's listener thread failed to start. We cannot continue."
    script, count = _fake_mpiexec(tmp_path, flake, failures)
    monkeypatch.setattr(lk.dist.cluster, "find_mpiexec", lambda: script)
    if failures == 1:
        assert lk.dist.launch(lk.dist.rank, n=2, output="none", timeout=60) == [0, 1]
    else:                            # a second failure is not a flake: it is reported
        with pytest.raises(lk.dist.DistError, match="listener thread failed to start"):
            lk.dist.launch(lk.dist.rank, n=2, output="none", timeout=60)
    assert count.read_text().count("x") == 2


def test_any_other_start_failure_is_reported_at_once(tmp_path, monkeypatch):
    script, count = _fake_mpiexec(tmp_path, "mpiexec: not enough slots", 1)
    monkeypatch.setattr(lk.dist.cluster, "find_mpiexec", lambda: script)
    with pytest.raises(lk.dist.DistError, match="(?s)stopped before the 2 workers started.*"
                                                "not enough slots"):
        lk.dist.launch(lk.dist.rank, n=2, output="none", timeout=60)
    assert count.read_text().count("x") == 1
