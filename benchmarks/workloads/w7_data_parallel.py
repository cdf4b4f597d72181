"""W7 data-parallel: DataParallel's gradient allreduce against raw mpi4py, and a DataParallel
training step of W3's MLP on 2 workers against 1.

1. Gradient allreduce, 64 MB: a model of 16 bias-free 1024x1024 float32 layers (16 x 4 MB of
   gradients) in DataParallel's default 25 MB buckets. ``labkit`` is what DataParallel runs
   once the gradients are in their buckets: each bucket's ``Iallreduce`` started in order,
   then waited for (the step's communication, without the backward it overlaps); ``raw`` is
   one ``comm.Allreduce(MPI.IN_PLACE, buf)`` of the same 64 MB into a preallocated buffer.
2. Gradient averaging, 64 MB, hooks to wait: fresh gradients (as backward leaves them) handed
   to DataParallel's hooks (each scaled by 1/world into its bucket, buckets started as they
   fill) and the end-of-pass wait, against the same job in raw mpi4py: copy the gradients
   into one buffer, ``Allreduce`` in place, divide by the world size.
3. Training step: W3's MLP (784-256-256-10, batch 128 per worker, cross-entropy, SGD), forward,
   ``loss.backward()`` (the allreduce overlapping it) and ``opt.step()``, on 1 and on 2
   workers; samples per second over all workers (weak scaling: each worker its own 128).
4. The same step without labkit, as the machine's ceiling for row 3: W3's hand-written NumPy
   forward and backward, the gradients copied into one buffer, ``comm.Allreduce`` in place,
   divided by the world size, SGD; on 1 and on 2 workers.

Samples alternate between implementations; each is the slowest rank's time after a barrier;
medians are reported.

    python benchmarks/workloads/w7_data_parallel.py [--repeats 21]

This workload starts processes of its own, so it is a script rather than an ``IMPLS``
registry of one-process implementations; ``run()`` returns the numbers as a dict.
"""
import argparse
import os
import sys

NAME = "W7"
TITLE = "DataParallel over 2 workers"
UNIT = "GB/s"
HIGHER_IS_BETTER = True
MB = 64
STEPS_PER_SAMPLE = 20


def _allreduce(repeats, warmup):
    """Rows 1 and 2, on every worker; per-sample seconds (slowest rank) of each."""
    import numpy as np
    from mpi4py import MPI

    import labkit as lk
    from benchmarks.common import slowest_rank_seconds
    from labkit.dist import runtime

    comm = runtime.group().comm
    world = comm.Get_size()
    layers = MB // 4
    lk.manual_seed(0)
    dp = lk.dist.DataParallel(lk.nn.Sequential(*[lk.nn.Linear(1024, 1024, bias=False)
                                                 for _ in range(layers)]))
    params = list(dp.parameters())
    rng = np.random.default_rng(lk.dist.rank())
    fresh = [rng.standard_normal(p.shape).astype(np.float32) for p in params]
    buf = np.concatenate([g.reshape(-1) for g in fresh])

    def fill():                                  # gradients as backward leaves them
        for p, g in zip(params, fresh):
            p.grad = lk.from_numpy(g.copy())

    dp.sync_gradients()                          # builds the buckets, as a first step does
    buckets = dp._grad_plan.buckets

    def labkit_allreduce():
        for b in buckets:
            b.start_sum(runtime.group())
        for i, b in enumerate(buckets):
            b.finish(i)

    def raw_allreduce():
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)

    def labkit_average():
        for p in reversed(params):               # backward finishes the last layer first
            dp._ready(p)
        dp.sync_gradients()

    def raw_average():
        offset = 0
        for p in params:
            g = p.grad.numpy()
            buf[offset:offset + g.size] = g.reshape(-1)
            offset += g.size
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        np.divide(buf, np.float32(world), out=buf)

    # the averaged gradients agree with raw MPI's
    fill()
    labkit_average()
    got = np.concatenate([p.grad.numpy().reshape(-1) for p in params])
    fill()
    raw_average()
    same = bool(np.allclose(got, buf, rtol=1e-6, atol=1e-6))
    impls = {"allreduce": (labkit_allreduce, raw_allreduce),
             "average": (labkit_average, raw_average)}
    samples = {f"{kind}_{who}": [] for kind in impls for who in ("labkit", "raw")}
    for i in range(warmup + repeats):
        for kind, (lab, raw) in impls.items():
            order = [("labkit", lab), ("raw", raw)]
            for who, fn in (order if i % 2 == 0 else order[::-1]):
                if kind == "average":
                    fill()
                seconds = slowest_rank_seconds(comm, fn)
                if i >= warmup:
                    samples[f"{kind}_{who}"].append(seconds)
    return {"samples": samples, "same": same, "bytes": buf.nbytes, "world": world}


