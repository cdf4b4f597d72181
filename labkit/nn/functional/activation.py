"""Activations: ``F.relu``, ``F.gelu``, ``F.softplus``... in PyTorch's signatures, with its values
and its gradients at the kinks (the gradient of ``hardtanh`` at its bounds is 0, of ``elu`` at 0
is ``alpha``, of ``hardswish`` at -3 is -0.5...). Piecewise functions are ``where`` of their
pieces, each piece fed only the inputs where it is taken, so an overflow in the branch not
taken cannot turn a gradient into NaN.

``inplace=True`` writes the result into the input and returns it, as PyTorch does (with the
checks of every in-place op: ``labkit.tensor.public.inplace``).

>>> import labkit as lk
>>> import labkit.nn.functional as F
>>> F.gelu(lk.tensor([0.0, 1.0])).tolist()
[0.0, 0.8413447141647339]
"""
import warnings

from ...errors import ShapeError, describe
from ...tensor.autocast import precision
from ...tensor.dtypes import as_dtype
from ...tensor.ops.composite import split
from ...tensor.ops.elementwise import abs, add, cast, div, exp, ge, gt, le, logical_and, lt, mul
from ...tensor.ops.elementwise import neg, relu as _relu, sigmoid as _sigmoid, sub
from ...tensor.ops.elementwise import tanh as _tanh, where
from ...tensor.ops.elementwise_math import expm1, log1p
from ...tensor.ops.nn_kernels import gelu as _gelu
from ...tensor.ops.nn_kernels import leaky_relu as _leaky_relu
from ...tensor.ops.shape import reshape
from ...tensor.ops.softmax import log_softmax as _log_softmax
from ...tensor.ops.softmax import softmax as _softmax
from ...tensor.public.inplace import inplace_flag

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


@inplace_flag
def relu(input, inplace=False):
    """``max(x, 0)``; gradient 0 at 0.

    >>> import labkit as lk
    >>> lk.nn.functional.relu(lk.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """
    return _relu(input)


def _below(x, threshold):
    """``x`` where ``x <= threshold``, else ``threshold``: the input of a branch for small x."""
    return where(gt(x, threshold), threshold, x)


@inplace_flag
def threshold(input, threshold, value, inplace=False):
    """``x`` where ``x > threshold``, else ``value``.

    >>> import labkit as lk
    >>> lk.nn.functional.threshold(lk.tensor([0.5, 2.0]), 1.0, -1.0).tolist()
    [-1.0, 2.0]
    """
    return where(le(input, threshold), value, input)


@inplace_flag
def leaky_relu(input, negative_slope=0.01, inplace=False):
    """``x`` for ``x > 0``, else ``negative_slope * x``.

    >>> import labkit as lk
    >>> lk.nn.functional.leaky_relu(lk.tensor([-2.0, 3.0]), 0.5).tolist()
    [-1.0, 3.0]
    """
    return _leaky_relu(input, negative_slope=float(negative_slope))


def _elu(x, alpha, scale, input_scale):
    """``scale * x`` for ``x > 0``, else ``scale * alpha * (exp(x * input_scale) - 1)``."""
    neg_part = expm1(mul(_below(x, 0.0), input_scale) if input_scale != 1 else _below(x, 0.0))
    neg_part = mul(neg_part, alpha * scale)
    pos = mul(x, scale) if scale != 1 else x
    return where(gt(x, 0), pos, neg_part)


@inplace_flag
def elu(input, alpha=1.0, inplace=False):
    """``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)``.

    >>> import labkit as lk
    >>> round(lk.nn.functional.elu(lk.tensor([-1.0])).item(), 4)
    -0.6321
    """
    return _elu(input, alpha, 1.0, 1.0)


@inplace_flag
def selu(input, inplace=False):
    """``scale * elu(x, alpha)`` with the self-normalising constants (alpha 1.6733, scale
    1.0507).

    >>> import labkit as lk
    >>> round(lk.nn.functional.selu(lk.tensor([1.0])).item(), 4)
    1.0507
    """
    return _elu(input, SELU_ALPHA, SELU_SCALE, 1.0)


@inplace_flag
def celu(input, alpha=1.0, inplace=False):
    """``x`` for ``x > 0``, else ``alpha * (exp(x / alpha) - 1)``.

    >>> import labkit as lk
    >>> round(lk.nn.functional.celu(lk.tensor([-1.0]), alpha=2.0).item(), 4)
    -0.7869
    """
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0 (it divides x)")
    return _elu(input, alpha, 1.0, 1.0 / alpha)


