"""Stateless layers and losses, composed from labkit ops (so gradients and capture come free),
in PyTorch's ``torch.nn.functional`` spellings; one module per kind (activations, losses,
distances, convolution and pooling, dropout, embeddings...), all imported here as ``F``.

>>> import labkit as lk
>>> import labkit.nn.functional as F
>>> logits = lk.tensor([[2.0, 0.0, -1.0], [0.0, 3.0, 0.0]], requires_grad=True)
>>> loss = F.cross_entropy(logits, lk.tensor([0, 1]))
>>> round(loss.item(), 4)
0.1324
>>> loss.backward(); logits.grad.shape
(2, 3)
"""
from ...tensor.ops.conv import avg_pool2d, conv2d, max_pool2d
from ...tensor.ops.elementwise import relu, sigmoid, tanh
from ...tensor.ops.softmax import log_softmax, softmax
from ...tensor.public.indexing import one_hot
from ...tensor.public.layout import pad
from .attention import multi_head_attention_forward, scaled_dot_product_attention
from .distance import cosine_similarity, normalize, pairwise_distance
from .dropout import dropout
from .linear import linear
from .loss import (binary_cross_entropy, binary_cross_entropy_with_logits, cosine_embedding_loss,
                   cross_entropy, gaussian_nll_loss, hinge_embedding_loss, huber_loss, kl_div,
                   l1_loss, margin_ranking_loss, mse_loss, multi_margin_loss,
                   multilabel_soft_margin_loss, nll_loss, poisson_nll_loss, smooth_l1_loss,
                   soft_margin_loss, triplet_margin_loss, triplet_margin_with_distance_loss)
from .sparse import embedding

__all__ = ["relu", "sigmoid", "tanh", "softmax", "log_softmax", "linear", "conv2d",
           "max_pool2d", "avg_pool2d", "dropout", "embedding", "pad", "one_hot",
           "scaled_dot_product_attention", "multi_head_attention_forward",
           # losses
           "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
           "poisson_nll_loss", "gaussian_nll_loss", "cosine_embedding_loss",
           "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
           "multilabel_soft_margin_loss", "multi_margin_loss", "triplet_margin_loss",
           "triplet_margin_with_distance_loss",
           # distances
           "pairwise_distance", "cosine_similarity", "normalize"]
