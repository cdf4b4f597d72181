"""Collectives on real workers (2 MPI processes), each checked against a NumPy reference."""
import time

import numpy as np
import pytest

import labkit as lk

pytestmark = pytest.mark.dist
SEED = 1234


def rank_data(rank, shape, dtype):
    """The array rank ``rank`` contributes (the test computes the reference from the same)."""
    rng = np.random.default_rng(SEED + rank)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(-100, 100, shape).astype(dtype)


def _allreduce(shape, dtype, op, transpose):
    x = lk.tensor(rank_data(lk.dist.rank(), shape, dtype))
    if transpose:
        x = x.T                    # a non-contiguous input
    out = lk.dist.allreduce(x, op=op)
    return out.numpy(), out.dtype.name, out.device.name, x.numpy()


REFERENCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}


@pytest.mark.parametrize("op,dtype", [(op, dtype) for dtype in ("float32", "float64", "int64")
                                      for op in ("sum", "mean", "max", "min")
                                      if (op, dtype) != ("mean", "int64")])   # refused
def test_allreduce_matches_numpy(cluster, op, dtype):
    results = cluster.run(_allreduce, (3, 5), dtype, op, False)
    inputs = np.stack([rank_data(r, (3, 5), dtype) for r in range(2)])
    want = REFERENCE[op](inputs, axis=0).astype(dtype)
    for out, out_dtype, device, _ in results:
        assert (out_dtype, device) == (dtype, "cpu:0")
        np.testing.assert_allclose(out, want, rtol=1e-6)


@pytest.mark.parametrize("shape,transpose", [((), False), ((4, 3), True), ((0, 2), False)])
def test_allreduce_of_scalars_views_and_empty_tensors(cluster, shape, transpose):
    results = cluster.run(_allreduce, shape, "float32", "sum", transpose)
    want = sum(rank_data(r, shape, "float32") for r in range(2))
    if transpose:
        want = want.T
    for out, _, _, _ in results:
        assert out.shape == want.shape
        np.testing.assert_allclose(out, want, rtol=1e-6)


def _small_types():
    h = lk.tensor(np.full(3, lk.dist.rank() + 0.5, dtype=np.float16))
    b = lk.tensor(np.array([lk.dist.rank() == 0, False, True]))
    return (lk.dist.allreduce(h).numpy(), lk.dist.allreduce(b, op="max").numpy(),
            lk.dist.allreduce(b, op="min").numpy())


def test_allreduce_of_float16_and_bool(cluster):
    for half, any_, all_ in cluster.run(_small_types):
        assert half.dtype == np.float16 and half.tolist() == [2.0, 2.0, 2.0]
        assert any_.tolist() == [True, False, True] and all_.tolist() == [False, False, True]


def _broadcast(src):
    x = lk.tensor(rank_data(lk.dist.rank(), (2, 3), "float64"))
    mask = lk.tensor(np.array([lk.dist.rank() == src, True]))
    return lk.dist.broadcast(x, src=src).numpy(), lk.dist.broadcast(mask, src=src).numpy()


@pytest.mark.parametrize("src", [0, 1])
def test_broadcast_gives_every_rank_the_source_values(cluster, src):
    for values, mask in cluster.run(_broadcast, src):
        np.testing.assert_array_equal(values, rank_data(src, (2, 3), "float64"))
        assert mask.tolist() == [True, True]


def _allgather(dtype):
    return lk.dist.allgather(lk.tensor(rank_data(lk.dist.rank(), (2, 2), dtype))).numpy()


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_allgather_stacks_every_rank_in_rank_order(cluster, dtype):
    want = np.stack([rank_data(r, (2, 2), dtype) for r in range(2)])
    for out in cluster.run(_allgather, dtype):
        assert out.dtype == want.dtype
        np.testing.assert_array_equal(out, want)


def _reduce_scatter(op):
    return lk.dist.reduce_scatter(lk.tensor(rank_data(lk.dist.rank(), (4, 3), "float32")),
                                  op=op).numpy()


@pytest.mark.parametrize("op", ["sum", "mean", "max"])
def test_reduce_scatter_gives_each_rank_its_slice(cluster, op):
    full = REFERENCE[op](np.stack([rank_data(r, (4, 3), "float32") for r in range(2)]), axis=0)
    for rank, out in enumerate(cluster.run(_reduce_scatter, op)):
        np.testing.assert_allclose(out, full[2 * rank:2 * rank + 2], rtol=1e-6)


def _barrier():
    if lk.dist.rank() == 1:
        time.sleep(0.5)
    start = time.perf_counter()
    lk.dist.barrier()
    return time.perf_counter() - start


def test_barrier_waits_for_every_rank(cluster):
    waited = cluster.run(_barrier)
    assert waited[0] >= 0.4


def _where_am_i():
    return (lk.dist.rank(), lk.dist.world_size(), lk.dist.local_rank(), lk.dist.device().name,
            lk.dist.is_initialized(), lk.zeros(1).device.name)


def test_workers_know_rank_world_size_and_device(cluster):
    assert cluster.run(_where_am_i) == [(0, 2, 0, "cpu:0", True, "cpu:0"),
                                        (1, 2, 1, "cpu:0", True, "cpu:0")]
    assert cluster.devices == ["cpu:0", "cpu:0"] and len(set(cluster.pids)) == 2


def _mismatched():
    return lk.dist.allreduce(lk.zeros(2 + lk.dist.rank()))


def test_mismatched_shapes_raise_the_same_error_on_every_rank(cluster):
    with pytest.raises(lk.dist.WorkerError) as info:
        cluster.run(_mismatched)
    e = info.value
    assert e.remote_type == "DistError" and e.failed_ranks == [0, 1]
    assert "rank 0: ((2,), 'float32', 'sum'); rank 1: ((3,), 'float32', 'sum')" in str(e)


def _gpu_allreduce():
    x = lk.tensor(rank_data(lk.dist.rank(), (64,), "float32"), device=lk.dist.device())
    out = lk.dist.allreduce(x, op="mean")
    g = lk.dist.allgather(x)
    return out.device.type, lk.tensor(out.numpy()).numpy(), g.numpy()


@pytest.mark.gpu
def test_gpu_tensors_through_nccl_or_host_mpi():
    want = np.mean(np.stack([rank_data(r, (64,), "float32") for r in range(2)]), axis=0)
    for kind, mean, gathered in lk.dist.launch(_gpu_allreduce, n=2, output="none"):
        assert kind == "gpu"
        np.testing.assert_allclose(mean, want, rtol=1e-6)
        assert gathered.shape == (2, 64)
