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
from . import functional, init, parallel, quantized, utils
from .activation import (CELU, ELU, GELU, GLU, SELU, Hardshrink, Hardsigmoid, Hardswish,
                         Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax, Mish, PReLU, ReLU, ReLU6,
                         Sigmoid, SiLU, Softmax, Softmax2d, Softmin, Softplus, Softshrink,
                         Softsign, Tanh, Tanhshrink, Threshold)
from .attention import MultiheadAttention
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from .distance import CosineSimilarity, PairwiseDistance
from .dropout import AlphaDropout, Dropout, Dropout1d, Dropout2d, FeatureAlphaDropout
from .flatten import Flatten, Unflatten
from .fold import Fold, Unfold
from .instancenorm import InstanceNorm1d, InstanceNorm2d
from .linear import Bilinear, Identity, Linear
from .loss import (BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss, CrossEntropyLoss,
                   GaussianNLLLoss, HingeEmbeddingLoss, HuberLoss, KLDivLoss, L1Loss,
                   MarginRankingLoss, MSELoss, MultiLabelSoftMarginLoss, MultiMarginLoss,
                   NLLLoss, PoissonNLLLoss, SmoothL1Loss, SoftMarginLoss, TripletMarginLoss,
                   TripletMarginWithDistanceLoss)
from .module import IncompatibleKeys, Module, StateDictError
from .normalization import GroupNorm, LayerNorm, RMSNorm
from .parallel import DataParallel
from .padding import (CircularPad1d, CircularPad2d, ConstantPad1d, ConstantPad2d,
                      ReflectionPad1d, ReflectionPad2d, ReplicationPad1d, ReplicationPad2d,
                      ZeroPad1d, ZeroPad2d)
from .parameter import Parameter
from .pixelshuffle import PixelShuffle, PixelUnshuffle
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d, AdaptiveMaxPool2d,
                      AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d)
from .recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .sparse import Embedding, EmbeddingBag
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,
                          TransformerEncoder, TransformerEncoderLayer)
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d
from . import modules  # noqa: E402  (torch.nn.modules' paths: labkit.nn.modules.rnn.LSTM)

__all__ = ["Module", "Parameter", "StateDictError", "IncompatibleKeys", "functional", "init",
           "parallel", "quantized", "utils", "modules", "DataParallel",
           # containers
           "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
           # linear, shape
           "Identity", "Linear", "Bilinear", "Flatten", "Unflatten", "Fold", "Unfold",
           # activations
           "CELU", "ELU", "GELU", "GLU", "SELU", "Hardshrink", "Hardsigmoid", "Hardswish",
           "Hardtanh", "LeakyReLU", "LogSigmoid", "LogSoftmax", "Mish", "PReLU", "ReLU", "ReLU6",
           "Sigmoid", "SiLU", "Softmax", "Softmax2d", "Softmin", "Softplus", "Softshrink",
           "Softsign", "Tanh", "Tanhshrink", "Threshold",
           # normalisation
           "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
           "LayerNorm", "GroupNorm", "RMSNorm",
           # dropout
           "Dropout", "Dropout1d", "Dropout2d", "AlphaDropout", "FeatureAlphaDropout",
           # convolution, pooling, resizing
           "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "MaxPool1d", "MaxPool2d",
           "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
           "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "Upsample", "UpsamplingNearest2d",
           "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle", "ZeroPad1d", "ZeroPad2d",
           "ConstantPad1d", "ConstantPad2d",
           "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d",
           "CircularPad1d", "CircularPad2d",
           # lookups, distances
           "Embedding", "EmbeddingBag", "CosineSimilarity", "PairwiseDistance",
           # recurrent, attention, transformer
           "RNN", "LSTM", "GRU", "RNNBase", "RNNCell", "LSTMCell", "GRUCell", "RNNCellBase",
           "MultiheadAttention", "Transformer", "TransformerEncoder", "TransformerDecoder",
           "TransformerEncoderLayer", "TransformerDecoderLayer",
           # losses
           "L1Loss", "MSELoss", "SmoothL1Loss", "HuberLoss", "NLLLoss", "CrossEntropyLoss",
           "BCELoss", "BCEWithLogitsLoss", "KLDivLoss", "PoissonNLLLoss", "GaussianNLLLoss",
           "MarginRankingLoss", "HingeEmbeddingLoss", "SoftMarginLoss",
           "MultiLabelSoftMarginLoss", "MultiMarginLoss", "CosineEmbeddingLoss",
           "TripletMarginLoss", "TripletMarginWithDistanceLoss"]