def _training(repeats, warmup):
    """Row 3 on every worker of one cluster: per-sample seconds of STEPS_PER_SAMPLE steps."""
    import numpy as np

    import labkit as lk
    from benchmarks.common import slowest_rank_seconds
    from labkit.dist import runtime

    comm = runtime.group().comm
    rng = np.random.default_rng(lk.dist.rank())
    x = lk.from_numpy(rng.standard_normal((128, 784)).astype(np.float32))
    y = lk.from_numpy(rng.integers(0, 10, 128))
    lk.manual_seed(0)
    model = lk.dist.DataParallel(lk.nn.Sequential(
        lk.nn.Linear(784, 256), lk.nn.ReLU(), lk.nn.Linear(256, 256), lk.nn.ReLU(),
        lk.nn.Linear(256, 10)))
    opt = lk.optim.SGD(model.parameters(), lr=0.01)

    def steps():
        for _ in range(STEPS_PER_SAMPLE):
            loss = lk.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

    samples = [slowest_rank_seconds(comm, steps) for _ in range(warmup + repeats)][warmup:]
    return {"samples": samples, "world": comm.Get_size()}


def _numpy_training(repeats, warmup):
    """Row 4 on every worker: row 3's step in hand-written NumPy and raw mpi4py."""
    import numpy as np
    from mpi4py import MPI

    from benchmarks.common import slowest_rank_seconds
    from benchmarks.workloads import w3_mlp
    from labkit.dist import runtime

    comm = runtime.group().comm
    world = comm.Get_size()
    p = w3_mlp.params(w3_mlp.data(np.random.default_rng(0)))
    mine = w3_mlp.data(np.random.default_rng(1 + comm.Get_rank()))
    x, y = mine["x"], mine["y"]
    flat = np.empty(sum(w.size for w in p), np.float32)
    views, offset = [], 0
    for w in p:
        views.append(flat[offset:offset + w.size].reshape(w.shape))
        offset += w.size

    def steps():
        for _ in range(STEPS_PER_SAMPLE):
            _, grads = w3_mlp._numpy_loss_and_grads(p, x, y)
            for view, g in zip(views, grads):
                np.copyto(view, g)
            comm.Allreduce(MPI.IN_PLACE, flat, op=MPI.SUM)
            np.divide(flat, np.float32(world), out=flat)
            for w, g in zip(p, views):
                w -= np.float32(0.01) * g

    samples = [slowest_rank_seconds(comm, steps) for _ in range(warmup + repeats)][warmup:]
    return {"samples": samples, "world": world}


def run(repeats=21, warmup=3):
    """Measure; returns a dict of medians and ratios (see the module docstring)."""
    import statistics

    import labkit as lk
    out = {"repeats": repeats}
    with lk.dist.Cluster(n=2, output="none") as cluster:
        r = cluster.run(_allreduce, repeats, warmup)[0]
        train2 = cluster.run(_training, repeats, warmup)[0]
        numpy2 = cluster.run(_numpy_training, repeats, warmup)[0]
    with lk.dist.Cluster(n=1, output="none") as cluster:
        train1 = cluster.run(_training, repeats, warmup)[0]
        numpy1 = cluster.run(_numpy_training, repeats, warmup)[0]
    out["results_equal"] = r["same"]
    for key, samples in r["samples"].items():
        seconds = statistics.median(samples)
        out[f"{key}_ms"] = seconds * 1e3
        out[f"{key}_GBps"] = r["bytes"] / seconds / 1e9
    for kind in ("allreduce", "average"):
        out[f"{kind}_ratio"] = out[f"{kind}_labkit_GBps"] / out[f"{kind}_raw_GBps"]
    for prefix, runs in (("train", (train1, train2)), ("numpy_train", (numpy1, numpy2))):
        for t in runs:
            seconds = statistics.median(t["samples"])
            out[f"{prefix}_{t['world']}_samples_per_s"] = (t["world"] * 128 * STEPS_PER_SAMPLE
                                                           / seconds)
        out[f"{prefix}_ratio"] = (out[f"{prefix}_2_samples_per_s"]
                                  / out[f"{prefix}_1_samples_per_s"])
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=TITLE)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args(argv)
    r = run(args.repeats)
    print(f"W7 {TITLE} (median of {r['repeats']} samples; results equal: {r['results_equal']})")
    for kind, label in (("allreduce", "64 MB gradient allreduce (buckets, start to wait)"),
                        ("average", "64 MB gradient averaging (hooks to wait)")):
        print(f"  {label}: labkit {r[f'{kind}_labkit_ms']:.2f} ms, raw mpi4py "
              f"{r[f'{kind}_raw_ms']:.2f} ms, labkit / raw {r[f'{kind}_ratio']:.2f}x")
    print(f"  W3 MLP step: 1 worker {r['train_1_samples_per_s']:.0f} samples/s, 2 workers "
          f"{r['train_2_samples_per_s']:.0f} samples/s, {r['train_ratio']:.2f}x")
    print(f"  the same step in NumPy + mpi4py: 1 worker {r['numpy_train_1_samples_per_s']:.0f} "
          f"samples/s, 2 workers {r['numpy_train_2_samples_per_s']:.0f} samples/s, "
          f"{r['numpy_train_ratio']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))))
    sys.exit(main())
