"""The sharding strategies on MPI ranks (labkit.distributed over labkit.dist): the same code as
on virtual devices, each rank holding its own piece, and the same losses as one process:
FSDP, tensor parallelism, data parallelism on 2 ranks (eager and captured), and on 4 ranks
with 2-d FSDP + TP."""
import numpy as np
import pytest

import labkit as lk
from tests.distributed import gpt
from tests.distributed.on_ranks import train_on_ranks

pytestmark = pytest.mark.dist
CFG = gpt.SMALL


@pytest.fixture(scope="module")
def reference():
    return gpt.train(lk, gpt.build(lk, CFG), CFG, 3)


@pytest.mark.parametrize("captured", [False, True], ids=["eager", "captured"])
@pytest.mark.parametrize("name", ["fsdp", "fsdp_zero2", "tensor_parallel",
                                  "sequence_parallel", "data_parallel"])
def test_two_ranks_train_like_one_process(cluster, reference, name, captured):
    for losses in cluster.run(train_on_ranks, name, CFG, 3, captured):
        np.testing.assert_allclose(losses, reference, rtol=1e-12)


@pytest.fixture(scope="module")
def cluster4():
    c = lk.dist.Cluster(n=4, output="text")
    from .conftest import _shared
    _shared["four_ranks"] = c
    try:
        yield c
    finally:
        _shared.pop("four_ranks", None)
        c.close()


@pytest.mark.parametrize("captured", [False, True], ids=["eager", "captured"])
@pytest.mark.parametrize("name", ["fsdp", "tensor_parallel", "fsdp_tp"])
def test_four_ranks_train_like_one_process(cluster4, reference, name, captured):
    for losses in cluster4.run(train_on_ranks, name, CFG, 3, captured):
        np.testing.assert_allclose(losses, reference, rtol=1e-12)


def _mesh_facts():
    from labkit.distributed.device_mesh import init_device_mesh
    from labkit.distributed.tensor import Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (lk.dist.world_size(),))
    x = distribute_tensor(lk.arange(8.0).reshape(4, 2), mesh, [Shard(0)])
    return mesh.get_coordinate(), x.to_local().tolist(), x.full_tensor().tolist()


def test_each_rank_holds_its_own_piece(cluster):
    (c0, p0, f0), (c1, p1, f1) = cluster.run(_mesh_facts)
    assert (c0, c1) == ((0,), (1,))
    assert p0 == [[0.0, 1.0], [2.0, 3.0]] and p1 == [[4.0, 5.0], [6.0, 7.0]]
    assert f0 == f1 == np.arange(8.0).reshape(4, 2).tolist()


@pytest.fixture(scope="module")
def w10_reference():
    return gpt.train(lk, gpt.build(lk, gpt.W10), gpt.W10, 10)


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("name", ["fsdp", "tensor_parallel"])
def test_w10_on_ranks_like_one_process(cluster, cluster4, w10_reference, name, ranks):
    """The GPT in W10's configuration, 10 steps, on 2 and on 4 ranks."""
    runner = cluster if ranks == 2 else cluster4
    for losses in runner.run(train_on_ranks, name, gpt.W10, 10):
        np.testing.assert_allclose(losses, w10_reference, rtol=1e-10)
