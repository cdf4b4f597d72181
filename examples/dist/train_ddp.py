"""Data-parallel training written for PyTorch and torchrun, run by labkit with the imports changed.

    python -m labkit.dist.run --standalone --nproc_per_node=2 examples/dist/train_ddp.py
    python examples/dist/train_ddp.py                # one process: the same numbers

The setup and the loop are nanoGPT's (``train.py``): ``ddp`` is whether torchrun's ``RANK`` is
set; ``init_process_group``; the rank, local rank and world size read from the environment;
the gradient accumulation steps divided among the ranks; ``DDP(model, device_ids=...)`` (None on
a CPU, as PyTorch asks); ``model.require_backward_grad_sync`` set in the micro-step loop so that
only the last micro-step's backward averages the gradients; ``destroy_process_group()``. The
model is a small MLP on generated data, and rank r takes the r-th share of each step's
micro-batches, so every run takes the same steps as one process doing all the micro-batches.
"""
import argparse
import os
import sys

try:
    import labkit as torch
except ImportError:                       # run from a checkout without installing labkit
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    import labkit as torch

import labkit.distributed as dist
import labkit.nn as nn
from labkit.distributed import destroy_process_group, init_process_group
from labkit.nn import functional as F
from labkit.nn.parallel import DistributedDataParallel as DDP


def make_data(n=1024, features=16, classes=4, seed=0):
    """Points labelled by the largest of four random linear scores: the same on every rank."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    return x, (x @ torch.randn(features, classes, generator=g)).argmax(dim=1)


def train(steps=8, micro_batch=16, gradient_accumulation_steps=4, lr=1e-2, backend="gloo",
          log=True):
    """Train for ``steps`` optimiser steps of ``gradient_accumulation_steps`` micro-batches
    (over all ranks); returns the losses (mean over the ranks) and the final parameters."""
    ddp = int(os.environ.get('RANK', -1)) != -1     # is this a ddp run?
    if ddp:
        init_process_group(backend=backend)
        ddp_rank = int(os.environ['RANK'])
        ddp_local_rank = int(os.environ['LOCAL_RANK'])
        ddp_world_size = int(os.environ['WORLD_SIZE'])
        device = f'cuda:{ddp_local_rank}' if torch.cuda.is_available() else 'cpu'
        master_process = ddp_rank == 0
        seed_offset = ddp_rank
        assert gradient_accumulation_steps % ddp_world_size == 0
        gradient_accumulation_steps //= ddp_world_size
    else:
        device = 'cpu'
        ddp_rank, master_process, seed_offset, ddp_world_size = 0, True, 0, 1
    torch.manual_seed(1337 + seed_offset)   # DDP starts every replica as rank 0's anyway

    x_all, y_all = make_data()
    per_step = gradient_accumulation_steps * ddp_world_size

    def get_batch(it, micro_step):
        k = (it * per_step + ddp_rank * gradient_accumulation_steps + micro_step) * micro_batch
        k %= len(x_all) - micro_batch
        return x_all[k:k + micro_batch].to(device), y_all[k:k + micro_batch].to(device)

    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 4)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    if ddp:
        model = DDP(model, device_ids=[ddp_local_rank] if device != 'cpu' else None)
    raw_model = model.module if ddp else model

    losses = []
    for it in range(steps):
        total = torch.zeros(())
        for micro_step in range(gradient_accumulation_steps):
            if ddp:
                # in DDP training we only need to sync gradients at the last micro step
                model.require_backward_grad_sync = (
                    micro_step == gradient_accumulation_steps - 1)
            X, Y = get_batch(it, micro_step)
            loss = F.cross_entropy(model(X), Y) / gradient_accumulation_steps
            loss.backward()
            total = total + loss.detach()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if ddp:
            dist.all_reduce(total, op=dist.ReduceOp.AVG)
        losses.append(total.item())
        if log and master_process:
            print(f"iter {it}: loss {losses[-1]:.4f}")
    params = [p.detach().numpy().copy() for p in raw_model.parameters()]
    if ddp:
        destroy_process_group()
    return losses, params


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--micro-batch", type=int, default=16)
    parser.add_argument("--accumulate", type=int, default=4,
                        help="micro-batches per step, over all ranks")
    parser.add_argument("--backend", default="gloo")
    parser.add_argument("--save", help="rank 0 saves the losses and parameters to this .npz")
    args = parser.parse_args()
    rank = int(os.environ.get("RANK", 0))
    losses, params = train(args.steps, args.micro_batch, args.accumulate, backend=args.backend)
    if args.save and rank == 0:
        import numpy as np
        np.savez(args.save, losses=np.array(losses), *params)


if __name__ == "__main__":
    main()
