"""W7 allreduce: a 64 MB float32 tensor summed over 2 workers, labkit against raw mpi4py.

Both run in the same two workers, started by ``lk.dist.Cluster``, on the same MPI communicator
and the same data: ``lk.dist.allreduce(t)`` (a new result tensor per call, argument checks
included) against ``comm.Allreduce(send, recv)`` into a preallocated buffer (the best case
for raw MPI). Samples alternate between the two (the order flips each round); each sample is
the slowest rank's time for one call, after a barrier. Reported as algorithmic bandwidth
(bytes of the tensor / seconds) and bus bandwidth (that times 2(n-1)/n, the bytes each rank
actually moves in a ring allreduce), medians over the samples.

    python benchmarks/workloads/w7_allreduce.py [--mb 64] [--workers 2] [--repeats 21]

This workload starts processes of its own, so it is a script rather than an ``IMPLS``
registry of one-process implementations; ``run()`` returns the numbers as a dict.
"""
import argparse
import os
import sys

NAME = "W7"
TITLE = "allreduce of a 64 MB float32 tensor over 2 workers"
UNIT = "GB/s"
HIGHER_IS_BETTER = True
TARGET = 0.90          # labkit's bandwidth >= 90% of raw mpi4py's


def _measure(mb, repeats, warmup):
    """Runs on every worker; returns per-sample seconds (slowest rank) for each implementation."""
    import numpy as np
    from mpi4py import MPI

    import labkit as lk
    from benchmarks.common import slowest_rank_seconds
    from labkit.dist import runtime

    comm = runtime.group().comm
    n = mb * 2 ** 20 // 4
    send = np.random.default_rng(lk.dist.rank()).standard_normal(n).astype(np.float32)
    recv = np.empty_like(send)
    t = lk.from_numpy(send)

    def raw():
        comm.Allreduce(send, recv, op=MPI.SUM)

    def labkit():
        return lk.dist.allreduce(t)

    raw()
    same = bool(np.array_equal(labkit().numpy(), recv))
    impls = {"raw": raw, "labkit": labkit}
    for _ in range(warmup):
        for f in impls.values():
            f()
    samples = {name: [] for name in impls}
    for i in range(repeats):
        order = list(impls) if i % 2 == 0 else list(reversed(impls))
        for name in order:
            samples[name].append(slowest_rank_seconds(comm, impls[name]))
    return {"samples": samples, "same": same, "bytes": send.nbytes,
            "world": lk.dist.world_size()}


def run(mb=64, workers=2, repeats=21, warmup=3):
    """Measure; returns {"labkit_GBps", "raw_GBps", "ratio", ...} (bandwidths are medians)."""
    import statistics

    import labkit as lk
    with lk.dist.Cluster(n=workers, output="none") as cluster:
        result = cluster.run(_measure, mb, repeats, warmup)[0]
    size, world = result["bytes"], result["world"]
    out = {"mb": mb, "workers": world, "repeats": repeats, "results_equal": result["same"]}
    for name, samples in result["samples"].items():
        seconds = statistics.median(samples)
        out[f"{name}_ms"] = seconds * 1e3
        out[f"{name}_GBps"] = size / seconds / 1e9
        out[f"{name}_bus_GBps"] = size / seconds / 1e9 * 2 * (world - 1) / world
    out["ratio"] = out["labkit_GBps"] / out["raw_GBps"]
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=TITLE)
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args(argv)
    r = run(args.mb, args.workers, args.repeats)
    print(f"W7 allreduce of {r['mb']} MB float32 over {r['workers']} workers "
          f"(median of {r['repeats']} samples each; results equal: {r['results_equal']})")
    for name, label in (("raw", "raw mpi4py Allreduce"), ("labkit", "lk.dist.allreduce")):
        print(f"  {label:22s} {r[f'{name}_ms']:8.2f} ms  {r[f'{name}_GBps']:6.2f} GB/s "
              f"(bus {r[f'{name}_bus_GBps']:6.2f} GB/s)")
    verdict = "meets" if r["ratio"] >= TARGET else "misses"
    print(f"  labkit / raw = {r['ratio']:.1%} ({verdict} the {TARGET:.0%} goal)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))))
    sys.exit(main())
