"""lk.quantization.quantize_dynamic and lk.nn.quantized.dynamic.Linear, as PyTorch's: accuracy
kept on the digits, which modules are replaced (checked against PyTorch's choice), the weight
scheme, copies, eval mode, capture, inference mode, checkpoints, and clear errors."""
import warnings

import numpy as np
import pytest
import torch

import labkit as lk
from labkit.quantization import (default_dynamic_qconfig, per_channel_dynamic_qconfig,
                                 quantize_dynamic)

QLinear = lk.nn.quantized.dynamic.Linear
F = lk.nn.functional


def _mlp():
    return lk.nn.Sequential(lk.nn.Flatten(), lk.nn.Linear(64, 64), lk.nn.ReLU(),
                            lk.nn.Linear(64, 10))


@pytest.fixture(scope="module")
def digits_model():
    """An MLP trained briefly on the digits, and the test split."""
    lk.manual_seed(0)
    train, test = lk.data.digits()
    model = _mlp()
    opt = lk.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(5):
        for x, y in lk.data.DataLoader(train, batch_size=64, shuffle=True):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    return model.eval(), test.tensors


def _accuracy(model, x, y):
    return (model(x).argmax(1) == y).float().mean().item()


@pytest.mark.parametrize("qconfig", [default_dynamic_qconfig, per_channel_dynamic_qconfig])
def test_mlp_on_digits_loses_less_than_a_point(digits_model, qconfig):
    model, (x, y) = digits_model
    before = _accuracy(model, x, y)
    qmodel = quantize_dynamic(model, {lk.nn.Linear: qconfig})
    assert before > 0.9
    assert _accuracy(qmodel, x, y) > before - 0.01
    agree = (qmodel(x).argmax(1) == model(x).argmax(1)).float().mean().item()
    assert agree > 0.98
    np.testing.assert_allclose(qmodel(x).detach().numpy(), model(x).detach().numpy(), atol=0.15)


# ---- copies, eval mode, which modules ---------------------------------------------------------
def test_the_original_is_untouched_unless_inplace():
    model = _mlp()
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    qmodel = quantize_dynamic(model)
    assert type(model[1]) is lk.nn.Linear and model.training
    assert type(qmodel[1]) is QLinear and type(qmodel[3]) is QLinear
    assert not qmodel.training and not any(m.training for m in qmodel.modules())
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), state[k])
    same = quantize_dynamic(model, inplace=True)
    assert same is model and type(model[1]) is QLinear and not model.training


def test_a_linear_model_itself_is_replaced():
    layer = lk.nn.Linear(4, 3)
    q = quantize_dynamic(layer)
    assert type(q) is QLinear and type(layer) is lk.nn.Linear
    assert type(quantize_dynamic(layer, {"": None})) is lk.nn.Linear


def _nested(lib):
    return lib.nn.Sequential(lib.nn.Linear(4, 4),
                             lib.nn.Sequential(lib.nn.Linear(4, 4), lib.nn.ReLU()),
                             lib.nn.Linear(4, 4))


def _spec(lib, name):
    q = lib.ao.quantization if lib is torch else lk.quantization
    return {"none": None, "types": {lib.nn.Linear}, "names": {"0", "1.0"},
            "parent": {"1": q.default_dynamic_qconfig},
            "everything_but": {"": q.default_dynamic_qconfig, "2": None},
            "type_of_parent": {lib.nn.Sequential: q.default_dynamic_qconfig, "1": None},
            "per_channel": {"2": q.per_channel_dynamic_qconfig}}[name]


def _replaced(model, qtype):
    return sorted(name for name, m in model.named_modules() if isinstance(m, qtype))


@pytest.mark.parametrize("spec", ["none", "types", "names", "parent", "everything_but",
                                  "type_of_parent", "per_channel"])
def test_the_modules_replaced_are_those_pytorch_replaces(spec):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.ao.quantization.quantize_dynamic(_nested(torch), _spec(torch, spec))
    ours = quantize_dynamic(_nested(lk), _spec(lk, spec))
    expected = _replaced(theirs, torch.ao.nn.quantized.dynamic.Linear)
    assert _replaced(ours, QLinear) == expected
    assert expected or spec == "none"


