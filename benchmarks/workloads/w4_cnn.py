"""W4 CNN: conv 1->8 3x3 pad 1, ReLU, max-pool 2, conv 8->16 3x3 pad 1, ReLU, max-pool 2,
linear 784->10, cross-entropy; batch 64 of 28x28; backward; SGD."""
import numpy as np

from ..common import (Registry, glorot, labels, register_labkit_trainers,
                      numpy_cross_entropy, numpy_trainer, torch_trainer)

NAME = "W4"
TITLE = "CNN conv(1->8)-pool-conv(8->16)-pool-linear(784->10), batch 64 of 28x28, SGD"
UNIT = "ms/step"
BATCH = 64
IMPLS = Registry()


def data(rng):
    return {
        "c1w": glorot(rng, 1 * 9, 8 * 9, (8, 1, 3, 3)), "c1b": np.zeros(8, np.float32),
        "c2w": glorot(rng, 8 * 9, 16 * 9, (16, 8, 3, 3)), "c2b": np.zeros(16, np.float32),
        "fw": glorot(rng, 784, 10), "fb": np.zeros(10, np.float32),
        "x": rng.standard_normal((BATCH, 1, 28, 28)).astype(np.float32),
        "y": labels(rng, BATCH),
    }


def metric(seconds_per_step):
    return seconds_per_step * 1e3


def params(d):
    return [d[k] for k in ("c1w", "c1b", "c2w", "c2b", "fw", "fb")]


def _labkit_loss(c1w, c1b, c2w, c2b, fw, fb, x, y):
    import labkit as lk
    h = lk.max_pool2d(lk.relu(lk.conv2d(x, c1w, c1b, padding=1)), 2)
    h = lk.max_pool2d(lk.relu(lk.conv2d(h, c2w, c2b, padding=1)), 2)
    return lk.nn.functional.cross_entropy(h.reshape(x.shape[0], 784) @ fw + fb, y)


register_labkit_trainers(IMPLS, params, ("x", "y"), _labkit_loss)


# ---- hand-written NumPy: im2col by nine slice copies, batched GEMM, strided-slice max-pool ----
def _conv(x, w, b):
    """3x3, stride 1, padding 1, NCHW. Returns the output and the columns kept for backward."""
    n, c, h, wd = x.shape
    o = w.shape[0]
    padded = np.zeros((n, c, h + 2, wd + 2), x.dtype)
    padded[:, :, 1:-1, 1:-1] = x
    cols = np.empty((n, c, 3, 3, h, wd), x.dtype)
    for i in range(3):
        for j in range(3):
            cols[:, :, i, j] = padded[:, :, i:i + h, j:j + wd]
    cols = cols.reshape(n, c * 9, h * wd)
    out = w.reshape(o, c * 9) @ cols                        # (N, O, H*W)
    out += b[:, None]
    return out.reshape(n, o, h, wd), cols


def _conv_back(dout, x_shape, w, cols, need_dx):
    n, c, h, wd = x_shape
    o = w.shape[0]
    d3 = dout.reshape(n, o, h * wd)
    dw = np.einsum("nol,nkl->ok", d3, cols, optimize=True).reshape(w.shape)
    db = d3.sum(axis=(0, 2))
    if not need_dx:
        return None, dw, db
    dcols = (w.reshape(o, c * 9).T @ d3).reshape(n, c, 3, 3, h, wd)
    dpad = np.zeros((n, c, h + 2, wd + 2), dout.dtype)
    for i in range(3):
        for j in range(3):
            dpad[:, :, i:i + h, j:j + wd] += dcols[:, :, i, j]
    return dpad[:, :, 1:-1, 1:-1], dw, db


_CORNERS = ((0, 0), (0, 1), (1, 0), (1, 1))


def _pool(x):
    """2x2 max-pool, stride 2: the max of four strided slices."""
    a, b, c, d = (x[:, :, i::2, j::2] for i, j in _CORNERS)
    return np.maximum(np.maximum(a, b), np.maximum(c, d)), x


def _pool_back(dout, x, out):
    """The gradient goes to the first maximum of each window (as in PyTorch)."""
    dx = np.zeros_like(x)
    taken = np.zeros(out.shape, bool)
    for i, j in _CORNERS:
        hit = x[:, :, i::2, j::2] == out
        hit &= ~taken
        taken |= hit
        dx[:, :, i::2, j::2] = dout * hit
    return dx


def _numpy_loss_and_grads(p, x, y):
    c1w, c1b, c2w, c2b, fw, fb = p
    z1, cols1 = _conv(x, c1w, c1b)
    a1 = np.maximum(z1, 0)
    p1, r1 = _pool(a1)
    z2, cols2 = _conv(p1, c2w, c2b)
    a2 = np.maximum(z2, 0)
    p2, r2 = _pool(a2)
    flat = p2.reshape(x.shape[0], 784)
    loss, dlogits = numpy_cross_entropy(flat @ fw + fb, y)
    dfw, dfb = flat.T @ dlogits, dlogits.sum(0)
    dp2 = (dlogits @ fw.T).reshape(p2.shape)
    dz2 = _pool_back(dp2, r2, p2) * (z2 > 0)
    dp1, dc2w, dc2b = _conv_back(dz2, p1.shape, c2w, cols2, need_dx=True)
    dz1 = _pool_back(dp1, r1, p1) * (z1 > 0)
    _, dc1w, dc1b = _conv_back(dz1, x.shape, c1w, cols1, need_dx=False)
    return loss, [dc1w, dc1b, dc2w, dc2b, dfw, dfb]


@IMPLS.register("numpy")
def numpy_impl(d, device):
    return numpy_trainer(params(d), [d["x"], d["y"]], _numpy_loss_and_grads, device)


def _torch_loss(c1w, c1b, c2w, c2b, fw, fb, x, y):
    import torch
    import torch.nn.functional as F
    h = F.max_pool2d(F.relu(F.conv2d(x, c1w, c1b, padding=1)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, c2w, c2b, padding=1)), 2)
    return F.cross_entropy(torch.addmm(fb, h.reshape(x.shape[0], 784), fw), y)


@IMPLS.register("torch")
def torch_impl(d, device):
    return torch_trainer(params(d), [d["x"], d["y"]], _torch_loss, device)
