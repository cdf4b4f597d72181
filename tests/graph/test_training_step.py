"""A whole training step captured as one graph: forward, backward and the optimiser's update.

The digits CNN trained by a captured step (``lk.optim`` inside ``lk.function``) follows the
eager losses; every optimiser's rule gives the eager trajectory when captured; ``zero_grad``
works inside the function before or after the step; optimiser state saved from a captured run
loads back into it; a tensor learning rate can be changed between runs.
"""
import itertools

import numpy as np
import pytest

import labkit as lk
from labkit import nn, optim
from labkit.nn import functional as F


def make_cnn():
    """The digits CNN of examples/train_digits.py."""
    return nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 2 * 2, 10))


@pytest.fixture(scope="module")
def digit_batches():
    train_set, _ = lk.data.digits(test_fraction=0.2, seed=0)
    loader = lk.data.DataLoader(train_set, batch_size=32, shuffle=True, seed=1)
    return list(itertools.islice(loader, 10))


def train(batches, captured, make_model=make_cnn, make_opt=None, seed=0):
    lk.manual_seed(seed)
    model = make_model()
    opt = (make_opt or (lambda ps: optim.Adam(ps, lr=3e-3)))(model.parameters())

    def step(images, labels):
        opt.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
        return loss

    if captured:
        step = lk.function(step)
    losses = [step(x, y).item() for x, y in batches]
    return losses, model, opt, step


def test_captured_step_trains_the_digits_cnn_like_eager(digit_batches):
    lk.manual_seed(0)
    initial = make_cnn()[0].weight.detach().numpy().copy()
    eager, eager_model, eager_opt, _ = train(digit_batches, captured=False)
    captured, model, opt, step = train(digit_batches, captured=True)
    assert np.abs(model[0].weight.detach().numpy() - initial).max() > 1e-3      # the weights moved
    np.testing.assert_allclose(captured, eager, rtol=0, atol=1e-5)
    assert len(step.traces) == 1                             # one graph for all ten steps
    for (name, p), q in zip(model.named_parameters(), eager_model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=name)
    # the optimiser's state advanced inside the graph: step counts and moments
    for p, q in zip(model.parameters(), eager_model.parameters()):
        assert int(opt.state[p]["step"]) == int(eager_opt.state[q]["step"]) == 10
        np.testing.assert_allclose(opt.state[p]["exp_avg_sq"].numpy(),
                                   eager_opt.state[q]["exp_avg_sq"].numpy(), rtol=1e-4,
                                   atol=1e-9)


def test_the_step_graph_holds_forward_backward_and_update(digit_batches):
    _, model, opt, step = train(digit_batches[:1], captured=True)
    graph = step.traces[0].graph
    roles = {n.role for n in graph.nodes}
    assert {"forward", "backward", "update"} <= roles
    updates = [n for n in graph.nodes if n.role == "update"]
    assert all(n.scope.startswith("Adam") for n in updates)
    written = {n.inputs[0].value for n in graph.nodes
               if n.kind == "op" and n.op.writes == 0}
    params = set(model.parameters())
    assert params <= written                                  # every parameter is updated...
    slots = {s for st in opt.state.values() for s in st.values()}
    assert slots <= written                                   # ...and every slot
    names = {n.name for n in graph.nodes if n.kind == "capture"}
    assert any(name.endswith("exp_avg") for name in names)   # slots are named in the graph
    assert any(name.endswith("step") for name in names)


OPTIMISERS = [
    ("SGD", dict(lr=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.01)),
    ("Adagrad", dict(lr=0.3, lr_decay=0.1, weight_decay=0.05, initial_accumulator_value=0.2)),
    ("RMSProp", dict(lr=0.01, alpha=0.9, momentum=0.5, weight_decay=0.1)),
    ("RMSProp", dict(lr=0.01, alpha=0.8, centered=True, momentum=0.3)),
    ("Adam", dict(lr=0.05)),
    ("Adam", dict(lr=0.05, betas=(0.8, 0.9), amsgrad=True, weight_decay=0.1)),
]


def small_mlp():
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).double()


@pytest.fixture(scope="module")
def small_batches():
    rng = np.random.default_rng(0)
    return [(lk.tensor(rng.standard_normal((16, 4))), lk.tensor(rng.integers(0, 3, 16)))
            for _ in range(6)]


@pytest.mark.parametrize("name,kwargs", OPTIMISERS,
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(OPTIMISERS)])
def test_every_optimiser_captured_equals_eager(name, kwargs, small_batches):
    make_opt = lambda ps: getattr(optim, name)(ps, **kwargs)  # noqa: E731
    eager, eager_model, eager_opt, _ = train(small_batches, False, small_mlp, make_opt)
    captured, model, opt, step = train(small_batches, True, small_mlp, make_opt)
    np.testing.assert_allclose(captured, eager, rtol=1e-12, atol=0)
    for p, q in zip(model.parameters(), eager_model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-12, atol=1e-15)
    assert len(step.traces) == 1
    saved, eager_saved = opt.state_dict(), eager_opt.state_dict()
    assert saved["state"].keys() == eager_saved["state"].keys()
    for i, slots in saved["state"].items():
        assert slots.keys() == eager_saved["state"][i].keys()
        for key, value in slots.items():
            np.testing.assert_allclose(value.numpy(), eager_saved["state"][i][key].numpy(),
                                       rtol=1e-12, atol=1e-15, err_msg=f"{i} {key}")


