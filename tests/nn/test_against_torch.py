"""Cross-checks against PyTorch itself, where it is installed (the bench extra): same state_dict
keys and shapes, same outputs and gradients for the same weights, same optimiser trajectories.
Skipped when PyTorch is missing."""
import numpy as np
import pytest

import labkit as lk
from labkit import nn, optim

torch = pytest.importorskip("torch")


def torch_copy(module, torch_module):
    torch_module.load_state_dict({k: torch.tensor(v.numpy()) for k, v in
                                  module.state_dict().items()})    # strict: same keys, shapes
    return torch_module


@pytest.mark.parametrize("make,make_torch,shape", [
    (lambda: nn.LSTM(3, 5, num_layers=2, batch_first=True),
     lambda: torch.nn.LSTM(3, 5, num_layers=2, batch_first=True), (4, 7, 3)),
    (lambda: nn.RNN(3, 5, num_layers=2), lambda: torch.nn.RNN(3, 5, num_layers=2), (7, 4, 3)),
    (lambda: nn.Conv2d(3, 4, 3, stride=2, padding=1, dilation=2),
     lambda: torch.nn.Conv2d(3, 4, 3, stride=2, padding=1, dilation=2), (2, 3, 9, 9)),
    (lambda: nn.Linear(6, 2), lambda: torch.nn.Linear(6, 2), (5, 6)),
], ids=["lstm", "rnn", "conv2d", "linear"])
def test_layers_match_torch(make, make_torch, shape):
    ours = make()
    theirs = torch_copy(ours, make_torch())
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out, ref = ours(lk.tensor(x)), theirs(torch.tensor(x))
    out, ref = (out[0], ref[0]) if isinstance(out, tuple) else (out, ref)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-4, atol=1e-5)
    (out * out).sum().backward()
    (ref * ref).sum().backward()
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), theirs.get_parameter(name).grad.numpy(),
                                   rtol=1e-4, atol=1e-5, err_msg=name)


def test_cross_entropy_matches_torch():
    x = np.random.default_rng(1).standard_normal((8, 5, 3)).astype(np.float32)
    t = np.random.default_rng(2).integers(0, 5, (8, 3))
    for reduction in ("mean", "sum", "none"):
        ours = nn.functional.cross_entropy(lk.tensor(x), lk.tensor(t), reduction=reduction)
        ref = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(t),
                                                reduction=reduction)
        np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,kwargs", [
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.01)),
    ("RMSProp", dict(lr=0.01, momentum=0.5, centered=True, weight_decay=0.01)),
    ("Adam", dict(lr=0.01, weight_decay=0.01, amsgrad=True)),
])
def test_optimiser_trajectories_match_torch(name, kwargs):
    torch_cls = getattr(torch.optim, "RMSprop" if name == "RMSProp" else name)
    lk.manual_seed(0)
    ours = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).double()
    theirs = torch_copy(ours, torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(),
                                                  torch.nn.Linear(8, 3)).double())
    opt, topt = getattr(optim, name)(ours.parameters(), **kwargs), \
        torch_cls(theirs.parameters(), **kwargs)
    rng = np.random.default_rng(0)
    for _ in range(10):
        x, y = rng.standard_normal((16, 4)), rng.integers(0, 3, 16)
        opt.zero_grad()
        nn.functional.cross_entropy(ours(lk.tensor(x)), lk.tensor(y)).backward()
        opt.step()
        topt.zero_grad()
        torch.nn.functional.cross_entropy(theirs(torch.tensor(x)), torch.tensor(y)).backward()
        topt.step()
    for key, value in ours.state_dict().items():
        np.testing.assert_allclose(value.numpy(), theirs.state_dict()[key].numpy(), rtol=1e-9,
                                   atol=1e-12, err_msg=key)
