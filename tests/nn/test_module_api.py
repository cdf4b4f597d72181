"""Module's PyTorch behaviour, each checked against torch.nn.Module where PyTorch has an answer:
hooks (order, removal, prepend, kwargs, replacing inputs and outputs, full backward hooks),
name scopes in captured graphs, buffers, load_state_dict reports, to(), traversal and lookup,
train/eval recursion, containers."""
import copy
import warnings
from collections import OrderedDict

import numpy as np
import pytest
import torch

import labkit as lk
from labkit import nn


def _pair(build):
    """The same model in labkit and PyTorch, with PyTorch's weights copied into labkit's."""
    torch.manual_seed(0)
    theirs = build(torch.nn).double()
    ours = build(nn).double()
    ours.load_state_dict({k: lk.tensor(v.detach().numpy()) for k, v in
                          theirs.state_dict().items()})
    return ours, theirs


def _mlp(lib):
    return lib.Sequential(lib.Linear(3, 4), lib.Tanh(), lib.Linear(4, 2))


# ---- forward hooks ------------------------------------------------------------------------------
def test_forward_hooks_run_in_order_can_replace_and_are_removed():
    events = {}
    outs = {}
    for lib, name in ((nn, "lk"), (torch.nn, "torch")):
        m = _mlp(lib)
        log = events[name] = []
        h1 = m[0].register_forward_pre_hook(lambda mod, args: log.append("pre1"))
        m[0].register_forward_pre_hook(lambda mod, args: log.append("pre0"), prepend=True)
        m[0].register_forward_hook(lambda mod, args, out: log.append(("fwd", tuple(out.shape))))
        m[0].register_forward_hook(lambda mod, args, kwargs, out: log.append("kw"),
                                   with_kwargs=True)
        m[2].register_forward_hook(lambda mod, args, out: out * 0 + 1)        # replaces
        m[1].register_forward_pre_hook(lambda mod, args: (args[0] * 0,))       # replaces input
        x = np.ones((2, 3))
        outs[name] = m(lk.tensor(x) if lib is nn else torch.tensor(x, dtype=torch.float32))
        h1.remove()
        m(lk.tensor(x) if lib is nn else torch.tensor(x, dtype=torch.float32))
    assert events["lk"] == events["torch"] == ["pre0", "pre1", ("fwd", (2, 4)), "kw", "pre0",
                                               ("fwd", (2, 4)), "kw"]
    np.testing.assert_array_equal(outs["lk"].detach().numpy(), outs["torch"].detach().numpy())


def test_forward_pre_hook_with_kwargs_and_handle_as_context():
    class Scale(nn.Module):
        def forward(self, x, scale=1.0):
            return x * scale
    m = Scale()
    with m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {"scale": 3.0}),
                                     with_kwargs=True):
        assert m(lk.ones(2)).tolist() == [3.0, 3.0]
    assert m(lk.ones(2)).tolist() == [1.0, 1.0]
    assert not m._forward_pre_hooks
    with pytest.raises(TypeError, match="callable"):
        m.register_forward_hook("not a function")
    with pytest.raises(NotImplementedError, match="register_full_backward_hook"):
        m.register_backward_hook(lambda *a: None)


def test_full_backward_hooks_see_and_replace_gradients_as_in_pytorch():
    ours, theirs = _pair(_mlp)
    seen = {"lk": [], "torch": []}

    def hooks(model, log, lib):
        def pre(mod, grad_output):
            log.append(("pre", _np(grad_output[0])))
            return (grad_output[0] * 2,)

        def full(mod, grad_input, grad_output):
            log.append(("full", _np(grad_input[0]), _np(grad_output[0])))
            return (grad_input[0] * 0.5,)
        model[2].register_full_backward_pre_hook(pre)
        model[2].register_full_backward_hook(full)
        model[0].register_full_backward_hook(lambda m, gi, go: log.append(("first", _np(gi[0]))))

    hooks(ours, seen["lk"], lk)
    hooks(theirs, seen["torch"], torch)
    x = np.random.default_rng(0).standard_normal((5, 3))
    xl, xt = lk.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (ours(xl) ** 2).sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (theirs(xt) ** 2).sum().backward()
    assert [e[0] for e in seen["lk"]] == [e[0] for e in seen["torch"]] == ["pre", "full", "first"]
    for a, b in zip(seen["lk"], seen["torch"]):
        for u, v in zip(a[1:], b[1:]):
            np.testing.assert_allclose(u, v, rtol=1e-10)
    np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-10)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, err_msg=name)


