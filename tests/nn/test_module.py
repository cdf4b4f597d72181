"""Module API: registration, traversal, state_dict round trips and their errors, modes, devices,
repr, containers and Parameter."""
import numpy as np
import pytest

import labkit as lk
from labkit import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(4 * 8 * 8, 16), nn.ReLU())
        self.head = nn.Linear(16, 3)
        self.register_buffer("steps", lk.zeros(1))
        self.register_buffer("scratch", lk.zeros(2), persistent=False)
        self.note = "plain attribute"

    def forward(self, x):
        return self.head(self.body(self.conv(x)))


def test_registration_and_traversal():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["conv.weight", "conv.bias", "body.1.weight", "body.1.bias", "head.weight",
                     "head.bias"]
    assert [n for n, _ in net.named_children()] == ["conv", "body", "head"]
    assert [n for n, _ in net.named_modules()] == ["", "conv", "body", "body.0", "body.1",
                                                   "body.2", "head"]
    assert len(list(net.modules())) == 7
    assert [n for n, _ in net.named_buffers()] == ["steps", "scratch"]
    assert net.note == "plain attribute" and "note" not in net._parameters
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in net.parameters())
    assert net.num_parameters() == 4 * 9 + 4 + 256 * 16 + 16 + 16 * 3 + 3
    assert "head" in dir(net)


def test_shared_parameter_counted_once_and_reassignment():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3)
            self.b = nn.Linear(3, 3)
            self.b.weight = self.a.weight
    m = Tied()
    assert len(list(m.parameters())) == 3
    assert set(m.state_dict()) == {"a.weight", "a.bias", "b.weight", "b.bias"}
    m.a = nn.ReLU()                      # replacing a submodule re-registers it
    assert isinstance(m.a, nn.ReLU) and [n for n, _ in m.named_children()] == ["a", "b"]
    del m.b
    assert [n for n, _ in m.named_children()] == ["a"]


def test_assignment_errors_are_explained():
    lin = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="lk.nn.Parameter"):
        lin.weight = lk.ones(2, 2)
    lin.bias = None
    assert lin.bias is None and lin(lk.ones(1, 2)).shape == (1, 2)

    class Forgot(nn.Module):
        def __init__(self):
            self.layer = nn.Linear(2, 2)
    with pytest.raises(AttributeError, match=r"super\(\).__init__\(\)"):
        Forgot()

    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(lk.ones(1))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        nn.Linear(2, 2).nope


def test_call_passes_arguments():
    class Two(nn.Module):
        def forward(self, x, scale=1.0):
            return x * scale
    assert Two()(lk.ones(2), scale=3.0).tolist() == [3.0, 3.0]


def test_state_dict_round_trip():
    a, b = Net(), Net()
    sd = a.state_dict()
    # PyTorch's order: a module's own parameters and buffers, then its children's
    assert list(sd) == ["steps", "conv.weight", "conv.bias", "body.1.weight", "body.1.bias",
                        "head.weight", "head.bias"]
    assert not any(t.requires_grad for t in sd.values())
    assert np.shares_memory(sd["head.weight"].detach().numpy(), a.head.weight.detach().numpy())
    weight_object = b.head.weight
    result = b.load_state_dict(sd)
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert b.head.weight is weight_object                      # loaded in place
    x = lk.randn(2, 1, 8, 8)
    np.testing.assert_array_equal(a(x).detach().numpy(), b(x).detach().numpy())
    # loaded values are copies: changing a afterwards leaves b alone
    a.head.weight._data += 1
    assert not np.allclose(a.head.weight.detach().numpy(), b.head.weight.detach().numpy())


def test_load_state_dict_accepts_numpy_and_casts():
    lin = nn.Linear(2, 3)
    lin.load_state_dict({"weight": np.ones((3, 2)), "bias": np.arange(3)})
    assert lin.weight.dtype is lk.float32 and lin.weight.detach().numpy().sum() == 6
    assert lin.bias.tolist() == [0.0, 1.0, 2.0]


def test_load_state_dict_errors_name_keys_and_shapes():
    net = Net()
    before = net.head.weight.detach().numpy().copy()
    sd = net.state_dict()
    sd = {k: v for k, v in sd.items() if k != "head.bias"}
    sd["head.extra"] = lk.zeros(1)
    sd["head.weight"] = lk.zeros(3, 16) + 5.0
    with pytest.raises(lk.nn.StateDictError) as info:
        net.load_state_dict(sd)
    text = str(info.value)
    assert "missing keys" in text and "head.bias" in text
    assert "unexpected keys" in text and "head.extra" in text
    assert "strict=False" in text
    np.testing.assert_array_equal(net.head.weight.detach().numpy(), before)   # nothing loaded

    result = net.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["head.bias"] and result.unexpected_keys == ["head.extra"]
    assert float(net.head.weight.detach().numpy().min()) == 5.0

    wrong = nn.Linear(2, 4).state_dict()
    with pytest.raises(lk.nn.StateDictError, match=r"weight: the model has \(3, 2\), the state "
                                                   r"dict \(4, 2\)"):
        nn.Linear(2, 3).load_state_dict(wrong, strict=False)
    with pytest.raises(TypeError, match="dict of name"):
        nn.Linear(2, 3).load_state_dict([1, 2])
    assert issubclass(lk.nn.StateDictError, lk.LabkitError)


