"""W9 profiler overhead: the captured MLP 784-256-256-10 training step (batch 128, SGD), with
and without ``lk.profile()`` open, in steps per second.

Samples alternate between the two in one process (the order flips each round), each the CPU
time of a block of steps; reported as medians. The goal: the profiler costs under 10%, i.e.
profiled throughput >= 0.91x unprofiled.

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
    return {"plain_steps_per_s": p, "profiled_steps_per_s": q, "ratio": q / p,
            "overhead_percent": 100 * (p / q - 1), "repeats": repeats}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args(argv)
    r = run(args.repeats)
    print(f"unprofiled {r['plain_steps_per_s']:.1f} steps/s, profiled "
          f"{r['profiled_steps_per_s']:.1f} steps/s: overhead {r['overhead_percent']:.1f}%")


if __name__ == "__main__":
    main()
