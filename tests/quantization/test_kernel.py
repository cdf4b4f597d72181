"""The ``quantized_linear_dynamic`` op: bitwise against a NumPy oracle of the ONNX ops it stands
for and against onnxruntime running those ops, on shapes larger than the op-case table's
(both accumulation routes: float32 up to K = 518, float64 beyond); its errors; no gradient;
capture and vmap."""
import importlib

import numpy as np
import pytest

import labkit as lk
from labkit.tensor.ops.quantized import quantized_linear_dynamic

# tests/ is on sys.path (it holds packages, not a package): the op-case table's oracle
oracle = importlib.import_module("tensor.cases.quantized")

SHAPES = [((5,), 7, 3), ((4, 64), 64, 10), ((2, 3, 100), 100, 17), ((3, 518), 518, 5),
          ((3, 519), 519, 5), ((2, 1500), 1500, 9)]


def _inputs(rng, x_shape, n, per_channel, kind="normal"):
    k = x_shape[-1]
    x = rng.standard_normal(x_shape) * rng.choice([1e-3, 1.0, 40.0])
    x = {"normal": x, "positive": np.abs(x) + 0.1, "negative": -np.abs(x) - 0.1,
         "zeros": np.zeros(x_shape), "constant": np.full(x_shape, 2.5)}[kind]
    w = rng.integers(-127, 128, (n, k)).astype(np.int8)
    s = rng.uniform(1e-3, 5e-2, (n,) if per_channel else ())
    return x.astype(np.float32), w, np.asarray(s, np.float32)


def _run(x, w, s, device="cpu:0"):
    return quantized_linear_dynamic(lk.tensor(x, device=device), lk.tensor(w, device=device),
                                    lk.tensor(s, device=device)).numpy()


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("kind", ["normal", "positive", "negative", "zeros", "constant"])
@pytest.mark.parametrize("x_shape, k, n", SHAPES)
def test_bitwise_equal_to_the_onnx_oracle(x_shape, k, n, kind, per_channel, device):
    x, w, s = _inputs(np.random.default_rng(k + n), x_shape, n, per_channel, kind)
    got = _run(x, w, s, device)
    expected = oracle.reference(x, w, s)
    assert got.dtype == np.float32 and got.shape == x_shape[:-1] + (n,)
    np.testing.assert_array_equal(got, expected)


def test_ties_round_half_to_even():
    # x's range is 255 * 0.0625, so x / scale lands on halves: 0.5 -> 0, 1.5 -> 2, -0.5 -> -0
    x = np.array([[-2.0, 13.9375, 0.03125, 0.09375, -0.03125, 0.15625]], np.float32)
    w = np.eye(6, dtype=np.int8)
    y = _run(x, w, np.float32(1.0))
    np.testing.assert_array_equal(y, oracle.reference(x, w, np.float32(1.0)))
    np.testing.assert_array_equal(y[0, 2:], np.array([0.0, 0.125, 0.0, 0.125]) * 1)


def test_a_float_weight_is_recovered_within_a_quantization_step():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 32)).astype(np.float32)
    w = rng.integers(-127, 128, (4, 32)).astype(np.int8)
    y = _run(x, w, np.float32(0.01))
    exact = x.astype(np.float64) @ (w.astype(np.float64) * 0.01).T
    step = (x.max() - x.min()) / 255
    assert np.abs(y - exact).max() <= 0.5 * step * np.abs(w * 0.01).sum(1).max() + 1e-5


