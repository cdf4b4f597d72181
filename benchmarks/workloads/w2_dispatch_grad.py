"""W2 dispatch with autodiff: 100 tiny elementwise ops recorded for a gradient, then backward.

``x = x * 1.0001 + 0.0001`` (two ops) runs 50 times on an (8, 8) float32 leaf that requires
grad, then ``sum()`` and ``backward()``. The time of the whole step (forward, tape, backward) is
divided by the 100 forward ops.
"""
import numpy as np

from ..common import (Bench, Registry, labkit_device, labkit_sync, numpy_only, require_capture,
                      torch_device, torch_info, torch_sync)
from .w1_dispatch import chain as w1_chain
from .w1_dispatch import data  # noqa: F401  (the same (8, 8) input as W1)

NAME = "W2"
TITLE = "dispatch + autodiff: 100 elementwise ops on (8, 8) with grad, sum, backward"
UNIT = "us/op"
OPS = 100
IMPLS = Registry()


def metric(seconds_per_step):
    return seconds_per_step / OPS * 1e6


def chain(x):
    return w1_chain(x, OPS)


def _backward_bench(x, to_numpy, **bench):
    """A Bench for ``chain(x).sum().backward()`` with a library that fills ``x.grad`` (labkit
    eager, PyTorch); ``to_numpy(grad)`` for the agreement check."""
    def step():
        s = chain(x).sum()
        s.backward()
        grad = x.grad
        x.grad = None
        return s, grad

    def check():
        s, grad = step()
        return [s.item(), float(to_numpy(grad).astype(np.float64).sum())]
    return Bench(step=step, check=check, **bench)


@IMPLS.register("labkit_eager")
def labkit_eager(d, device):
    import labkit as lk
    x = lk.tensor(d["x"], device=labkit_device(device), requires_grad=True)
    return _backward_bench(x, lambda g: g.numpy(), sync=labkit_sync(device))


@IMPLS.register("labkit_captured")
def labkit_captured(d, device):
    import labkit as lk
    function = require_capture()
    x = lk.tensor(d["x"], device=labkit_device(device))
    f = function(lk.value_and_grad(lambda x: chain(x).sum()))

    def check():
        s, grad = f(x)
        return [s.item(), float(grad.numpy().astype(np.float64).sum())]
    return Bench(step=lambda: f(x), check=check, sync=labkit_sync(device))


@IMPLS.register("numpy")
def numpy_impl(d, device):
    numpy_only(device)
    x = d["x"].copy()

    def step():
        s = chain(x).sum()
        g = np.ones_like(x)            # d(sum)/dy
        for _ in range(OPS // 2):      # back through "+ 0.0001" (identity) and "* 1.0001"
            g = g * 1.0001
        return s, g

    def check():
        s, g = step()
        return [float(s), float(g.astype(np.float64).sum())]
    return Bench(step=step, check=check)


@IMPLS.register("torch")
def torch_impl(d, device):
    import torch
    x = torch.tensor(d["x"], device=torch_device(device), requires_grad=True)
    return _backward_bench(x, lambda g: g.cpu().numpy(), sync=torch_sync(device),
                           info=torch_info())
