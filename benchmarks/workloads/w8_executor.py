"""W8 executor throughput: ``g.run`` of a trivial explicit graph — one ``assign_add`` of 1 to a
scalar variable — in runs per second, from one thread.

This is the executor's fixed cost per run (feed/fetch handling, plan lookup, one kernel). The
TensorFlow paper's executor ran up to 10,000 subgraphs per second; labkit's goal is at least
50,000. The other columns do the same update their own way, for scale: labkit eager
(``v.assign_add(1.0)``), NumPy (``np.add(v, 1, out=v)``) and PyTorch (``v.add_(1)``).
"""
import numpy as np

from ..common import (Bench, NotAvailable, Registry, labkit_device, labkit_sync, torch_device,
                      torch_sync)

NAME = "W8"
TITLE = "executor: g.run of one assign_add on a scalar variable (runs per second)"
UNIT = "runs/s"
HIGHER_IS_BETTER = True
ABSOLUTE_TARGET = ("labkit_captured", ">=", 50_000)
IMPLS = Registry()


def data(rng):
    return {}


def metric(seconds_per_step):
    return 1.0 / seconds_per_step


@IMPLS.register("labkit_captured")
def labkit_graph(d, device):
    import labkit as lk
    if not hasattr(lk, "Variable"):
        raise NotAvailable("n/a (lk.Variable not built yet)")
    v = lk.Variable(lk.tensor(0.0, device=labkit_device(device)))
    with lk.Graph() as g:
        update = v.assign_add(1.0)
    run = g.run
    return Bench(step=lambda: run(update), check=lambda: [1.0], sync=labkit_sync(device))


@IMPLS.register("labkit_eager")
def labkit_eager(d, device):
    import labkit as lk
    v = lk.tensor(0.0, device=labkit_device(device))
    return Bench(step=lambda: v.assign_add(1.0), check=lambda: [1.0], sync=labkit_sync(device))


@IMPLS.register("numpy")
def numpy_impl(d, device):
    if device != "cpu":
        raise NotAvailable("NumPy runs on the CPU only")
    v = np.zeros((), np.float32)
    return Bench(step=lambda: np.add(v, 1.0, out=v), check=lambda: [1.0])


@IMPLS.register("torch")
def torch_impl(d, device):
    import torch
    v = torch.zeros((), device=torch_device(device))
    return Bench(step=lambda: v.add_(1.0), check=lambda: [1.0], sync=torch_sync(device))
