"""Attention: ``F.scaled_dot_product_attention`` and ``F.multi_head_attention_forward`` (what
``nn.MultiheadAttention`` computes), in labkit ops, with PyTorch's masks and edge cases.

Masks come in PyTorch's two conventions: ``scaled_dot_product_attention`` takes a boolean mask
that is True where a query *may* attend, the multi-head functions take boolean masks that are
True where it may *not*; in both, a float mask is added to the scores (``-inf`` forbids). A
query that may attend to nothing gets zeros from ``scaled_dot_product_attention`` (as PyTorch's),
and NaN from the multi-head path that returns the weights (as PyTorch's too).
"""
import math
import warnings

from ...errors import DTypeError, ShapeError, describe
from ...tensor.autocast import precision
from ...tensor.creation import full, zeros
from ...tensor.ops.composite import mean, unsqueeze
from ...tensor.ops.elementwise import (add, cast, eq, logical_and, logical_not, logical_or, mul,
                                       where)
from ...tensor.ops.index import _getitem, getitem_slices
from ...tensor.ops.layout import pad, triu
from ...tensor.ops.linalg import matmul, matmul_t
from ...tensor.ops.shape import broadcast_to, concat, permute, reshape
from ...tensor.ops.softmax import softmax
from ...tensor.ops.statistics import all_, any_
from .dropout import dropout as _dropout
from .linear import linear
from ...tensor.tensor import concrete

_NEG_INF = float("-inf")


# ---- masks ------------------------------------------------------------------------------------
class Mask:
    """A mask in one form: ``allowed`` (bool, True where a query may attend) or ``additive``
    (float, added to the scores). Both broadcast against the scores (..., L, S)."""
    __slots__ = ("allowed", "additive")

    def __init__(self, allowed=None, additive=None):
        self.allowed, self.additive = allowed, additive

    def apply(self, scores):
        # an addition, even for a boolean mask: its backward is the cotangent itself, where a
        # select would make a second select
        return add(scores, self.as_additive(scores.dtype))

    def dead_rows(self):
        """Where a query row may attend to nothing (bool, (..., L, 1))."""
        if self.allowed is not None:
            return logical_not(any_(self.allowed, dim=-1, keepdim=True))
        return all_(eq(self.additive, _NEG_INF), dim=-1, keepdim=True)

    def reviving(self, dead):
        """The mask with the ``dead`` rows opened (so their softmax stays finite)."""
        if self.allowed is not None:
            return Mask(allowed=logical_or(self.allowed, dead))
        return Mask(additive=where(dead, 0.0, self.additive))

    def as_additive(self, dtype):
        if self.additive is not None:
            return self.additive
        return cast(where(self.allowed, 0.0, _NEG_INF), dtype=dtype.name)

    def map(self, fn):
        """The mask with ``fn`` applied to its tensor (reshape, pad...)."""
        return Mask(allowed=fn(self.allowed)) if self.allowed is not None else \
            Mask(additive=fn(self.additive))


def check_mask_dtype(name, mask):
    if mask.dtype.name != "bool_" and not mask.dtype.is_floating:
        raise DTypeError(f"{name}: only bool and floating types of masks are supported, got "
                         f"{describe(mask)}; pass a bool mask or a float mask of -inf and 0")


def _merge(a, b, dtype):
    """Two masks as one: both boolean stay boolean, else both become additive."""
    if a is None or b is None:
        return a if b is None else b
    if a.allowed is not None and b.allowed is not None:
        return Mask(allowed=logical_and(a.allowed, b.allowed))
    return Mask(additive=add(a.as_additive(dtype), b.as_additive(dtype)))


def _causal(q, k):
    """Top-left aligned causal mask (L, S): query i attends to keys 0..i, as PyTorch's."""
    return Mask(additive=triu(full((q.shape[-2], k.shape[-2]), _NEG_INF, dtype=q.dtype,
                                   device=q.device), diagonal=1))


# ---- the attention itself ----------------------------------------------------------------------
def attend(q, k, v, mask, dropout_p, scale, safe):
    """``softmax(q @ k^T * scale + mask) @ v`` -> (output, weights).

    ``safe``: rows that may attend to nothing give zero weights (PyTorch's
    scaled_dot_product_attention) instead of NaN (its multi-head path with weights)."""
    scores = matmul_t(mul(q, scale), k, transpose_b=True)
    dead = None
    if mask is not None:
        if safe:
            dead = mask.dead_rows()
            known = concrete(dead)
            if known is not None and not bool(known.any()):
                dead = None                  # eagerly known: no row is fully masked
            else:
                mask = mask.reviving(dead)
        scores = mask.apply(scores)
    weights = softmax(scores, dim=-1)
    if dead is not None:
        weights = mul(weights, cast(logical_not(dead), dtype=weights.dtype.name))
    if dropout_p > 0.0:
        weights = _dropout(weights, dropout_p, True)
    return matmul(weights, v), weights


