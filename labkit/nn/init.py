"""Initialisers that fill a tensor in place (PyTorch's ``torch.nn.init``), drawn from labkit's
seeded generator.

The distributions, gains and fan computations are PyTorch's, and so is every layer's default
initialisation (``reset_parameters``): Kaiming-uniform with ``a=sqrt(5)`` for Linear and
convolution weights, so ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``, N(0, 1) for embeddings, ones and
zeros for normalisation layers. The numbers come from ``lk.manual_seed``'s generator, so a
seeded run gives the same model on CPU and GPU (they are not PyTorch's numbers: copy a
``state_dict`` to start from the same weights).

>>> import labkit as lk
>>> w = lk.nn.Parameter(lk.zeros(4, 3))
>>> _ = lk.nn.init.uniform_(w, -0.1, 0.1)
>>> bool((w.abs() <= 0.1).all())
True
"""
import math
import warnings

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


def _gen(generator):
    """The NumPy generator to draw from: ``generator``'s (an ``lk.Generator``), else the one
    ``lk.manual_seed`` seeds."""
    return _random.numpy_generator(generator)


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill ``tensor`` with values from U(a, b). Returns ``tensor``."""
    return _fill(tensor, _gen(generator).uniform(a, b, size=tensor.shape))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill ``tensor`` with values from N(mean, std**2). Returns ``tensor``."""
    return _fill(tensor, _gen(generator).normal(mean, std, size=tensor.shape))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill ``tensor`` from N(mean, std**2) truncated to ``[a, b]`` (absolute bounds, as in
    PyTorch). Returns ``tensor``.

    >>> import labkit as lk
    >>> w = lk.nn.init.trunc_normal_(lk.nn.Parameter(lk.zeros(1000)), std=0.02, a=-0.04, b=0.04)
    >>> float(w.abs().max()) <= 0.04
    True
    """
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
                      "distribution of values may be incorrect.", stacklevel=2)
    import scipy.special          # here: importing it costs ~0.2 s, most programs never call this
    lo, hi = scipy.special.ndtr((a - mean) / std), scipy.special.ndtr((b - mean) / std)
    u = _gen(generator).uniform(lo, hi, size=tensor.shape)
    return _fill(tensor, np.clip(mean + std * scipy.special.ndtri(u), a, b))


def constant_(tensor, val):
    """Fill ``tensor`` with ``val``. Returns ``tensor``."""
    return _fill(tensor, np.full(tensor.shape, val))


def zeros_(tensor):
    """Fill ``tensor`` with 0. Returns ``tensor``."""
    return constant_(tensor, 0.0)


def ones_(tensor):
    """Fill ``tensor`` with 1. Returns ``tensor``."""
    return constant_(tensor, 1.0)


def eye_(tensor):
    """Fill a 2-d ``tensor`` with the identity matrix (ones on the diagonal).

    >>> import labkit as lk
    >>> lk.nn.init.eye_(lk.nn.Parameter(lk.zeros(2, 3))).tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    if tensor.ndim != 2:
        raise ValueError("eye_: only tensors with 2 dimensions are supported")
    return _fill(tensor, np.eye(*tensor.shape))


def dirac_(tensor, groups=1):
    """Fill a 3-, 4- or 5-d convolution weight with the Dirac delta: each output channel (of
    each of ``groups``) copies one input channel. Returns ``tensor``.

    >>> import labkit as lk
    >>> w = lk.nn.init.dirac_(lk.nn.Parameter(lk.zeros(2, 2, 3)))
    >>> w[0].tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    """
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("dirac_: only tensors with 3, 4, or 5 dimensions are supported")
    out, inp = tensor.shape[:2]
    if out % groups:
        raise ValueError(f"dirac_: dim 0 ({out}) must be divisible by groups={groups}")
    values = np.zeros(tensor.shape)
    per_group = out // groups
    centre = tuple(s // 2 for s in tensor.shape[2:])
    for g in range(groups):
        for d in range(min(per_group, inp)):
            values[(g * per_group + d, d) + centre] = 1
    return _fill(tensor, values)


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's table).

    >>> import labkit as lk
    >>> round(lk.nn.init.calculate_gain("relu"), 4)
    1.4142
    """
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unknown nonlinearity {nonlinearity!r}; use one of linear, "
                     f"conv1d/2d/3d, conv_transpose1d/2d/3d, sigmoid, tanh, relu, leaky_relu, "
                     f"selu")


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) of a weight of shape (out, in, *kernel): PyTorch's computation."""
    if tensor.ndim < 2:
        raise ShapeError(f"fan in and fan out can not be computed for a tensor with fewer than "
                         f"2 dimensions (a weight (out, in, ...)); got shape {tensor.shape}")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode {mode!r} not supported; use 'fan_in' or 'fan_out'")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _empty(tensor):
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He initialisation, uniform: U(-b, b) with b = gain * sqrt(3 / fan). Returns ``tensor``."""
    if _empty(tensor):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He initialisation, normal: N(0, std**2) with std = gain / sqrt(fan). Returns ``tensor``."""
    if _empty(tensor):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot initialisation, uniform: b = gain * sqrt(6 / (fan_in + fan_out)). Returns
    ``tensor``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot initialisation, normal: std = gain * sqrt(2 / (fan_in + fan_out)). Returns
    ``tensor``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def orthogonal_(tensor, gain=1, generator=None):
    """Fill ``tensor`` (2 or more dimensions, flattened after the first) with a (semi-)
    orthogonal matrix times ``gain``: the Q of a Gaussian matrix's QR, signs made uniform.

    >>> import labkit as lk
    >>> w = lk.nn.init.orthogonal_(lk.nn.Parameter(lk.zeros(3, 5)))
    >>> bool(((w @ w.T) - lk.eye(3)).abs().max() < 1e-5)
    True
    """
    if tensor.ndim < 2:
        raise ValueError("orthogonal_: only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _gen(generator).standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, (q * gain).reshape(tensor.shape))


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Fill a 2-d ``tensor`` from N(0, std**2), then zero a ``sparsity`` fraction of the rows
    of each column. Returns ``tensor``."""
    if tensor.ndim != 2:
        raise ValueError("sparse_: only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    gen = _gen(generator)
    values = gen.normal(0.0, std, size=(rows, cols))
    zeros = math.ceil(sparsity * rows)
    for c in range(cols):
        values[gen.permutation(rows)[:zeros], c] = 0
    return _fill(tensor, values)


def layer_default_(weight, bias=None):
    """PyTorch's default for Linear and convolution layers: Kaiming-uniform (a=sqrt(5))
    weights and a bias uniform in +-1/sqrt(fan_in)."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = _calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        uniform_(bias, -bound, bound)
