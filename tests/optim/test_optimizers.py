"""Optimisers: a few steps on a quadratic against PyTorch's update formulas written out in NumPy,
plus zero_grad, parameter groups, state_dict round trips and argument errors."""
import numpy as np
import pytest

import labkit as lk
from labkit import nn, optim

A = np.array([1.0, 3.0, 0.5, 2.0])          # f(p) = 0.5 * sum(A * (p - C)^2), grad = A (p - C)
C = np.array([0.5, -1.0, 2.0, 0.0])
P0 = np.array([2.0, 1.0, -1.0, 0.3])


def grad(p):
    return A * (p - C)


# ---- PyTorch's formulas (torch.optim docs), in float64 NumPy --------------------------------
def ref_sgd(steps, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    p, buf = P0.copy(), None
    for _ in range(steps):
        g = grad(p) + weight_decay * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
    return p


def ref_adagrad(steps, lr, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
                eps=1e-10):
    p, s = P0.copy(), np.full(4, initial_accumulator_value)
    for t in range(1, steps + 1):
        g = grad(p) + weight_decay * p
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g * g
        p = p - clr * g / (np.sqrt(s) + eps)
    return p


def ref_rmsprop(steps, lr, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                centered=False):
    p, v, ga, buf = P0.copy(), np.zeros(4), np.zeros(4), np.zeros(4)
    for _ in range(steps):
        g = grad(p) + weight_decay * p
        v = alpha * v + (1 - alpha) * g * g
        if centered:
            ga = alpha * ga + (1 - alpha) * g
            avg = np.sqrt(v - ga * ga) + eps
        else:
            avg = np.sqrt(v) + eps
        if momentum > 0:
            buf = momentum * buf + g / avg
            p = p - lr * buf
        else:
            p = p - lr * g / avg
    return p


def ref_adam(steps, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False):
    b1, b2 = betas
    p, m, v, vmax = P0.copy(), np.zeros(4), np.zeros(4), np.zeros(4)
    for t in range(1, steps + 1):
        g = grad(p) + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat = m / (1 - b1 ** t)
        if amsgrad:
            vmax = np.maximum(vmax, v)
            v_hat = vmax / (1 - b2 ** t)
        else:
            v_hat = v / (1 - b2 ** t)
        p = p - lr * m_hat / (np.sqrt(v_hat) + eps)
    return p


CASES = [
    (optim.SGD, ref_sgd, dict(lr=0.1)),
    (optim.SGD, ref_sgd, dict(lr=0.05, momentum=0.9)),
    (optim.SGD, ref_sgd, dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.1)),
    (optim.SGD, ref_sgd, dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.01)),
    (optim.Adagrad, ref_adagrad, dict(lr=0.3)),
    (optim.Adagrad, ref_adagrad, dict(lr=0.3, lr_decay=0.1, weight_decay=0.05,
                                      initial_accumulator_value=0.2)),
    (optim.RMSProp, ref_rmsprop, dict(lr=0.01)),
    (optim.RMSProp, ref_rmsprop, dict(lr=0.01, alpha=0.9, momentum=0.5, weight_decay=0.1)),
    (optim.RMSProp, ref_rmsprop, dict(lr=0.01, alpha=0.8, centered=True, momentum=0.3)),
    (optim.Adam, ref_adam, dict(lr=0.1)),
    (optim.Adam, ref_adam, dict(lr=0.05, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1)),
    (optim.Adam, ref_adam, dict(lr=0.05, amsgrad=True)),
]


def more_steps(p, opt, steps):
    a, c = lk.tensor(A, dtype=p.dtype, device=p.device), lk.tensor(C, dtype=p.dtype,
                                                                   device=p.device)
    for _ in range(steps):
        opt.zero_grad()
        (0.5 * a * (p - c) ** 2).sum().backward()
        opt.step()


def run(cls, kwargs, steps):
    p = nn.Parameter(lk.tensor(P0, dtype=lk.float64))
    opt = cls([p], **kwargs)
    more_steps(p, opt, steps)
    return p, opt


@pytest.mark.parametrize("cls,ref,kwargs", CASES,
                         ids=[f"{c.__name__}-{i}" for i, (c, _, _) in enumerate(CASES)])