def _np(t):
    return None if t is None else (t.detach().numpy() if isinstance(t, torch.Tensor)
                                   else t.numpy())


def test_full_backward_hook_with_several_inputs_and_one_without_grad():
    class Mix(nn.Module):
        def forward(self, a, b, scale, c):
            return a * b * scale + c, a - c

    got = []
    m = Mix()
    m.register_full_backward_hook(lambda mod, gi, go: got.append((gi, go)))
    a = lk.tensor([1.0, 2.0], requires_grad=True)
    b = lk.tensor([3.0, 4.0], dtype=lk.float64, requires_grad=True)
    c = lk.tensor([0.5, 0.5])                 # no grad
    y, z = m(a, b, 2.0, c)
    (y.sum() + 3 * z.sum()).backward()
    (gi, go), = got
    assert gi[2] is None and gi[3] is None
    assert gi[0].tolist() == [9.0, 11.0] and gi[1].tolist() == [2.0, 4.0]
    assert gi[0].dtype is lk.float32 and gi[1].dtype is lk.float64
    assert go[0].tolist() == [1.0, 1.0] and go[1].tolist() == [3.0, 3.0]
    assert a.grad.tolist() == [9.0, 11.0]


def test_backward_hook_of_a_first_layer_fires_with_none_inputs():
    layer = nn.Linear(2, 2)
    got = []
    layer.register_full_backward_hook(lambda m, gi, go: got.append(gi))
    with pytest.warns(UserWarning, match="no input requires grad"):
        layer(lk.ones(3, 2)).sum().backward()
    assert got == [(None,)]
    assert layer.weight.grad is not None


# ---- name scopes ---------------------------------------------------------------------------------
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.Linear(4, 4)
        self.mlp = nn.Sequential(nn.Linear(4, 4), nn.GELU())

    def forward(self, x):
        return self.mlp(self.attn(x))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Block(), Block()])
        self.norm = nn.LayerNorm(4)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.encoder(x))


def test_captured_graph_groups_nodes_by_module_path():
    model = Model()
    graph = lk.function(lambda x: model(x).sum()).graph(lk.ones(3, 4))
    scopes = {n.scope for n in graph.nodes if n.kind == "op"}
    assert {"encoder/layers.0/attn", "encoder/layers.1/mlp/0", "encoder/layers.1/mlp/1",
            "encoder/norm", "head"} <= scopes
    names = [n.name for n in graph.nodes]
    assert "encoder/layers.0/attn/matmul" in names and "head/add" in names
    assert "encoder.layers.0.attn.weight" in names        # parameters keep their own names
    assert any(n.name == "sum" and n.scope == "" for n in graph.nodes)   # outside any module


