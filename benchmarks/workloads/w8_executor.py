"""W8 executor throughput: ``g.run`` of an explicit graph, fed a new input on every run.

The graph holds the W1 chain (``x = x * 1.0001 + 0.0001`` 500 times: 1,000 elementwise ops on
an (8, 8) float32 placeholder); each run feeds a fresh array and fetches the result, so the time
per op is the executor's cost per node, with its per-run cost (feeding, plan lookup) spread over
the 1,000 nodes. The graph column is labkit's "captured" one; the others run the same chain
eagerly on the same fed array, for reference. Until labkit has explicit graphs (``lk.Graph``,
``lk.placeholder``, ``g.run``) the graph column says so.
"""
import numpy as np

from ..common import (Bench, NotAvailable, Registry, labkit_device, labkit_sync, numpy_only,
                      torch_device, torch_info, torch_sync)
from .w1_dispatch import chain

NAME = "W8"
TITLE = "executor: g.run of a 1,000-op graph on a fed (8, 8) float32 input"
UNIT = "us/op"
OPS = 1000
IMPLS = Registry()


def data(rng):
    return {"x": rng.standard_normal((8, 8)).astype(np.float32)}


def metric(seconds_per_step):
    return seconds_per_step / OPS * 1e6


def _checksum(arr):
    return [float(np.asarray(arr, dtype=np.float64).sum())]


@IMPLS.register("labkit_captured")
def labkit_graph(d, device):
    import labkit as lk
    if not (hasattr(lk, "Graph") and hasattr(lk, "placeholder")):
        raise NotAvailable("n/a (explicit graphs, lk.Graph and g.run, not built yet)")
    dev = labkit_device(device)
    with lk.Graph() as g:
        x = lk.placeholder((8, 8), lk.float32, name="x", device=dev)
        y = chain(x)
    feed = d["x"]
    run = g.run
    return Bench(step=lambda: run(y, {x: feed}), check=lambda: _checksum(run(y, {x: feed}).numpy()),
                 sync=labkit_sync(device))


@IMPLS.register("labkit_eager")
def labkit_eager(d, device):
    import labkit as lk
    dev = labkit_device(device)
    feed = d["x"]

    def step():
        return chain(lk.tensor(feed, device=dev))
    return Bench(step=step, check=lambda: _checksum(step().numpy()), sync=labkit_sync(device))


@IMPLS.register("numpy")
def numpy_impl(d, device):
    numpy_only(device)
    feed = d["x"]
    return Bench(step=lambda: chain(feed.copy()), check=lambda: _checksum(chain(feed.copy())))


@IMPLS.register("torch")
def torch_impl(d, device):
    import torch
    dev = torch_device(device)
    feed = d["x"]

    def step():
        return chain(torch.tensor(feed, device=dev))
    return Bench(step=step, check=lambda: _checksum(step().cpu().numpy()),
                 sync=torch_sync(device), info=torch_info())
