"""Dynamic int8 quantization: the ``quantized_linear_dynamic`` primitive.

``quantized_linear_dynamic(x, weight_int8, weight_scale)`` is a linear layer (no bias) with an
int8 weight, its input quantized to uint8 at run time. Its semantics are exactly those of the ONNX
sequence the exporter emits for it, so onnxruntime gives the same numbers::

    xq, xs, xzp = DynamicQuantizeLinear(x)                  # uint8, per tensor
    acc = MatMulInteger(xq, Transpose(weight_int8), xzp, 0)  # int32
    y = Cast(acc, float32) * (xs * weight_scale)

- ``x``: float32 ``[..., K]``; ``weight_int8``: int8 ``[N, K]`` (PyTorch's Linear layout, out x
  in), zero point 0 (symmetric); ``weight_scale``: float32, shape ``()`` (per tensor) or
  ``(N,)`` (per output channel). The result is float32 ``[..., N]``.
- DynamicQuantizeLinear over the whole of ``x``: ``lo = min(0, min(x))``, ``hi = max(0,
  max(x))``; ``xs = (hi - lo) / 255`` in float32 (1.0 when ``hi == lo``, that is when x is all
  zeros, as onnxruntime does; the output is then 0 whatever the scale);
  ``xzp = round(clip(0 - lo / xs, 0, 255))``; ``xq = clip(round(x / xs) + xzp, 0, 255)``, rounding
  half to even throughout.
- The integer products are accumulated exactly: as integer-valued floats in a float GEMM
  (float32 while ``K * 255 * 127 <= 2**24``, float64 beyond: exact for any K below 2**38), which
  is far faster than NumPy's integer matmul and runs the same on CuPy.

It has no gradient (``vjp=None``): it is for inference. Under ``lk.vmap`` each example is
quantized with its own scale, as calling the op on that example alone would.

>>> import labkit as lk
>>> from labkit.tensor.ops.quantized import quantized_linear_dynamic
>>> x = lk.tensor([[-2.0, 13.9375]])          # x's scale: (13.9375 + 2) / 255 = 0.0625
>>> w = lk.tensor([[1, -2], [127, 0]], dtype=lk.int8)
>>> quantized_linear_dynamic(x, w, lk.tensor(0.5)).tolist()     # x @ (0.5 * w).T
[[-14.9375, -127.0]]
"""
import math
from collections import namedtuple

import numpy as np

from ...errors import DTypeError, ShapeError, describe
from ..creation import zeros
from ..dtypes import float32, int8
from ..op import op
from .composite import stack
from .shape import batch_size, materialized

NAME = "quantized_linear_dynamic"
_F32 = np.float32
_EXACT_IN_FLOAT32 = 2 ** 24 // (255 * 127)   # K up to which float32 sums stay exact integers


def _rule(x, weight_int8, weight_scale):
    shapes = tuple(getattr(a, "shape", ()) for a in (x, weight_int8, weight_scale))
    given = f"Inputs: x {describe(x)}, weight_int8 {describe(weight_int8)}, weight_scale " \
            f"{describe(weight_scale)}."
    for name, value, want in (("x", x, float32), ("weight_scale", weight_scale, float32)):
        if getattr(value, "dtype", None) is not want:
            raise DTypeError(f"{NAME}: {name} must be a float32 tensor, got {describe(value)}. "
                             f"{given} Convert it first ({name}.float()).")
    if getattr(weight_int8, "dtype", None) is not int8:
        raise DTypeError(f"{NAME}: weight_int8 must be an int8 tensor (the quantized weight), "
                         f"got {describe(weight_int8)}. {given} Quantize a float weight with "
                         f"lk.nn.quantized.dynamic.Linear.from_float(linear).")
    xs, ws, ss = shapes
    if len(ws) != 2:
        raise ShapeError(f"{NAME}: weight_int8 must be 2-D (out_features, in_features), got "
                         f"shape {tuple(ws)}. {given}")
    if len(xs) < 1 or xs[-1] != ws[1]:
        raise ShapeError(f"{NAME}: x's last dimension ({xs[-1] if xs else 'none: x is 0-d'}) must "
                         f"equal weight_int8's in_features ({ws[1]}). {given} The weight is "
                         f"(out_features, in_features), as lk.nn.Linear's.")
    if tuple(ss) not in ((), (ws[0],)):
        raise ShapeError(f"{NAME}: weight_scale must have shape () (one scale for the weight) or "
                         f"({ws[0]},) (one per output channel), got {tuple(ss)}. {given}")
    return tuple(xs[:-1]) + (ws[0],), float32


def _dynamic_quantize(xp, x):
    """ONNX DynamicQuantizeLinear of ``x``: ``(xq - xzp, xs)``, the first as integer-valued
    float32 values in [-255, 255]."""
    if x.size:
        lo = xp.minimum(x.min(), _F32(0))
        hi = xp.maximum(x.max(), _F32(0))
    else:
        lo = hi = xp.zeros((), _F32)
    scale = xp.where(hi == lo, _F32(1), (hi - lo) / _F32(255)).astype(_F32)
    zero_point = xp.rint(xp.clip(_F32(0) - lo / scale, _F32(0), _F32(255)))
    q = xp.clip(xp.rint(x / scale) + zero_point, _F32(0), _F32(255))
    return q - zero_point, scale


def _batch(inputs, bdims):
    """Each example has its own activation scale (DynamicQuantizeLinear reads the whole
    example), so the batch runs one example at a time, as the op alone would."""
    size = batch_size(inputs, bdims)
    full = [materialized(x, d, size) for x, d in zip(inputs, bdims)]
    if size == 0:
        shape, dtype = _rule(*[_Example(tuple(t.shape[1:]), t.dtype) for t in full])
        return zeros((0,) + shape, dtype=dtype, device=full[0].device), 0
    return stack([quantized_linear_dynamic(*[t[i] for t in full]) for i in range(size)]), 0


_Example = namedtuple("_Example", "shape dtype")


@op(NAME, shape=_rule, vjp=None, batch=_batch)
def quantized_linear_dynamic(xp, x, weight_int8, weight_scale):
    """``x @ weight_int8.T`` with ``x`` quantized to uint8 at run time (ONNX's
    DynamicQuantizeLinear + MatMulInteger), scaled back to float32 (see the module)."""
    if (x.dtype != _F32 or weight_int8.dtype != np.int8 or weight_scale.dtype != _F32
            or x.ndim == 0 or weight_int8.ndim != 2 or x.shape[-1] != weight_int8.shape[1]
            or weight_scale.shape not in ((), weight_int8.shape[:1])):
        # inputs the arithmetic below might take without failing, but not as the op means:
        # eager mode then asks the shape rule, which says what is wrong
        raise TypeError(f"{NAME}: inputs of the wrong dtypes or shapes")
    n, k = weight_int8.shape
    centred, x_scale = _dynamic_quantize(xp, x)
    acc_dtype = _F32 if k <= _EXACT_IN_FLOAT32 else np.float64
    rows = centred.reshape(math.prod(x.shape[:-1]), k).astype(acc_dtype, copy=False)
    acc = rows @ weight_int8.astype(acc_dtype).T
    y = acc.astype(_F32) * (x_scale * weight_scale)
    return y.reshape(x.shape[:-1] + (n,))
