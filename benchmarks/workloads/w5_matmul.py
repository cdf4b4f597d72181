"""W5 matmul: one 2048x2048 by 2048x2048 float32 product; reported in GFLOP/s (higher is better)."""
import numpy as np

from ..common import (Bench, Registry, blas_info, labkit_call_bench, numpy_only, torch_device,
                      torch_info, torch_sync)

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


@IMPLS.register("labkit_eager")
def labkit_eager(d, device):
    import labkit as lk
    return labkit_call_bench(lk.matmul, [d["a"], d["b"]], device, False, _checksum)


@IMPLS.register("labkit_captured")
def labkit_captured(d, device):
    import labkit as lk
    return labkit_call_bench(lk.matmul, [d["a"], d["b"]], device, True, _checksum)


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
