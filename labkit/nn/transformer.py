"""The Transformer of "Attention Is All You Need" as PyTorch's ``torch.nn.modules.transformer``:
``TransformerEncoderLayer``, ``TransformerEncoder``, ``TransformerDecoderLayer``,
``TransformerDecoder`` and ``Transformer``, with the same constructors, submodule names (so the
same ``state_dict`` keys), post-norm or pre-norm (``norm_first``), masks and initialisation.
"""
import copy

from ..errors import ShapeError, describe
from ..tensor.creation import full
from ..tensor.ops.elementwise import add
from ..tensor.ops.layout import triu
from . import functional as F
from .attention import MultiheadAttention
from .container import ModuleList
from .dropout import Dropout
from .functional.attention import check_mask_dtype
from ..tensor.tensor import concrete
from .linear import Linear
from .module import Module
from .normalization import LayerNorm

__all__ = ["Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
           "TransformerDecoderLayer"]


def _activation(activation):
    if callable(activation):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise ValueError(f"activation should be relu/gelu (or a callable), not {activation!r}")


# ---- masks ------------------------------------------------------------------------------------
def _generate_square_subsequent_mask(sz, device=None, dtype=None):
    """(sz, sz) float mask: 0 on and below the diagonal, -inf above (a causal mask)."""
    return triu(full((sz, sz), float("-inf"), dtype=dtype, device=device), diagonal=1)


def _seq_len(src, batch_first):
    return src.shape[0] if src.ndim == 2 else src.shape[1 if batch_first else 0]


def _detect_is_causal_mask(mask, is_causal=None, size=None):
    """``is_causal``, or when None: whether ``mask`` is the causal mask (read when its values
    are known; a symbolic mask counts as not causal, which gives the same result)."""
    if is_causal is not None or mask is None:
        return bool(is_causal)
    sz = size if size is not None else mask.shape[-2]
    if tuple(mask.shape) != (sz, sz):
        return False
    values = concrete(mask)
    if values is None:
        return False
    causal = concrete(_generate_square_subsequent_mask(sz, mask.device, mask.dtype))
    return bool((values == causal).all())


def _check_mask(name, mask):
    if mask is not None:
        check_mask_dtype(name, mask)


def _clones(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


# ---- layers -----------------------------------------------------------------------------------
class _Layer(Module):
    """What the encoder and decoder layers share: their submodules, with PyTorch's names and
    order (so the same state_dict), and the self-attention and feed-forward blocks. A decoder
    layer has a second attention, a third norm and a third dropout."""

    def __init__(self, attentions, d_model, nhead, dim_feedforward, dropout, activation,
                 layer_norm_eps, batch_first, norm_first, bias, device, dtype):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        names = ["self_attn", "multihead_attn"][:attentions]
        for name in names:
            setattr(self, name, MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                   batch_first=batch_first, **kw))
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = bool(norm_first)
        for i in range(1, attentions + 2):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        for i in range(1, attentions + 2):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = _activation(activation)
        self._last_dropout = f"dropout{attentions + 1}"

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return getattr(self, self._last_dropout)(x)


class TransformerEncoderLayer(_Layer):
    """Self-attention and a feed-forward block, each with dropout, a residual connection and
    LayerNorm (after the residual, or before the block with ``norm_first=True``).

    ``forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False)``: src (S, N, E)
    ((N, S, E) with ``batch_first``); masks as ``nn.MultiheadAttention``'s (bool True = may not
    attend); ``is_causal`` a hint that ``src_mask`` is the causal mask.

    >>> import labkit as lk
    >>> layer = lk.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16,
    ...                                       batch_first=True)
    >>> layer(lk.randn(3, 5, 8)).shape
    (3, 5, 8)
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__(1, d_model, nhead, dim_feedforward, dropout, activation,
                         layer_norm_eps, batch_first, norm_first, bias, device, dtype)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        _check_mask("TransformerEncoderLayer (src_mask)", src_mask)
        _check_mask("TransformerEncoderLayer (src_key_padding_mask)", src_key_padding_mask)
        x = src
        if self.norm_first:
            x = add(x, self._sa_block(self.norm1(x), src_mask, src_key_padding_mask,
                                      is_causal))
            return add(x, self._ff_block(self.norm2(x)))
        x = self.norm1(add(x, self._sa_block(x, src_mask, src_key_padding_mask, is_causal)))
        return self.norm2(add(x, self._ff_block(x)))


class TransformerDecoderLayer(_Layer):
    """Self-attention over the target, attention to the encoder's output (``memory``) and a
    feed-forward block, each with dropout, a residual connection and LayerNorm.

    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)``.

    >>> import labkit as lk
    >>> layer = lk.nn.TransformerDecoderLayer(d_model=8, nhead=2, dim_feedforward=16)
    >>> layer(lk.randn(4, 2, 8), lk.randn(6, 2, 8)).shape
    (4, 2, 8)
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__(2, d_model, nhead, dim_feedforward, dropout, activation,
                         layer_norm_eps, batch_first, norm_first, bias, device, dtype)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = add(x, self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask,
                                      tgt_is_causal))
            x = add(x, self._mha_block(self.norm2(x), memory, memory_mask,
                                       memory_key_padding_mask, memory_is_causal))
            return add(x, self._ff_block(self.norm3(x)))
        x = self.norm1(add(x, self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal)))
        x = self.norm2(add(x, self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                              memory_is_causal)))
        return self.norm3(add(x, self._ff_block(x)))

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)