@precision("low")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """``softmax(query @ key^T * scale + mask) @ value`` over the last two dimensions, as
    PyTorch's: query (..., L, E), key (..., S, E), value (..., S, Ev) -> (..., L, Ev).

    ``attn_mask``: bool (True where a query may attend) or float (added to the scores),
    broadcasting to (..., L, S). ``is_causal``: query i attends to keys 0..i (no attn_mask
    then). ``scale``: default 1/sqrt(E). ``dropout_p``: dropout on the attention weights (always
    applied when > 0, as PyTorch's; pass 0.0 in evaluation). ``enable_gqa``: key and value may
    have fewer heads (dim -3) than query, each shared by a group of query heads. A query that
    may attend to nothing gets zeros.

    >>> import labkit as lk
    >>> import labkit.nn.functional as F
    >>> q = k = v = lk.eye(3).reshape(1, 3, 3)
    >>> F.scaled_dot_product_attention(q, k, v, is_causal=True)[0, 0].tolist()
    [1.0, 0.0, 0.0]
    """
    name = "scaled_dot_product_attention"
    for t, what in ((query, "query"), (key, "key"), (value, "value")):
        if t.ndim < 2:
            raise ShapeError(f"{name}: {what} must have at least 2 dimensions (..., L, E), got "
                             f"{describe(t)}")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ShapeError(f"{name}: query (..., L, E), key (..., S, E) and value (..., S, Ev) do "
                         f"not fit: {describe(query)}, {describe(key)}, {describe(value)}")
    if attn_mask is not None and is_causal:
        raise ValueError(f"{name}: explicit attn_mask should not be set when is_causal=True "
                         f"(is_causal is the mask)")
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        key, value = _share_heads(name, query, key), _share_heads(name, query, value)
    mask = None
    if is_causal:
        mask = _causal(query, key)
    elif attn_mask is not None:
        check_mask_dtype(name, attn_mask)
        mask = Mask(allowed=attn_mask) if attn_mask.dtype.name == "bool_" else \
            Mask(additive=attn_mask)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    return attend(query, key, value, mask, dropout_p, scale, safe=not is_causal)[0]


def _share_heads(name, query, kv):
    """``kv`` (..., Hkv, S, E) with each head repeated for its group of query heads."""
    hq, hkv = query.shape[-3], kv.shape[-3]
    if hkv == 0 or hq % hkv:
        raise ShapeError(f"{name}: with enable_gqa the number of heads in key and value "
                         f"({hkv}) must divide the number of heads in query ({hq}); got "
                         f"{describe(query)} and {describe(kv)}")
    r = hq // hkv
    lead = tuple(kv.shape[:-3])
    spread = broadcast_to(unsqueeze(kv, -3), shape=lead + (hkv, r) + tuple(kv.shape[-2:]))
    return reshape(spread, shape=lead + (hq,) + tuple(kv.shape[-2:]))


# ---- multi-head attention ----------------------------------------------------------------------
def _heads(x, num_heads, batch_first, parts=1):
    """(L, N, E) (or (N, L, E)) -> (N, heads, L, head_dim); with ``parts``, (L, N, parts * E)
    -> a list of ``parts`` such tensors."""
    a, b, e = x.shape
    hd = e // (parts * num_heads)
    if parts == 1:
        x = reshape(x, shape=(a, b, num_heads, hd))
        return permute(x, dims=(0, 2, 1, 3) if batch_first else (1, 2, 0, 3))
    x = reshape(x, shape=(a, b, parts, num_heads, hd))
    x = permute(x, dims=(2, 0, 3, 1, 4) if batch_first else (2, 1, 3, 0, 4))
    return [_getitem(x, spec=(("i", i),)) for i in range(parts)]


def _rows(t, start, stop):
    return None if t is None else getitem_slices(t, 0, start, stop)


