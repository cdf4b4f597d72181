"""W6 RNN: tanh cell, input 64, hidden 128, 50 steps, batch 32; readout and cross-entropy on the
last state; backward through time; SGD.

Every implementation writes the same define-by-run loop
``h = tanh(x[t] @ W_ih + h @ W_hh + b)`` (PyTorch's fused ``nn.RNN`` is not used, so the
comparison is of eager frameworks running one Python loop).
"""
import numpy as np

from ..common import (Registry, glorot, labels, register_labkit_trainers,
                      numpy_cross_entropy, numpy_trainer, torch_trainer)

NAME = "W6"
TITLE = "tanh RNN in 64, hidden 128, 50 steps, batch 32, readout + cross-entropy, BPTT, SGD"
UNIT = "ms/step"
STEPS, BATCH, IN, HIDDEN, CLASSES = 50, 32, 64, 128, 10
IMPLS = Registry()


def data(rng):
    return {
        "w_ih": glorot(rng, IN, HIDDEN), "w_hh": glorot(rng, HIDDEN, HIDDEN),
        "b": np.zeros(HIDDEN, np.float32),
        "w_out": glorot(rng, HIDDEN, CLASSES), "b_out": np.zeros(CLASSES, np.float32),
        "x": rng.standard_normal((STEPS, BATCH, IN)).astype(np.float32),
        "h0": np.zeros((BATCH, HIDDEN), np.float32),
        "y": labels(rng, BATCH, CLASSES),
    }


def metric(seconds_per_step):
    return seconds_per_step * 1e3


def params(d):
    return [d[k] for k in ("w_ih", "w_hh", "b", "w_out", "b_out")]


def _labkit_loss(w_ih, w_hh, b, w_out, b_out, x, h, y):
    import labkit as lk
    for t in range(STEPS):
        h = lk.tanh(x[t] @ w_ih + h @ w_hh + b)
    return lk.nn.functional.cross_entropy(h @ w_out + b_out, y)


register_labkit_trainers(IMPLS, params, ("x", "h0", "y"), _labkit_loss)


def _numpy_loss_and_grads(p, x, h0, y):
    w_ih, w_hh, b, w_out, b_out = p
    hs = [h0]
    for t in range(STEPS):
        hs.append(np.tanh(x[t] @ w_ih + hs[-1] @ w_hh + b))
    loss, dlogits = numpy_cross_entropy(hs[-1] @ w_out + b_out, y)
    dw_out, db_out = hs[-1].T @ dlogits, dlogits.sum(0)
    dh = dlogits @ w_out.T
    dw_ih, dw_hh, db = np.zeros_like(w_ih), np.zeros_like(w_hh), np.zeros_like(b)
    for t in range(STEPS - 1, -1, -1):
        dz = dh * (1 - hs[t + 1] * hs[t + 1])
        dw_ih += x[t].T @ dz
        dw_hh += hs[t].T @ dz
        db += dz.sum(0)
        dh = dz @ w_hh.T
    return loss, [dw_ih, dw_hh, db, dw_out, db_out]


@IMPLS.register("numpy")
def numpy_impl(d, device):
    return numpy_trainer(params(d), [d["x"], d["h0"], d["y"]], _numpy_loss_and_grads, device)


def _torch_loss(w_ih, w_hh, b, w_out, b_out, x, h, y):
    import torch
    import torch.nn.functional as F
    for t in range(STEPS):
        h = torch.tanh(x[t] @ w_ih + h @ w_hh + b)
    return F.cross_entropy(torch.addmm(b_out, h, w_out), y)


@IMPLS.register("torch")
def torch_impl(d, device):
    return torch_trainer(params(d), [d["x"], d["h0"], d["y"]], _torch_loss, device)
