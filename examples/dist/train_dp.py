"""Data-parallel training from a script: a small MLP on generated data, each rank on its share.

    python -m labkit.dist.run -n 2 examples/dist/train_dp.py [--steps 20] [--batch-size 32]
    mpiexec -n 2 python examples/dist/train_dp.py
    python examples/dist/train_dp.py                # one process: the same numbers

``--batch-size`` is the global batch: each of N ranks trains on batch_size / N samples of it,
chosen by ``lk.data.DistributedSampler``, and ``lk.dist.DataParallel`` averages the gradients,
so every run takes the same steps as one process on the whole batch. ``train`` runs unchanged
on workers launched from a notebook cell, too: ``lk.dist.launch(train, 20, 32, n=2)``.
"""
import argparse
import os
import sys

try:
    import labkit as lk
except ImportError:                       # run from a checkout without installing labkit
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    import labkit as lk

from labkit import nn
from labkit.nn import functional as F


def make_data(n=512, features=8, classes=3, seed=0):
    """Points labelled by the largest of three random linear scores: the same on every rank."""
    g = lk.Generator().manual_seed(seed)
    x = lk.randn(n, features, generator=g)
    labels = (x @ lk.randn(features, classes, generator=g)).argmax(dim=1)
    return lk.data.TensorDataset(x, labels)


def train(steps=20, batch_size=32, lr=0.1, seed=0, log=True):
    """Train the MLP for ``steps`` steps of global batch ``batch_size``; return the losses (mean
    over the ranks) and the final parameters as NumPy arrays."""
    info = lk.dist.init()                 # a world of one when nothing started ranks
    if batch_size % info.world_size:
        raise ValueError(f"--batch-size {batch_size} does not divide among "
                         f"{info.world_size} ranks")
    dataset = make_data()
    sampler = lk.data.DistributedSampler(dataset, shuffle=True, seed=seed)
    loader = lk.data.DataLoader(dataset, batch_size=batch_size // info.world_size,
                                sampler=sampler, drop_last=True)
    lk.manual_seed(seed)                  # DataParallel starts every replica as rank 0's anyway
    model = lk.dist.DataParallel(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3)))
    opt = lk.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    losses, epoch = [], 0
    while len(losses) < steps:
        sampler.set_epoch(epoch)          # a new order every epoch, the same on every rank
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()               # DataParallel averages the gradients over the ranks
            opt.step()
            losses.append(lk.dist.allreduce(loss.detach(), op="mean").item())
            if log and info.rank == 0:
                print(f"step {len(losses) - 1} loss {losses[-1]:.4f}")
            if len(losses) == steps:
                break
        epoch += 1
    return losses, [p.detach().numpy().copy() for p in model.parameters()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32, help="the global batch")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--save", help="rank 0 saves the losses and parameters to this .npz")
    args = parser.parse_args()
    losses, params = train(args.steps, args.batch_size, args.lr)
    if args.save and lk.dist.rank() == 0:
        import numpy as np
        np.savez(args.save, losses=np.array(losses), *params)


if __name__ == "__main__":
    main()
