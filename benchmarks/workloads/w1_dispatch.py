"""W1 dispatch: 1,000 sequential tiny elementwise ops with no gradient.

``x = x * 1.0001 + 0.0001`` is two ops; it runs 500 times on an (8, 8) float32 tensor that does
not require grad, so the time is almost all per-op overhead (dispatch, wrapping, allocation).
"""
import numpy as np

from ..common import (Bench, Registry, labkit_call_bench, numpy_only, torch_device, torch_info,
                      torch_sync)

NAME = "W1"
TITLE = "dispatch: 1,000 elementwise ops on (8, 8) float32, no grad"
UNIT = "us/op"
OPS = 1000
IMPLS = Registry()


def data(rng):
    return {"x": rng.standard_normal((8, 8)).astype(np.float32)}


def metric(seconds_per_step):
    return seconds_per_step / OPS * 1e6


def chain(x, ops=OPS):
    """``ops`` elementwise ops: ``x = x * 1.0001 + 0.0001``, ``ops // 2`` times (any library)."""
    for _ in range(ops // 2):
        x = x * 1.0001 + 0.0001
    return x


def _checksum(arr):
    return [float(np.asarray(arr, dtype=np.float64).sum())]


@IMPLS.register("labkit_eager")
def labkit_eager(d, device):
    return labkit_call_bench(chain, [d["x"]], device, False, _checksum)


@IMPLS.register("labkit_captured")
def labkit_captured(d, device):
    return labkit_call_bench(chain, [d["x"]], device, True, _checksum)


@IMPLS.register("numpy")
def numpy_impl(d, device):
    numpy_only(device)
    x = d["x"].copy()
    return Bench(step=lambda: chain(x), check=lambda: _checksum(chain(x)))


@IMPLS.register("torch")
def torch_impl(d, device):
    import torch
    x = torch.tensor(d["x"], device=torch_device(device))
    return Bench(step=lambda: chain(x), check=lambda: _checksum(chain(x).detach().cpu().numpy()),
                 sync=torch_sync(device), info=torch_info())
