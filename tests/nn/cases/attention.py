"""Cases of nn.MultiheadAttention: self- and cross-attention, batch-first and time-major and
unbatched, kdim/vdim, bool and float masks (attention and key padding, 2-D and 3-D), the
is_causal hint, per-head or averaged weights or none, no bias, bias_k/bias_v and a zero key."""
import numpy as np

from ..module_cases import ModuleCase
from .calls import attention_mask, causal_float, inputs, padding, wrapped

L, S, N, E, H = 4, 5, 3, 8, 2


def self_attention(names=(), **kw):
    """forward(x, *masks) = m(x, x, x) with the masks as the keywords ``names``."""
    return lambda nn, m, x, *masks: m(x, x, x, **dict(zip(names, masks)), **kw)


def key_is_value(names=(), **kw):
    return lambda nn, m, q, kv, *masks: m(q, kv, kv, **dict(zip(names, masks)), **kw)


MODULE_CASES = [
    ModuleCase("mha_self_batch_first_weights",
               wrapped(lambda nn: nn.MultiheadAttention(E, H, batch_first=True),
                       self_attention()),
               inputs((N, L, E)), module="MultiheadAttention"),
    ModuleCase("mha_self_causal_hint_no_weights",
               wrapped(lambda nn: nn.MultiheadAttention(E, H),
                       self_attention(("attn_mask",), need_weights=False, is_causal=True)),
               inputs((L, N, E), causal_float(L)), module="MultiheadAttention"),
    ModuleCase("mha_self_causal_hint_and_padding",
               wrapped(lambda nn: nn.MultiheadAttention(E, H, batch_first=True),
                       self_attention(("key_padding_mask", "attn_mask"), need_weights=False,
                                      is_causal=True)),
               inputs((N, L, E), padding(N, L), causal_float(L)),
               module="MultiheadAttention"),
    ModuleCase("mha_cross_kdim_vdim_padding_per_head_weights",
               lambda nn: nn.MultiheadAttention(E, H, kdim=6, vdim=5),
               inputs((L, N, E), (S, N, 6), (S, N, 5), padding(N, S), True,
                      attention_mask(L, S)),
               kwargs={"average_attn_weights": False}),
    ModuleCase("mha_key_is_value_3d_bool_mask_float_padding",
               wrapped(lambda nn: nn.MultiheadAttention(E, H, batch_first=True),
                       key_is_value(("key_padding_mask", "attn_mask"))),
               inputs((N, L, E), (N, S, E), np.where(padding(N, S), -np.inf, 0.0),
                      np.stack([attention_mask(L, S, seed) for seed in range(N * H)])),
               module="MultiheadAttention"),
    ModuleCase("mha_separate_inputs_no_weights_float_mask",
               lambda nn: nn.MultiheadAttention(E, 4),
               inputs((L, N, E), (S, N, E), (S, N, E), None, False,
                      np.where(attention_mask(L, S), -np.inf, 0.5))),
    ModuleCase("mha_bias_kv_zero_attn_masks",
               lambda nn: nn.MultiheadAttention(E, H, add_bias_kv=True, add_zero_attn=True),
               inputs((L, N, E), (S, N, E), (S, N, E), padding(N, S), True,
                      attention_mask(L, S))),
    ModuleCase("mha_bias_kv_no_weights",
               lambda nn: nn.MultiheadAttention(E, H, add_bias_kv=True),
               inputs((L, N, E), (S, N, E), (S, N, E), padding(N, S), False)),
    ModuleCase("mha_no_bias", lambda nn: nn.MultiheadAttention(E, H, bias=False),
               inputs((L, N, E), (S, N, E), (S, N, E))),
    ModuleCase("mha_unbatched_padding",
               wrapped(lambda nn: nn.MultiheadAttention(E, H, batch_first=True),
                       self_attention(("key_padding_mask",), average_attn_weights=False)),
               inputs((L, E), padding(1, L)[0]), module="MultiheadAttention"),
    ModuleCase("mha_unbatched_3d_mask_no_weights",
               lambda nn: nn.MultiheadAttention(E, H),
               inputs((L, E), (S, E), (S, E), None, False,
                      np.stack([attention_mask(L, S, seed) for seed in range(H)]))),
    ModuleCase("mha_dropout_eval", lambda nn: nn.MultiheadAttention(E, H, dropout=0.5),
               inputs((L, N, E), (S, N, E), (S, N, E)), train=False),
]
