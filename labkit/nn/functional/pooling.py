"""Pooling: ``F.max_pool1d/2d``, ``F.avg_pool1d/2d``, ``F.adaptive_avg_pool1d/2d``,
``F.adaptive_max_pool1d/2d``, in PyTorch's signatures (``ceil_mode``, ``return_indices``,
``count_include_pad``, ``divisor_override``), on unbatched inputs too.

The fixed-window pools are the tensor layer's (``unfold``, then a max or a sum); the 1-d forms are
the 2-d ones on a height-1 image. Adaptive average pooling is a product with an averaging matrix
along each dimension (or a plain pool when the windows tile the input); adaptive max pooling
gathers each window, padded to the widest one by repeating its last element, and takes the
first maximum.

>>> import labkit as lk
>>> import labkit.nn.functional as F
>>> F.adaptive_avg_pool2d(lk.arange(16.0).reshape(1, 4, 4), 1).tolist()
[[[7.5]]]
"""
import numpy as np

from ...errors import ShapeError, describe
from ...tensor import creation
from ...tensor.ops.composite import mean, squeeze, unsqueeze
from ...tensor.ops.conv import avg_pool2d as _avg_pool2d
from ...tensor.ops.conv import max_pool2d as _max_pool2d
from ...tensor.ops.index import _gather, take
from ...tensor.ops.linalg import matmul, matmul_t
from ...tensor.ops.reduce import argmax
from ...tensor.ops.shape import broadcast_to, permute, reshape
from .conv import batched, one


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over each window of (N, C, H, W) or (C, H, W) ``input``; ``stride`` defaults to
    ``kernel_size``. With ``return_indices=True`` also where each maximum is (an index into
    the flattened H*W plane, as ``F.max_unpool2d`` reads it).

    >>> import labkit as lk
    >>> lk.nn.functional.max_pool2d(lk.arange(9.0).reshape(1, 3, 3), 2, ceil_mode=True).tolist()
    [[[4.0, 5.0], [7.0, 8.0]]]
    """
    return batched(lambda x: _max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode,
                                         return_indices), input, 2, "max_pool2d")


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over each window of (N, C, L) or (C, L) ``input``.

    >>> import labkit as lk
    >>> lk.nn.functional.max_pool1d(lk.tensor([[1.0, 3.0, 2.0, 0.0]]), 2).tolist()
    [[3.0, 2.0]]
    """
    k = one(kernel_size, "kernel_size")
    s = k if stride is None or stride == () else one(stride, "stride")

    def run(x):
        out = _max_pool2d(unsqueeze(x, 2), (1, k), (1, s), (0, one(padding, "padding")),
                          (1, one(dilation, "dilation")), ceil_mode, return_indices)
        return tuple(squeeze(o, 2) for o in out) if return_indices else squeeze(out, 2)
    return batched(run, input, 1, "max_pool1d")


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Mean over each window of (N, C, H, W) or (C, H, W) ``input``.

    >>> import labkit as lk
    >>> lk.nn.functional.avg_pool2d(lk.ones(1, 1, 4, 4), 2).shape
    (1, 1, 2, 2)
    """
    return batched(lambda x: _avg_pool2d(x, kernel_size, stride, padding, ceil_mode,
                                         count_include_pad, divisor_override),
                   input, 2, "avg_pool2d")


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """Mean over each window of (N, C, L) or (C, L) ``input``.

    >>> import labkit as lk
    >>> lk.nn.functional.avg_pool1d(lk.tensor([[1.0, 3.0, 2.0, 0.0]]), 2).tolist()
    [[2.0, 1.0]]
    """
    k = one(kernel_size, "kernel_size")
    s = k if stride is None or stride == () else one(stride, "stride")
    return batched(lambda x: squeeze(_avg_pool2d(unsqueeze(x, 2), (1, k), (1, s),
                                                 (0, one(padding, "padding")), ceil_mode,
                                                 count_include_pad), 2),
                   input, 1, "avg_pool1d")


# ---- adaptive pools ---------------------------------------------------------------------------
def _output_size(name, x, output_size, spatial):
    sizes = (output_size,) * spatial if not isinstance(output_size, (tuple, list)) \
        else tuple(output_size)
    if len(sizes) != spatial:
        raise ShapeError(f"{name}: output_size {output_size} must give {spatial} size(s)")
    sizes = tuple(x.shape[-spatial + i] if s is None else int(s) for i, s in enumerate(sizes))
    if any(s <= 0 for s in sizes):
        raise ShapeError(f"{name}: output_size {output_size} must be positive")
    if any(n == 0 for n in x.shape[-spatial:]):
        raise ShapeError(f"{name}: the input {describe(x)} has an empty spatial dimension")
    return sizes


def _bounds(size, out):
    """PyTorch's adaptive windows: ``[floor(i*size/out), ceil((i+1)*size/out))``."""
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)


