"""DataParallel's bucketed reducer on 2 workers: gradients live in flat buckets (each ``.grad`` a
view, no copy out), a bucket's allreduce starts during backward as soon as its gradients are
in (seen in the profiler's events), and ``no_sync()`` accumulates locally, the next synced
backward averaging everything, as one process accumulating over the whole global batch."""
import numpy as np
import pytest

import labkit as lk

pytestmark = pytest.mark.dist


def _model():
    lk.manual_seed(0)
    return lk.nn.Sequential(lk.nn.Linear(6, 8), lk.nn.ReLU(), lk.nn.Linear(8, 8), lk.nn.ReLU(),
                            lk.nn.Linear(8, 3))


def _accumulate(micro_batches, global_batch=24):
    """Gradient accumulation: ``micro_batches`` backward passes, all but the last under
    no_sync, then one SGD step; the same code in one process (world of one) and on workers."""
    rank, world = lk.dist.rank(), lk.dist.world_size()
    rng = np.random.default_rng(1)
    x = lk.tensor(rng.standard_normal((global_batch, 6)).astype(np.float32))
    y = lk.tensor(rng.integers(0, 3, global_batch))
    dp = lk.dist.DataParallel(_model(), bucket_cap_mb=0.0002)        # several buckets
    opt = lk.optim.SGD(dp.parameters(), lr=0.5)
    shard = global_batch // world
    mine = slice(rank * shard, (rank + 1) * shard)
    xs, ys = x[mine], y[mine]
    size = shard // micro_batches
    for step in range(2):
        opt.zero_grad()
        for m in range(micro_batches):
            part = slice(m * size, (m + 1) * size)
            loss = lk.nn.functional.cross_entropy(dp(xs[part]), ys[part]) / micro_batches
            if m < micro_batches - 1:
                with dp.no_sync():
                    loss.backward()
                local = dp.module[4].bias.grad.numpy().copy()     # this rank's own so far
            else:
                loss.backward()
        syncs = dp._syncs
        opt.step()
    return syncs, local if micro_batches > 1 else None, [p.detach().numpy().copy()
                                                          for p in dp.parameters()]


def test_no_sync_accumulates_and_the_next_backward_averages_it(cluster):
    # one process, one pass over the whole global batch
    _, _, want = _accumulate(micro_batches=1)
    (s0, local0, got0), (s1, local1, got1) = cluster.run(_accumulate, 3)
    assert s0 == s1 == 2                       # one averaging per step, none under no_sync
    assert not np.allclose(local0, local1)     # under no_sync each rank kept its own
    for a, b, c in zip(got0, got1, want):
        assert np.array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=0, atol=1e-6)


def _grads_are_views():
    dp = lk.dist.DataParallel(_model(), bucket_cap_mb=0.0002)
    x = lk.ones(4, 6) * (lk.dist.rank() + 1)
    seen = []
    for _ in range(2):
        dp.zero_grad()
        dp(x).sum().backward()
        flats = [b.flat for b in dp._grad_plan.buckets]
        seen.append([[np.shares_memory(p.grad.numpy(), f) for f in flats]
                     for p in dp.parameters()])
    return len(flats), seen


def test_each_grad_is_a_view_into_its_bucket_buffer(cluster):
    for buckets, steps in cluster.run(_grads_are_views):
        assert buckets > 1
        for step in steps:
            for hits in step:                  # each gradient in exactly one bucket's buffer
                assert sum(hits) == 1


def _overlap():
    dp = lk.dist.DataParallel(_model(), bucket_cap_mb=0.0002)
    loss = dp(lk.ones(4, 6) * (lk.dist.rank() + 1)).sum()
    with lk.profile() as prof:
        loss.backward()
    ops = [(e.op, e.name, e.start_ns, e.end_ns) for e in prof.events]
    return ops, len(dp._grad_plan.buckets)


def test_the_first_bucket_starts_before_backward_ends(cluster):
    for ops, buckets in cluster.run(_overlap):
        reduces = {name: (start, end) for op, name, start, end in ops if op == "allreduce"}
        assert len(reduces) == buckets
        backward = [(start, end) for op, _, start, end in ops if op != "allreduce"]
        first_start, first_end = reduces["gradient bucket 0"]
        # backward ops ran after the last layer's bucket had started: the overlap
        assert any(start > first_start for start, _ in backward)
        # and the buckets started in order, each event spanning its start to its wait
        starts = [reduces[f"gradient bucket {b}"][0] for b in range(buckets)]
        assert starts == sorted(starts)
        assert first_end >= max(end for _, end in backward)


def _flags():
    net = lk.nn.ModuleList([lk.nn.Linear(2, 2), lk.nn.Linear(2, 2), lk.nn.Linear(2, 2)])
    dp = lk.dist.DataParallel(net, bucket_cap_mb=0.0001)
    out = net[0](lk.ones(1, 2))
    if lk.dist.rank() == 0:
        out = net[1](out)                      # rank 0 alone uses the second layer
    out.sum().backward()                       # the third layer is used by no rank
    return [None if p.grad is None else p.grad.numpy() for p in net.parameters()]


def test_a_gradient_no_rank_made_stays_none(cluster):
    g0, g1 = cluster.run(_flags)
    for a, b in zip(g0, g1):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(a, b)
    assert [g is None for g in g0] == [False, False, False, False, True, True]