def _project(query, key, value, num_heads, batch_first, w, b, separate):
    """The input projections, split into heads: q, k, v each (N, heads, len, head_dim)."""
    e = query.shape[-1] if separate is None else separate[0].shape[0]
    if separate is not None:
        wq, wk, wv = separate
        bq, bk, bv = (_rows(b, 0, e), _rows(b, e, 2 * e), _rows(b, 2 * e, 3 * e))
    elif query is key and key is value:             # self-attention: one product
        return _heads(linear(query, w, b), num_heads, batch_first, parts=3)
    else:
        wq, bq = _rows(w, 0, e), _rows(b, 0, e)
        if key is value:
            k, v = _heads(linear(key, _rows(w, e, 3 * e), _rows(b, e, 3 * e)), num_heads,
                          batch_first, parts=2)
            return _heads(linear(query, wq, bq), num_heads, batch_first), k, v
        wk, bk, wv, bv = _rows(w, e, 2 * e), _rows(b, e, 2 * e), _rows(w, 2 * e, 3 * e), \
            _rows(b, 2 * e, 3 * e)
    return (_heads(linear(query, wq, bq), num_heads, batch_first),
            _heads(linear(key, wk, bk), num_heads, batch_first),
            _heads(linear(value, wv, bv), num_heads, batch_first))


def _mha_shapes(query, key, value, key_padding_mask, attn_mask, num_heads):
    """PyTorch's checks; whether the input is batched."""
    name = "multi_head_attention_forward"
    batched = query.ndim == 3
    if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
        raise ShapeError(f"{name}: query, key and value must all be 3-D (batched) or all 2-D "
                         f"(unbatched); got {describe(query)}, {describe(key)}, "
                         f"{describe(value)}")
    if key_padding_mask is not None and key_padding_mask.ndim != query.ndim - 1:
        raise ShapeError(f"{name}: key_padding_mask must be {query.ndim - 1}-D "
                         f"({'(N, S)' if batched else '(S,)'}), got {describe(key_padding_mask)}")
    if attn_mask is not None and attn_mask.ndim not in (2, 3):
        raise ShapeError(f"{name}: attn_mask must be 2-D (L, S) or 3-D (N * num_heads, L, S), "
                         f"got {describe(attn_mask)}")
    if not batched and attn_mask is not None and attn_mask.ndim == 3 and \
            attn_mask.shape[0] != num_heads:
        raise ShapeError(f"{name}: for unbatched query a 3-D attn_mask must be (num_heads="
                         f"{num_heads}, L, S), got {describe(attn_mask)}")
    return batched


def _mha_masks(attn_mask, key_padding_mask, bsz, num_heads, tgt_len, src_len, dtype):
    """The masks as one :class:`Mask` broadcasting to (N, heads, L, S), or None."""
    name = "multi_head_attention_forward"
    mask = None
    if attn_mask is not None:
        want = (tgt_len, src_len) if attn_mask.ndim == 2 else (bsz * num_heads, tgt_len, src_len)
        if tuple(attn_mask.shape) != want:
            raise ShapeError(f"{name}: the shape of the {attn_mask.ndim}-D attn_mask is "
                             f"{tuple(attn_mask.shape)}, but should be {want}")
        m = attn_mask if attn_mask.ndim == 2 else \
            reshape(attn_mask, shape=(bsz, num_heads, tgt_len, src_len))
        mask = Mask(allowed=logical_not(m)) if m.dtype.name == "bool_" else Mask(additive=m)
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise ShapeError(f"{name}: expected key_padding_mask of shape {(bsz, src_len)} "
                             f"(batch, source length), got {describe(key_padding_mask)}")
        m = reshape(key_padding_mask, shape=(bsz, 1, 1, src_len))
        kpm = Mask(allowed=logical_not(m)) if m.dtype.name == "bool_" else Mask(additive=m)
        if mask is not None and (mask.allowed is None) != (kpm.allowed is None):
            warnings.warn("Support for mismatched key_padding_mask and attn_mask is deprecated. "
                          "Use same type for both instead.", stacklevel=4)
        mask = _merge(mask, kpm, dtype)
    return mask


def _append_key(k, v, mask, extra_k, extra_v):
    """One more key and value (N, heads, 1, head_dim) for every query; masks let it in."""
    k = concat(k, extra_k, dim=2)
    v = concat(v, extra_v, dim=2)
    if mask is not None:
        mask = mask.map(lambda m: pad(m, widths=((0, 0),) * (m.ndim - 1) + ((0, 1),),
                                      value=True if m.dtype.name == "bool_" else 0.0))
    return k, v, mask


