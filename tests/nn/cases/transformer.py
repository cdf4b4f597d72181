"""Cases of the Transformer layers: post-norm and pre-norm (norm_first), relu, gelu and a
callable activation, batch-first and time-major and unbatched, masks (causal float, bool key
padding, the is_causal hint), no bias; the encoder and decoder stacks and the whole model."""
from ..module_cases import ModuleCase
from .calls import causal_float, inputs, padding, wrapped

D, NH, FF = 8, 2, 16
SMALL = dict(dim_feedforward=FF, dropout=0.0)


def encoder_layer(nn, **kw):
    return nn.TransformerEncoderLayer(D, NH, **{**SMALL, **kw})


def decoder_layer(nn, **kw):
    return nn.TransformerDecoderLayer(D, NH, **{**SMALL, **kw})


def call(**kw):
    """forward(x, *masks as keywords ``names``)."""
    names = kw.pop("names", ())
    return lambda nn, m, *xs: m(*xs[:len(xs) - len(names)],
                                **dict(zip(names, xs[len(xs) - len(names):])), **kw)


MODULE_CASES = [
    ModuleCase("encoder_layer_post_norm_masks",
               wrapped(lambda nn: encoder_layer(nn),
                       call(names=("src_mask", "src_key_padding_mask"))),
               inputs((5, 3, D), causal_float(5), padding(3, 5)),
               module="TransformerEncoderLayer"),
    ModuleCase("encoder_layer_norm_first_gelu_batch_first_causal",
               wrapped(lambda nn: encoder_layer(nn, activation="gelu", norm_first=True,
                                                batch_first=True),
                       call(names=("src_mask",), is_causal=True)),
               inputs((3, 5, D), causal_float(5)), module="TransformerEncoderLayer"),
    ModuleCase("encoder_layer_callable_activation_no_bias",
               lambda nn: encoder_layer(nn, activation=nn.functional.tanh, bias=False,
                                        layer_norm_eps=1e-3),
               inputs((4, 2, D))),
    ModuleCase("encoder_layer_unbatched", lambda nn: encoder_layer(nn), inputs((4, D))),
    ModuleCase("encoder_layer_dropout_eval",
               lambda nn: nn.TransformerEncoderLayer(D, NH, dim_feedforward=FF),
               inputs((4, 2, D)), train=False),
    ModuleCase("encoder_two_layers_mask_detected_causal",
               wrapped(lambda nn: nn.TransformerEncoder(encoder_layer(nn, batch_first=True), 2),
                       call(names=("mask", "src_key_padding_mask"))),
               inputs((3, 5, D), causal_float(5), padding(3, 5)),
               module="TransformerEncoder"),
    ModuleCase("decoder_layer_post_norm_masks",
               wrapped(lambda nn: decoder_layer(nn),
                       call(names=("tgt_mask", "tgt_key_padding_mask",
                                   "memory_key_padding_mask"))),
               inputs((4, 3, D), (6, 3, D), causal_float(4), padding(3, 4), padding(3, 6, 2)),
               module="TransformerDecoderLayer"),
    ModuleCase("decoder_layer_norm_first_batch_first_gelu",
               wrapped(lambda nn: decoder_layer(nn, norm_first=True, batch_first=True,
                                                activation="gelu"),
                       call(names=("tgt_mask",), tgt_is_causal=True)),
               inputs((3, 4, D), (3, 6, D), causal_float(4)), module="TransformerDecoderLayer"),
    ModuleCase("decoder_two_layers",
               wrapped(lambda nn: nn.TransformerDecoder(decoder_layer(nn), 2),
                       call(names=("tgt_mask", "memory_key_padding_mask"))),
               inputs((4, 2, D), (6, 2, D), causal_float(4), padding(2, 6)),
               module="TransformerDecoder"),
    ModuleCase("transformer",
               wrapped(lambda nn: nn.Transformer(D, NH, 2, 1, FF, dropout=0.0),
                       call(names=("tgt_mask", "src_key_padding_mask",
                                   "memory_key_padding_mask"))),
               inputs((6, 2, D), (4, 2, D), causal_float(4), padding(2, 6), padding(2, 6)),
               module="Transformer"),
    ModuleCase("transformer_norm_first_batch_first",
               lambda nn: nn.Transformer(D, NH, 1, 2, FF, dropout=0.0, batch_first=True,
                                         norm_first=True, activation="gelu"),
               inputs((2, 6, D), (2, 4, D))),
]