def test_train_eval_and_zero_grad():
    net = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    assert net.training and net[1].training
    assert net.eval() is net and not net[1].training
    net.train()
    assert net[1].training
    loss = net.eval()(lk.ones(3, 2)).sum()
    loss.backward()
    assert net[0].weight.grad is not None
    net.zero_grad(set_to_none=False)
    assert net[0].weight.grad.numpy().sum() == 0.0 and net[0].weight.grad.shape == (2, 2)
    net.zero_grad()
    assert net[0].weight.grad is None
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


def test_to_dtype_keeps_parameter_objects():
    net = Net()
    w = net.head.weight
    net.to(dtype=lk.float64)
    assert net.head.weight is w and w.dtype is lk.float64
    assert net.steps.dtype is lk.float64
    assert net(lk.randn(1, 1, 8, 8, dtype=lk.float64)).dtype is lk.float64
    net.to(lk.float32)
    assert w.dtype is lk.float32
    assert net.to("float64") is net and w.dtype is lk.float64
    with pytest.raises(lk.DTypeError, match="floating"):
        net.to(dtype=lk.int64)


def test_to_device(device):
    net = Net().to(device)
    assert all(p.device.name == device for p in net.parameters())
    out = net(lk.randn(2, 1, 8, 8, device=device))
    assert out.device.name == device
    out.sum().backward()
    assert net.head.weight.grad.device.name == device
    restored = Net()
    restored.load_state_dict(net.state_dict())            # across devices
    np.testing.assert_allclose(restored.head.weight.detach().numpy(), net.head.weight.detach().numpy())


def test_repr_like_pytorch():
    net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(128, 10, bias=False))
    assert repr(net) == (
        "Sequential(\n"
        "  (0): Conv2d(1, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
        "  (1): ReLU()\n"
        "  (2): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)\n"
        "  (3): Flatten(start_dim=1, end_dim=-1)\n"
        "  (4): Linear(in_features=128, out_features=10, bias=False)\n"
        ")")
    nested = repr(Net())
    assert "(body): Sequential(\n    (0): Flatten" in nested
    assert repr(nn.LSTM(3, 4, num_layers=2, batch_first=True)) == \
        "LSTM(3, 4, num_layers=2, batch_first=True)"
    assert repr(nn.Embedding(10, 3, padding_idx=0)) == "Embedding(10, 3, padding_idx=0)"
    assert repr(nn.Dropout(0.25)) == "Dropout(p=0.25, inplace=False)"
    assert repr(nn.Parameter(lk.zeros(2))).startswith("Parameter containing:\ntensor(")


def test_sequential_and_module_list():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    seq.append(nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[-1], nn.Linear)
    assert isinstance(seq[:2], nn.Sequential) and len(seq[:2]) == 2
    assert seq(lk.ones(4, 2)).shape == (4, 1)
    named = nn.Sequential({"fc": nn.Linear(2, 2), "act": nn.ReLU()})
    assert [n for n, _ in named.named_parameters()] == ["fc.weight", "fc.bias"]
    with pytest.raises(TypeError, match="not an lk.nn.Module"):
        nn.Sequential(lambda x: x)
    blocks = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(list(blocks.parameters())) == 6 and len(blocks[1:]) == 2
    assert [n for n, _ in blocks.named_parameters()][:2] == ["0.weight", "0.bias"]


def test_deepcopy_gives_an_independent_model():
    import copy
    net = Net()
    twin = copy.deepcopy(net)
    assert isinstance(twin.head.weight, nn.Parameter) and twin.head.weight is not net.head.weight
    np.testing.assert_array_equal(twin.head.weight.detach().numpy(), net.head.weight.detach().numpy())
    twin.head.weight._data += 1
    assert not np.array_equal(twin.head.weight.detach().numpy(), net.head.weight.detach().numpy())


def test_apply_visits_every_module():
    seen = []
    Net().apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "Net" and seen.count("Linear") == 2


def test_parameter():
    t = lk.ones(3)
    p = nn.Parameter(t)
    assert p.requires_grad and p.is_leaf and isinstance(p, lk.Tensor)
    assert np.shares_memory(p.detach().numpy(), t.detach().numpy())
    frozen = nn.Parameter(lk.ones(2), requires_grad=False)
    assert not frozen.requires_grad
    with pytest.raises(lk.DTypeError, match="floating"):
        nn.Parameter(lk.tensor([1, 2]))
    view = nn.Parameter(lk.ones(1).expand(3))       # read-only broadcast view: owns a copy
    view._data += 1
    assert view.tolist() == [2.0, 2.0, 2.0]
    assert type(p * 2) is lk.Tensor                  # ops return plain tensors


def test_parameters_take_their_qualified_names_and_graphs_show_them():
    class Net(lk.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = lk.nn.Sequential(lk.nn.Linear(3, 4), lk.nn.ReLU(), lk.nn.Linear(4, 2))
            self.scale = lk.nn.Parameter(lk.ones(1))

        def forward(self, x):
            return self.body(x) * self.scale

    net = Net()
    assert [p.name for p in net.parameters()] == [n for n, _ in net.named_parameters()]
    assert net.body[0].weight.name == "body.0.weight"
    f = lk.function(lambda x: net(x).sum())
    captured = [n.name for n in f.graph(lk.ones(2, 3)).nodes if n.kind == "capture"]
    assert set(captured) == {"body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias",
                             "scale"}
    svg = lk.viz.graph(f, lk.ones(2, 3), collapse=False).svg()
    assert "body.0.weight" in svg and ">Parameter<" not in svg
