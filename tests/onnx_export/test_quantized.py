"""Dynamically quantized models exported as ONNX's integer ops, run in onnxruntime: the same
numbers as labkit's quantized model, a quarter of the weights' bytes."""
import io

import numpy as np
import pytest

import labkit as lk
from labkit import nn

ort = pytest.importorskip("onnxruntime")


def session(proto):
    return ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("qconfig", ["per_tensor", "per_channel"])
def test_quantized_mlp_runs_in_onnxruntime_as_in_labkit(qconfig):
    _ = lk.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    spec = {nn.Linear} if qconfig == "per_tensor" else \
        {nn.Linear: lk.quantization.per_channel_dynamic_qconfig}
    q = lk.quantization.quantize_dynamic(model, spec, dtype=lk.qint8)
    proto = lk.onnx.export(q, (lk.randn(4, 64),), io.BytesIO(), input_names=["x"],
                           dynamic_axes={"x": {0: "batch"}})
    kinds = [n.op_type for n in proto.graph.node]
    assert kinds.count("DynamicQuantizeLinear") == 2 and kinds.count("MatMulInteger") == 2
    weights = [t for t in proto.graph.initializer if t.data_type == 3 and t.dims]   # int8
    assert sorted(tuple(t.dims) for t in weights) == [(64, 256), (256, 10)]
    s = session(proto)
    for n in (4, 1, 37):
        x = lk.randn(n, 64)
        with lk.inference_mode():
            want = q(x).numpy()
        got = s.run(None, {"x": x.numpy()})[0]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_int8_model_is_smaller_and_as_accurate_on_the_digits():
    _ = lk.manual_seed(0)
    train, test = lk.data.digits(test_fraction=0.25, seed=0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = lk.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(4):
        for images, labels in lk.data.DataLoader(train, batch_size=64, shuffle=True):
            opt.zero_grad()
            lk.nn.functional.cross_entropy(model(images), labels).backward()
            opt.step()
    model.eval()
    images, labels = test.tensors
    sizes, accuracy = {}, {}
    for name, m in [("float32", model),
                    ("int8", lk.quantization.quantize_dynamic(model, {nn.Linear}))]:
        buf = io.BytesIO()
        proto = lk.onnx.export(m, (images[:2],), buf, input_names=["image"],
                               dynamic_axes={"image": [0]})
        sizes[name] = len(buf.getvalue())
        scores = session(proto).run(None, {"image": images.numpy()})[0]
        accuracy[name] = float((scores.argmax(1) == labels.numpy()).mean())
    assert accuracy["float32"] > 0.9
    assert accuracy["float32"] - accuracy["int8"] < 0.01
    assert sizes["int8"] < 0.3 * sizes["float32"]
