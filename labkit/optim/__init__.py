"""Optimisers in PyTorch's spelling: each updates parameters in place from their ``.grad``.

>>> import labkit as lk
>>> model = lk.nn.Linear(3, 1)
>>> opt = lk.optim.Adam(model.parameters(), lr=1e-2)
>>> loss = lk.nn.functional.mse_loss(model(lk.ones(4, 3)), lk.zeros(4, 1))
>>> opt.zero_grad(); loss.backward(); opt.step()
"""
from .adagrad import Adagrad
from .adam import Adam
from .optimizer import Optimizer, OptimizerStateError
from .rmsprop import RMSProp, RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "OptimizerStateError", "SGD", "Adagrad", "RMSProp", "RMSprop", "Adam"]
