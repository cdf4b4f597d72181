"""Stateless layers and losses, composed from labkit ops (so gradients and capture come free),
in PyTorch's ``torch.nn.functional`` spellings; one module per kind (activations, losses,
distances, convolution and pooling, normalisation, dropout, embeddings...), all imported here as ``F``.

>>> import labkit as lk
>>> import labkit.nn.functional as F
>>> logits = lk.tensor([[2.0, 0.0, -1.0], [0.0, 3.0, 0.0]], requires_grad=True)
>>> loss = F.cross_entropy(logits, lk.tensor([0, 1]))
>>> round(loss.item(), 4)
0.1324
>>> loss.backward(); logits.grad.shape
(2, 3)
"""
from ...tensor.public.index import one_hot
from ...tensor.public.layout import pad
from .activation import (celu, elu, gelu, glu, hardshrink, hardsigmoid, hardswish, hardtanh,
                         leaky_relu, log_softmax, logsigmoid, mish, prelu, relu, relu6, selu,
                         sigmoid, silu, softmax, softmin, softplus, softshrink, softsign, tanh,
                         tanhshrink, threshold)
from .attention import multi_head_attention_forward, scaled_dot_product_attention
from .conv import conv1d, conv2d, conv_transpose1d, conv_transpose2d, fold, unfold
from .distance import cosine_similarity, pairwise_distance
from .dropout import alpha_dropout, dropout, dropout1d, dropout2d, feature_alpha_dropout
from .linear import bilinear, linear
from .loss import (binary_cross_entropy, binary_cross_entropy_with_logits, cosine_embedding_loss,
                   cross_entropy, gaussian_nll_loss, hinge_embedding_loss, huber_loss, kl_div,
                   l1_loss, margin_ranking_loss, mse_loss, multi_margin_loss,
                   multilabel_soft_margin_loss, nll_loss, poisson_nll_loss, smooth_l1_loss,
                   soft_margin_loss, triplet_margin_loss, triplet_margin_with_distance_loss)
from .normalization import (batch_norm, group_norm, instance_norm, layer_norm, normalize,
                            rms_norm)
from .pooling import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_max_pool1d,
                      adaptive_max_pool2d, avg_pool1d, avg_pool2d, max_pool1d, max_pool2d)
from .pixelshuffle import pixel_shuffle, pixel_unshuffle
from .sparse import embedding, embedding_bag
from .upsampling import interpolate, upsample

__all__ = [
    # activations
    "celu", "elu", "gelu", "glu", "hardshrink", "hardsigmoid", "hardswish", "hardtanh",
    "leaky_relu", "log_softmax", "logsigmoid", "mish", "prelu", "relu", "relu6", "selu",
    "sigmoid", "silu", "softmax", "softmin", "softplus", "softshrink", "softsign", "tanh",
    "tanhshrink", "threshold",
    # linear, convolution, pooling, resizing, padding
    "linear", "bilinear", "conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "fold",
    "unfold", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d",
    "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d", "interpolate",
    "upsample", "pad", "pixel_shuffle", "pixel_unshuffle",
    # normalisation, dropout, lookups, distances
    "batch_norm", "instance_norm", "layer_norm", "group_norm", "rms_norm", "normalize",
    "dropout", "dropout1d", "dropout2d", "alpha_dropout", "feature_alpha_dropout", "embedding",
    "embedding_bag", "one_hot", "cosine_similarity", "pairwise_distance",
    # attention
    "scaled_dot_product_attention", "multi_head_attention_forward",
    # losses
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "poisson_nll_loss",
    "gaussian_nll_loss", "cosine_embedding_loss", "margin_ranking_loss", "hinge_embedding_loss",
    "soft_margin_loss", "multilabel_soft_margin_loss", "multi_margin_loss", "triplet_margin_loss",
    "triplet_margin_with_distance_loss"]


def _checked():
    """Every function above fails with a LabkitError naming it and the argument at fault, never
    with a bare Python or NumPy error (``labkit.tensor.arguments``)."""
    from ...tensor.public.registry import explained
    here = globals()
    for name in __all__:
        fn = here[name]
        if not getattr(fn, "explained", False):     # (pad, one_hot: wrapped where defined)
            here[name] = explained(name, fn, tensor_first=True, home=__name__)


_checked()
