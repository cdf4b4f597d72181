"""A 4-rank world over two hosts (two workers each), each host a network namespace of this
machine with its own address, host name and sshd: ranks and hosts, collectives against NumPy,
DataParallel against one process, and an interrupt of a kept cluster."""
import os
import time

import numpy as np
import pytest

import labkit as lk

from ..test_data_parallel import train
from .test_ending import _interrupt_when_started, _spin_forever

pytestmark = [pytest.mark.dist, pytest.mark.multihost]


def _where():
    import socket
    return lk.dist.rank(), lk.dist.world_size(), socket.gethostname(), os.getpid()


def test_every_rank_reports_its_rank_and_host(cluster4, hosts):
    reports = cluster4.run(_where)
    assert [r[:2] for r in reports] == [(0, 4), (1, 4), (2, 4), (3, 4)]
    if hosts.kind == "namespaces":              # each namespace answers to its own name
        assert [r[2] for r in reports] == [hosts.names[0]] * 2 + [hosts.names[1]] * 2
    assert cluster4.hosts == hosts.specs


def _collectives(seed):
    rank, world = lk.dist.rank(), lk.dist.world_size()
    mine = np.random.default_rng(seed + rank).standard_normal((3, 8)).astype(np.float32)
    t = lk.tensor(mine)
    return {"sum": lk.dist.allreduce(t, op="sum").numpy(),
            "mean": lk.dist.allreduce(t, op="mean").numpy(),
            "max": lk.dist.allreduce(t, op="max").numpy(),
            "min": lk.dist.allreduce(t, op="min").numpy(),
            "broadcast": lk.dist.broadcast(t, src=2).numpy(),
            "allgather": [x.numpy() for x in lk.dist.allgather(t)],
            "reduce_scatter": lk.dist.reduce_scatter(t.reshape(-1)).numpy()}


def test_collectives_across_hosts_match_numpy(cluster4):
    results = cluster4.run(_collectives, 7)
    inputs = [np.random.default_rng(7 + r).standard_normal((3, 8)).astype(np.float32)
              for r in range(4)]
    total = np.sum(inputs, axis=0)
    for rank, got in enumerate(results):
        np.testing.assert_allclose(got["sum"], total, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got["mean"], total / 4, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(got["max"], np.max(inputs, axis=0))
        np.testing.assert_array_equal(got["min"], np.min(inputs, axis=0))
        np.testing.assert_array_equal(got["broadcast"], inputs[2])
        for a, b in zip(got["allgather"], inputs):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(got["reduce_scatter"], total.reshape(-1)[rank * 6:
                                                                             rank * 6 + 6],
                                   rtol=1e-6, atol=1e-6)


def _mlp():
    return lk.nn.Sequential(lk.nn.Flatten(), lk.nn.Linear(64, 32), lk.nn.ReLU(),
                            lk.nn.Linear(32, 10))


def test_data_parallel_across_hosts_matches_one_process(cluster4):
    single_losses, single_params = train(_mlp, 10, 64, "sgd")
    results = cluster4.run(train, _mlp, 10, 64, "sgd")
    for losses, params in results:
        np.testing.assert_allclose(losses, single_losses, rtol=0, atol=1e-6)
        for a, b in zip(params, single_params):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    assert single_losses[-1] < single_losses[0]


@pytest.mark.timeout(120)
def test_a_kept_cluster_is_interrupted_through_the_nanny_and_stays_usable(cluster4, tmp_path):
    when = []
    _interrupt_when_started(tmp_path, 4, when)
    pids = cluster4.pids
    with pytest.raises(KeyboardInterrupt):
        cluster4.run(_spin_forever, str(tmp_path))
    assert time.monotonic() - when[0] < 5.0
    assert cluster4.run(lk.dist.rank) == [0, 1, 2, 3]
    assert cluster4.pids == pids                  # the interrupt reached them: not restarted