def test_types_match_exactly_and_a_qconfig_attribute_wins():
    class MyLinear(lk.nn.Linear):
        pass
    model = lk.nn.Sequential(MyLinear(4, 4), lk.nn.Linear(4, 4), lk.nn.Linear(4, 4))
    model[2].qconfig = per_channel_dynamic_qconfig
    q = quantize_dynamic(model)
    assert type(q[0]) is MyLinear                          # a subclass stays, as in PyTorch
    assert q[1].qscheme == "per_tensor_symmetric" and q[2].qscheme == "per_channel_symmetric"
    model[1].qconfig = None
    assert type(quantize_dynamic(model)[1]) is lk.nn.Linear
    assert "qconfig" not in vars(quantize_dynamic(_mlp())[1])


def test_shared_layers_stay_shared_and_hooks_carry_over():
    shared = lk.nn.Linear(4, 4)
    calls = []
    shared.register_forward_hook(lambda m, args, out: calls.append(out.shape))
    model = lk.nn.Sequential(shared, lk.nn.ReLU(), shared)
    q = quantize_dynamic(model)
    assert q[0] is q[2] and type(q[0]) is QLinear
    q(lk.ones(2, 4))
    assert calls == [(2, 4), (2, 4)]
    assert type(quantize_dynamic(model, {"0"})[2]) is QLinear
    with pytest.raises(ValueError, match="'2', which is the same module as '0' .shared.*name '0'"):
        quantize_dynamic(model, {"2"})


# ---- the weight -------------------------------------------------------------------------------
def test_weights_are_symmetric_int8_with_scale_max_over_127():
    layer = lk.nn.Linear(3, 2)
    with lk.no_grad():
        layer.weight.copy_(lk.tensor([[0.5, -1.27, 0.0031], [0.0, 0.0, 0.0]]))
    per_tensor = QLinear.from_float(layer)
    scale = np.float32(1.27) / np.float32(127)
    assert per_tensor.weight_scale.shape == () and per_tensor.weight_scale.item() == scale
    expected = np.clip(np.rint(np.array([[0.5, -1.27, 0.0031], [0, 0, 0]], np.float32) / scale),
                       -127, 127)
    np.testing.assert_array_equal(per_tensor.weight_int8.numpy(), expected)
    assert per_tensor.weight_int8.dtype is lk.int8
    per_channel = QLinear.from_float(layer, qscheme="per_channel_symmetric")
    np.testing.assert_array_equal(per_channel.weight_scale.numpy(), [scale, 1.0])  # zero row
    np.testing.assert_allclose(per_channel.weight().numpy(), layer.weight.detach().numpy(),
                               atol=scale / 2)
    np.testing.assert_array_equal(per_channel.bias().numpy(), layer.bias.detach().numpy())
    with lk.no_grad():
        layer.weight.zero_()
        layer.bias.add_(1.0)
    assert per_channel.bias().tolist() != layer.bias.tolist()     # a copy, not the same memory
    zero = QLinear.from_float(layer)
    assert zero.weight_scale.item() == 1.0 and not zero.weight_int8.numpy().any()
    np.testing.assert_array_equal(zero(lk.ones(1, 3)).detach().numpy(), layer(lk.ones(1, 3)).detach().numpy())


def test_repr_and_names():
    q = quantize_dynamic(lk.nn.Linear(4, 3, bias=False), {"": per_channel_dynamic_qconfig})
    assert repr(q) == ("DynamicQuantizedLinear(in_features=4, out_features=3, dtype=lk.qint8, "
                       "qscheme=per_channel_symmetric)")
    assert q.bias() is None and sorted(q.state_dict()) == ["weight_int8", "weight_scale"]
    assert list(q.parameters()) == []
    assert lk.qint8 is lk.int8
    assert lk.ao.quantization is lk.quantization
    assert lk.ao.nn.quantized.dynamic.Linear is QLinear
    import labkit.ao.nn.quantized.dynamic as nnqd
    assert nnqd.Linear is QLinear


# ---- running it -------------------------------------------------------------------------------
def test_captured_equals_eager_and_inference_mode(digits_model):
    model, (x, _) = digits_model
    qmodel = quantize_dynamic(model, {lk.nn.Linear: per_channel_dynamic_qconfig})
    eager = qmodel(x).numpy()
    captured = lk.function(qmodel)(x)
    np.testing.assert_array_equal(captured.numpy(), eager)
    with lk.inference_mode():
        out = qmodel(x)
    assert out.is_inference() and not out.requires_grad
    np.testing.assert_array_equal(out.numpy(), eager)


