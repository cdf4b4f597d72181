"""Losses: ``F.cross_entropy``, ``F.nll_loss``, ``F.mse_loss``... (``reduction=`` as in PyTorch)."""
from ...errors import DTypeError, ShapeError, describe
from ...tensor.ops.composite import mean
from ...tensor.ops.elementwise import mul, sub
from ...tensor.ops.nll import nll_loss as _nll_loss
from ...tensor.ops.reduce import sum as _sum
from ...tensor.ops.softmax import log_softmax

REDUCTIONS = ("mean", "sum", "none")


def reduce_loss(name, loss, reduction):
    if reduction == "mean":
        return mean(loss)
    if reduction == "sum":
        return _sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{name}: reduction={reduction!r} is not one of {', '.join(REDUCTIONS)}")


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
    return reduce_loss("mse_loss", mul(diff, diff), reduction)
