"""A GPT-style decoder trained step for step with PyTorch (see lockstep.py): token and position
embeddings, two blocks of causal self-attention and a GELU MLP with LayerNorm before each, a
final LayerNorm and an output head tied to the token embedding; AdamW with weight decay on the
2-D weights only (two parameter groups), linear warm-up then cosine decay, gradient clipping.

Attention is written both ways people write it: q/k/v from one Linear and
``F.scaled_dot_product_attention(is_causal=True)``, or ``nn.MultiheadAttention`` with a boolean
causal mask kept as a buffer. The schedule is a ``LambdaLR`` with the warm-up and cosine in one
function, or a ``SequentialLR`` of ``LinearLR`` and ``CosineAnnealingLR``.

The attention projections have no bias (as in nanoGPT's ``bias=False`` and LLaMA): a bias of the
keys adds the same number to every score of a query, which softmax ignores, so its gradient is
zero but for rounding, and Adam scales rounding noise to steps of the size of the learning rate,
different in every library (and between eager and captured)."""
import math

import numpy as np
import pytest

from .lockstep import lockstep

VOCAB, CONTEXT, D_MODEL, HEADS, LAYERS, BATCH, STEPS = 64, 16, 32, 4, 2, 8, 30
WARMUP, LR, WEIGHT_DECAY, CLIP = 5, 3e-3, 0.1, 1.0


def make_gpt(torch, attention):
    nn, F = torch.nn, torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self, d_model, n_head):
            super().__init__()
            self.n_head = n_head
            self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
            self.proj = nn.Linear(d_model, d_model)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.qkv(x).split(C, dim=2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.proj(y)

    class MultiheadSelfAttention(nn.Module):
        def __init__(self, d_model, n_head):
            super().__init__()
            self.attn = nn.MultiheadAttention(d_model, n_head, batch_first=True, bias=False)
            mask = torch.triu(torch.ones(CONTEXT, CONTEXT, dtype=torch.bool), diagonal=1)
            self.register_buffer("mask", mask, persistent=False)

        def forward(self, x):
            T = x.size(1)
            y, _ = self.attn(x, x, x, attn_mask=self.mask[:T, :T], need_weights=False)
            return y

    class Block(nn.Module):
        def __init__(self, d_model, n_head):
            super().__init__()
            self.ln_1 = nn.LayerNorm(d_model)
            if attention == "sdpa":
                self.attn = CausalSelfAttention(d_model, n_head)
            else:
                self.attn = MultiheadSelfAttention(d_model, n_head)
            self.ln_2 = nn.LayerNorm(d_model)
            self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                     nn.Linear(4 * d_model, d_model))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, vocab, context, d_model, n_head, n_layer):
            super().__init__()
            self.tok = nn.Embedding(vocab, d_model)
            self.pos = nn.Embedding(context, d_model)
            self.blocks = nn.ModuleList([Block(d_model, n_head) for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab, bias=False)
            self.head.weight = self.tok.weight
            self.apply(self._init_weights)

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            B, T = idx.size()
            pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
            x = self.tok(idx) + self.pos(pos)
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.ln_f(x))
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            return logits, loss

        def configure_optimizers(self, weight_decay, learning_rate):
            params = {name: p for name, p in self.named_parameters() if p.requires_grad}
            decay = [p for p in params.values() if p.dim() >= 2]
            no_decay = [p for p in params.values() if p.dim() < 2]
            groups = [{"params": decay, "weight_decay": weight_decay},
                      {"params": no_decay, "weight_decay": 0.0}]
            return torch.optim.AdamW(groups, lr=learning_rate, betas=(0.9, 0.95))

    return GPT(VOCAB, CONTEXT, D_MODEL, HEADS, LAYERS)


def warmup_cosine(step):
    if step < WARMUP:
        return (step + 1) / WARMUP
    progress = (step - WARMUP) / (STEPS - WARMUP)
    return 0.1 + 0.45 * (1.0 + math.cos(math.pi * progress))


def lambda_schedule(torch, model):
    optimizer = model.configure_optimizers(WEIGHT_DECAY, LR)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine)


def sequential_schedule(torch, model):
    optimizer = model.configure_optimizers(WEIGHT_DECAY, LR)
    sched = torch.optim.lr_scheduler
    warmup = sched.LinearLR(optimizer, start_factor=1.0 / WARMUP, total_iters=WARMUP - 1)
    cosine = sched.CosineAnnealingLR(optimizer, T_max=STEPS - WARMUP, eta_min=LR / 10)
    return optimizer, sched.SequentialLR(optimizer, [warmup, cosine], milestones=[WARMUP])


def loss_of(torch, model, idx, targets):
    _, loss = model(idx, targets)
    return loss


def batches(seed=0):
    """Sequences that count up from a random start by a step of 1, 2 or 3 (mod VOCAB): the
    step can be read from the context; (inputs, next tokens) of CONTEXT tokens each."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(STEPS):
        start = rng.integers(0, VOCAB, (BATCH, 1))
        stride = rng.integers(1, 4, (BATCH, 1))
        seq = (start + stride * np.arange(CONTEXT + 1)) % VOCAB
        out.append((seq[:, :-1].astype(np.int64), seq[:, 1:].astype(np.int64)))
    return out


@pytest.mark.parametrize("attention,optimize", [("sdpa", lambda_schedule),
                                                ("multihead", sequential_schedule)],
                         ids=["sdpa-LambdaLR", "MultiheadAttention-SequentialLR"])
def test_gpt_trains_step_for_step_with_pytorch(attention, optimize, device):
    theirs, eager, captured = lockstep(lambda lib: make_gpt(lib, attention), optimize, loss_of,
                                       batches(), clip=CLIP, device=device)
    for model in (eager, captured):
        assert model.head.weight is model.tok.weight
        assert len(model.configure_optimizers(0.1, 1.0).param_groups[0]["params"]) == \
            len(theirs.configure_optimizers(0.1, 1.0).param_groups[0]["params"])
