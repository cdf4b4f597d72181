"""W9 profiler overhead: the captured MLP 784-256-256-10 training step (batch 128, SGD), with
and without ``lk.profile()`` open, in steps per second.

Samples alternate between the two in one process (the order flips each round), each the CPU
time of a block of steps; reported as medians. The goal: the profiler costs under 10%, i.e.
profiled throughput >= 0.91x unprofiled.

It also measures what the profiler adds to one tiny eager op (W1's chain of (8, 8)
elementwise ops), in microseconds per op: plain, under ``lk.profile()``, and with each of
``record_shapes=True`` and ``with_stack=True`` (what the timeline explorer's details show).

    python benchmarks/workloads/w9_profiler_overhead.py [--repeats 21]
"""
import argparse
import time

NAME = "W9"
TITLE = "profiler overhead on the captured MLP training step"
UNIT = "steps/s"
HIGHER_IS_BETTER = True
TARGET = 0.91          # profiled throughput >= 91% of unprofiled (overhead under 10%)


def _make_step():
    import numpy as np

    import labkit as lk
    from labkit import nn
    from labkit.nn import functional as F
    lk.manual_seed(0)
    rng = np.random.default_rng(0)
    x = lk.tensor(rng.standard_normal((128, 784)).astype(np.float32))
    y = lk.tensor(rng.integers(0, 10, 128))
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 10))
    opt = lk.optim.SGD(model.parameters(), lr=0.01)

    @lk.function
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return lambda: step(x, y)


def run(repeats=21, steps_per_sample=20):
    """Medians of ``repeats`` samples each way; returns a dict of the numbers."""
    import statistics

    import labkit as lk
    step = _make_step()
    for _ in range(5):
        step()

    def sample(profiled):
        start = time.process_time()
        if profiled:
            with lk.profile() as prof:
                for _ in range(steps_per_sample):
                    step()
            assert prof.events, "the profile recorded nothing"
        else:
            for _ in range(steps_per_sample):
                step()
        return steps_per_sample / (time.process_time() - start)

    plain, profiled = [], []
    for i in range(repeats):
        order = (False, True) if i % 2 == 0 else (True, False)
        for p in order:
            (profiled if p else plain).append(sample(p))
    p, q = statistics.median(plain), statistics.median(profiled)
    eager = {f"eager_us_per_op_{k}": v for k, v in eager_per_op(repeats).items()}
    return {"plain_steps_per_s": p, "profiled_steps_per_s": q, "ratio": q / p,
            "overhead_percent": 100 * (p / q - 1), "repeats": repeats, **eager}


EAGER_SETTINGS = {"plain": None, "profile": {}, "record_shapes": {"record_shapes": True},
                  "with_stack": {"with_stack": True},
                  "both": {"record_shapes": True, "with_stack": True}}


def eager_per_op(repeats=21, ops=1000):
    """Median microseconds per tiny eager op under each of ``EAGER_SETTINGS`` (samples of
    ``ops`` ops, the settings taken in turn within each round)."""
    import statistics

    import numpy as np

    import labkit as lk
    from benchmarks.workloads.w1_dispatch import chain
    x = lk.tensor(np.ones((8, 8), np.float32))

    def sample(kwargs):
        start = time.process_time()
        if kwargs is None:
            chain(x, ops)
        else:
            with lk.profile(**kwargs):
                chain(x, ops)
        return (time.process_time() - start) / ops * 1e6

    times = {name: [] for name in EAGER_SETTINGS}
    for kwargs in EAGER_SETTINGS.values():
        sample(kwargs)
    for _ in range(repeats):
        for name, kwargs in EAGER_SETTINGS.items():
            times[name].append(sample(kwargs))
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args(argv)
    r = run(args.repeats)
    print(f"unprofiled {r['plain_steps_per_s']:.1f} steps/s, profiled "
          f"{r['profiled_steps_per_s']:.1f} steps/s: overhead {r['overhead_percent']:.1f}%")
    per_op = {k[len("eager_us_per_op_"):]: v for k, v in r.items()
              if k.startswith("eager_us_per_op_")}
    plain = per_op.pop("plain")
    print(f"one tiny eager op: {plain:.2f} us plain; added by the profiler: "
          + ", ".join(f"{name} +{t - plain:.2f} us" for name, t in per_op.items()))


if __name__ == "__main__":
    main()
