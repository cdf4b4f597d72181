"""``lk.compile`` in torch.compile's spelling: graph breaks (whole call eager, reason and line
recorded; ``fullgraph=True`` raises), guards and the cache size limit, PyTorch's argument
checks, and compiled modules (``OptimizedModule``, ``Module.compile``) that train through
the eager tape exactly as the eager model does."""
import inspect

import numpy as np
import pytest
import torch

import labkit as lk

def _line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


# ---- functions ---------------------------------------------------------------------------------
def test_compiled_function_matches_eager_in_every_spelling():
    def body(x, y):
        return (x @ y).relu().sum(dim=0)
    x, y = lk.randn(3, 4), lk.randn(4, 5)
    want = body(x, y).numpy()
    for f in (lk.compile(body), lk.compile()(body), lk.compile(fullgraph=True)(body),
              lk.compile(body, backend="eager"), lk.compile(body, mode="max-autotune"),
              lk.compile(body, dynamic=True, options={"triton.cudagraphs": False})):
        np.testing.assert_allclose(f(x, y).numpy(), want, rtol=1e-6)
        assert len(f.traces) == 1 and f.breaks == [] and f.traces[0].plan is not None
    assert lk.compile(body, disable=True) is body


def _breaks_on(how):
    def body(x):
        y = x * 2.0
        if how == "branch":
            if y.sum() > 0:
                return y
            return -y
        if how == "item":
            return y * y.sum().item()
        if how == "print":
            print(y)
            return y
        if how == "numpy":
            return lk.tensor(y.numpy() + 1.0)
        if how == "outside item":
            return y * OUTSIDE.item()
        if how == "numpy random":
            return y + lk.tensor(np.random.rand(3).astype(np.float32))
        if how == "disabled":
            return log(y)
    return body


OUTSIDE = lk.tensor(3.0)


@lk.compiler.disable
def log(t):
    return t + 0.0


@pytest.mark.parametrize("how, reason, line", [
    ("branch", "Python control flow on a tensor", "if y.sum() > 0"),
    ("item", "t.item() needs the value of node", "y.sum().item()"),
    ("print", "print() / str() of a traced tensor", "print(y)"),
    ("numpy", "t.numpy() needs the value of node", "y.numpy()"),
    ("outside item", "item() read the value of", "OUTSIDE.item()"),
    ("numpy random", "drew from NumPy's global random generator", None),
    ("disabled", "call of log, which lk.compiler.disable keeps out of graphs", "log(y)"),
])
def test_graph_break_runs_the_call_eagerly_and_records_why(how, reason, line, capsys):
    body = _breaks_on(how)
    f = lk.compile(body)
    x = lk.tensor([1.0, 2.0, 3.0])
    for _ in range(3):
        state = np.random.get_state()
        got = f(x).numpy()
        np.random.set_state(state)
        np.testing.assert_allclose(got, body(x).numpy(), rtol=1e-6)
    assert len(f.traces) == 1                   # later calls go straight to eager
    [brk] = f.breaks
    assert reason in brk.reason and brk.trace == 1
    if line is not None:
        assert brk.source == (__file__, _line_of(_breaks_on, line))
    explained = f.explain()
    assert (explained.graph_count, explained.graph_break_count) == (0, 1)
    assert reason in str(explained)
    if how == "print":       # the traced print raised before printing: 3 calls, 3 lines of
        printed = capsys.readouterr().out.strip().splitlines()        # eager f and 3 of body
        assert len(printed) == 6 and all(p == "tensor([2., 4., 6.])" for p in printed)


def test_fullgraph_raises_naming_the_line():
    f = lk.compile(_breaks_on("branch"), fullgraph=True)
    with pytest.raises(lk.GraphBreak) as caught:
        f(lk.ones(3))
    assert str(caught.value) == (
        f"lk.compile(fullgraph=True) body: Python control flow on a tensor (if/while/and/or, "
        f"bool(t)) needs the value of node 'gt' (gt)\n  at {__file__}:"
        f"{_line_of(_breaks_on, 'if y.sum() > 0')}: if y.sum() > 0:\nWithout fullgraph=True "
        f"this call would run eagerly.")
    assert lk._dynamo.exc.Unsupported is lk.GraphBreak


def test_data_dependent_shapes_are_captured_and_a_python_size_of_one_breaks():
    f = lk.compile(lambda x: x[x > 0].sum() * 2.0)
    g = lk.compile(lambda x: x * len(x.nonzero()))
    for values in ([1.0, -1.0, 2.0], [-1.0, -2.0, 5.0]):
        x = lk.tensor(values)
        assert f(x).item() == x[x > 0].sum().item() * 2.0
        assert g(x).tolist() == (x * len(x.nonzero())).tolist()
    assert f.breaks == [] and len(f.traces) == 1
    [brk] = g.breaks
    assert brk.reason.startswith("TypeError: ") and len(g.traces) == 1


