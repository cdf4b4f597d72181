"""Neural-network layers, losses and initialisers, in PyTorch's spelling.

A model is a plain Python class deriving from ``Module``; layers are Modules; losses and
stateless layers live in ``labkit.nn.functional``; initialisers in ``labkit.nn.init``.

>>> import labkit as lk
>>> net = lk.nn.Sequential(lk.nn.Linear(4, 16), lk.nn.ReLU(), lk.nn.Linear(16, 3))
>>> loss = lk.nn.functional.cross_entropy(net(lk.randn(8, 4)), lk.randint(0, 3, 8))
>>> loss.backward()
>>> net[0].weight.grad.shape
(16, 4)
"""
from . import functional, init, utils
from .activation import Flatten, Identity, ReLU, Sigmoid, Softmax, Tanh
from .attention import MultiheadAttention
from .container import ModuleList, Sequential
from .conv import Conv2d, MaxPool2d
from .distance import CosineSimilarity, PairwiseDistance
from .dropout import Dropout
from .embedding import Embedding
from .linear import Linear
from .loss import (BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss, CrossEntropyLoss,
                   GaussianNLLLoss, HingeEmbeddingLoss, HuberLoss, KLDivLoss, L1Loss,
                   MarginRankingLoss, MSELoss, MultiLabelSoftMarginLoss, MultiMarginLoss,
                   NLLLoss, PoissonNLLLoss, SmoothL1Loss, SoftMarginLoss, TripletMarginLoss,
                   TripletMarginWithDistanceLoss)
from .module import IncompatibleKeys, Module, StateDictError
from .parameter import Parameter
from .recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,
                          TransformerEncoder, TransformerEncoderLayer)

__all__ = ["Module", "Parameter", "Sequential", "ModuleList", "Linear", "Conv2d", "MaxPool2d",
           "Flatten", "Identity", "ReLU", "Tanh", "Sigmoid", "Softmax", "Embedding", "RNN",
           "LSTM", "GRU", "RNNBase", "RNNCell", "LSTMCell", "GRUCell", "RNNCellBase",
           "MultiheadAttention", "Transformer", "TransformerEncoder", "TransformerDecoder",
           "TransformerEncoderLayer", "TransformerDecoderLayer", "Dropout", "StateDictError",
           "IncompatibleKeys", "functional", "init", "utils", "PairwiseDistance",
           "CosineSimilarity",
           # losses
           "L1Loss", "MSELoss", "SmoothL1Loss", "HuberLoss", "NLLLoss", "CrossEntropyLoss",
           "BCELoss", "BCEWithLogitsLoss", "KLDivLoss", "PoissonNLLLoss", "GaussianNLLLoss",
           "MarginRankingLoss", "HingeEmbeddingLoss", "SoftMarginLoss",
           "MultiLabelSoftMarginLoss", "MultiMarginLoss", "CosineEmbeddingLoss",
           "TripletMarginLoss", "TripletMarginWithDistanceLoss"]
