"""Stateless layers and losses, composed from labkit ops (so gradients and capture come free).

>>> import labkit as lk
>>> import labkit.nn.functional as F
>>> logits = lk.tensor([[2.0, 0.0, -1.0], [0.0, 3.0, 0.0]], requires_grad=True)
>>> loss = F.cross_entropy(logits, lk.tensor([0, 1]))
>>> round(loss.item(), 4)
0.1324
>>> loss.backward(); logits.grad.shape
(2, 3)
"""
from ..errors import DTypeError, ShapeError, describe
from ..tensor.creation import tensor as _tensor
from ..tensor.ops.composite import mean, unsqueeze
from ..tensor.ops.softmax import log_softmax, softmax
from ..tensor.ops.conv import conv2d, max_pool2d, avg_pool2d
from ..tensor.ops.elementwise import add, cast, mul, ne, relu, sigmoid, sub, tanh
from ..tensor.ops.index import take
from ..tensor.ops.linalg import matmul_t
from ..tensor.ops.nll import nll_loss as _nll_loss
from ..tensor.ops.reduce import sum as _sum
from ..tensor import random as _random
from ..tensor.public.indexing import one_hot
from ..tensor.public.layout import pad

__all__ = ["relu", "sigmoid", "tanh", "softmax", "log_softmax", "linear", "conv2d",
           "max_pool2d", "avg_pool2d", "cross_entropy", "nll_loss", "mse_loss", "dropout",
           "embedding", "pad", "one_hot"]

_REDUCTIONS = ("mean", "sum", "none")


def linear(x, weight, bias=None):
    """``x @ weight.T + bias``, with ``weight`` of shape (out, in) as in PyTorch.

    >>> import labkit as lk
    >>> lk.nn.functional.linear(lk.ones(2, 3), lk.ones(4, 3), lk.zeros(4)).tolist()[0]
    [3.0, 3.0, 3.0, 3.0]
    """
    if weight.ndim != 2:
        raise ShapeError(f"linear: weight must be 2-d (out_features, in_features); got "
                         f"{describe(weight)}")
    if x.ndim == 0 or x.shape[-1] != weight.shape[1]:
        raise ShapeError(
            f"linear: input {describe(x)} does not fit weight {describe(weight)}: the input's "
            f"last dimension must be in_features={weight.shape[1]}. Did you forget to flatten "
            f"(x.flatten(1) or nn.Flatten()), or is the layer's in_features wrong?")
    out = matmul_t(x, weight, transpose_b=True)
    if bias is not None:
        out = add(out, bias)
    return out


def _reduce(name, loss, reduction):
    if reduction == "mean":
        return mean(loss)
    if reduction == "sum":
        return _sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{name}: reduction={reduction!r} is not one of {', '.join(_REDUCTIONS)}")


def _concrete(t):
    """The backend array behind ``t`` when it holds values now (eager), else None."""
    device, data = getattr(t, "device", None), getattr(t, "_data", None)
    return data if device is not None and isinstance(data, device.array_type) else None


def nll_loss(log_probs, target, reduction="mean"):
    """Negative log-likelihood of integer ``target`` classes under ``log_probs`` (N, C, *).

    >>> import labkit as lk
    >>> lp = lk.tensor([[-0.1, -2.3], [-1.2, -0.4]])
    >>> round(lk.nn.functional.nll_loss(lp, lk.tensor([0, 1])).item(), 4)
    0.25
    """
    return _nll_loss(log_probs, target, reduction=reduction)


def cross_entropy(input, target, reduction="mean"):
    """Softmax cross-entropy of logits ``input`` (N, C, *) against integer ``target`` (N, *).

    Computed as ``nll_loss(log_softmax(input, dim=1), target)``, stable for large logits.
    ``reduction``: 'mean' (default), 'sum' or 'none'.

    >>> import labkit as lk
    >>> round(lk.nn.functional.cross_entropy(lk.tensor([[0.0, 0.0]]), lk.tensor([1])).item(), 4)
    0.6931
    """
    if not input.dtype.is_floating:
        raise DTypeError(f"cross_entropy: input must be floating-point logits, got "
                         f"{describe(input)}")
    if input.ndim == 0:
        raise ShapeError(f"cross_entropy: input must have a class dimension; got {describe(input)}")
    return nll_loss(log_softmax(input, dim=1 if input.ndim > 1 else 0), target, reduction)


def mse_loss(input, target, reduction="mean"):
    """Mean squared error ``(input - target) ** 2``, reduced by ``reduction``.

    The shapes must match: a silent broadcast of (N, 1) against (N,) would compare every
    prediction with every target.

    >>> import labkit as lk
    >>> lk.nn.functional.mse_loss(lk.tensor([1.0, 2.0]), lk.tensor([1.0, 4.0])).item()
    2.0
    """
    if tuple(input.shape) != tuple(getattr(target, "shape", ())):
        raise ShapeError(
            f"mse_loss: input {describe(input)} and target {describe(target)} must have the same "
            f"shape (broadcasting them is almost always a bug). Reshape one, e.g. "
            f"pred.squeeze(-1) or target.unsqueeze(-1).")
    diff = sub(input, target)
    return _reduce("mse_loss", mul(diff, diff), reduction)


def dropout(x, p=0.5, training=True):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``; identity
    when ``training`` is False. The mask comes from labkit's seeded generator.

    >>> import labkit as lk
    >>> lk.nn.functional.dropout(lk.ones(4), p=0.5, training=False).tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be between 0 and 1, got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return mul(x, 0.0)
    keep = _random.generator().random(x.shape) >= p
    mask = _tensor((keep / (1.0 - p)).astype(x.dtype.np), device=x.device)
    return mul(x, mask)


def embedding(input, weight, padding_idx=None):
    """Rows of ``weight`` (num, dim) picked by integer ``input`` of any shape -> (*input, dim).

    Rows at ``padding_idx`` come out as zeros and get no gradient.

    >>> import labkit as lk
    >>> w = lk.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])
    >>> lk.nn.functional.embedding(lk.tensor([[2, 1]]), w).tolist()
    [[[3.0, 4.0], [1.0, 2.0]]]
    """
    if input.dtype.is_floating or input.dtype.name == "bool_":
        raise DTypeError(f"embedding: indices must be integers (int64), got {describe(input)}; "
                         f"convert with x.long()")
    num = weight.shape[0]
    data = _concrete(input)
    if data is not None and data.size:
        lo, hi = int(data.min()), int(data.max())
        if lo < 0 or hi >= num:
            raise ShapeError(f"embedding: index {lo if lo < 0 else hi} is out of range for "
                             f"{num} embeddings (valid: 0..{num - 1}). Enlarge the table "
                             f"(num_embeddings) or fix the indices.")
    out = take(weight, input, dim=0)
    if padding_idx is not None:
        keep = cast(ne(input, padding_idx), dtype=weight.dtype.name)
        out = mul(out, unsqueeze(keep, -1))
    return out