def test_a_break_on_one_signature_does_not_stop_another():
    def body(x, clip):
        if clip:
            return x.clamp(max=x.mean().item())
        return x * 2.0
    f = lk.compile(body)
    x = lk.tensor([1.0, 5.0])
    assert f(x, True).tolist() == [1.0, 3.0] and f(x, False).tolist() == [2.0, 10.0]
    assert [t.plan is None for t in f.traces] == [True, False]


def test_dynamo_config_and_helpers():
    assert lk._dynamo.config.cache_size_limit == 8
    lk._dynamo.config.recompile_limit = 2
    try:
        assert lk.config._state["cache_size_limit"] == 2
    finally:
        lk._dynamo.config.cache_size_limit = 8
    assert lk._dynamo.list_backends() == torch._dynamo.list_backends()
    out = lk._dynamo.explain(_breaks_on("branch"))(lk.ones(3))
    assert (out.graph_count, out.graph_break_count) == (0, 1)
    out = lk._dynamo.explain(lambda x: x.exp())(lk.ones(3))
    assert out.graph_count == 1 and out.ops_per_graph == [["exp"]]
    assert not lk.compiler.is_compiling()
    seen = []
    lk.compile(lambda x: seen.append(lk.compiler.is_compiling()) or x)(lk.ones(1))
    assert seen == [True]


@pytest.mark.parametrize("kwargs", [dict(backend="nope"), dict(mode="fast"),
                                    dict(mode="default", options={"a": 1})])
def test_arguments_are_checked_as_pytorch_checks_them(kwargs):
    with pytest.raises(Exception) as theirs:
        torch.compile(lambda x: x, **kwargs)
    with pytest.raises(type(theirs.value) if type(theirs.value) is RuntimeError else
                       lk._dynamo.exc.InvalidBackend) as ours:
        lk.compile(lambda x: x, **kwargs)
    assert str(ours.value).replace("lk._dynamo", "torch._dynamo") == str(theirs.value)


def test_a_custom_backend_callable_is_refused():
    with pytest.raises(lk._dynamo.exc.InvalidBackend, match="custom backend"):
        lk.compile(lambda x: x, backend=lambda gm, inputs: gm)


def test_disable_hands_back_the_original():
    def body(x):
        return x
    f = lk.compile(body)
    assert lk.compiler.disable(f) is body


# ---- modules -------------------------------------------------------------------------------------
class Net(lk.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = lk.nn.Linear(4, 16), lk.nn.Linear(16, 1)
        self.drop = lk.nn.Dropout(0.25)
        self.scale = 1.0

    def forward(self, x, y=None):
        out = self.fc2(self.drop(lk.nn.functional.gelu(self.fc1(x)))) * self.scale
        loss = None if y is None else lk.nn.functional.mse_loss(out, y)
        return out, loss

    def describe(self):
        return f"Net with scale {self.scale}"


def _train_net(compiled, steps=6):
    lk.manual_seed(0)
    net = Net()
    opt = lk.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=0.1)
    model = lk.compile(net) if compiled else net
    data = lk.Generator().manual_seed(1)
    losses = []
    for i in range(steps):
        x, y = lk.randn(8, 4, generator=data), lk.randn(8, 1, generator=data)
        if i == 3:
            net.scale = 0.5                    # a guarded attribute: one retrace
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with lk.no_grad():
        out, _ = model(x)
    return losses, out.numpy(), [p.detach().numpy().copy() for p in net.parameters()], model


def test_compiled_model_trains_exactly_as_the_eager_model():
    eager, out_e, params_e, _ = _train_net(False)
    losses, out, params, model = _train_net(True)
    assert losses == eager                      # dropout masks from one stream: equal
    np.testing.assert_array_equal(out, out_e)
    for a, b in zip(params, params_e):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    reasons = [t.reason for t in model.forward.traces]
    assert reasons[:2] == ["first call", "Net.scale: 1.0 -> 0.5"] and len(reasons) == 3
    assert [t.joint is not None for t in model.forward.traces] == [True, True, False]


def test_optimized_module_is_pytorchs_wrapper():
    net = Net()
    model = lk.compile(net)
    theirs = torch.compile(torch.nn.Linear(2, 2))
    assert type(model).__name__ == type(theirs).__name__ == "OptimizedModule"
    assert isinstance(model, lk.nn.Module) and model._orig_mod is net
    assert list(model.state_dict()) == [f"_orig_mod.{k}" for k in net.state_dict()]
    assert all(a is b for a, b in zip(model.parameters(), net.parameters()))
    assert net.fc1.weight.name == "fc1.weight"       # the model's own names are kept
    assert model.scale == 1.0 and model.describe() == "Net with scale 1.0"
    assert model.fc1 is net.fc1
    model.eval()
    assert not net.training and not net.drop.training
    model.train()
    assert net.training
    assert repr(model).startswith("OptimizedModule(\n  (_orig_mod): Net(")
    # nanoGPT's resume: strip the prefix, load into a fresh model
    saved = model.state_dict()
    fresh = Net()
    fresh.load_state_dict({k[len("_orig_mod."):]: v for k, v in saved.items()})
    np.testing.assert_array_equal(fresh.fc2.bias.detach().numpy(), net.fc2.bias.detach().numpy())


