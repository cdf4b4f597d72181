"""The corpus programs as benchmark workloads: one per program, in the shape of
``benchmarks/workloads/*`` (``NAME``, ``TITLE``, ``UNIT``, ``data(rng)``, ``metric``, ``IMPLS``),
so that ``benchmarks/run.py``'s workers and round-robin sampling time them.

Every implementation starts from PyTorch's own initialisation of the program: ``prepare(name)``
runs the program's setup on PyTorch once, in a process of its own, and writes its weights to
``benchmarks/results/corpus/<name>.npz``; ``data(rng)`` reads them, with the batches drawn from
``rng``. The check (``Bench.check``) runs the program's first ``check_steps`` steps
deterministically (dropout off, in-model random draws from the batch) from those weights; the
timed step then runs with the program's own randomness, cycling through ``STEPS_BATCHES``
batches.

    python -m benchmarks.corpus.bench prepare mnist      # what the runner does first
"""
import os
import sys
import tempfile

import numpy as np

from ..common import Bench, NotAvailable, Registry, torch_info
from .programs import PROGRAMS

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results",
                       "corpus")
TIMED_BATCHES = 4          # the timed step cycles through this many batches


def weights_path(name):
    return os.path.join(RESULTS, f"{name}.npz")


def prepare(name):
    """Write PyTorch's initial weights of program ``name`` (needs PyTorch; run in a process of
    its own)."""
    import torch
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as workdir:
        state = PROGRAMS[name].setup("torch", workdir, deterministic=True).state()
    os.makedirs(RESULTS, exist_ok=True)
    flat = {f"{module}/{key}": value for module, sd in state.items() for key, value in sd.items()}
    np.savez(weights_path(name), **flat)


def _unflatten(arrays, prefix):
    state = {}
    for key, value in arrays.items():
        if key.startswith(prefix):
            module, k = key[len(prefix):].split("/", 1)
            state.setdefault(module, {})[k] = value
    return state


class Workload:
    """One corpus program as a benchmark workload module."""

    UNIT = "ms/step"

    def __init__(self, name):
        self.program = PROGRAMS[name]
        self.NAME = name
        self.TITLE = self.program.title
        self.WORKER_NAME = f"corpus.{name}"
        self.IMPLS = Registry()
        for impl, framework, captured in (("labkit_eager", "labkit", False),
                                          ("labkit_captured", "labkit", True),
                                          ("torch", "torch", False)):
            self.IMPLS.register(impl)(self._factory(framework, captured))

    @staticmethod
    def metric(seconds_per_step):
        return seconds_per_step * 1e3

    def data(self, rng):
        out = {}
        with np.load(weights_path(self.NAME)) as weights:
            out.update({f"w/{k}": weights[k] for k in weights.files})
        for i, batch in enumerate(self.program.check_batches(rng)):
            out.update({f"check{i}/{k}": v for k, v in batch.items()})
        for i, batch in enumerate(self.program.batches(rng, TIMED_BATCHES)):
            out.update({f"step{i}/{k}": v for k, v in batch.items()})
        return out

    def _factory(self, framework, captured):
        def factory(data, device):
            if device != "cpu":
                raise NotAvailable("the corpus benchmark runs on the CPU")
            return self._bench(data, framework, captured)
        return factory

    def _bench(self, data, framework, captured):
        from .programs import check_run
        program = self.program
        workdir = tempfile.TemporaryDirectory(prefix=f"corpus-{self.NAME}-")
        state = {m: {k: np.array(v) for k, v in sd.items()}
                 for m, sd in _unflatten(data, "w/").items()}
        check_batches = [_unflatten_batch(data, f"check{i}/")
                         for i in range(program.check_steps)]
        timed = program.setup(framework, workdir.name)
        timed.load_state(state)
        batches = [timed.batch(_unflatten_batch(data, f"step{i}/"))
                   for i in range(TIMED_BATCHES)]
        run = program.captured(timed) if captured else program.eager(timed)
        counter = iter(range(1 << 62))

        def step():
            return run(batches[next(counter) % TIMED_BATCHES])

        def check():
            _, out = check_run(program, framework, workdir.name, state, check_batches,
                               captured=captured)
            step()                       # the timed setup's first step (and trace) done here
            return [v for step_losses in out for v in step_losses]

        info = torch_info() if framework == "torch" else {}
        bench = Bench(step=step, check=check, info=info)
        bench.workdir = workdir          # removed with the bench
        return bench


def _unflatten_batch(data, prefix):
    return {k[len(prefix):]: v for k, v in data.items() if k.startswith(prefix)}


def workload(name):
    return Workload(name)


WORKLOADS = [Workload(name) for name in PROGRAMS]

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "prepare":
        prepare(sys.argv[2])
    else:
        sys.exit(f"usage: python -m benchmarks.corpus.bench prepare PROGRAM "
                 f"(one of {', '.join(PROGRAMS)})")
