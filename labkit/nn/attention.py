"""``MultiheadAttention`` as PyTorch's (which keeps it in ``torch/nn/modules/activation.py``):
the same constructor, parameter names (``in_proj_weight``, ``in_proj_bias``, ``out_proj.weight``,
``q_proj_weight``... when ``kdim``/``vdim`` differ, ``bias_k``/``bias_v``), initialisation,
masks and return values; the math is ``nn.functional.attention``."""
from ..tensor.creation import zeros
from . import init
from .functional import attention as A
from .linear import Linear
from .module import Module
from .parameter import Parameter


class NonDynamicallyQuantizableLinear(Linear):
    """A Linear layer under the name PyTorch gives MultiheadAttention's output projection."""


class MultiheadAttention(Module):
    """Attention from ``query`` to ``key``/``value`` over ``num_heads`` heads of size
    ``embed_dim // num_heads``, then an output projection.

    ``forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False)``: query (L, N, E), key (S, N, kdim), value
    (S, N, vdim) ((N, L, E)... with ``batch_first=True``, or unbatched (L, E)). Boolean masks
    are True where a query may *not* attend; float masks are added to the scores.
    ``key_padding_mask`` is (N, S); ``attn_mask`` (L, S) or (N * num_heads, L, S); ``is_causal``
    is a hint that ``attn_mask`` is the causal mask. Returns ``(output, weights)``: weights
    averaged over heads (N, L, S) (per head with ``average_attn_weights=False``) when
    ``need_weights``, else None. Dropout applies to the attention weights while training.

    >>> import labkit as lk
    >>> mha = lk.nn.MultiheadAttention(8, 2, batch_first=True)
    >>> x = lk.randn(3, 5, 8)
    >>> out, w = mha(x, x, x)
    >>> out.shape, w.shape
    ((3, 5, 8), (3, 5, 5))
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"MultiheadAttention: embed_dim and num_heads must be greater than "
                             f"0, got embed_dim={embed_dim} and num_heads={num_heads} instead")
        super().__init__()
        self.embed_dim = int(embed_dim)
        self.kdim = int(kdim) if kdim is not None else self.embed_dim
        self.vdim = int(vdim) if vdim is not None else self.embed_dim
        self._qkv_same_embed_dim = self.kdim == self.embed_dim and self.vdim == self.embed_dim
        self.num_heads = int(num_heads)
        self.dropout = float(dropout)
        self.batch_first = bool(batch_first)
        self.head_dim = self.embed_dim // self.num_heads
        if self.head_dim * self.num_heads != self.embed_dim:
            raise ValueError(f"MultiheadAttention: embed_dim must be divisible by num_heads "
                             f"(got embed_dim={embed_dim}, num_heads={num_heads})")
        def param(*shape):
            return Parameter(zeros(shape, dtype=dtype, device=device))
        e = self.embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = param(3 * e, e)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = param(e, e)
            self.k_proj_weight = param(e, self.kdim)
            self.v_proj_weight = param(e, self.vdim)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = param(3 * e)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(e, e, bias=bias, device=device,
                                                        dtype=dtype)
        if add_bias_kv:
            self.bias_k = param(1, 1, e)
            self.bias_v = param(1, 1, e)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = bool(add_zero_attn)
        self._reset_parameters()

    def _reset_parameters(self):
        """PyTorch's: Xavier-uniform projections, zero biases, Xavier-normal bias_k/bias_v."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        separate = None if self._qkv_same_embed_dim else \
            (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        return A.multi_head_attention(
            query, key, value, self.num_heads, self.in_proj_weight, self.in_proj_bias,
            self.bias_k, self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight,
            self.out_proj.bias, training=self.training, key_padding_mask=key_padding_mask,
            need_weights=need_weights, attn_mask=attn_mask, separate=separate,
            average_attn_weights=average_attn_weights, is_causal=is_causal,
            batch_first=self.batch_first, embed_dim=self.embed_dim)