def _averaging(size, out, dtype, device):
    """(out, size) matrix whose rows average each adaptive window."""
    start, end = _bounds(size, out)
    a = np.zeros((out, size))
    for i, (s, e) in enumerate(zip(start, end)):
        a[i, s:e] = 1.0 / (e - s)
    return creation.tensor(a.astype(dtype.np), device=device)


def _adaptive_avg(x, sizes):
    (h, w), (oh, ow) = x.shape[-2:], sizes
    if (oh, ow) == (1, 1):
        return mean(x, dim=(-2, -1), keepdim=True)
    if h % oh == 0 and w % ow == 0:
        return _avg_pool2d(x, (h // oh, w // ow), (h // oh, w // ow))
    x = matmul_t(x, _averaging(w, ow, x.dtype, x.device), transpose_b=True)   # (..., H, OW)
    return matmul(_averaging(h, oh, x.dtype, x.device), x)


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to a fixed ``output_size`` (an int, or (h, w) with None for "as the
    input") whatever the input's size, with PyTorch's windows.

    >>> import labkit as lk
    >>> lk.nn.functional.adaptive_avg_pool2d(lk.ones(2, 3, 7, 5), (3, None)).shape
    (2, 3, 3, 5)
    """
    sizes = _output_size("adaptive_avg_pool2d", input, output_size, 2)
    return batched(lambda x: _adaptive_avg(x, sizes), input, 2, "adaptive_avg_pool2d")


def adaptive_avg_pool1d(input, output_size):
    """Average pooling of (N, C, L) or (C, L) ``input`` to ``output_size`` positions.

    >>> import labkit as lk
    >>> lk.nn.functional.adaptive_avg_pool1d(lk.tensor([[1.0, 2.0, 3.0]]), 2).tolist()
    [[1.5, 2.5]]
    """
    (size,) = _output_size("adaptive_avg_pool1d", input, output_size, 1)
    return batched(lambda x: squeeze(_adaptive_avg(unsqueeze(x, 2), (1, size)), 2),
                   input, 1, "adaptive_avg_pool1d")


def _window_index(size, out):
    """(out, widest) positions of each adaptive window, the short ones padded with their last."""
    start, end = _bounds(size, out)
    widest = int((end - start).max())
    return np.minimum(start[:, None] + np.arange(widest), end[:, None] - 1)


def _adaptive_max(x, sizes, return_indices):
    n, c, h, w = x.shape
    (oh, ow) = sizes
    rows, cols = _window_index(h, oh), _window_index(w, ow)
    kh, kw = rows.shape[1], cols.shape[1]
    t = take(x, creation.tensor(rows, device=x.device), dim=2)           # (N, C, OH, kh, W)
    t = take(t, creation.tensor(cols, device=x.device), dim=4)           # (..., kh, OW, kw)
    t = reshape(permute(t, dims=(0, 1, 2, 4, 3, 5)), shape=(n, c, oh, ow, kh * kw))
    where_max = argmax(t, dim=4, keepdim=True)
    out = reshape(_gather(t, where_max, dim=4), shape=(n, c, oh, ow))
    if not return_indices:
        return out
    plane = (rows[:, None, :, None] * w + cols[None, :, None, :]).reshape(oh, ow, kh * kw)
    plane = broadcast_to(creation.tensor(plane, device=x.device), shape=(n, c, oh, ow, kh * kw))
    return out, reshape(_gather(plane, where_max, dim=4), shape=(n, c, oh, ow))


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max pooling to a fixed ``output_size`` whatever the input's size (PyTorch's windows);
    the gradient goes to each window's first maximum.

    >>> import labkit as lk
    >>> lk.nn.functional.adaptive_max_pool2d(lk.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
    [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    sizes = _output_size("adaptive_max_pool2d", input, output_size, 2)
    return batched(lambda x: _adaptive_max(x, sizes, return_indices), input, 2,
                   "adaptive_max_pool2d")


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max pooling of (N, C, L) or (C, L) ``input`` to ``output_size`` positions.

    >>> import labkit as lk
    >>> lk.nn.functional.adaptive_max_pool1d(lk.tensor([[1.0, 3.0, 2.0]]), 2).tolist()
    [[3.0, 3.0]]
    """
    (size,) = _output_size("adaptive_max_pool1d", input, output_size, 1)

    def run(x):
        out = _adaptive_max(unsqueeze(x, 2), (1, size), return_indices)
        return tuple(squeeze(o, 2) for o in out) if return_indices else squeeze(out, 2)
    return batched(run, input, 1, "adaptive_max_pool1d")
