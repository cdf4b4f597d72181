"""W7 parameter-server null step: each worker pulls a scalar, pushes a scalar gradient, and waits
for the step, with 1 and 2 workers and one server, labkit against raw mpi4py.

The baseline of the TensorFlow paper's synchronous-replication measurements (OSDI 2016,
section 6.3, the "null" model): the step does no computation worth the name, so its time is
the system's own per-step cost. labkit runs ``lk.dist.ParameterServer(mode="sync")`` on a
model holding one scalar parameter (forward ``w * x``, loss the output's sum, SGD with lr 0);
a step's time is the median period between a worker's step starts (pull, forward, backward,
push, then the pull of the next step waits until the server has applied this one). The raw
reference is the same message pattern in a few lines of mpi4py: each worker sends a pull
request and blocks in ``recv`` for the value, sends its gradient; the server answers every
pull, gathers every gradient, applies their mean. Samples alternate between the two.

    python benchmarks/workloads/w7_ps_null_step.py [--steps 100] [--repeats 21]

This workload starts processes of its own, so it is a script rather than an ``IMPLS``
registry of one-process implementations; ``run()`` returns the numbers as a dict.
"""
import argparse
import os
import sys

NAME = "W7"
TITLE = "synchronous parameter-server null step (pull a scalar, push a scalar, wait), 1 server"
UNIT = "ms/step"
HIGHER_IS_BETTER = False
WORKERS = (1, 2)


def _model():
    import labkit as lk

    class Scalar(lk.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = lk.nn.Parameter(lk.ones(()))

        def forward(self, x):
            return self.w * x

    return Scalar()


def _loss(output, target):
    return output.sum()


def _optimizer(params):
    import labkit as lk
    return lk.optim.SGD(params, lr=0.0)


def _periods_ms(timeline, skip):
    """Median over workers of each worker's median period between its step starts."""
    import statistics
    by_rank = {}
    for t in timeline:
        by_rank.setdefault(t["rank"], []).append(t["start_ns"])
    per_rank = []
    for starts in by_rank.values():
        starts = sorted(starts)[skip:]
        per_rank.append(statistics.median(b - a for a, b in zip(starts, starts[1:])) / 1e6)
    return max(per_rank)


def _measure(steps, repeats):
    """Runs on every rank; returns {"labkit": [ms/step per sample], "raw": [...]} on rank 0."""
    import time

    import numpy as np
    from mpi4py import MPI

    import labkit as lk
    from labkit.dist import runtime

    comm = runtime.group().comm.Dup()
    me, size = comm.Get_rank(), comm.Get_size()
    workers = list(range(1, size))
    data = lk.data.TensorDataset(lk.ones((8,)), lk.zeros((8,)))
    ps = lk.dist.ParameterServer(_model, _optimizer, mode="sync", loss_fn=_loss)
    pull, params, push = 11, 12, 13

    def raw():
        value = np.ones((), np.float32)
        comm.Barrier()
        start = time.perf_counter()
        if me == 0:
            for _ in range(steps):
                for _ in workers:
                    status = MPI.Status()
                    comm.recv(source=MPI.ANY_SOURCE, tag=pull, status=status)
                    comm.send(value, dest=status.Get_source(), tag=params)
                grads = [comm.recv(source=MPI.ANY_SOURCE, tag=push) for _ in workers]
                value = value - 0.0 * np.mean(grads)
        else:
            for _ in range(steps):
                comm.send(None, dest=0, tag=pull)
                w = comm.recv(source=0, tag=params)
                comm.send(np.ones((), np.float32) * w, dest=0, tag=push)
        elapsed = time.perf_counter() - start
        return comm.allreduce(elapsed, op=MPI.MAX) / steps * 1e3

    def labkit():
        out = ps.train(data, steps, batch_size=1)
        timelines = comm.gather(out.get("timeline", []), root=0)
        if me != 0:
            return None
        return _periods_ms([t for tl in timelines for t in tl], skip=3)

    samples = {"raw": [], "labkit": []}
    raw(), labkit()                                  # warm-up
    for i in range(repeats):
        order = ["raw", "labkit"] if i % 2 == 0 else ["labkit", "raw"]
        for name in order:
            value = raw() if name == "raw" else labkit()
            samples[name].append(value)
    return samples if me == 0 else None


def run(steps=100, repeats=21):
    """Measure with 1 and 2 workers; returns {"labkit_ms_1", "raw_ms_1", "ratio_1", ...}
    (medians of ``repeats`` samples of ``steps`` steps each)."""
    import statistics

    import labkit as lk
    out = {"steps": steps, "repeats": repeats}
    for k in WORKERS:
        with lk.dist.Cluster(n=1 + k, output="none") as cluster:
            samples = cluster.run(_measure, steps, repeats)[0]
        for name, values in samples.items():
            out[f"{name}_ms_{k}"] = statistics.median(values)
        out[f"ratio_{k}"] = out[f"labkit_ms_{k}"] / out[f"raw_ms_{k}"]
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=TITLE)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args(argv)
    r = run(args.steps, args.repeats)
    print(f"W7 {TITLE} (median of {r['repeats']} samples of {r['steps']} steps)")
    for k in WORKERS:
        print(f"  {k} worker{'s' if k > 1 else ''}: labkit {r[f'labkit_ms_{k}']:.3f} ms/step, "
              f"raw mpi4py {r[f'raw_ms_{k}']:.3f} ms/step, labkit / raw {r[f'ratio_{k}']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))))
    sys.exit(main())