def test_steps_match_pytorch_formulas(cls, ref, kwargs):
    p, _ = run(cls, kwargs, steps=5)
    np.testing.assert_allclose(p.detach().numpy(), ref(5, **kwargs), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cls,ref,kwargs", CASES[1::3], ids=lambda v: getattr(v, "__name__", ""))
def test_float32_and_device(cls, ref, kwargs, device):
    p = nn.Parameter(lk.tensor(P0, dtype=lk.float32, device=device))
    more_steps(p, cls([p], **kwargs), 5)
    assert p.dtype is lk.float32 and p.device.name == device
    np.testing.assert_allclose(p.detach().numpy(), ref(5, **kwargs), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cls,ref,kwargs", CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_state_dict_round_trip_continues_identically(cls, ref, kwargs):
    p1, opt1 = run(cls, kwargs, steps=3)
    saved = opt1.state_dict()
    p2 = nn.Parameter(lk.tensor(p1.detach().numpy().copy(), dtype=lk.float64))
    opt2 = cls([p2], lr=123.0)                 # hyperparameters come back from the state dict
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["lr"] == kwargs["lr"]
    more_steps(p1, opt1, 2)
    more_steps(p2, opt2, 2)
    np.testing.assert_array_equal(p2.detach().numpy(), p1.detach().numpy())
    np.testing.assert_allclose(p2.detach().numpy(), ref(5, **kwargs), rtol=1e-12, atol=1e-12)


def test_state_dict_is_a_snapshot():
    p, opt = run(optim.Adam, dict(lr=0.1), steps=2)
    saved = opt.state_dict()
    m = saved["state"][0]["exp_avg"].numpy().copy()
    assert saved["state"][0]["step"] == 2 and saved["param_groups"][0]["params"] == [0]
    a = lk.tensor(A, dtype=lk.float64)
    (a * p).sum().backward()
    opt.step()
    np.testing.assert_array_equal(saved["state"][0]["exp_avg"].numpy(), m)


def test_load_state_dict_errors():
    _, opt = run(optim.SGD, dict(lr=0.1, momentum=0.9), steps=1)
    other = optim.SGD([nn.Parameter(lk.zeros(4)), nn.Parameter(lk.zeros(2))], lr=0.1)
    with pytest.raises(optim.OptimizerStateError, match="saved with 1 parameters, but has 2"):
        other.load_state_dict(opt.state_dict())
    wrong_shape = optim.SGD([nn.Parameter(lk.zeros(3))], lr=0.1)
    with pytest.raises(optim.OptimizerStateError, match="momentum_buffer.*shape"):
        wrong_shape.load_state_dict(opt.state_dict())
    with pytest.raises(optim.OptimizerStateError, match="param_groups"):
        wrong_shape.load_state_dict({"lr": 0.1})


def test_zero_grad_and_params_without_grad():
    a, b = nn.Parameter(lk.ones(2)), nn.Parameter(lk.ones(2))
    opt = optim.SGD([a, b], lr=0.5)
    (a * 3).sum().backward()
    opt.step()                                      # b has no grad: left alone
    assert a.tolist() == [-0.5, -0.5] and b.tolist() == [1.0, 1.0]
    opt.zero_grad(set_to_none=False)
    assert a.grad.tolist() == [0.0, 0.0] and b.grad is None
    opt.zero_grad()
    assert a.grad is None


def test_step_never_writes_into_gradients():
    # d(a + b)/da and d(a + b)/db can be one shared array: an update must not modify it
    a, b = nn.Parameter(lk.ones(3)), nn.Parameter(lk.ones(3))
    (a + b).sum().backward()
    before = a.grad.numpy().copy(), b.grad.numpy().copy()
    optim.SGD([a, b], lr=0.1, momentum=0.9, weight_decay=0.5, nesterov=True).step()
    np.testing.assert_array_equal(a.grad.numpy(), before[0])
    np.testing.assert_array_equal(b.grad.numpy(), before[1])
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy())


def test_param_groups_and_closure():
    body, head = nn.Linear(2, 2), nn.Linear(2, 1)
    opt = optim.SGD([{"params": body.parameters()},
                     {"params": head.parameters(), "lr": 0.0}], lr=0.1, momentum=0.5)
    assert opt.param_groups[1]["momentum"] == 0.5 and opt.param_groups[1]["lr"] == 0.0
    before = head.weight.detach().numpy().copy(), body.weight.detach().numpy().copy()

    def closure():
        opt.zero_grad()
        loss = head(body(lk.ones(4, 2))).sum()
        loss.backward()
        return loss
    loss = opt.step(closure)
    assert isinstance(loss, lk.Tensor)
    np.testing.assert_array_equal(head.weight.detach().numpy(), before[0])
    assert not np.array_equal(body.weight.detach().numpy(), before[1])
    assert "Parameter Group 1" in repr(opt) and "lr: 0.0" in repr(opt)


def test_argument_errors():
    w = nn.Parameter(lk.ones(2))
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.Adam([])
    with pytest.raises(TypeError, match="iterable of tensors"):
        optim.Adam(w)
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([w], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="learning rate"):
        optim.RMSProp([w], lr=-1)
    with pytest.raises(ValueError, match="betas"):
        optim.Adam([w], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="not a leaf"):
        optim.SGD([w * 2], lr=0.1)
    with pytest.raises(ValueError, match="appears twice"):
        optim.SGD([w, w], lr=0.1)
    assert optim.RMSprop is optim.RMSProp


def test_checkpoint_of_model_and_optimiser_resumes_training(tmp_path):
    def batches():
        rng = np.random.default_rng(0)
        for _ in range(6):
            yield lk.tensor(rng.standard_normal((8, 3))), lk.tensor(rng.integers(0, 2, 8))

    def train(model, opt, data):
        for x, y in data:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x.float()), y).backward()
            opt.step()

    lk.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = optim.Adam(model.parameters(), lr=0.05, betas=(0.8, 0.9))
    data = list(batches())
    train(model, opt, data[:3])
    lk.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, tmp_path / "ckpt.lk")

    restored = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    restored_opt = optim.Adam(restored.parameters())
    checkpoint = lk.load(tmp_path / "ckpt.lk")
    restored.load_state_dict(checkpoint["model"])
    restored_opt.load_state_dict(checkpoint["optimizer"])
    assert restored_opt.param_groups[0]["betas"] == (0.8, 0.9)
    train(model, opt, data[3:])
    train(restored, restored_opt, data[3:])
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(restored.state_dict()[key].numpy(), value.numpy())
