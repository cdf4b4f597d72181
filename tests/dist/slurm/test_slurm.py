"""``launcher="slurm"``: the workers run as one job of a real Slurm cluster (one node, on this
machine), the job's ``mpiexec`` makes them one MPI world, and the job ends with the cluster,
and is cancelled when the process holding the cluster is killed."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import labkit as lk
from labkit.dist import procs
from labkit.dist.testing.hosts import find

from ..conftest import wait_until_gone

pytestmark = [pytest.mark.dist, pytest.mark.slurm]


def _sum_of_ranks():
    mine = lk.tensor([float(lk.dist.rank() + 1), 2.0])
    return lk.dist.rank(), lk.dist.world_size(), lk.dist.allreduce(mine).numpy()


@pytest.mark.timeout(180)
def test_a_cluster_through_slurm_runs_collectives_and_its_job_ends_with_it(slurm):
    with lk.dist.Cluster(n=2, launcher="slurm", output="none") as cluster:
        assert [j for j in slurm.jobs() if j[1] == "RUNNING"]
        results = cluster.run(_sum_of_ranks)
    assert [r[:2] for r in results] == [(0, 2), (1, 2)]
    for r in results:
        np.testing.assert_array_equal(r[2], [3.0, 4.0])
    deadline = time.monotonic() + 10
    while slurm.jobs() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not slurm.jobs(), "the Slurm job outlived the cluster"


def test_launcher_is_checked():
    with pytest.raises(lk.dist.DistError, match="launcher='lsf' is not one of"):
        lk.dist.launch(print, launcher="lsf")
    with pytest.raises(lk.dist.DistError, match="leave hosts=None"):
        lk.dist.launch(print, launcher="slurm", hosts=["a"])


_HOLDER = """
import time
import labkit as lk
cluster = lk.dist.Cluster(n=2, launcher="slurm", output="none")
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.timeout(180)
def test_the_job_is_cancelled_when_the_process_holding_the_cluster_is_killed(slurm):
    """A kernel killed with its cluster open: labkit's reaper cancels the job (scancel by its
    name: on a real cluster its workers run on nodes the reaper's marks do not reach), so
    Slurm records it CANCELLED, and nothing of the cluster is left here."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=env, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        running = [job for job, state in slurm.jobs() if state == "RUNNING"]
        assert len(running) == 1, slurm.jobs()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert not wait_until_gone(slurm.jobs, timeout=15), "the job outlived its kernel"
    shown = subprocess.run([find("scontrol"), "show", "job", running[0]], capture_output=True,
                           text=True, timeout=10).stdout
    assert "JobState=CANCELLED" in shown, shown
    assert not wait_until_gone(lambda: procs.marked(prefix=f"{holder.pid}-"), timeout=10)


@pytest.mark.timeout(120)
def test_a_job_that_fails_before_its_workers_start_is_reported_at_once(slurm):
    """The job's mpiexec cannot start the workers' Python: Slurm records the job FAILED, and
    the cluster says so with the job's output instead of waiting out its timeout."""
    start = time.monotonic()
    with pytest.raises(lk.dist.DistError) as caught:
        lk.dist.Cluster(n=2, launcher="slurm", output="none", timeout=90,
                        python="/nonexistent/bin/python")
    message = str(caught.value)
    assert "the Slurm job is FAILED" in message, message
    assert "0 of 2 workers registered" in message
    assert "/nonexistent/bin/python" in message      # mpiexec's words, from the job's output
    assert time.monotonic() - start < 60
    assert not wait_until_gone(slurm.jobs, timeout=15)


@pytest.mark.timeout(120)
def test_a_job_still_pending_at_the_timeout_says_why_and_is_cancelled(slurm):
    with pytest.raises(lk.dist.DistError) as caught:
        lk.dist.Cluster(n=2, launcher="slurm", output="none", timeout=5,
                        batch_options=["--begin=now+3600"])
    message = str(caught.value)
    assert "within 5 s; the Slurm job is PENDING (reason: BeginTime)" in message, message
    assert "larger timeout=" in message
    assert not wait_until_gone(slurm.jobs, timeout=15), "the pending job was left queued"
