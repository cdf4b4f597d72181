"""W5 matmul: one 2048x2048 by 2048x2048 float32 product; reported in GFLOP/s (higher is better)."""
import numpy as np

from ..common import (Bench, Registry, blas_info, labkit_device, labkit_sync, numpy_only,
                      require_capture, torch_device, torch_info, torch_sync)

NAME = "W5"
TITLE = "2048x2048 float32 matmul"
UNIT = "GFLOP/s"
HIGHER_IS_BETTER = True
N = 2048
IMPLS = Registry()


def data(rng):
    return {"a": rng.standard_normal((N, N)).astype(np.float32),
            "b": rng.standard_normal((N, N)).astype(np.float32)}


def metric(seconds_per_step):
    return 2.0 * N ** 3 / seconds_per_step / 1e9


def _checksum(c):
    return [float(np.abs(np.asarray(c, dtype=np.float64)).mean())]


def _labkit(d, device, capture):
    import labkit as lk
    dev = labkit_device(device)
    f = require_capture()(lk.matmul) if capture else lk.matmul
    a, b = lk.tensor(d["a"], device=dev), lk.tensor(d["b"], device=dev)
    return Bench(step=lambda: f(a, b), check=lambda: _checksum(f(a, b).numpy()),
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
    a, b = d["a"], d["b"]
    return Bench(step=lambda: a @ b, check=lambda: _checksum(a @ b), info=blas_info())


@IMPLS.register("torch")
def torch_impl(d, device):
    import torch
    dev = torch_device(device)
    a, b = torch.tensor(d["a"], device=dev), torch.tensor(d["b"], device=dev)
    return Bench(step=lambda: a @ b, check=lambda: _checksum((a @ b).cpu().numpy()),
                 sync=torch_sync(device), info=torch_info())
