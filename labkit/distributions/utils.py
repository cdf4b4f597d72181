"""Helpers the distributions share, as ``torch.distributions.utils``: broadcasting parameters,
probabilities to logits and back, a property computed once, and sums over event dimensions."""
import functools
import math

import numpy as np

from ..errors import DTypeError, ShapeError
from ..tensor import (Tensor, broadcast_tensors, clamp, get_default_dtype, log, log1p, logsumexp,
                      sigmoid, softmax, tensor)


def broadcast_all(*values):
    """The values as tensors of one shape: Python numbers become tensors of the first tensor's
    dtype and device (the default float dtype if there is none), as PyTorch's."""
    like = next((v for v in values if isinstance(v, Tensor)), None)
    if like is None and not all(isinstance(v, (int, float)) for v in values):
        raise DTypeError(f"broadcast_all takes tensors and numbers; got "
                         f"{', '.join(type(v).__name__ for v in values)}")
    dtype = like.dtype if like is not None and like.dtype.is_floating else get_default_dtype()
    device = like.device if like is not None else None
    tensors = [v if isinstance(v, Tensor) else tensor(float(v), dtype=dtype, device=device)
               for v in values]
    return tuple(broadcast_tensors(*tensors))


def broadcast_shape(*shapes):
    """NumPy's broadcast of several shapes, with a ShapeError naming them."""
    try:
        return tuple(np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        raise ShapeError(f"shapes {', '.join(str(tuple(s)) for s in shapes)} cannot be "
                         f"broadcast together") from None


def clamp_probs(probs):
    """``probs`` kept within ``[eps, 1 - eps]`` of its dtype (no infinite logits)."""
    eps = float(np.finfo(probs.dtype.np).eps)
    return clamp(probs, min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    """Log-odds of Bernoulli probabilities (``is_binary``), else log-probabilities."""
    p = clamp_probs(probs)
    return log(p) - log1p(-p) if is_binary else log(p)


def logits_to_probs(logits, is_binary=False):
    """Probabilities from log-odds (``is_binary``) or from unnormalised log-probabilities of
    the last dimension."""
    return sigmoid(logits) if is_binary else softmax(logits, -1)


def normalized_logits(logits):
    """Log-probabilities: ``logits`` less their log-sum-exp over the last dimension."""
    return logits - logsumexp(logits, -1, keepdim=True)


def sum_rightmost(value, dim):
    """``value`` summed over its ``dim`` rightmost dimensions."""
    if dim == 0:
        return value
    return value.reshape(value.shape[:value.ndim - dim] + (-1,)).sum(-1)


class lazy_property:
    """A property computed on first use and then kept on the instance (a distribution's
    ``logits`` from its ``probs``, or the other way)."""

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        value = self.fn(instance)
        instance.__dict__[self.fn.__name__] = value
        return value


HALF_LOG_TWO_PI = 0.5 * math.log(2 * math.pi)
