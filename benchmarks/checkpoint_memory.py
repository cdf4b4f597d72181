"""Activation checkpointing on W10's GPT: the peak memory of a training step (forward, loss,
backward) with and without ``lk.utils.checkpoint.checkpoint`` around each block, eager and
captured (``lk.function``), and what the recomputation costs in time.

    python benchmarks/checkpoint_memory.py                       # W10's GPT with 2, 4, 8 layers
    python benchmarks/checkpoint_memory.py --layers 4 --device gpu:0

Time is this process's CPU time per step (steadier than the wall clock on a shared machine;
run with OPENBLAS_NUM_THREADS=1 so that it is one core's), and only a rough ratio: tracemalloc
is tracing while it is taken.

The peak is ``lk.devices.memory_stats``'s: on a CPU, tracemalloc's count of every NumPy array
(tracing is on while this runs), on a GPU, CuPy's memory pool's. It is reported above what is
held before the step (weights, gradients of the previous step freed, inputs): the memory the
step itself needs, which is where activations live.
"""
import argparse
import gc
import os
import sys
import time
import tracemalloc

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

import labkit as lk  # noqa: E402
from benchmarks.workloads import w10_gpt  # noqa: E402
from labkit.utils.checkpoint import checkpoint  # noqa: E402


class Checkpointed(lk.nn.Module):
    """``block``, with its activations recomputed in the backward pass."""

    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)


def build(layers, device, checkpointed, seed=0):
    """W10's GPT with ``layers`` blocks, its weights drawn from ``seed``; each block wrapped in
    ``Checkpointed`` when asked."""
    w10_gpt.LAYERS = layers
    data = w10_gpt.data(np.random.default_rng(seed))
    model = w10_gpt.make_gpt(lk).to(device)
    model.load_state_dict({k: lk.tensor(v, device=device)
                           for k, v in w10_gpt._state(data).items()})
    if checkpointed:
        for i, block in enumerate(model.blocks):
            model.blocks[i] = Checkpointed(block)
    idx = lk.tensor(data["idx"], device=device)
    targets = lk.tensor(data["targets"], device=device)
    return model, idx, targets


def step_of(model, captured):
    def step(idx, targets):
        model.zero_grad(set_to_none=True)
        loss = model(idx, targets)
        loss.backward()
        return loss
    return lk.function(step) if captured else step


def measure(layers, device, checkpointed, captured, repeats=3):
    """(peak bytes of a step above what is held before it, plus the buffers a captured plan
    keeps between steps; seconds per step; loss; gradient norm)."""
    gc.collect()
    kept = lk.devices.memory_stats(device)["workspace_bytes"]
    model, idx, targets = build(layers, device, checkpointed)
    step = step_of(model, captured)
    loss = step(idx, targets)                   # warm-up (and the trace)
    kept = lk.devices.memory_stats(device)["workspace_bytes"] - kept
    times, peaks = [], []
    for _ in range(repeats):
        model.zero_grad(set_to_none=True)
        gc.collect()
        lk.devices.reset_peak_memory_stats(device)
        before = lk.devices.memory_stats(device)["bytes_in_use"]
        start = time.process_time()
        loss = step(idx, targets)
        float(loss.item())
        times.append(time.process_time() - start)
        peaks.append(lk.devices.memory_stats(device)["peak_bytes_in_use"] - before + kept)
    norm = float(np.sqrt(sum(float((p.grad.numpy().astype(np.float64) ** 2).sum())
                             for p in model.parameters() if p.grad is not None)))
    return min(peaks), float(np.median(times)), loss.item(), norm


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--device", default="cpu:0")
    args = parser.parse_args()
    if not args.device.startswith("gpu"):
        tracemalloc.start()
    print(f"W10 GPT (vocab {w10_gpt.VOCAB}, context {w10_gpt.CONTEXT}, d_model "
          f"{w10_gpt.D_MODEL}, {w10_gpt.HEADS} heads, batch {w10_gpt.BATCH}) on {args.device}: "
          f"peak memory of forward + backward above the start of the step (captured: with "
          f"the plan's workspace); time x: checkpointed / plain, CPU time per step")
    print(f"{'layers':>6} {'mode':>8} {'plain MB':>9} {'checkpointed MB':>16} {'saved':>6} "
          f"{'time x':>7}")
    for layers in args.layers:
        for captured in (False, True):
            plain = measure(layers, args.device, False, captured)
            ck = measure(layers, args.device, True, captured)
            assert abs(plain[2] - ck[2]) <= 1e-5 * abs(plain[2]), (plain, ck)
            assert abs(plain[3] - ck[3]) <= 1e-4 * plain[3], (plain, ck)
            print(f"{layers:>6} {'captured' if captured else 'eager':>8} {plain[0] / 2**20:>9.1f} "
                  f"{ck[0] / 2**20:>16.1f} {1 - ck[0] / plain[0]:>6.0%} "
                  f"{ck[1] / plain[1]:>7.2f}")


if __name__ == "__main__":
    main()