def test_module_compile_in_place():
    lk.manual_seed(3)
    net = Net().eval()
    x = lk.randn(2, 4)
    want, _ = net(x)
    assert net.compile() is None
    got, _ = net(x)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    assert type(net) is Net and list(net.state_dict())[0] == "fc1.weight"
    assert len(net._compiled_call.traces) == 1


def test_gradients_of_inputs_and_parameters_through_a_compiled_module():
    lk.manual_seed(2)
    layer = lk.nn.Sequential(lk.nn.Linear(3, 4), lk.nn.Tanh(), lk.nn.Linear(4, 2))
    fast = lk.compile(layer)
    x = lk.randn(5, 3, requires_grad=True)
    w = lk.randn(5, 2)
    (fast(x) * w).sum().backward()
    got = [x.grad.numpy()] + [p.grad.numpy() for p in layer.parameters()]
    x2 = lk.tensor(x.detach().numpy(), requires_grad=True)
    for p in layer.parameters():
        p.grad = None
    (layer(x2) * w).sum().backward()
    want = [x2.grad.numpy()] + [p.grad.numpy() for p in layer.parameters()]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_frozen_parameter_and_retained_graph():
    layer = lk.nn.Linear(3, 1)
    fast = lk.compile(layer)
    out = fast(lk.ones(2, 3)).sum()
    out.backward(retain_graph=True)
    out.backward()                              # the saved values are kept for a second pass
    assert layer.bias.grad.tolist() == [4.0]
    layer.weight.requires_grad_(False)          # frozen: traced again, no gradient for it
    layer.weight.grad = None
    fast(lk.ones(2, 3)).sum().backward()
    assert layer.weight.grad is None and layer.bias.grad.tolist() == [6.0]
    assert fast.forward.traces[1].reason == "weight.requires_grad: True -> False"


def test_double_backward_through_a_compiled_call_says_why_not():
    fast = lk.compile(lambda x: (x ** 3).sum())
    x = lk.tensor([2.0], requires_grad=True)
    with pytest.raises(lk.GradError, match="cannot go through a compiled call"):
        fast(x).backward(create_graph=True)
    fast(x).backward()
    assert x.grad.tolist() == [12.0]


def test_compiled_module_inside_a_captured_step_is_traced_inline():
    lk.manual_seed(4)
    net = lk.nn.Linear(3, 1)
    fast = lk.compile(net)
    opt = lk.optim.SGD(net.parameters(), lr=0.1)

    @lk.function
    def step(x):
        opt.zero_grad()
        loss = fast(x).sum()
        loss.backward()
        opt.step()
        return loss
    first = step(lk.ones(2, 3)).item()
    assert step(lk.ones(2, 3)).item() < first and len(step.traces) == 1
    assert fast.forward.traces == []


def test_a_compiled_training_step():
    def run(make):
        lk.manual_seed(0)
        net = lk.nn.Sequential(lk.nn.Linear(4, 8), lk.nn.ReLU(), lk.nn.Linear(8, 1))
        opt = lk.optim.Adam(net.parameters(), lr=0.01)

        def body(x, y):
            opt.zero_grad()
            loss = lk.nn.functional.mse_loss(net(x), y)
            loss.backward()
            opt.step()
            return loss
        step = make(body)
        x, y = lk.ones(4, 4), lk.zeros(4, 1)
        return [step(x, y).item() for _ in range(5)], step
    eager, _ = run(lambda f: f)
    losses, step = run(lk.compile)
    np.testing.assert_allclose(losses, eager, rtol=1e-6)
    assert len(step.traces) == 1 and step.traces[0].joint is None


def test_a_compiled_model_under_autocast_trains_as_eager():
    def run(compiled):
        lk.manual_seed(0)
        net = lk.nn.Sequential(lk.nn.Linear(8, 32), lk.nn.GELU(), lk.nn.Linear(32, 4))
        model = lk.compile(net) if compiled else net
        opt = lk.optim.AdamW(net.parameters(), lr=1e-2)
        x, y = lk.randn(16, 8), lk.randint(0, 4, (16,))
        losses = []
        for _ in range(4):
            with lk.autocast("cpu", dtype=lk.bfloat16):
                logits = model(x)
                loss = lk.nn.functional.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        with lk.no_grad():
            plain = model(x)
        return losses, logits.dtype, plain.dtype, [p.grad.dtype for p in net.parameters()], model
    eager, compiled = run(False), run(True)
    assert compiled[:4] == eager[:4] and compiled[1] is lk.bfloat16
    assert [t.reason for t in compiled[4].forward.traces] == [
        "first call", "autocast changed: bfloat16 on cpu -> off; grad mode on -> off"]