def gelu(input, approximate="none"):
    """``x * Phi(x)`` (``approximate='none'``, with ``erf``) or its tanh approximation
    (``approximate='tanh'``); one op each way (``labkit.tensor.ops.nn_kernels``).

    >>> import labkit as lk
    >>> round(lk.nn.functional.gelu(lk.tensor([1.0]), approximate="tanh").item(), 4)
    0.8412
    """
    return _gelu(input, approximate=approximate)


@inplace_flag
def silu(input, inplace=False):
    """``x * sigmoid(x)`` (also called swish).

    >>> import labkit as lk
    >>> round(lk.nn.functional.silu(lk.tensor([1.0])).item(), 4)
    0.7311
    """
    return mul(input, _sigmoid(input))


@precision("float32_gpu")
def softplus(input, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold``.

    >>> import labkit as lk
    >>> round(lk.nn.functional.softplus(lk.tensor([0.0])).item(), 4)
    0.6931
    """
    scaled = mul(input, beta) if beta != 1 else input
    linear = gt(scaled, threshold)
    soft = log1p(exp(where(linear, 0.0, scaled)))
    return where(linear, input, div(soft, beta) if beta != 1 else soft)


@inplace_flag
def mish(input, inplace=False):
    """``x * tanh(softplus(x))``.

    >>> import labkit as lk
    >>> round(lk.nn.functional.mish(lk.tensor([1.0])).item(), 4)
    0.8651
    """
    return mul(input, _tanh(softplus(input)))


def softsign(input):
    """``x / (1 + |x|)``.

    >>> import labkit as lk
    >>> lk.nn.functional.softsign(lk.tensor([1.0, -3.0])).tolist()
    [0.5, -0.75]
    """
    return div(input, add(abs(input), 1.0))


@inplace_flag
def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """``x`` clipped to ``[min_val, max_val]``; the gradient is 0 at the bounds and outside.

    >>> import labkit as lk
    >>> lk.nn.functional.hardtanh(lk.tensor([-2.0, 0.5, 2.0])).tolist()
    [-1.0, 0.5, 1.0]
    """
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val={min_val} is above max_val={max_val}")
    return where(le(input, min_val), min_val, where(ge(input, max_val), max_val, input))


@inplace_flag
def relu6(input, inplace=False):
    """``min(max(x, 0), 6)``.

    >>> import labkit as lk
    >>> lk.nn.functional.relu6(lk.tensor([-1.0, 3.0, 9.0])).tolist()
    [0.0, 3.0, 6.0]
    """
    return hardtanh(input, 0.0, 6.0)


@inplace_flag
def hardsigmoid(input, inplace=False):
    """``relu6(x + 3) / 6``: 0 below -3, 1 above 3, linear between.

    >>> import labkit as lk
    >>> lk.nn.functional.hardsigmoid(lk.tensor([-4.0, 0.0, 4.0])).tolist()
    [0.0, 0.5, 1.0]
    """
    return div(hardtanh(add(input, 3.0), 0.0, 6.0), 6.0)


@inplace_flag
def hardswish(input, inplace=False):
    """``x * relu6(x + 3) / 6``; its gradient is ``x / 3 + 1/2`` strictly between -3 and 3,
    0 below and 1 above (PyTorch's).

    >>> import labkit as lk
    >>> lk.nn.functional.hardswish(lk.tensor([-4.0, 0.0, 1.0, 4.0])).tolist()
    [-0.0, 0.0, 0.6666666865348816, 4.0]
    """
    middle = div(mul(input, add(input, 3.0)), 6.0)
    return where(le(input, -3.0), mul(input, 0.0),
                 where(ge(input, 3.0), input, middle))


def logsigmoid(input):
    """``log(sigmoid(x))``, computed stably as ``-softplus(-x)``.

    >>> import labkit as lk
    >>> round(lk.nn.functional.logsigmoid(lk.tensor([0.0])).item(), 4)
    -0.6931
    """
    return neg(softplus(neg(input)))


def tanhshrink(input):
    """``x - tanh(x)``.

    >>> import labkit as lk
    >>> lk.nn.functional.tanhshrink(lk.tensor([0.0])).tolist()
    [0.0]
    """
    return sub(input, _tanh(input))


def softshrink(input, lambd=0.5):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, 0 between.

    >>> import labkit as lk
    >>> lk.nn.functional.softshrink(lk.tensor([-1.0, 0.2, 1.0])).tolist()
    [-0.5, 0.0, 0.5]
    """
    if lambd < 0:
        raise ValueError(f"softshrink: lambd must be at least 0, got {lambd}")
    return where(gt(input, lambd), sub(input, lambd),
                 where(lt(input, -lambd), add(input, lambd), mul(input, 0.0)))


def hardshrink(input, lambd=0.5):
    """``x`` where ``|x| > lambd``, else 0.

    >>> import labkit as lk
    >>> lk.nn.functional.hardshrink(lk.tensor([-1.0, 0.2, 1.0])).tolist()
    [-1.0, 0.0, 1.0]
    """
    return where(logical_and(ge(input, -lambd), le(input, lambd)), 0.0, input)


def glu(input, dim=-1):
    """Gated linear unit: the first half of ``dim`` times the sigmoid of the second half.

    >>> import labkit as lk
    >>> lk.nn.functional.glu(lk.tensor([2.0, 0.0])).tolist()
    [1.0]
    """
    if input.ndim == 0:
        raise ShapeError(f"glu: needs at least one dimension to halve; got {describe(input)}")
    size = input.shape[dim]
    if size % 2:
        raise ShapeError(f"glu: dimension {dim} of {describe(input)} has odd size {size}; it is "
                         f"halved into values and gates")
    a, b = split(input, size // 2, dim)
    return mul(a, _sigmoid(b))


@precision("low")
def prelu(input, weight):
    """``x`` for ``x > 0``, else ``weight * x``; ``weight`` holds one slope or one per channel
    (dimension 1 of the input, or 0 for a 1-d input).

    >>> import labkit as lk
    >>> lk.nn.functional.prelu(lk.tensor([-2.0, 2.0]), lk.tensor([0.25])).tolist()
    [-0.5, 2.0]
    """
    n = weight.numel() if hasattr(weight, "numel") else 1
    if n != 1:
        channels = input.shape[1] if input.ndim >= 2 else (input.shape[0] if input.ndim else 1)
        if input.ndim == 0 or n != channels:
            raise ShapeError(f"prelu: {n} slopes do not match the {channels} channels of "
                             f"{describe(input)} (dimension 1, or 0 for a 1-d input); use one "
                             f"slope or one per channel")
        if input.ndim >= 2:
            weight = reshape(weight, shape=(n,) + (1,) * (input.ndim - 2))
    elif weight.ndim:
        weight = reshape(weight, shape=())
    return where(gt(input, 0), input, mul(weight, input))


def _softmax_dim(name, input, dim):
    if dim is None:         # PyTorch's legacy choice for an unspecified dim
        warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the "
                      f"call to include dim=X as an argument.", stacklevel=3)
        return 0 if input.ndim in (0, 1, 3) else 1
    return dim


def _with_dtype(input, dtype):
    return input if dtype is None else cast(input, dtype=as_dtype(dtype).name)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``exp(x) / sum(exp(x))`` over ``dim`` (cast to ``dtype`` first, if given).

    >>> import labkit as lk
    >>> lk.nn.functional.softmax(lk.zeros(2), dim=0).tolist()
    [0.5, 0.5]
    """
    return _softmax(_with_dtype(input, dtype), dim=_softmax_dim("softmax", input, dim))


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``log(softmax(x))`` over ``dim``, computed stably.

    >>> import labkit as lk
    >>> round(lk.nn.functional.log_softmax(lk.zeros(2), dim=0)[0].item(), 4)
    -0.6931
    """
    return _log_softmax(_with_dtype(input, dtype), dim=_softmax_dim("log_softmax", input, dim))


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """``softmax(-x)`` over ``dim``.

    >>> import labkit as lk
    >>> [round(v, 4) for v in lk.nn.functional.softmin(lk.tensor([0.0, 1.0]), dim=0).tolist()]
    [0.7311, 0.2689]
    """
    return _softmax(neg(_with_dtype(input, dtype)), dim=_softmax_dim("softmin", input, dim))


def sigmoid(input):
    """``1 / (1 + exp(-x))``."""
    return _sigmoid(input)


def tanh(input):
    """``tanh(x)``."""
    return _tanh(input)