@pytest.mark.parametrize("qconfig", [default_dynamic_qconfig, per_channel_dynamic_qconfig])
def test_state_dict_round_trips_through_save_and_load(tmp_path, qconfig):
    spec = {lk.nn.Linear: qconfig}
    qmodel = quantize_dynamic(_mlp(), spec)
    path = tmp_path / "quantized.safetensors"
    lk.save(qmodel.state_dict(), path)
    fresh = quantize_dynamic(_mlp(), spec)                 # other weights
    fresh.load_state_dict(lk.load(path))
    x = lk.randn(5, 1, 8, 8)
    np.testing.assert_array_equal(fresh(x).numpy(), qmodel(x).numpy())
    assert fresh[1].weight_int8.dtype is lk.int8 and fresh[1].weight_scale.dtype is lk.float32


def test_a_device_gives_the_same_numbers(device):
    qmodel = quantize_dynamic(_mlp())
    x = lk.randn(3, 1, 8, 8)
    expected = qmodel(x).numpy()
    qmodel.to(device)
    assert qmodel[1].weight_int8.device.name == device and qmodel[1].weight_int8.dtype is lk.int8
    np.testing.assert_array_equal(qmodel(x.to(device)).numpy(), expected)


# ---- errors -------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, error, pattern", [
    (dict(dtype=lk.float16), lk.DTypeError, r"dtype=lk.float16 is not supported.*lk.qint8"),
    (dict(dtype=lk.float32), lk.DTypeError, "int8 weights only"),
    (dict(qconfig_spec="1"), TypeError, "got qconfig_spec of type str.*a set of module types"),
    (dict(qconfig_spec={3}), TypeError, "entry 3 is neither a module type nor a submodule name"),
    (dict(qconfig_spec={lk.nn.Linear: "per_channel"}), TypeError,
     r"qconfig_spec\[Linear\] is 'per_channel', not a QConfig.*per_channel_dynamic_qconfig"),
    (dict(qconfig_spec={"fc1": None}), ValueError,
     r"names submodule 'fc1', which the model does not have; its submodules are '', '0', '1', "
     r"'2', '3'"),
    (dict(qconfig_spec={"1.": None}), ValueError, r"submodule '1\.'.*did you mean '1'"),
    (dict(qconfig_spec={"1": lk.quantization.QConfig("dynamic_quint8_per_tensor", "affine")}),
     ValueError, "qscheme 'affine' is not one labkit has"),
    (dict(mapping={lk.nn.Linear: lk.nn.ReLU}), TypeError, "mapping.*has no from_float"),
])
def test_errors_are_clear(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        quantize_dynamic(_mlp(), **kwargs)


def test_other_errors_and_the_warning_for_types_without_a_quantized_version():
    assert type(quantize_dynamic(lk.nn.Linear(2, 2), dtype="qint8")) is QLinear
    with pytest.raises(TypeError, match="from_float needs an lk.nn.Linear, got ReLU"):
        QLinear.from_float(lk.nn.ReLU())
    with pytest.raises(TypeError, match="needs an lk.nn.Module"):
        quantize_dynamic(lambda x: x)
    with pytest.raises(lk.DTypeError, match=r"x must be a float32 tensor.*x.float\(\)"):
        quantize_dynamic(lk.nn.Linear(2, 2))(lk.ones(1, 2, dtype=lk.float64))
    model = lk.nn.Sequential(lk.nn.LSTM(3, 4), lk.nn.Linear(4, 2), lk.nn.GRUCell(2, 2))
    for spec in (None, {lk.nn.LSTM, lk.nn.Linear, lk.nn.GRUCell}, {"": default_dynamic_qconfig}):
        with pytest.warns(UserWarning, match=r"no dynamically quantized GRUCell, LSTM \(PyTorch "
                                             r"has\); these modules stay float: '0', '2'"):
            q = quantize_dynamic(model, spec)
        assert type(q[0]) is lk.nn.LSTM and type(q[1]) is QLinear
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quantize_dynamic(model, {lk.nn.Linear})     # asked for Linear only: nothing to say
        quantize_dynamic(_nested(lk), {lk.nn.Sequential: default_dynamic_qconfig})
