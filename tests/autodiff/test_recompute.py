"""Activation checkpointing (``lk.utils.checkpoint``, ``labkit.autodiff.recompute``).

Gradients equal those without checkpointing (float64: inputs and module parameters, eagerly,
captured, against finite differences, against PyTorch); dropout masks are replayed and the
generator ends where a plain call leaves it; the peak memory of W10's GPT step falls; the
captured graph recomputes in the backward pass (not merged back by CSE); outputs of every kind,
keyword arguments, nesting, hooks, ``lk.grad`` and the errors.
"""
import gc
import tracemalloc

import numpy as np
import pytest

import labkit as lk
from labkit.autodiff.engine import gradients
from labkit.utils.checkpoint import checkpoint, checkpoint_sequential

F = lk.nn.functional


class Block(lk.nn.Module):
    """A pre-norm MLP block with dropout, in float64."""

    def __init__(self, d, p=0.0):
        super().__init__()
        self.ln = lk.nn.LayerNorm(d, dtype=lk.float64)
        self.fc = lk.nn.Linear(d, 3 * d, dtype=lk.float64)
        self.out = lk.nn.Linear(3 * d, d, dtype=lk.float64)
        self.p = p

    def forward(self, x, scale=1.0):
        h = F.dropout(F.gelu(self.fc(self.ln(x))), self.p, self.training)
        return x + scale * self.out(h)


def _blocks(p=0.0, n=3, d=6, seed=0):
    lk.manual_seed(seed)
    return lk.nn.ModuleList([Block(d, p) for _ in range(n)])


def _grads(blocks, x, ck, seed=7, **kw):
    """Loss, input gradient, parameter gradients and the generator's next draw after one
    forward and backward pass through ``blocks``, each checkpointed when ``ck``."""
    lk.manual_seed(seed)
    x = x.detach().requires_grad_()
    blocks.zero_grad(set_to_none=True)
    h = x
    for b in blocks:
        h = checkpoint(b, h, use_reentrant=False, **kw) if ck else b(h)
    loss = (h ** 2).sum()
    loss.backward()
    return (loss.item(), x.grad.numpy().copy(), [p.grad.numpy().copy()
                                                   for p in blocks.parameters()],
            lk.rand(1).item())


def _assert_same(a, b):
    assert a[0] == b[0]
    np.testing.assert_array_equal(a[1], b[1])
    for g, h in zip(a[2], b[2]):
        np.testing.assert_array_equal(g, h)
    assert a[3] == b[3]


@pytest.mark.parametrize("p", [0.0, 0.3])
def test_gradients_and_random_stream_as_without_checkpointing(p, device):
    blocks = _blocks(p).to(device)
    x = lk.randn(2, 5, 6, dtype=lk.float64, device=device)
    plain, ck = _grads(blocks, x, False), _grads(blocks, x, True)
    _assert_same(plain, ck)          # dropout masks replayed; the generator moved on once


def test_without_preserved_rng_state_the_recomputation_draws_afresh():
    blocks = _blocks(0.5, n=1)
    x = lk.randn(4, 6, dtype=lk.float64)
    plain = _grads(blocks, x, False)
    fresh = _grads(blocks, x, True, preserve_rng_state=False)
    assert fresh[0] == plain[0]                      # the same forward pass
    assert not np.array_equal(fresh[1], plain[1])    # a new mask in the backward pass
    assert fresh[3] != plain[3]                      # and the generator moved on twice


def test_captured_equals_eager_and_recomputes_in_the_backward_pass():
    blocks = _blocks(0.3)
    x = lk.randn(2, 5, 6, dtype=lk.float64)
    eager = _grads(blocks, x, True)

    @lk.function
    def step(x):
        h = x
        for b in blocks:
            h = checkpoint(b, h, use_reentrant=False)
        loss = (h ** 2).sum()
        loss.backward()
        return loss

    for _ in range(2):               # the trace, then the compiled plan
        lk.manual_seed(7)
        blocks.zero_grad(set_to_none=True)
        xc = x.detach().requires_grad_()
        loss = step(xc)
        _assert_same(eager, (loss.item(), xc.grad.numpy(),
                             [p.grad.numpy() for p in blocks.parameters()], lk.rand(1).item()))
    graph = step.traces[0].graph
    roles = [(n.role, n.op_name) for n in graph.nodes if n.kind == "op"]
    # each block's layer_norm and gelu run again in the backward pass, not merged by CSE
    assert roles.count(("backward", "layer_norm_affine")) == 3 == \
        roles.count(("forward", "layer_norm_affine"))
    assert roles.count(("backward", "gelu")) == 3


def test_gradients_against_finite_differences_and_pytorch():
    torch = pytest.importorskip("torch")
    lk.manual_seed(1)
    net = lk.nn.Sequential(lk.nn.Linear(3, 4, dtype=lk.float64), lk.nn.Tanh(),
                           lk.nn.Linear(4, 4, dtype=lk.float64), lk.nn.Sigmoid(),
                           lk.nn.Linear(4, 2, dtype=lk.float64))
    x = lk.randn(5, 3, dtype=lk.float64, requires_grad=True)
    assert lk.gradcheck(lambda x: checkpoint_sequential(net, 2, x, use_reentrant=False), (x,))
    tnet = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 4),
                               torch.nn.Sigmoid(), torch.nn.Linear(4, 2)).double()
    tnet.load_state_dict({k: torch.tensor(v.numpy()) for k, v in net.state_dict().items()})
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    torch.utils.checkpoint.checkpoint_sequential(tnet, 2, tx, use_reentrant=False).sum().backward()
    checkpoint_sequential(net, 2, x, use_reentrant=False).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    for (name, p), tp in zip(net.named_parameters(), tnet.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-12, err_msg=name)


