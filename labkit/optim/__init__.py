"""Optimisers in PyTorch's spelling: each updates parameters in place from their ``.grad``;
``lk.optim.lr_scheduler`` changes their learning rates over training.

>>> import labkit as lk
>>> model = lk.nn.Linear(3, 1)
>>> opt = lk.optim.Adam(model.parameters(), lr=1e-2)
>>> loss = lk.nn.functional.mse_loss(model(lk.ones(4, 3)), lk.zeros(4, 1))
>>> opt.zero_grad(); loss.backward(); opt.step()
"""
from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam
from .adamw import AdamW
from .adamax import Adamax
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer, OptimizerStateError, ParamGroup
from .radam import RAdam
from .rmsprop import RMSProp, RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "OptimizerStateError", "ParamGroup", "SGD", "Adam", "AdamW", "Adagrad",
           "Adadelta", "Adamax", "NAdam", "RAdam", "RMSprop", "RMSProp", "LBFGS",
           "lr_scheduler"]
