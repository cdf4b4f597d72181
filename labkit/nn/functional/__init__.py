"""Stateless layers and losses, composed from labkit ops (so gradients and capture come free),
in PyTorch's ``torch.nn.functional`` spellings; one module per kind (activations, losses,
convolution and pooling, normalisation, dropout, embeddings...), all imported here as ``F``.

>>> import labkit as lk
>>> import labkit.nn.functional as F
>>> logits = lk.tensor([[2.0, 0.0, -1.0], [0.0, 3.0, 0.0]], requires_grad=True)
>>> loss = F.cross_entropy(logits, lk.tensor([0, 1]))
>>> round(loss.item(), 4)
0.1324
>>> loss.backward(); logits.grad.shape
(2, 3)
"""
from ...tensor.public.indexing import one_hot
from ...tensor.public.layout import pad
from .activation import (celu, elu, gelu, glu, hardshrink, hardsigmoid, hardswish, hardtanh,
                         leaky_relu, log_softmax, logsigmoid, mish, prelu, relu, relu6, selu,
                         sigmoid, silu, softmax, softmin, softplus, softshrink, softsign, tanh,
                         tanhshrink, threshold)
from .conv import conv1d, conv2d, conv_transpose1d, conv_transpose2d
from .dropout import dropout
from .linear import bilinear, linear
from .loss import cross_entropy, mse_loss, nll_loss
from .sparse import embedding

__all__ = ["relu", "sigmoid", "tanh", "softmax", "log_softmax", "linear", "conv2d",
           "cross_entropy", "nll_loss", "mse_loss", "dropout", "embedding", "pad", "one_hot",
           "celu", "elu", "gelu", "glu", "hardshrink", "hardsigmoid", "hardswish", "hardtanh",
           "leaky_relu", "logsigmoid", "mish", "prelu", "relu6", "selu", "silu", "softmin",
           "softplus", "softshrink", "softsign", "tanhshrink", "threshold",
           "conv1d", "conv_transpose1d", "conv_transpose2d"]
from .pooling import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_max_pool1d,
                      adaptive_max_pool2d, avg_pool1d, avg_pool2d, max_pool1d, max_pool2d)

__all__ += ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d",
            "adaptive_max_pool2d", "avg_pool1d", "avg_pool2d", "max_pool1d", "max_pool2d"]
from .upsampling import interpolate, upsample

__all__ += ["interpolate", "upsample"]
from .distance import cosine_similarity, pairwise_distance
from .dropout import alpha_dropout, dropout1d, dropout2d, feature_alpha_dropout
from .normalization import (batch_norm, group_norm, instance_norm, layer_norm, normalize,
                            rms_norm)
from .sparse import embedding_bag

__all__ += ["cosine_similarity", "pairwise_distance", "alpha_dropout", "dropout1d", "dropout2d",
            "feature_alpha_dropout", "batch_norm", "group_norm", "instance_norm", "layer_norm",
            "normalize", "rms_norm", "embedding_bag"]
__all__ += ["bilinear"]