def _peak_of_step(model, idx, targets, device):
    model.zero_grad(set_to_none=True)
    gc.collect()
    lk.devices.reset_peak_memory_stats(device)
    before = lk.devices.memory_stats(device)["bytes_in_use"]
    loss = model(idx, targets)
    loss.backward()
    return lk.devices.memory_stats(device)["peak_bytes_in_use"] - before, loss.item()


@pytest.mark.parametrize("device", ["cpu:0", pytest.param(
    "gpu:0", marks=[pytest.mark.gpu, pytest.mark.cupy])])   # CuPy's memory pool counts it
def test_lower_peak_memory_on_w10s_gpt(device):
    from benchmarks.checkpoint_memory import build
    plain, idx, targets = build(4, device, checkpointed=False)
    ck = build(4, device, checkpointed=True)[0]
    tracing = device.startswith("cpu")     # a CPU's peak is tracemalloc's; a GPU's, its pool's
    if tracing:
        tracemalloc.start()
    try:
        peaks = [_peak_of_step(m, idx, targets, device) for m in (plain, ck, plain, ck)]
    finally:
        if tracing:
            tracemalloc.stop()
    (p_plain, loss), (p_ck, loss_ck) = min(peaks[0::2]), min(peaks[1::2])
    assert abs(loss - loss_ck) < 1e-6
    for a, b in zip(plain.parameters(), ck.parameters()):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-5, atol=1e-7)
    # four blocks' activations kept against one block's at a time (measured: about 84 vs 34 MB)
    assert p_ck < 0.6 * p_plain, (p_plain, p_ck)


def test_outputs_of_every_kind_keywords_and_lk_grad():
    lin = lk.nn.Linear(3, 3, dtype=lk.float64)

    def fn(x, k, scale=1.0):
        y = lin(x) * scale
        return {"y": y, "pair": (y.sum(), (x > 0).sum()), "k": k, "unused": y * 2}

    x = lk.randn(2, 3, dtype=lk.float64, requires_grad=True)
    out = checkpoint(fn, x, "label", scale=3.0, use_reentrant=False)
    assert out["k"] == "label" and out["pair"][1].dtype == lk.int64
    assert not out["pair"][1].requires_grad and out["y"].requires_grad
    (out["y"].sum() + out["pair"][0]).backward()
    want = lk.grad(lambda x: 2 * (lin(x) * 3.0).sum())(x)
    np.testing.assert_allclose(x.grad.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    got = lk.grad(lambda x: checkpoint(fn, x, "k", scale=3.0)["y"].sum() * 2)(x)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)


def test_gradients_of_gradients_through_checkpoint():
    lin = lk.nn.Linear(3, 3, dtype=lk.float64)

    def f(x):
        return (lin(x).tanh() * x).sum()

    def f_ck(x):
        return checkpoint(f, x, use_reentrant=False)

    x = lk.randn(2, 3, dtype=lk.float64, requires_grad=True)
    for fn in (lk.grad, lk.hessian):
        np.testing.assert_allclose(fn(f_ck)(x).detach().numpy(), fn(f)(x).detach().numpy(),
                                   rtol=1e-12)
    g, = gradients(f_ck(x), x, create_graph=True)        # torch.autograd.grad's form
    g.sum().backward()
    want = lk.grad(lambda x: lk.grad(f)(x).sum())(x.detach())
    np.testing.assert_allclose(x.grad.numpy(), want.numpy(), rtol=1e-12)
    assert lin.weight.grad is not None           # the second backward reaches parameters too


def test_nested_checkpoints_and_gradient_hooks():
    blocks = _blocks(0.2, n=2)
    x = lk.randn(3, 6, dtype=lk.float64)
    plain = _grads(blocks, x, False)
    seen = []
    handles = [p.register_post_accumulate_grad_hook(lambda p: seen.append(id(p)))
               for p in blocks.parameters()]

    def both(h):
        return blocks[1](checkpoint(blocks[0], h, use_reentrant=False))
    lk.manual_seed(7)
    xr = x.detach().requires_grad_()
    blocks.zero_grad(set_to_none=True)
    loss = (checkpoint(both, xr, use_reentrant=False) ** 2).sum()
    loss.backward()
    nested = (loss.item(), xr.grad.numpy(), [p.grad.numpy() for p in blocks.parameters()],
              lk.rand(1).item())
    _assert_same(plain, nested)
    assert sorted(seen) == sorted(id(p) for p in blocks.parameters())   # once each
    for h in handles:
        h.remove()


def test_no_grad_frozen_inputs_and_errors():
    lin = lk.nn.Linear(2, 2, dtype=lk.float64)
    x = lk.randn(1, 2, dtype=lk.float64)
    with lk.no_grad():
        assert not checkpoint(lin, x).requires_grad
    lin.requires_grad_(False)
    assert not checkpoint(lin, x).requires_grad      # nothing to differentiate
    lin.requires_grad_(True)
    x.requires_grad_()
    calls = []

    def changing(t):
        calls.append(1)
        return lin(t)[:, :len(calls)]
    with pytest.raises(lk.GradError, match="gave .* as output 0, but float64\\[1, 1\\]"):
        checkpoint(changing, x).sum().backward()
    with pytest.raises(ValueError, match="use_reentrant must be True, False or None"):
        checkpoint(lin, x, use_reentrant="yes")
    with pytest.raises(ValueError, match="give at most 1 segments"):
        checkpoint_sequential([lin], 2, x)
