"""W10 GPT: a GPT-style decoder's training step (vocab 256, context 64, d_model 128, 4 heads,
2 layers, batch 16) with AdamW.

The model is one source, written in PyTorch's spelling as a function of the library
(``make_gpt(torch)`` / ``make_gpt(labkit)``): token and position embeddings, blocks of causal
self-attention (q/k/v from one Linear, ``F.scaled_dot_product_attention(is_causal=True)``) and a
GELU MLP with LayerNorm before each, a final LayerNorm and an output head tied to the token
embedding. Both libraries load the same weights (a ``state_dict`` drawn from the seeded
generator) and run the same loop: ``zero_grad``, forward, cross-entropy, ``backward``,
``AdamW.step``. labkit captured is that whole step as one ``lk.function``.

No hand-written NumPy column: a GPT's backward written out by hand (attention, LayerNorm, GELU,
the tied head, AdamW) is a program of its own, longer than the model, and W3/W6 already show
labkit against hand-written NumPy.
"""
import numpy as np

from ..common import (Bench, NotAvailable, Registry, labkit_device, labkit_sync, require_capture,
                      torch_device, torch_info, torch_sync)

NAME = "W10"
TITLE = ("GPT decoder (vocab 256, context 64, d_model 128, 4 heads, 2 layers), batch 16, "
         "cross-entropy, backward, AdamW")
UNIT = "ms/step"
VOCAB, CONTEXT, D_MODEL, HEADS, LAYERS, BATCH = 256, 64, 128, 4, 2, 16
LR = 3e-4
IMPLS = Registry()


def make_gpt(torch):
    """The model, built from ``torch`` (PyTorch or labkit: the same source)."""
    nn, F = torch.nn, torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL, bias=False)
            self.proj = nn.Linear(D_MODEL, D_MODEL)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.qkv(x).split(C, dim=2)
            q = q.view(B, T, HEADS, C // HEADS).transpose(1, 2)
            k = k.view(B, T, HEADS, C // HEADS).transpose(1, 2)
            v = v.view(B, T, HEADS, C // HEADS).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(D_MODEL)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(D_MODEL)
            self.mlp = nn.Sequential(nn.Linear(D_MODEL, 4 * D_MODEL), nn.GELU(),
                                     nn.Linear(4 * D_MODEL, D_MODEL))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(VOCAB, D_MODEL)
            self.pos = nn.Embedding(CONTEXT, D_MODEL)
            self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
            self.ln_f = nn.LayerNorm(D_MODEL)
            self.head = nn.Linear(D_MODEL, VOCAB, bias=False)
            self.head.weight = self.tok.weight

        def forward(self, idx, targets):
            B, T = idx.size()
            pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
            x = self.tok(idx) + self.pos(pos)
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    return GPT()


def _weights(rng):
    """The model's ``state_dict`` as NumPy arrays: weights N(0, 0.02) as in GPT-2, biases zero,
    LayerNorms the identity; the head shares the token embedding."""
    d, state = D_MODEL, {}
    state["tok.weight"] = rng.normal(0, 0.02, (VOCAB, d))
    state["pos.weight"] = rng.normal(0, 0.02, (CONTEXT, d))
    for i in range(LAYERS):
        p = f"blocks.{i}."
        for ln in ("ln_1", "ln_2"):
            state[p + ln + ".weight"], state[p + ln + ".bias"] = np.ones(d), np.zeros(d)
        state[p + "attn.qkv.weight"] = rng.normal(0, 0.02, (3 * d, d))
        state[p + "attn.proj.weight"] = rng.normal(0, 0.02, (d, d))
        state[p + "attn.proj.bias"] = np.zeros(d)
        state[p + "mlp.0.weight"] = rng.normal(0, 0.02, (4 * d, d))
        state[p + "mlp.0.bias"] = np.zeros(4 * d)
        state[p + "mlp.2.weight"] = rng.normal(0, 0.02, (d, 4 * d))
        state[p + "mlp.2.bias"] = np.zeros(d)
    state["ln_f.weight"], state["ln_f.bias"] = np.ones(d), np.zeros(d)
    state["head.weight"] = state["tok.weight"]
    return {f"state/{k}": v.astype(np.float32) for k, v in state.items()}


def data(rng):
    out = _weights(rng)
    tokens = rng.integers(0, VOCAB, (BATCH, CONTEXT + 1))
    out["idx"], out["targets"] = tokens[:, :-1].copy(), tokens[:, 1:].copy()
    return out


def metric(seconds_per_step):
    return seconds_per_step * 1e3


def _state(d):
    return {k[len("state/"):]: v for k, v in d.items() if k.startswith("state/")}


def _trainer(lib, d, device, to_tensor, capture=None, sync=None, info=None):
    """A Bench for ``lib``'s model on ``device``: load the weights, AdamW, one step = zero_grad,
    forward, backward, step; ``capture`` wraps the step (``lk.function``)."""
    model = make_gpt(lib).to(device)      # load_state_dict copies into the model where it is
    model.load_state_dict({k: to_tensor(v) for k, v in _state(d).items()})
    optimizer = lib.optim.AdamW(model.parameters(), lr=LR)
    idx, targets = to_tensor(d["idx"]), to_tensor(d["targets"])

    def train_step(idx, targets):
        optimizer.zero_grad()
        loss = model(idx, targets)
        loss.backward()
        optimizer.step()
        return loss
    run = capture(train_step) if capture is not None else train_step

    def step():
        return run(idx, targets)

    def check():
        return [step().item(), step().item()]
    return Bench(step=step, check=check, sync=sync, info=info)


def _labkit(d, device, capture):
    import labkit as lk
    dev = labkit_device(device)
    return _trainer(lk, d, dev, lambda a: lk.tensor(a, device=dev),
                    capture=require_capture() if capture else None, sync=labkit_sync(device))


@IMPLS.register("labkit_eager")
def labkit_eager(d, device):
    return _labkit(d, device, capture=False)


@IMPLS.register("labkit_captured")
def labkit_captured(d, device):
    return _labkit(d, device, capture=True)


@IMPLS.register("numpy")
def numpy_impl(d, device):
    raise NotAvailable("no hand-written NumPy GPT: its backward by hand is a program of its own "
                       "(W3 and W6 compare labkit with hand-written NumPy)")


@IMPLS.register("torch")
def torch_impl(d, device):
    import torch
    dev = torch_device(device)
    return _trainer(torch, d, dev, lambda a: torch.tensor(a, device=dev), sync=torch_sync(device),
                    info=torch_info())
