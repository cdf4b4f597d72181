"""Initialisers that fill a parameter in place, drawn from labkit's seeded generator.

The defaults of labkit's layers are PyTorch's (Kaiming-uniform with ``a=sqrt(5)`` for weights,
so ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``), but the numbers come from ``lk.manual_seed``'s
generator, so a seeded run gives the same model on CPU and GPU.

>>> import labkit as lk
>>> w = lk.nn.Parameter(lk.zeros(4, 3))
>>> _ = lk.nn.init.uniform_(w, -0.1, 0.1)
>>> bool((w.abs() <= 0.1).all())
True
"""
import math

import numpy as np

from ..devices import get_device, transfer
from ..errors import GradError, ShapeError
from ..tensor import random as _random


def _fill(t, host_values):
    """Write host ``values`` into ``t``'s storage (in place, on its device, no history)."""
    if t._node is not None:
        raise GradError("init functions fill leaf tensors (parameters) in place; this tensor "
                        "was computed by an op. Initialise the parameter itself.")
    arr = np.asarray(host_values, dtype=t.dtype.np)
    if t.device.type != "cpu":
        arr = transfer(arr, get_device("cpu:0"), t.device)
    t._data[...] = arr
    return t


def uniform_(t, a=0.0, b=1.0):
    """Fill ``t`` with values from U(a, b). Returns ``t``."""
    return _fill(t, _random.generator().uniform(a, b, size=t.shape))


def normal_(t, mean=0.0, std=1.0):
    """Fill ``t`` with values from N(mean, std**2). Returns ``t``."""
    return _fill(t, _random.generator().normal(mean, std, size=t.shape))


def constant_(t, value):
    """Fill ``t`` with ``value``. Returns ``t``."""
    return _fill(t, np.full(t.shape, value))


def zeros_(t):
    return constant_(t, 0.0)


def ones_(t):
    return constant_(t, 1.0)


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's table).

    >>> import labkit as lk
    >>> round(lk.nn.init.calculate_gain("relu"), 4)
    1.4142
    """
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "sigmoid"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unknown nonlinearity {nonlinearity!r}; use one of linear, "
                     f"conv2d, sigmoid, tanh, relu, leaky_relu, selu")


def fan_in_and_fan_out(t):
    """(fan_in, fan_out) of a weight of shape (out, in, *kernel)."""
    if t.ndim < 2:
        raise ShapeError(f"fan in and fan out need a weight with at least 2 dimensions (out, in, "
                         f"...); got shape {t.shape}")
    receptive = math.prod(t.shape[2:])
    return t.shape[1] * receptive, t.shape[0] * receptive


def _fan(t, mode):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = fan_in_and_fan_out(t)
    return fan_in if mode == "fan_in" else fan_out


def kaiming_uniform_(t, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    """He initialisation, uniform: U(-b, b) with b = gain * sqrt(3 / fan). Returns ``t``."""
    fan = _fan(t, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan) if fan else 0.0
    return uniform_(t, -bound, bound)


def kaiming_normal_(t, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    """He initialisation, normal: N(0, std**2) with std = gain / sqrt(fan). Returns ``t``."""
    fan = _fan(t, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan) if fan else 0.0
    return normal_(t, 0.0, std)


def xavier_uniform_(t, gain=1.0):
    """Glorot initialisation, uniform: b = gain * sqrt(6 / (fan_in + fan_out)). Returns ``t``."""
    fan_in, fan_out = fan_in_and_fan_out(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound)


def xavier_normal_(t, gain=1.0):
    """Glorot initialisation, normal: std = gain * sqrt(2 / (fan_in + fan_out)). Returns ``t``."""
    fan_in, fan_out = fan_in_and_fan_out(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def layer_default_(weight, bias=None):
    """PyTorch's default for Linear and Conv layers: Kaiming-uniform (a=sqrt(5)) weights and a
    bias uniform in +-1/sqrt(fan_in)."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in else 0.0
        uniform_(bias, -bound, bound)