# ---- against onnxruntime ------------------------------------------------------------------------
def _onnx_model(x_shape, n, per_channel):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    k = x_shape[-1]
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xzp"]),
             helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
             helper.make_node("MatMulInteger", ["xq", "wt", "xzp", "wzp"], ["acc"]),
             helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["xs", "ws"], ["scale"]),
             helper.make_node("Mul", ["accf", "scale"], ["y"])]
    graph = helper.make_graph(
        nodes, "quantized_linear_dynamic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape)),
         helper.make_tensor_value_info("w", TensorProto.INT8, [n, k]),
         helper.make_tensor_value_info("ws", TensorProto.FLOAT, [n] if per_channel else [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x_shape[:-1]) + [n])],
        initializer=[helper.make_tensor("wzp", TensorProto.INT8, [], [0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


@pytest.mark.parametrize("optimized", [False, True])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("kind", ["normal", "positive", "negative", "zeros"])
@pytest.mark.parametrize("x_shape, k, n", [s for s in SHAPES if len(s[0]) > 1])
def test_bitwise_equal_to_onnxruntime(x_shape, k, n, kind, per_channel, optimized):
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimized
                                        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    session = ort.InferenceSession(_onnx_model(x_shape, n, per_channel), options,
                                   providers=["CPUExecutionProvider"])
    x, w, s = _inputs(np.random.default_rng(k * n), x_shape, n, per_channel, kind)
    (expected,) = session.run(None, {"x": x, "w": w, "ws": s})
    np.testing.assert_array_equal(_run(x, w, s), expected)


# ---- errors, gradient, capture, vmap --------------------------------------------------------
def _args(x_shape=(2, 4), w_shape=(3, 4), s_shape=(), x_dtype="float32", w_dtype="int8",
          s_dtype="float32"):
    return (lk.zeros(x_shape, dtype=x_dtype), lk.zeros(w_shape, dtype=w_dtype),
            lk.ones(s_shape, dtype=s_dtype))


@pytest.mark.parametrize("kwargs, error, pattern", [
    (dict(x_shape=(2, 5)), lk.ShapeError, r"x's last dimension \(5\) must equal weight_int8's "
                                          r"in_features \(4\).*shape=\(2, 5\)"),
    (dict(x_shape=()), lk.ShapeError, "x is 0-d"),
    (dict(w_dtype="float32"), lk.DTypeError, r"weight_int8 must be an int8 tensor.*float32"
                                             r".*from_float"),
    (dict(w_shape=(3, 4, 1)), lk.ShapeError, "weight_int8 must be 2-D"),
    (dict(s_shape=(4,)), lk.ShapeError, r"weight_scale must have shape \(\) .* or \(3,\).*"
                                        r"got \(4,\)"),
    (dict(s_dtype="float64"), lk.DTypeError, r"weight_scale must be a float32.*float64"),
    (dict(x_dtype="float64"), lk.DTypeError, r"x must be a float32 tensor.*x.float\(\)"),
])
def test_errors_name_the_op_shapes_dtypes_and_the_fix(kwargs, error, pattern):
    args = _args(**kwargs)
    with pytest.raises(error, match=pattern) as info:
        quantized_linear_dynamic(*args)
    assert str(info.value).startswith("quantized_linear_dynamic: ")
    with pytest.raises(error, match=pattern):       # the shape rule alone, as capture uses it
        quantized_linear_dynamic.shape(*args)


def test_no_gradient_flows_through_it():
    x = lk.randn(2, 4, requires_grad=True)
    y = quantized_linear_dynamic(x, lk.ones((3, 4), dtype=lk.int8), lk.tensor(0.1))
    assert not y.requires_grad


def test_captured_and_vmapped_equal_eager():
    rng = np.random.default_rng(1)
    x, w, s = (lk.tensor(a) for a in _inputs(rng, (6, 20), 4, True))
    eager = quantized_linear_dynamic(x, w, s).numpy()
    captured = lk.function(lambda a: quantized_linear_dynamic(a, w, s))(x).numpy()
    np.testing.assert_array_equal(captured, eager)
    # each example has its own activation scale: vmap equals the op on each row alone
    rows = lk.vmap(lambda row: quantized_linear_dynamic(row, w, s))(x).numpy()
    for i in range(6):
        np.testing.assert_array_equal(rows[i], quantized_linear_dynamic(x[i], w, s).numpy())
    assert lk.vmap(lambda row: quantized_linear_dynamic(row, w, s))(x[:0]).shape == (0, 4)
