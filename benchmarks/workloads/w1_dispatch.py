"""W1 dispatch: 1,000 sequential tiny elementwise ops with no gradient.

``x = x * 1.0001 + 0.0001`` is two ops; it runs 500 times on an (8, 8) float32 tensor that does
not require grad, so the time is almost all per-op overhead (dispatch, wrapping, allocation).
"""
import numpy as np

from ..common import (Bench, Registry, labkit_device, labkit_sync, numpy_only, require_capture,
                      torch_device, torch_info, torch_sync)

NAME = "W1"
TITLE = "dispatch: 1,000 elementwise ops on (8, 8) float32, no grad"
UNIT = "us/op"
OPS = 1000
IMPLS = Registry()


def data(rng):
    return {"x": rng.standard_normal((8, 8)).astype(np.float32)}


def metric(seconds_per_step):
    return seconds_per_step / OPS * 1e6


def chain(x):
    for _ in range(OPS // 2):
        x = x * 1.0001 + 0.0001
    return x


def _checksum(arr):
    return [float(np.asarray(arr, dtype=np.float64).sum())]


def _labkit(d, device, capture):
    import labkit as lk
    dev = labkit_device(device)
    f = require_capture()(chain) if capture else chain
    x = lk.tensor(d["x"], device=dev)
    return Bench(step=lambda: f(x), check=lambda: _checksum(f(x).numpy()),
                 sync=labkit_sync(device))


@IMPLS.register("labkit_eager")
def labkit_eager(d, device):
    return _labkit(d, device, capture=False)


@IMPLS.register("labkit_captured")
def labkit_captured(d, device):
    return _labkit(d, device, capture=True)


@IMPLS.register("numpy")
def numpy_impl(d, device):
    numpy_only(device)
    x = d["x"].copy()
    return Bench(step=lambda: chain(x), check=lambda: _checksum(chain(x)))


@IMPLS.register("torch")
def torch_impl(d, device):
    import torch
    x = torch.tensor(d["x"], device=torch_device(device))
    return Bench(step=lambda: chain(x), check=lambda: _checksum(chain(x).cpu().numpy()),
                 sync=torch_sync(device), info=torch_info())
