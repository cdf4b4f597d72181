"""The GPT of the benchmarks (W10's config: vocab 256, context 64, d_model 128, 4 heads, 2
layers, batch 16) written as tensor-parallel code expects it: q, k and v from three Linears
(W10 has one Linear for all three, which a split by columns would cut across q, k and v). The
same weights give the same function: ``w10_weights`` splits W10's ``qkv`` weight in three, and a
test checks the two models' losses are equal on one device.

``make_gpt(lib, config)`` builds it from ``lib`` (labkit or PyTorch: one source);
``stage_modules`` cuts it into pipeline stages."""
import numpy as np

W10 = dict(vocab=256, context=64, d_model=128, heads=4, layers=2, batch=16)
SMALL = dict(vocab=32, context=8, d_model=16, heads=4, layers=2, batch=8)


def make_gpt(torch, config, dtype=None):
    nn, F = torch.nn, torch.nn.functional
    V, T, C, H, L = (config[k] for k in ("vocab", "context", "d_model", "heads", "layers"))

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(C, C, bias=False)
            self.k = nn.Linear(C, C, bias=False)
            self.v = nn.Linear(C, C, bias=False)
            self.proj = nn.Linear(C, C)

        def forward(self, x):
            B, T_, C_ = x.size()
            q = self.q(x).view(B, T_, H, C_ // H).transpose(1, 2)
            k = self.k(x).view(B, T_, H, C_ // H).transpose(1, 2)
            v = self.v(x).view(B, T_, H, C_ // H).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).contiguous().view(B, T_, C_))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(C)
            self.mlp = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V, C)
            self.pos = nn.Embedding(T, C)
            self.blocks = nn.ModuleList([Block() for _ in range(L)])
            self.ln_f = nn.LayerNorm(C)
            self.head = nn.Linear(C, V, bias=False)
            self.head.weight = self.tok.weight

        def embed(self, idx):
            B, T_ = idx.size()
            pos = torch.arange(0, T_, dtype=torch.long, device=idx.device)
            return self.tok(idx) + self.pos(pos)

        def logits(self, x):
            return self.head(self.ln_f(x))

        def forward(self, idx, targets):
            x = self.embed(idx)
            for block in self.blocks:
                x = block(x)
            logits = self.logits(x)
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    model = GPT()
    return model if dtype is None else model.to(dtype)


def as_sequence(torch, model):
    """The GPT as a Sequential of its parts (embedding, blocks, head), to cut into pipeline
    stages; it shares the model's modules (and its tied embedding)."""
    nn, F = torch.nn, torch.nn.functional

    class Embed(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = model.tok, model.pos

        def forward(self, idx):
            T_ = idx.size(1)
            pos = torch.arange(0, T_, dtype=torch.long, device=idx.device)
            return self.tok(idx) + self.pos(pos)

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_f, self.head = model.ln_f, model.head

        def forward(self, x):
            logits = self.head(self.ln_f(x))
            return logits.view(-1, logits.size(-1))

    return nn.Sequential(Embed(), *model.blocks, Head())


def loss_fn(torch):
    return lambda logits, targets: torch.nn.functional.cross_entropy(logits, targets.view(-1))


def weights(config, seed=0):
    """The model's state dict as NumPy float64 arrays (GPT-2's initialisation, as W10's)."""
    rng = np.random.default_rng(seed)
    V, T, C, L = (config[k] for k in ("vocab", "context", "d_model", "layers"))
    s = {"tok.weight": rng.normal(0, 0.02, (V, C)), "pos.weight": rng.normal(0, 0.02, (T, C))}
    for i in range(L):
        p = f"blocks.{i}."
        for ln in ("ln_1", "ln_2"):
            s[p + ln + ".weight"], s[p + ln + ".bias"] = np.ones(C), np.zeros(C)
        for name in ("q", "k", "v", "proj"):
            s[p + f"attn.{name}.weight"] = rng.normal(0, 0.02, (C, C))
        s[p + "attn.proj.bias"] = np.zeros(C)
        s[p + "mlp.0.weight"] = rng.normal(0, 0.02, (4 * C, C))
        s[p + "mlp.0.bias"] = rng.normal(0, 0.02, 4 * C)
        s[p + "mlp.2.weight"] = rng.normal(0, 0.02, (C, 4 * C))
        s[p + "mlp.2.bias"] = np.zeros(C)
    s["ln_f.weight"], s["ln_f.bias"] = np.ones(C), np.zeros(C)
    s["head.weight"] = s["tok.weight"]
    return s


def w10_weights(state):
    """The same weights in W10's layout (``attn.qkv.weight``: q, k and v stacked)."""
    out = {}
    for k, v in state.items():
        if k.endswith("attn.q.weight"):
            base = k[:-len("q.weight")]
            out[base + "qkv.weight"] = np.concatenate(
                [state[base + n + ".weight"] for n in ("q", "k", "v")])
        elif not (k.endswith("attn.k.weight") or k.endswith("attn.v.weight")):
            out[k] = v
    return out


def batch(config, seed=1):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, config["vocab"], (config["batch"], config["context"] + 1))
    return tokens[:, :-1].copy(), tokens[:, 1:].copy()


def build(lk, config, seed=0):
    """The model in float64 with the seeded weights loaded."""
    model = make_gpt(lk, config).to(lk.float64)
    model.load_state_dict({k: lk.tensor(v, dtype=lk.float64)
                           for k, v in weights(config, seed).items()})
    return model


def trainer(lk, model, captured=False, lr=1e-2):
    """One AdamW training step of ``model`` as a function of the batch (captured or not)."""
    opt = lk.optim.AdamW(model.parameters(), lr=lr)

    def step(idx, targets):
        opt.zero_grad()
        loss = model(idx, targets)
        loss.backward()
        opt.step()
        return loss
    return lk.function(step) if captured else step


def train(lk, model, config, steps, captured=False, lr=1e-2):
    """``steps`` AdamW steps on one batch; the losses as floats."""
    idx, targets = (lk.tensor(a) for a in batch(config))
    run = trainer(lk, model, captured, lr)
    return [float(run(idx, targets).item()) for _ in range(steps)]