def multi_head_attention(query, key, value, num_heads, in_proj_weight, in_proj_bias, bias_k,
                         bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                         training=True, key_padding_mask=None, need_weights=True,
                         attn_mask=None, separate=None, static_k=None, static_v=None,
                         average_attn_weights=True, is_causal=False, batch_first=False,
                         embed_dim=None):
    """What ``nn.MultiheadAttention`` computes, in either layout (``batch_first``); see
    :func:`multi_head_attention_forward` for the arguments. Returns (output, weights or None)."""
    name = "multi_head_attention_forward"
    if embed_dim is not None and query.shape[-1] != embed_dim:
        raise ShapeError(f"MultiheadAttention: was expecting embedding dimension of {embed_dim} "
                         f"(the query's last dimension), but got {describe(query)}")
    batched = _mha_shapes(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        same_kv = key is value
        query, key = (unsqueeze(query, 1),) * 2 if query is key else \
            (unsqueeze(query, 1), unsqueeze(key, 1))
        value = key if same_kv else unsqueeze(value, 1)
        if key_padding_mask is not None:
            key_padding_mask = unsqueeze(key_padding_mask, 0)
        batch_first = False
    embed_dim = query.shape[-1]
    bsz = query.shape[0 if batch_first else 1]
    tgt_len = query.shape[1 if batch_first else 0]
    if embed_dim % num_heads:
        raise ShapeError(f"{name}: embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    for m, what in ((attn_mask, "attn_mask"), (key_padding_mask, "key_padding_mask")):
        if m is not None:
            check_mask_dtype(f"{name} ({what})", m)
    if is_causal and attn_mask is None:
        raise ValueError("Need attn_mask if specifying the is_causal hint. You may use the "
                         "Transformer module method `generate_square_subsequent_mask` to create "
                         "this mask.")
    causal_only = is_causal and key_padding_mask is None and not need_weights
    q, k, v = _project(query, key, value, num_heads, batch_first, in_proj_weight, in_proj_bias,
                       separate)
    head_dim = embed_dim // num_heads
    if static_k is not None:
        k = reshape(static_k, shape=(bsz, num_heads, -1, head_dim))
    if static_v is not None:
        v = reshape(static_v, shape=(bsz, num_heads, -1, head_dim))
    src_len = k.shape[2]
    mask = None if causal_only else _mha_masks(attn_mask, key_padding_mask, bsz, num_heads,
                                               tgt_len, src_len, query.dtype)
    if (bias_k is None) != (bias_v is None):
        raise ValueError(f"{name}: bias_k and bias_v go together; got only one of them")
    if bias_k is not None:
        extra = [broadcast_to(reshape(b, shape=(1, num_heads, 1, head_dim)),
                              shape=(bsz, num_heads, 1, head_dim)) for b in (bias_k, bias_v)]
        k, v, mask = _append_key(k, v, mask, *extra)
    if add_zero_attn:
        zero = zeros((bsz, num_heads, 1, head_dim), dtype=k.dtype, device=k.device)
        k, v, mask = _append_key(k, v, mask, zero, zero)
    if not training:
        dropout_p = 0.0
    if need_weights:
        out, weights = attend(q, k, v, mask, dropout_p, 1.0 / math.sqrt(head_dim), safe=False)
        if average_attn_weights:
            weights = mean(weights, dim=1)
        if not batched:
            weights = _getitem(weights, spec=(("i", 0),))
    else:
        if causal_only:
            mask = _causal(q, k)
        out = attend(q, k, v, mask, dropout_p, 1.0 / math.sqrt(head_dim),
                     safe=not causal_only)[0]
        weights = None
    # (N, heads, L, head_dim) -> (L, N, E) or (N, L, E)
    out = permute(out, dims=(0, 2, 1, 3) if batch_first else (2, 0, 1, 3))
    out = linear(reshape(out, shape=tuple(out.shape[:2]) + (embed_dim,)), out_proj_weight,
                 out_proj_bias)
    if not batched:
        out = _getitem(out, spec=(("s", None, None, None), ("i", 0)))
    return out, weights


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """Multi-head attention as PyTorch's functional form (time-major: query (L, N, E), key and
    value (S, N, kdim / vdim), or unbatched (L, E)). Boolean masks are True where a query may
    *not* attend; ``attn_mask`` is (L, S) or (N * num_heads, L, S), ``key_padding_mask`` (N, S).
    Returns ``(output (L, N, E), weights)``: weights (N, L, S) averaged over heads (or (N,
    num_heads, L, S) with ``average_attn_weights=False``) when ``need_weights``, else None.
    """
    separate = (q_proj_weight, k_proj_weight, v_proj_weight) if use_separate_proj_weight \
        else None
    return multi_head_attention(query, key, value, num_heads, in_proj_weight, in_proj_bias,
                                bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight,
                                out_proj_bias, training, key_padding_mask, need_weights,
                                attn_mask, separate, static_k, static_v, average_attn_weights,
                                is_causal, embed_dim=embed_dim_to_check)