def test_zero_grad_after_the_step_inside_the_function(small_batches):
    lk.manual_seed(0)
    model = small_mlp()
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @lk.function
    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()            # PyTorch's other habit: clear after stepping
        return loss

    _, eager_model, _, _ = train(small_batches, False, small_mlp,
                                 lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9))
    for x, y in small_batches:
        step(x, y)
        assert all(p.grad is None for p in model.parameters())
    for p, q in zip(model.parameters(), eager_model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-12)


def test_zero_grad_set_to_none_false_inside_the_function(small_batches):
    lk.manual_seed(0)
    model = small_mlp()
    opt = optim.Adam(model.parameters(), lr=0.01)

    @lk.function
    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss

    for x, y in small_batches[:2]:
        step(x, y)
        for p in model.parameters():
            assert p.grad is not None and not p.grad.numpy().any()


def test_state_saved_from_a_captured_run_loads_back_into_it(small_batches, tmp_path):
    make_opt = lambda ps: optim.Adam(ps, lr=0.05, amsgrad=True)  # noqa: E731
    _, eager_model, _, _ = train(small_batches, False, small_mlp, make_opt)
    # three captured steps, a checkpoint, three more; then rewind to the checkpoint (into the
    # very tensors the graph holds) and replay the last three: the same result again
    _, model, opt, step = train(small_batches[:3], True, small_mlp, make_opt)
    lk.save({"model": model.state_dict(), "opt": opt.state_dict()}, tmp_path / "ckpt.lk")
    for x, y in small_batches[3:]:
        step(x, y)
    np.testing.assert_allclose(model[0].weight.detach().numpy(), eager_model[0].weight.detach().numpy(),
                               rtol=1e-12)
    ckpt = lk.load(tmp_path / "ckpt.lk")
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
    assert int(opt.state[model[0].weight]["step"]) == 3
    for x, y in small_batches[3:]:
        step(x, y)
    assert len(step.traces) == 1
    for p, q in zip(model.parameters(), eager_model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-12)


def test_a_tensor_learning_rate_changes_a_captured_step():
    w = nn.Parameter(lk.tensor([1.0, -2.0], dtype="float64"))
    lr = lk.Variable(0.1, dtype="float64", trainable=False, name="lr")
    opt = optim.SGD([w], lr=lr, momentum=0.5)

    @lk.function
    def step():
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()

    step()
    np.testing.assert_allclose(w.detach().numpy(), [0.8, -1.6])          # w - 0.1 * 2w
    saved = opt.state_dict()
    lr.assign(0.0)
    step()
    np.testing.assert_allclose(w.detach().numpy(), [0.8, -1.6])          # lr 0: no move
    opt.load_state_dict(saved)                                   # lr 0.1 again, in place
    assert opt.param_groups[0]["lr"] is lr and lr.item() == 0.1
    step()
    assert not np.allclose(w.detach().numpy(), [0.8, -1.6])
    assert len(step.traces) == 1
    assert "lr: 0.1 (a tensor)" in repr(opt)


def test_old_and_pytorch_style_state_dicts_load(small_batches):
    # 'step' saved as a Python number (older labkit, PyTorch's SGD buffers without a count)
    _, model, opt, _ = train(small_batches[:2], False, small_mlp,
                             lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, dampening=0.5))
    saved = opt.state_dict()
    for slots in saved["state"].values():       # PyTorch's layout: SGD keeps no step count
        assert sorted(slots) == ["momentum_buffer"]
    fresh = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, dampening=0.5)
    fresh.load_state_dict(saved)
    before = model[0].weight.detach().numpy().copy()
    buf = fresh.state[model[0].weight]["momentum_buffer"].numpy().copy()
    x, y = small_batches[2]
    F.cross_entropy(model(x), y).backward()
    g = model[0].weight.grad.numpy().copy()
    fresh.step()        # a loaded buffer has had its first step: the gradient is damped
    np.testing.assert_allclose(model[0].weight.detach().numpy(),
                               before - 0.05 * (0.9 * buf + 0.5 * g), rtol=1e-12)
    adam = optim.Adam(model.parameters())
    state = {0: {"step": 4, "exp_avg": np.zeros((8, 4)), "exp_avg_sq": np.ones((8, 4))}}
    adam.load_state_dict({"state": state, "param_groups": adam.state_dict()["param_groups"]})
    assert adam.state[model[0].weight]["step"].dtype is lk.int64
    assert int(adam.state[model[0].weight]["step"]) == 4


