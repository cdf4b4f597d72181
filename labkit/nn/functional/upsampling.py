"""``F.interpolate`` (and ``F.upsample``): resizing (N, C, *spatial) tensors with PyTorch's
source positions, one spatial dimension at a time.

'nearest' and 'nearest-exact' pick one source row per output row (an index lookup); 'linear',
'bilinear' and 'trilinear' blend the two neighbouring rows with PyTorch's weights
(``align_corners`` as in PyTorch); 'area' is adaptive average pooling. The source positions
are computed in the input's precision, as PyTorch's kernels do, so the rows chosen agree at
the boundaries too.

>>> import labkit as lk
>>> import labkit.nn.functional as F
>>> F.interpolate(lk.tensor([[[1.0, 2.0]]]), scale_factor=2).tolist()
[[[1.0, 1.0, 2.0, 2.0]]]
>>> F.interpolate(lk.tensor([[[1.0, 2.0]]]), size=3, mode="linear", align_corners=True).tolist()
[[[1.0, 1.5, 2.0]]]
"""
import math

import numpy as np

from ...errors import ShapeError, describe
from ...tensor import arguments, creation
from ...tensor.ops.elementwise import add, mul
from ...tensor.ops.index import take

_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}
MODES = ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "area")


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dimensions (all but N and C) of ``input`` to ``size``, or by
    ``scale_factor`` (the output size is ``floor(size * scale_factor)``).

    >>> import labkit as lk
    >>> lk.nn.functional.interpolate(lk.ones(1, 3, 4, 4), scale_factor=1.5,
    ...                              mode="bilinear").shape
    (1, 3, 6, 6)
    """
    if mode not in MODES:
        hint = " (bicubic is not implemented; use 'bilinear')" if mode == "bicubic" else ""
        raise ValueError(f"interpolate: mode={mode!r} is not one of {', '.join(MODES)}{hint}")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not implemented; resize "
                                  "without it (or smooth first with avg_pool2d)")
    spatial = input.ndim - 2
    if spatial < 1:
        raise ShapeError(f"interpolate: needs (N, C, *spatial) input, got {describe(input)}")
    if mode in _LINEAR and _LINEAR[mode] != spatial:
        raise ShapeError(f"interpolate: mode={mode!r} needs a {_LINEAR[mode] + 2}-d input; got "
                         f"{describe(input)} (use 'linear' for 3-d, 'bilinear' for 4-d, "
                         f"'trilinear' for 5-d)")
    if align_corners is not None and mode not in _LINEAR:
        raise ValueError(f"interpolate: align_corners only applies to the linear modes, not "
                         f"mode={mode!r}; leave it out")
    in_sizes = tuple(input.shape[2:])
    out_sizes, scales = _sizes(in_sizes, size, scale_factor, recompute_scale_factor, spatial)
    if mode == "area":
        from .pooling import adaptive_avg_pool1d, adaptive_avg_pool2d
        if spatial > 2:
            raise NotImplementedError("interpolate: mode='area' is implemented for 3-d and 4-d "
                                      "inputs")
        return (adaptive_avg_pool1d if spatial == 1 else adaptive_avg_pool2d)(input, out_sizes)
    x = input
    for d, (n_in, n_out, scale) in enumerate(zip(in_sizes, out_sizes, scales)):
        dim = d + 2
        if mode in ("nearest", "nearest-exact"):
            if n_in != n_out:
                x = take(x, _index(_nearest(n_in, n_out, scale, mode), x), dim=dim)
        else:
            x = _blend(x, dim, n_in, n_out, scale, bool(align_corners))
    return x


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """PyTorch's older name for ``interpolate``."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def _sizes(in_sizes, size, scale_factor, recompute, spatial):
    """Output sizes, and the scale each dimension's source positions use (None: in/out)."""
    if (size is None) == (scale_factor is None):
        raise ShapeError("interpolate: give exactly one of size and scale_factor")
    if size is not None:
        sizes = arguments.size("interpolate", (size,) if isinstance(size, (tuple, list))
                               else ((size,) * spatial,))
        if len(sizes) != spatial:
            raise ShapeError(f"interpolate: size {size} must give {spatial} size(s) for the "
                             f"input's {spatial} spatial dimension(s)")
    else:
        factors = tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) \
            else (scale_factor,) * spatial
        if len(factors) != spatial:
            raise ShapeError(f"interpolate: scale_factor {scale_factor} must give {spatial} "
                             f"factor(s)")
        for f in factors:
            if not math.isfinite(arguments.number("interpolate", "scale_factor", f)):
                raise ShapeError(f"interpolate: scale_factor must be finite, got {f}")
        sizes = tuple(int(math.floor(float(n) * float(f))) for n, f in zip(in_sizes, factors))
    if min(sizes) <= 0 < min(in_sizes):
        raise ShapeError(f"interpolate: the output sizes {sizes} must be greater than 0 (input "
                         f"sizes {tuple(in_sizes)}); give a larger size or scale_factor")
    if size is not None:
        return sizes, (None,) * spatial
    return sizes, ((None,) * spatial if recompute else tuple(float(f) for f in factors))


def _ratio(n_in, n_out, scale, dtype):
    return dtype(1.0 / scale) if scale is not None and scale > 0 else \
        dtype(n_in) / dtype(n_out)


def _nearest(n_in, n_out, scale, mode):
    # PyTorch's nearest kernels work in float32 whatever the data type
    ratio = _ratio(n_in, n_out, scale, np.float32)
    pos = np.arange(n_out, dtype=np.float32)
    if mode == "nearest-exact":
        pos = pos + np.float32(0.5)
    return np.minimum(np.floor(pos * ratio).astype(np.int64), n_in - 1)


def _index(array, like):
    return creation.tensor(array, device=like.device)


def _blend(x, dim, n_in, n_out, scale, align_corners):
    """Linear interpolation along ``dim``: each output row from its two neighbouring rows."""
    dtype = np.dtype(x.dtype.np).type
    dst = np.arange(n_out, dtype=dtype)
    if align_corners:
        ratio = dtype(n_in - 1) / dtype(n_out - 1) if n_out > 1 else dtype(0)
        src = dst * ratio
    else:
        src = np.maximum((dst + dtype(0.5)) * _ratio(n_in, n_out, scale, dtype) - dtype(0.5), 0)
    lo = src.astype(np.int64)
    hi = lo + (lo < n_in - 1)
    w_hi = np.clip(src - lo, 0, 1).astype(dtype)
    w_lo = (dtype(1) - w_hi).astype(dtype)
    shape = (n_out,) + (1,) * (x.ndim - dim - 1)
    return add(mul(take(x, _index(lo, x), dim=dim), _index(w_lo.reshape(shape), x)),
               mul(take(x, _index(hi, x), dim=dim), _index(w_hi.reshape(shape), x)))
