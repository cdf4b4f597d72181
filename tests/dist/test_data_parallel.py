"""DataParallel on 2 workers trains the digits CNN exactly like one process on the same global
batch: the same losses (within 1e-5) for 20 steps, and identical replicas on every rank."""
import importlib.util
import os

import numpy as np
import pytest

import labkit as lk
from labkit.nn import functional as F

pytestmark = pytest.mark.dist
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS, GLOBAL_BATCH = 20, 64


def load_example(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "examples",
                                                                     f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def train(make_model, steps, global_batch, optimizer, how="hooks"):
    """The same code in one process (world of one) and on every worker: each rank takes its
    contiguous share of every global batch; the logged loss is the mean over the ranks."""
    rank, world = lk.dist.rank(), lk.dist.world_size()
    lk.manual_seed(0)
    train_set, _ = lk.data.digits(test_fraction=0.2, seed=0)
    images, labels = train_set.tensors
    model = lk.dist.DataParallel(make_model(), bucket_cap_mb=0.01)   # several buckets
    opt = (lk.optim.Adam(model.parameters(), lr=3e-3) if optimizer == "adam"
           else lk.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    shard = global_batch // world
    losses = []
    for step in range(steps):
        lo = step * global_batch + rank * shard
        loss = F.cross_entropy(model(images[lo:lo + shard]), labels[lo:lo + shard])
        opt.zero_grad()
        if how == "hooks":
            loss.backward()            # the parameters' gradient hooks average the gradients
        else:
            model.backward(loss)
        opt.step()
        losses.append(lk.dist.allreduce(loss.detach(), op="mean").item())
    return losses, [p.detach().numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("optimizer, how", [("adam", "hooks"), ("sgd", "dp.backward")])
def test_data_parallel_matches_single_process_training(cluster, optimizer, how):
    make_model = load_example("train_digits").make_model
    single_losses, single_params = train(make_model, STEPS, GLOBAL_BATCH, optimizer)
    (losses0, params0), (losses1, params1) = cluster.run(train, make_model, STEPS,
                                                         GLOBAL_BATCH, optimizer, how)
    assert losses0 == losses1
    np.testing.assert_allclose(losses0, single_losses, rtol=0, atol=1e-5)
    assert single_losses[-1] < single_losses[0]
    for a, b, c in zip(params0, params1, single_params):
        assert np.array_equal(a, b)                  # the replicas stay bit-identical
        np.testing.assert_allclose(a, c, rtol=0, atol=1e-4)


def _replicas_start_equal():
    lk.manual_seed(lk.dist.rank())                   # different initial weights on each rank
    model = lk.dist.DataParallel(lk.nn.Sequential(lk.nn.Linear(3, 4), lk.nn.Linear(4, 2)))
    return [p.detach().numpy().copy() for p in model.parameters()]


def test_parameters_are_broadcast_from_rank_zero(cluster):
    ranks = cluster.run(_replicas_start_equal)
    lk.manual_seed(0)
    want = [p.detach().numpy() for p in lk.nn.Sequential(lk.nn.Linear(3, 4),
                                                lk.nn.Linear(4, 2)).parameters()]
    for params in ranks:
        for a, b in zip(params, want):
            np.testing.assert_array_equal(a, b)


def _unused_parameter():
    lk.manual_seed(0)
    net = lk.nn.ModuleList([lk.nn.Linear(2, 2), lk.nn.Linear(2, 2)])
    model = lk.dist.DataParallel(net)
    x = lk.ones(1, 2) * (lk.dist.rank() + 1)
    out = net[0](x)
    if lk.dist.rank() == 1:
        out = net[1](out)                            # only rank 1 uses the second layer
    out.sum().backward()                             # averaged by the gradient hooks
    assert model._syncs == 1
    return [None if p.grad is None else p.grad.numpy() for p in net.parameters()]


def test_gradients_are_averaged_and_unused_parameters_count_as_zero(cluster):
    g0, g1 = cluster.run(_unused_parameter)
    for a, b in zip(g0, g1):
        np.testing.assert_array_equal(a, b)
    assert all(g is not None for g in g0)            # used on rank 1: everyone gets a grad


def _mismatched_models():
    return lk.dist.DataParallel(lk.nn.Linear(2, 2 + lk.dist.rank()))


def test_different_models_on_the_ranks_are_an_error(cluster):
    with pytest.raises(lk.dist.WorkerError, match="differs from rank 0's"):
        cluster.run(_mismatched_models)
