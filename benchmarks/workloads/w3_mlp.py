"""W3 MLP: 784-256-256-10 with ReLU, softmax cross-entropy, batch 128, backward, SGD."""
import numpy as np

from ..common import (Registry, glorot, labels, register_labkit_trainers,
                      numpy_cross_entropy, numpy_trainer, torch_trainer)

NAME = "W3"
TITLE = "MLP 784-256-256-10, ReLU, cross-entropy, batch 128, backward, SGD"
UNIT = "ms/step"
BATCH = 128
SIZES = (784, 256, 256, 10)
IMPLS = Registry()


def data(rng):
    d = {}
    for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:]), 1):
        d[f"w{i}"] = glorot(rng, a, b)
        d[f"b{i}"] = np.zeros(b, np.float32)
    d["x"] = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    d["y"] = labels(rng, BATCH)
    return d


def metric(seconds_per_step):
    return seconds_per_step * 1e3


def params(d):
    return [d[k] for k in ("w1", "b1", "w2", "b2", "w3", "b3")]


def _labkit_loss(w1, b1, w2, b2, w3, b3, x, y):
    import labkit as lk
    h = lk.relu(x @ w1 + b1)
    h = lk.relu(h @ w2 + b2)
    return lk.nn.functional.cross_entropy(h @ w3 + b3, y)


register_labkit_trainers(IMPLS, params, ("x", "y"), _labkit_loss)


def _numpy_loss_and_grads(p, x, y):
    w1, b1, w2, b2, w3, b3 = p
    z1 = x @ w1 + b1
    h1 = np.maximum(z1, 0)
    z2 = h1 @ w2 + b2
    h2 = np.maximum(z2, 0)
    loss, dz3 = numpy_cross_entropy(h2 @ w3 + b3, y)
    dh2 = dz3 @ w3.T
    dz2 = dh2 * (z2 > 0)
    dh1 = dz2 @ w2.T
    dz1 = dh1 * (z1 > 0)
    grads = [x.T @ dz1, dz1.sum(0), h1.T @ dz2, dz2.sum(0), h2.T @ dz3, dz3.sum(0)]
    return loss, grads


@IMPLS.register("numpy")
def numpy_impl(d, device):
    return numpy_trainer(params(d), [d["x"], d["y"]], _numpy_loss_and_grads, device)


def _torch_loss(w1, b1, w2, b2, w3, b3, x, y):
    import torch
    import torch.nn.functional as F
    h = F.relu(torch.addmm(b1, x, w1))      # what nn.Linear does
    h = F.relu(torch.addmm(b2, h, w2))
    return F.cross_entropy(torch.addmm(b3, h, w3), y)


@IMPLS.register("torch")
def torch_impl(d, device):
    return torch_trainer(params(d), [d["x"], d["y"]], _torch_loss, device)