def test_a_captured_step_alone_reads_the_gradients_of_each_call(small_batches):
    make_opt = lambda ps: optim.Adam(ps, lr=0.05)  # noqa: E731
    _, eager_model, _, _ = train(small_batches, False, small_mlp, make_opt)
    lk.manual_seed(0)
    model = small_mlp()
    opt = make_opt(model.parameters())
    update = lk.function(opt.step)              # backward stays eager, the update is a graph
    for x, y in small_batches:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        update()
    assert len(update.traces) == 1
    assert "read_grad" in {n.op_name for n in update.traces[0].graph.nodes}
    for p, q in zip(model.parameters(), eager_model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-12)
    opt.zero_grad()
    with pytest.raises(lk.GradError, match="has no .grad now"):
        update()


def test_gradients_accumulate_across_calls_as_eagerly():
    w = nn.Parameter(lk.tensor([1.0, 2.0], dtype="float64"))

    @lk.function
    def accumulate(x):
        (w * x).sum().backward()

    accumulate(lk.tensor([1.0, 1.0], dtype="float64"))
    accumulate(lk.tensor([10.0, 10.0], dtype="float64"))
    assert w.grad.tolist() == [11.0, 11.0]


def test_a_trace_assumes_no_grad_until_a_call_finds_one():
    w = nn.Parameter(lk.tensor([1.0, 2.0], dtype="float64"))

    @lk.function
    def step(x):
        (w * x).sum().backward()

    step(lk.tensor([1.0, 1.0], dtype="float64"))       # w.grad None: the new gradient is it
    first = step.traces[0].graph
    assert "read_grad" not in {n.op_name for n in first.nodes}
    step(lk.tensor([10.0, 10.0], dtype="float64"))     # w.grad set: a trace that adds to it
    assert len(step.traces) == 2 and "read_grad" in {n.op_name for n in step.traces[1].graph.nodes}
    assert "was None when trace 1 was made and is set now" in step.traces[1].reason
    assert w.grad.tolist() == [11.0, 11.0]
    w.grad = None                                      # back to the first trace, no retrace
    step(lk.tensor([3.0, 3.0], dtype="float64"))
    step(lk.tensor([1.0, 1.0], dtype="float64"))
    assert len(step.traces) == 2 and w.grad.tolist() == [4.0, 4.0]


def test_backward_in_a_captured_function_sets_its_arguments_grad_as_eagerly():
    # a tensor argument that requires grad gets its .grad from backward() inside the function,
    # added to one it already has (as eagerly), or replaced after the function clears it
    def accumulate(x, w):
        (x * w).sin().sum().backward()
        return x * 1.0

    def cleared_first(x, w):
        x.grad = None
        (x * w).sin().sum().backward()
        return x * 1.0

    for fn in (accumulate, cleared_first):
        results = []
        for run in (fn, lk.function(fn)):
            x = lk.tensor([0.5, 1.0, 2.0], requires_grad=True)
            w = lk.tensor([1.0, -1.0, 3.0])
            grads = []
            for _ in range(3):
                run(x, w)
                grads.append(x.grad.numpy().copy())
            results.append(grads)
        for eager, captured in zip(*results):
            np.testing.assert_allclose(captured, eager, rtol=1e-6)
        accumulated = not np.allclose(results[0][0], results[0][1])
        assert accumulated == (fn is accumulate)


class _Residual(nn.Module):
    """conv, BatchNorm, ReLU; a residual block; a stride-2 one; average pooling over 4x4: the
    activations reach the BatchNorms and the pooling channels first (a convolution's layout)
    when eager, and the pooling C-ordered (a plan's buffer) when captured."""

    def __init__(self):
        super().__init__()
        def block(stride):
            return nn.Sequential(nn.Conv2d(8, 8, 3, stride=stride, padding=1, bias=False),
                                 nn.BatchNorm2d(8))
        self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU())
        self.block, self.down = block(1), block(2)
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        x = self.stem(x)
        x = F.relu(self.down(F.relu(self.block(x) + x)))
        return self.head(lk.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def test_a_captured_step_through_batch_norm_gives_eager_bits(device, digit_batches):
    # fusion off: a fused kernel may round differently, by design; everything else must not
    batches = [(x.to(device), y.to(device)) for x, y in digit_batches[:4]]
    disabled = "fusion" in lk.config.disabled_passes()
    lk.config.disable_pass("fusion")
    try:
        runs = [train(batches, captured, lambda: _Residual().to(device),
                      lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9)) for captured in (False, True)]
    finally:
        if not disabled:
            lk.config.enable_pass("fusion")
    (eager, eager_model, *_), (captured, model, *_) = runs
    assert eager == captured
    for (name, a), b in zip(model.state_dict().items(), eager_model.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
