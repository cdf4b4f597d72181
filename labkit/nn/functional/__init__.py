"""Stateless layers and losses, composed from labkit ops (so gradients and capture come free),
in PyTorch's ``torch.nn.functional`` spellings; one module per kind (activations, losses,
convolution and pooling, dropout, embeddings...), all imported here as ``F``.

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
from .dropout import dropout
from .linear import linear
from .loss import cross_entropy, mse_loss, nll_loss
from .sparse import embedding

__all__ = ["relu", "sigmoid", "tanh", "softmax", "log_softmax", "linear", "conv2d",
           "max_pool2d", "avg_pool2d", "cross_entropy", "nll_loss", "mse_loss", "dropout",
           "embedding", "pad", "one_hot", "scaled_dot_product_attention",
           "multi_head_attention_forward"]
