"""W12 while-loop RNN: notebook 04's variable-length tanh RNN, ``h = tanh(x[t] @ Wx + h @ Wh)``
while ``t < n``, with W6's sizes (input 64, hidden 128, batch 32, 50 steps), forward only.

labkit eager runs ``lk.while_loop`` as a Python loop; captured, it is one ``while_loop`` node
whose length ``n`` is a tensor fed at each call (one trace serves every length). NumPy and
PyTorch run the same Python loop.
"""
import numpy as np

from ..common import (Bench, Registry, glorot, labkit_call_bench, numpy_only, torch_device,
                      torch_info, torch_sync)

NAME = "W12"
TITLE = ("notebook 04's while-loop tanh RNN (input 64, hidden 128, batch 32, 50 steps), "
         "forward")
UNIT = "ms/call"
STEPS, BATCH, IN, HIDDEN = 50, 32, 64, 128
IMPLS = Registry()


def data(rng):
    return {"xs": rng.standard_normal((STEPS, BATCH, IN)).astype(np.float32),
            "wx": glorot(rng, IN, HIDDEN), "wh": glorot(rng, HIDDEN, HIDDEN),
            "n": np.array(STEPS, np.int64)}


def metric(seconds_per_step):
    return seconds_per_step * 1e3


def _checksum(arr):
    return [float(np.asarray(arr, dtype=np.float64).sum())]


def _labkit_rnn(xs, wx, wh, n):
    import labkit as lk

    def step(t, h):
        return t + 1, (xs[t] @ wx + h @ wh).tanh()
    _, h = lk.while_loop(lambda t, h: t < n, step, (0, lk.zeros(BATCH, HIDDEN, device=xs.device)))
    return h


def _args(d):
    return [d["xs"], d["wx"], d["wh"], d["n"]]


@IMPLS.register("labkit_eager")
def labkit_eager(d, device):
    return labkit_call_bench(_labkit_rnn, _args(d), device, False, _checksum)


@IMPLS.register("labkit_captured")
def labkit_captured(d, device):
    return labkit_call_bench(_labkit_rnn, _args(d), device, True, _checksum)


def _loop(tanh, zeros, xs, wx, wh, n):
    h = zeros
    for t in range(int(n)):
        h = tanh(xs[t] @ wx + h @ wh)
    return h


@IMPLS.register("numpy")
def numpy_impl(d, device):
    numpy_only(device)
    xs, wx, wh, n = _args(d)

    def step():
        return _loop(np.tanh, np.zeros((BATCH, HIDDEN), np.float32), xs, wx, wh, n)
    return Bench(step=step, check=lambda: _checksum(step()))


@IMPLS.register("torch")
def torch_impl(d, device):
    import torch
    dev = torch_device(device)
    xs, wx, wh = (torch.tensor(a, device=dev) for a in _args(d)[:3])
    n = int(d["n"])

    def step():
        return _loop(torch.tanh, torch.zeros(BATCH, HIDDEN, device=dev), xs, wx, wh, n)
    return Bench(step=step, check=lambda: _checksum(step().detach().cpu().numpy()),
                 sync=torch_sync(device), info=torch_info())