def _batch_first(stack):
    """Whether the layers of an encoder or decoder stack take batch-first input."""
    first = stack.layers[0] if len(stack.layers) else None
    attn = getattr(first, "self_attn", None)
    return bool(getattr(attn, "batch_first", False))


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` (``layers.0``, ``layers.1``...), then ``norm``
    if given.

    ``forward(src, mask=None, src_key_padding_mask=None, is_causal=None)``; with ``is_causal``
    None, a ``mask`` equal to the causal mask counts as causal.

    >>> import labkit as lk
    >>> layer = lk.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
    >>> encoder = lk.nn.TransformerEncoder(layer, num_layers=2)
    >>> encoder(lk.randn(5, 3, 8)).shape
    (5, 3, 8)
    """

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = int(num_layers)
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor     # accepted; labkit pads instead
        self.use_nested_tensor = False
        self.mask_check = mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        _check_mask("TransformerEncoder (mask)", mask)
        _check_mask("TransformerEncoder (src_key_padding_mask)", src_key_padding_mask)
        is_causal = _detect_is_causal_mask(mask, is_causal, _seq_len(src, _batch_first(self)))
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, is_causal=is_causal,
                           src_key_padding_mask=src_key_padding_mask)
        return self.norm(output) if self.norm is not None else output


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer``, then ``norm`` if given.

    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False)``.
    """

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = int(num_layers)
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal,
                                               _seq_len(tgt, _batch_first(self)))
        output = tgt
        for layer in self.layers:
            output = layer(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                           tgt_key_padding_mask=tgt_key_padding_mask,
                           memory_key_padding_mask=memory_key_padding_mask,
                           tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        return self.norm(output) if self.norm is not None else output


class Transformer(Module):
    """Encoder-decoder Transformer: ``encoder`` (a TransformerEncoder of
    ``num_encoder_layers`` layers and a final LayerNorm) and ``decoder`` (likewise), every
    weight matrix Xavier-uniform as PyTorch's.

    ``forward(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
    src_key_padding_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
    src_is_causal=None, tgt_is_causal=None, memory_is_causal=False)`` -> (T, N, E).

    >>> import labkit as lk
    >>> model = lk.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1,
    ...                           num_decoder_layers=1, dim_feedforward=16)
    >>> tgt_mask = lk.nn.Transformer.generate_square_subsequent_mask(4)
    >>> model(lk.randn(6, 2, 8), lk.randn(4, 2, 8), tgt_mask=tgt_mask).shape
    (4, 2, 8)
    """

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation=F.relu, custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias, **kw)
            self.encoder = TransformerEncoder(layer, num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias,
                                                        **kw))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias, **kw)
            self.decoder = TransformerDecoder(layer, num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias,
                                                        **kw))
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        batched = src.ndim == 3
        b = 0 if self.batch_first else 1
        if batched and src.shape[b] != tgt.shape[b]:
            layout = "(N, S, E); batch_first=True" if self.batch_first else "(S, N, E)"
            raise ShapeError(f"Transformer: the batch number of src and tgt must be equal; got "
                             f"{describe(src)} and {describe(tgt)} (layout {layout})")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ShapeError(f"Transformer: the feature number of src and tgt must be equal to "
                             f"d_model={self.d_model}; got {describe(src)} and {describe(tgt)}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """A causal mask (sz, sz): 0.0 on and below the diagonal, -inf above.

        >>> import labkit as lk
        >>> lk.nn.Transformer.generate_square_subsequent_mask(3).tolist()
        [[0.0, -inf, -inf], [0.0, 0.0, -inf], [0.0, 0.0, 0.0]]
        """
        return _generate_square_subsequent_mask(sz, device=device, dtype=dtype)

    def _reset_parameters(self):
        from . import init
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