def test_name_scopes_cost_nothing_eagerly_and_a_stray_module_is_named_by_class():
    stray = nn.Tanh()

    class Uses(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(2, 2)

        def forward(self, x):
            return stray(self.inner(x))
    m = Uses()
    assert m(lk.ones(1, 2)).shape == (1, 2)        # eager: no graph, no scope bookkeeping
    graph = lk.function(lambda x: m(x)).graph(lk.ones(1, 2))
    assert {n.scope for n in graph.nodes if n.kind == "op"} == {"inner", "Tanh"}


def test_training_step_with_scopes_matches_eager():
    torch_free = Model()
    twin = copy.deepcopy(torch_free)
    opt_a = lk.optim.SGD(torch_free.parameters(), lr=0.1)
    opt_b = lk.optim.SGD(twin.parameters(), lr=0.1)

    def step(model, opt, x):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    captured = lk.function(lambda x: step(torch_free, opt_a, x))
    x = lk.randn(5, 4)
    for _ in range(3):
        np.testing.assert_allclose(captured(x).item(), step(twin, opt_b, x).item(), rtol=1e-6)
    for (name, p), q in zip(torch_free.named_parameters(), twin.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-7, err_msg=name)


# ---- buffers ------------------------------------------------------------------------------------
def test_buffers_persistent_or_not_moved_cast_and_not_trained():
    m = nn.Module()
    m.register_buffer("steps", lk.zeros(2))
    m.register_buffer("scratch", lk.ones(2), persistent=False)
    m.register_buffer("count", lk.tensor(0))
    m.register_buffer("absent", None)
    assert [n for n, _ in m.named_buffers()] == ["steps", "scratch", "count"]
    assert list(m.state_dict()) == ["steps", "count"]
    assert list(m.parameters()) == []
    m.double()
    assert m.steps.dtype is lk.float64 and m.scratch.dtype is lk.float64
    assert m.count.dtype is lk.int64                           # integer buffers keep their dtype
    assert not m.steps.requires_grad
    m.register_buffer("steps", lk.ones(3))                     # re-registering replaces
    assert m.steps.shape == (3,)
    m.steps = lk.zeros(4)                                      # assignment keeps it a buffer
    assert "steps" in m._buffers and m.get_buffer("steps").shape == (4,)
    m.weight = nn.Parameter(lk.ones(1))
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("weight", lk.zeros(1))
    with pytest.raises(KeyError, match="no '.'"):
        m.register_buffer("a.b", lk.zeros(1))
    with pytest.raises(TypeError, match="needs a Tensor"):
        m.register_buffer("x", [1, 2])


def test_batchnorm_buffers_named_like_pytorchs():
    ours, theirs = nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert list(ours.state_dict()) == list(theirs.state_dict())


# ---- load_state_dict -----------------------------------------------------------------------------
def _nested(lib):
    class Net(lib.Module):
        def __init__(self):
            super().__init__()
            self.body = lib.Sequential(lib.Linear(2, 3), lib.BatchNorm1d(3))
            self.head = lib.Linear(3, 1)
            self.register_buffer("scratch", lib.Linear(1, 1).weight.detach() * 0,
                                 persistent=False)
    return Net()


@pytest.mark.parametrize("edit", ["missing", "unexpected", "both", "none"])
def test_load_state_dict_reports_keys_as_pytorch(edit):
    reports = []
    for lib in (nn, torch.nn):
        model = _nested(lib)
        sd = OrderedDict(model.state_dict())
        if edit in ("missing", "both"):
            del sd["head.bias"], sd["body.1.running_var"]
        if edit in ("unexpected", "both"):
            sd["zzz.extra"] = sd["head.weight"]
            sd["body.0.extra"] = sd["head.weight"]
            sd["body.9.weight"] = sd["head.weight"]
            sd["alpha"] = sd["head.weight"]
        result = model.load_state_dict(sd, strict=False)
        reports.append((list(result.missing_keys), list(result.unexpected_keys), repr(result)))
        if edit != "none":
            with pytest.raises((lk.nn.StateDictError, RuntimeError)):
                model.load_state_dict(sd)
    ours, theirs = reports
    assert ours[:2] == theirs[:2]
    assert ours[2] == theirs[2].replace("_IncompatibleKeys", "IncompatibleKeys")


def test_load_state_dict_assign_replaces_the_tensors():
    m = nn.Linear(2, 2)
    new = {"weight": lk.ones(2, 2, dtype=lk.float64), "bias": lk.zeros(2, dtype=lk.float64)}
    m.load_state_dict(new, assign=True)
    assert isinstance(m.weight, nn.Parameter) and m.weight.dtype is lk.float64
    assert m.weight.requires_grad and np.shares_memory(m.weight.detach().numpy(), new["weight"].detach().numpy())


def test_state_dict_prefix_keep_vars_and_destination():
    m = nn.Linear(2, 2)
    sd = m.state_dict(prefix="enc.", keep_vars=True)
    assert list(sd) == ["enc.weight", "enc.bias"] and sd["enc.weight"] is m.weight
    dest = {"other": 1}
    assert m.state_dict(destination=dest) is dest and list(dest) == ["other", "weight", "bias"]


# ---- to(), traversal, lookups, modes -------------------------------------------------------------
def test_to_forms():
    m = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    assert m.to(lk.zeros(1, dtype=lk.float64)) is m and m[0].weight.dtype is lk.float64
    assert m[1].num_batches_tracked.dtype is lk.int64
    m.to(device="cpu", dtype=lk.float32)
    assert m[0].weight.dtype is lk.float32
    m.to("cpu", lk.float64, non_blocking=True)
    assert m[1].running_mean.dtype is lk.float64
    m.half()
    assert m[0].bias.dtype is lk.float16
    m.float()
    with pytest.raises(lk.DTypeError, match="floating"):
        m.to(lk.zeros(1, dtype=lk.int64))
    with pytest.raises(TypeError, match="unexpected arguments"):
        m.to(colour="red")


def test_traversal_and_lookup_as_pytorch():
    for lib in (nn, torch.nn):
        shared = lib.Linear(2, 2)
        m = lib.Sequential(shared, lib.Sequential(shared, lib.ReLU()))
        assert [n for n, _ in m.named_modules()] == ["", "0", "1", "1.1"]
        assert [n for n, _ in m.named_modules(remove_duplicate=False)] == \
            ["", "0", "1", "1.0", "1.1"]
        assert [n for n, _ in m.named_modules(prefix="net")] == ["net", "net.0", "net.1",
                                                                   "net.1.1"]
        assert [n for n, _ in m.named_parameters(remove_duplicate=False)] == \
            ["0.weight", "0.bias", "1.0.weight", "1.0.bias"]
        assert [n for n, _ in m.named_children()] == ["0", "1"]
        assert m.get_submodule("1.0") is shared and m.get_parameter("1.0.bias") is shared.bias
    m = nn.Sequential(nn.Linear(2, 2))
    with pytest.raises(AttributeError, match="has no submodule '3'"):
        m.get_submodule("3.weight")
    with pytest.raises(AttributeError, match="no parameter 'scale'"):
        m.get_parameter("0.scale")


def test_train_eval_recurse_through_each_childs_own_train():
    class Frozen(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(2)

        def train(self, mode=True):               # the usual "freeze BatchNorm" override
            super().train(mode)
            self.bn.eval()
            return self
    m = nn.Sequential(nn.Linear(2, 2), Frozen())
    m.train()
    assert m.training and m[0].training and m[1].training and not m[1].bn.training
    m.eval()
    assert not any(x.training for x in m.modules())
    with pytest.raises(ValueError, match="True or False"):
        m.train("yes")


def test_zero_grad_requires_grad_and_apply():
    m = _mlp(nn)
    m(lk.ones(1, 3)).sum().backward()
    m.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.numpy().any() for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    seen = []
    assert m.apply(lambda mod: seen.append(type(mod).__name__)) is m
    assert seen == ["Linear", "Tanh", "Linear", "Sequential"]


# ---- containers ----------------------------------------------------------------------------------
def test_module_list_repr_and_list_methods_as_pytorch():
    for lib in (nn, torch.nn):
        ml = lib.ModuleList([lib.Linear(2, 2) for _ in range(3)] + [lib.ReLU(), lib.ReLU()])
        ml.insert(1, lib.Tanh())
        ml.append(lib.Linear(2, 2))
        del ml[0]
        popped = ml.pop(0)
        ml += [lib.Sigmoid()]
        result = (repr(ml), type(popped).__name__, len(ml), [n for n, _ in ml.named_children()])
        if lib is nn:
            ours = result
    assert ours == result


def test_sequential_list_methods_as_pytorch():
    for lib in (nn, torch.nn):
        seq = lib.Sequential(lib.Linear(2, 3), lib.ReLU())
        seq.append(lib.Linear(3, 1))
        seq.insert(0, lib.Identity())
        seq[1] = lib.Linear(2, 3, bias=False)
        del seq[2]
        result = (repr(seq), len(seq), repr(seq[1:]), [n for n, _ in seq.named_parameters()])
        if lib is nn:
            ours = result
    assert ours == result


def test_module_dict_parameter_list_and_dict_as_pytorch():
    for lib, factory in ((nn, lk), (torch.nn, torch)):
        md = lib.ModuleDict({"a": lib.Linear(2, 2)})
        md.update([("b", lib.ReLU())])
        md["c"] = lib.Tanh()
        popped = md.pop("a")
        pl = lib.ParameterList([lib.Parameter(factory.ones(2, 3))])
        pl.append(factory.zeros(4))                      # a tensor becomes a Parameter
        pl.extend([lib.Parameter(factory.ones(1))])
        pd = lib.ParameterDict({"w": lib.Parameter(factory.ones(2))})
        pd["b"] = factory.zeros(2)
        del pd["w"]
        result = (list(md.keys()), type(popped).__name__, "c" in md, len(pl),
                  [type(p).__name__ for p in pl], [n for n, _ in pl.named_parameters()],
                  list(pd.keys()), [n for n, _ in pd.named_parameters()],
                  repr(pl).replace("torch.", "lk."), repr(md))
        if lib is nn:
            ours = result
    assert ours == result


def test_calling_a_module_whose_init_skipped_super_says_so():
    class Forgot(nn.Module):
        def __init__(self):
            pass

        def forward(self, x):
            return x
    with pytest.raises(AttributeError, match=r"super\(\).__init__\(\)"):
        Forgot()(lk.ones(1))
