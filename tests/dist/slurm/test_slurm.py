"""``launcher="slurm"``: the workers run as one job of a real Slurm cluster (one node, on this
machine), the job's ``mpiexec`` makes them one MPI world, and the job ends with the cluster."""
import time

import numpy as np
import pytest

import labkit as lk

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
