"""Attention and the Transformer against PyTorch: ``F.scaled_dot_product_attention`` (masks,
causal, scale, grouped-query heads, rows with nothing to attend, dropout), the multi-head
functional form, errors, initialisation, and a captured TransformerEncoder step equal to eager.
The modules' outputs and gradients against PyTorch's are the ModuleCases of
``tests/nn/cases/attention.py`` and ``tests/nn/cases/transformer.py``."""
import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import labkit as lk
from labkit import nn
from labkit.nn import functional as F


def pair(a, grad=True):
    if a.dtype == bool:
        return lk.tensor(a), torch.tensor(a)
    return lk.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


def close(ours, theirs, tol=1e-12):
    theirs = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else theirs
    np.testing.assert_allclose(ours.detach().numpy(), theirs, rtol=tol, atol=tol)


def check_sdpa(shapes, mask=None, **kw):
    """Output and the gradients of q, k, v (and a float mask) against torch's."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in shapes]
    ours, theirs = zip(*(pair(a) for a in arrays))
    m_ours = m_theirs = None
    if mask is not None:
        m_ours, m_theirs = pair(mask)
    out = F.scaled_dot_product_attention(*ours, attn_mask=m_ours, **kw)
    ref = TF.scaled_dot_product_attention(*theirs, attn_mask=m_theirs, **kw)
    close(out, ref)
    cot = rng.standard_normal(tuple(ref.shape))
    (out * lk.tensor(cot)).sum().backward()
    (ref * torch.tensor(cot)).sum().backward()
    for a, b in zip(ours + (m_ours,), theirs + (m_theirs,)):
        if b is not None and b.grad is not None:
            close(a.grad, b.grad)
    return out


B, H, L, S, E = 2, 3, 4, 5, 6


@pytest.mark.parametrize("name,mask", [
    ("none", None),
    ("bool_2d", np.random.default_rng(1).random((L, S)) < 0.6),
    ("bool_per_batch", np.random.default_rng(2).random((B, 1, L, S)) < 0.6),
    ("float", np.random.default_rng(3).standard_normal((B, H, L, S))),
    ("float_with_minus_inf", np.where(np.random.default_rng(4).random((L, S)) < 0.4, -np.inf,
                                      np.random.default_rng(5).standard_normal((L, S)))),
])
def test_sdpa_masks_match_torch(name, mask):
    check_sdpa([(B, H, L, E), (B, H, S, E), (B, H, S, 7)], mask)


@pytest.mark.parametrize("l,s", [(4, 4), (3, 6), (6, 3)])
def test_sdpa_causal_matches_torch(l, s):
    check_sdpa([(B, H, l, E), (B, H, s, E), (B, H, s, E)], is_causal=True)


def test_sdpa_scale_unbatched_and_broadcast_batch_match_torch():
    check_sdpa([(L, E), (S, E), (S, 2)], scale=0.3)
    check_sdpa([(B, H, L, E), (1, H, S, E), (1, H, S, E)], scale=-1.5)


def test_sdpa_grouped_query_heads_match_torch():
    check_sdpa([(B, 6, L, E), (B, 2, S, E), (B, 2, S, 3)], enable_gqa=True)
    check_sdpa([(B, 4, L, E), (B, 4, S, E), (B, 4, S, 3)], enable_gqa=True)
    with pytest.raises(lk.ShapeError, match="must divide the number of heads in query"):
        F.scaled_dot_product_attention(lk.ones(1, 3, 2, 4), lk.ones(1, 2, 2, 4),
                                       lk.ones(1, 2, 2, 4), enable_gqa=True)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_sdpa_row_with_nothing_to_attend_gives_zeros_as_torch(kind):
    allowed = np.random.default_rng(6).random((L, S)) < 0.7
    allowed[:, 0] = True
    allowed[2] = False                               # query 2 may attend to nothing
    mask = allowed if kind == "bool" else np.where(allowed, 0.0, -np.inf)
    out = check_sdpa([(B, H, L, E), (B, H, S, E), (B, H, S, E)], mask)
    assert not np.any(out.detach().numpy()[:, :, 2]) and np.all(np.isfinite(out.detach().numpy()))


def test_sdpa_row_with_nothing_to_attend_under_capture():
    q = lk.randn(1, 1, 2, 3, dtype=lk.float64)
    mask = lk.tensor([[True, True], [False, False]])
    f = lk.function(lambda q, m: F.scaled_dot_product_attention(q, q, q, attn_mask=m))
    np.testing.assert_allclose(f(q, mask).numpy(),
                               F.scaled_dot_product_attention(q, q, q, attn_mask=mask).numpy())
    assert not np.any(f(q, mask).numpy()[0, 0, 1])


def test_sdpa_dropout():
    q = lk.randn(2, 2, 8, 4, dtype=lk.float64)
    zero = F.scaled_dot_product_attention(q, q, q, dropout_p=1.0)
    assert not np.any(zero.numpy())                              # as torch: all weights dropped
    lk.manual_seed(0)
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).numpy()
    lk.manual_seed(0)
    np.testing.assert_array_equal(a, F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
                                  .numpy())
    assert not np.allclose(a, F.scaled_dot_product_attention(q, q, q).numpy())
    ones = lk.ones(1, 1, 200, 1, dtype=lk.float64)
    kept = F.scaled_dot_product_attention(ones, ones, ones, dropout_p=0.25).numpy()
    assert abs(kept.mean() - 1.0) < 0.05          # rescaled by 1 / (1 - p): the mean is kept


def test_sdpa_errors():
    q = lk.ones(1, 2, 3, 4)
    with pytest.raises(ValueError, match="attn_mask should not be set when is_causal"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=lk.ones(3, 3, dtype=lk.bool_),
                                       is_causal=True)
    with pytest.raises(lk.DTypeError, match="bool and floating.*int64"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=lk.ones(3, 3, dtype=lk.int64))
    with pytest.raises(lk.ShapeError, match=r"do not fit.*\(1, 2, 3, 4\).*\(1, 2, 3, 5\)"):
        F.scaled_dot_product_attention(q, lk.ones(1, 2, 3, 5), q)
    with pytest.raises(lk.ShapeError, match="at least 2 dimensions"):
        F.scaled_dot_product_attention(lk.ones(4), q, q)


# ---- multi-head attention ----------------------------------------------------------------------
def copied(make):
    torch.manual_seed(0)
    theirs = make(torch.nn).double()
    ours = make(nn)
    ours.load_state_dict({k: lk.tensor(v.detach().numpy()) for k, v in
                          theirs.state_dict().items()})
    return ours, theirs


@pytest.mark.filterwarnings("ignore:invalid value encountered")     # NumPy's, on the NaN row
@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_query_with_nothing_to_attend_as_torch(need_weights):
    """PyTorch gives NaN for such a query where it returns the weights, zeros where not."""
    ours, theirs = copied(lambda nn: nn.MultiheadAttention(4, 2))
    x = np.random.default_rng(7).standard_normal((3, 2, 4))
    kpm = np.array([[False, False, True], [True, True, True]])       # batch 1: all padded
    out, w = ours(*(lk.tensor(x),) * 3, key_padding_mask=lk.tensor(kpm),
                  need_weights=need_weights)
    ref, tw = theirs(*(torch.tensor(x),) * 3, key_padding_mask=torch.tensor(kpm),
                     need_weights=need_weights)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-12, atol=1e-12)
    assert np.isnan(out.detach().numpy()[:, 1]).all() == need_weights
    if need_weights:
        np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-12, atol=1e-12)
    else:
        assert w is None and tw is None


def test_multi_head_attention_forward_matches_torch():
    rng = np.random.default_rng(8)
    e, h = 6, 3
    arrays = {"q": (4, 2, e), "k": (5, 2, 3), "v": (5, 2, 2), "wq": (e, e), "wk": (e, 3),
              "wv": (e, 2), "b": (3 * e,), "wo": (e, e), "bo": (e,), "bk": (1, 1, e),
              "bv": (1, 1, e)}
    ours, theirs = {}, {}
    for key, shape in arrays.items():
        ours[key], theirs[key] = pair(rng.standard_normal(shape))
    kpm = rng.random((2, 5)) < 0.3
    kpm[:, 0] = False

    def run(lib, fn, t):
        return fn(t["q"], t["k"], t["v"], e, h, None, t["b"], t["bk"], t["bv"], True, 0.0,
                  t["wo"], t["bo"], training=False, key_padding_mask=lib.tensor(kpm),
                  use_separate_proj_weight=True, q_proj_weight=t["wq"], k_proj_weight=t["wk"],
                  v_proj_weight=t["wv"], average_attn_weights=False)
    out, w = run(lk, F.multi_head_attention_forward, ours)
    ref, tw = run(torch, TF.multi_head_attention_forward, theirs)
    close(out, ref)
    close(w, tw)
    cot = rng.standard_normal(tuple(ref.shape))
    (out * lk.tensor(cot)).sum().backward()
    (ref * torch.tensor(cot)).sum().backward()
    for key in arrays:
        close(ours[key].grad, theirs[key].grad)


def test_multi_head_attention_forward_static_kv_matches_torch():
    rng = np.random.default_rng(9)
    e, h, n = 4, 2, 2
    w, b, wo, bo = (rng.standard_normal(s) for s in ((3 * e, e), (3 * e,), (e, e), (e,)))
    q = rng.standard_normal((3, n, e))
    sk, sv = rng.standard_normal((n * h, 5, e // h)), rng.standard_normal((n * h, 5, e // h))

    def run(lib, fn):
        t = [lib.tensor(a) for a in (q, w, b, wo, bo, sk, sv)]
        return fn(t[0], t[0], t[0], e, h, t[1], t[2], None, None, False, 0.0, t[3], t[4],
                  static_k=t[5], static_v=t[6])
    for a, r in zip(run(lk, F.multi_head_attention_forward),
                    run(torch, TF.multi_head_attention_forward)):
        close(a, r)


def test_mha_errors():
    with pytest.raises(ValueError, match="divisible by num_heads"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(ValueError, match="greater than 0"):
        nn.MultiheadAttention(0, 2)
    mha = nn.MultiheadAttention(4, 2)
    x = lk.ones(3, 2, 4)
    with pytest.raises(lk.ShapeError, match=r"expecting embedding dimension of 4.*\(3, 2, 5\)"):
        mha(lk.ones(3, 2, 5), x, x)
    with pytest.raises(ValueError, match="Need attn_mask if specifying the is_causal hint"):
        mha(x, x, x, is_causal=True)
    with pytest.raises(lk.ShapeError, match=r"key_padding_mask of shape \(2, 3\)"):
        mha(x, x, x, key_padding_mask=lk.zeros(3, 2, dtype=lk.bool_))
    with pytest.raises(lk.ShapeError, match=r"2-D attn_mask is \(3, 4\), but should be \(3, 3\)"):
        mha(x, x, x, attn_mask=lk.zeros(3, 4, dtype=lk.bool_))
    with pytest.raises(lk.ShapeError, match=r"all be 3-D .* or all 2-D"):
        mha(x, lk.ones(3, 4), x)
    with pytest.raises(lk.DTypeError, match="key_padding_mask.*bool and floating"):
        mha(x, x, x, key_padding_mask=lk.zeros(2, 3, dtype=lk.int64))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mha(x, x, x, key_padding_mask=lk.zeros(2, 3), attn_mask=lk.zeros(3, 3, dtype=lk.bool_))
    assert "mismatched key_padding_mask and attn_mask" in str(caught[0].message)


def test_mha_initialisation_as_torch():
    lk.manual_seed(0)
    mha = nn.MultiheadAttention(16, 4, add_bias_kv=True)
    bound = math.sqrt(6.0 / (16 + 48))                  # Xavier-uniform of (3E, E)
    w = mha.in_proj_weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert not np.any(mha.in_proj_bias.detach().numpy()) and not np.any(mha.out_proj.bias.detach().numpy())
    assert mha.bias_k.shape == (1, 1, 16) and np.any(mha.bias_k.detach().numpy())
    assert np.abs(mha.out_proj.weight.detach().numpy()).max() <= 1 / math.sqrt(16)   # Linear's default
    cross = nn.MultiheadAttention(16, 4, kdim=5, vdim=7)
    assert cross.in_proj_weight is None and cross.k_proj_weight.shape == (16, 5)
    assert [k for k, _ in cross.state_dict().items()] == [
        k for k, _ in torch.nn.MultiheadAttention(16, 4, kdim=5, vdim=7).state_dict().items()]
    assert repr(mha) == repr(torch.nn.MultiheadAttention(16, 4, add_bias_kv=True))


# ---- the Transformer ---------------------------------------------------------------------------
def test_generate_square_subsequent_mask_as_torch():
    ours = nn.Transformer.generate_square_subsequent_mask(4)
    theirs = torch.nn.Transformer.generate_square_subsequent_mask(4)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert ours.dtype == lk.float32
    assert nn.Transformer.generate_square_subsequent_mask(2, dtype=lk.float64).dtype == \
        lk.float64


def test_transformer_structure_and_initialisation_as_torch():
    lk.manual_seed(1)
    make = (lambda nn: nn.Transformer(8, 2, 2, 1, 16))
    ours, theirs = make(nn), make(torch.nn)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    assert repr(ours.encoder.norm) == repr(theirs.encoder.norm)
    for name, p in ours.named_parameters():
        if p.ndim > 1:                      # every matrix Xavier-uniform
            bound = math.sqrt(6.0 / sum(p.shape))
            assert np.abs(p.detach().numpy()).max() <= bound, name
    layers = ours.encoder.layers
    layers[0].linear1.weight.detach().numpy()[...] = 0.0        # the stack's layers are copies
    assert np.any(layers[1].linear1.weight.detach().numpy())


def test_transformer_errors():
    model = nn.Transformer(8, 2, 1, 1, 16)
    with pytest.raises(lk.ShapeError, match="batch number of src and tgt must be equal"):
        model(lk.ones(5, 2, 8), lk.ones(4, 3, 8))
    with pytest.raises(lk.ShapeError, match="d_model=8"):
        model(lk.ones(5, 2, 8), lk.ones(4, 2, 6))
    with pytest.raises(ValueError, match="relu/gelu"):
        nn.TransformerEncoderLayer(8, 2, activation="swish")
    with pytest.raises(lk.DTypeError, match="src_mask.*bool and floating"):
        nn.TransformerEncoderLayer(8, 2)(lk.ones(3, 1, 8), src_mask=lk.zeros(3, 3,
                                                                              dtype=lk.int64))


def test_transformer_dropout_is_seeded_and_off_in_eval():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5)
    x = lk.randn(4, 2, 8)
    lk.manual_seed(2)
    a = layer(x).detach().numpy()
    lk.manual_seed(2)
    np.testing.assert_array_equal(a, layer(x).detach().numpy())
    layer.eval()
    np.testing.assert_array_equal(layer(x).detach().numpy(), layer(x).detach().numpy())
    assert not np.allclose(a, layer(x).detach().numpy())


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
def test_captured_transformer_encoder_equals_eager():
    lk.manual_seed(3)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                       activation="gelu", dtype=lk.float64)
    encoder = nn.TransformerEncoder(layer, 2)
    x = lk.randn(3, 5, 8, dtype=lk.float64)
    mask = nn.Transformer.generate_square_subsequent_mask(5, dtype=lk.float64)
    padding = lk.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
    params = list(encoder.parameters())

    def step(x, mask, padding):
        out = encoder(x, mask=mask, src_key_padding_mask=padding)
        loss = (out * out).sum()
        loss.backward()
        return loss
    results = []
    for run in (step, lk.function(step)):
        encoder.zero_grad()
        loss = run(x, mask, padding)
        results.append((loss.item(), [p.grad.numpy().copy() for p in params]))
    (eager, eager_grads), (graph, graph_grads) = results
    np.testing.assert_allclose(graph, eager, rtol=1e-12)
    for a, b in zip(graph_grads, eager_grads):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
