"""Cases for dynamic int8 quantization: ``quantized_linear_dynamic`` against a NumPy oracle of
the ONNX ops it stands for (DynamicQuantizeLinear, MatMulInteger, Cast, Mul), written as ONNX's
reference implementation computes them, with int32 accumulation.

The op takes float32 only, so the case casts its float inputs to float32 (the harness also
runs it on float64 inputs) and the oracle does the same; results must then agree bitwise.
"""
import numpy as np
from hypothesis import strategies as st

from labkit.tensor.ops.quantized import quantized_linear_dynamic

from ..case_kit import Case, Sample, _arr, shapes

F32 = np.float32


def dynamic_quantize_linear(x):
    """ONNX DynamicQuantizeLinear of float32 ``x``: ``(y uint8, y_scale, y_zero_point)``, as
    onnxruntime computes it (scale 1.0 for an all-zero x; ONNX's reference says 1/255 there,
    which changes nothing downstream: every y is then the zero point, 0)."""
    hi = np.maximum(F32(0), x.max()) if x.size else F32(0)
    lo = np.minimum(F32(0), x.min()) if x.size else F32(0)
    scale = F32(1) if hi == lo else F32(hi - lo) / F32(255)
    zero_point = np.rint(np.clip(F32(0) - lo / scale, 0, 255)).astype(np.uint8)
    y = np.clip(np.rint(x / scale) + F32(zero_point), 0, 255).astype(np.uint8)
    return y, F32(scale), zero_point


def reference(x, weight_int8, weight_scale):
    """The ONNX sequence: DynamicQuantizeLinear(x); MatMulInteger(xq, w.T, xzp, 0) in int32;
    Cast(acc, float32) * (xs * weight_scale)."""
    x, weight_scale = x.astype(F32), weight_scale.astype(F32)
    xq, xs, xzp = dynamic_quantize_linear(x)
    k = weight_int8.shape[1]
    a = xq.reshape(int(np.prod(x.shape[:-1])), k).astype(np.int32) - np.int32(xzp)
    acc = a @ weight_int8.astype(np.int32).T
    y = acc.astype(F32) * (xs * weight_scale)
    return y.reshape(x.shape[:-1] + (weight_int8.shape[0],))


def _values(rng, shape, kind):
    x = rng.standard_normal(shape) * rng.choice([1e-3, 1.0, 30.0])
    return {"normal": x, "positive": np.abs(x), "negative": -np.abs(x),
            "zeros": np.zeros(shape)}[kind]


def _build(rng, batch, k, n, per_channel, kind):
    x = _arr(_values(rng, tuple(batch) + (k,), kind))
    w = _arr(rng.integers(-127, 128, (n, k)), np.int8)
    s = _arr(rng.uniform(1e-3, 5e-2, (n,) if per_channel else ()))
    return Sample((x, w, s))


def _fn(x, weight_int8, weight_scale):
    return quantized_linear_dynamic(x.float(), weight_int8, weight_scale.float())


PARAMS = st.fixed_dictionaries({
    "batch": shapes(max_dims=2), "k": st.integers(0, 6), "n": st.integers(0, 4),
    "per_channel": st.booleans(),
    "kind": st.sampled_from(["normal", "normal", "positive", "negative", "zeros"])})
EDGES = [dict(batch=(), k=3, n=2, per_channel=False, kind="normal"),      # 1-D x
         dict(batch=(4,), k=5, n=3, per_channel=True, kind="normal"),
         dict(batch=(2, 3), k=4, n=2, per_channel=False, kind="positive"),
         dict(batch=(3,), k=4, n=2, per_channel=True, kind="negative"),
         dict(batch=(2,), k=3, n=2, per_channel=False, kind="zeros"),     # x's scale 1.0
         dict(batch=(0,), k=3, n=2, per_channel=True, kind="normal"),     # no rows
         dict(batch=(2,), k=0, n=2, per_channel=False, kind="normal"),    # K = 0
         dict(batch=(2,), k=3, n=0, per_channel=True, kind="normal")]     # N = 0

PRIMITIVE_CASES = [
    Case("quantized_linear_dynamic", _fn, reference, _build, PARAMS, EDGES,
         op="quantized_linear_dynamic", differentiable=False, rtol=0, atol=0),
]
