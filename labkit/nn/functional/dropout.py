"""Dropout: ``F.dropout``, ``F.dropout1d``, ``F.dropout2d``, ``F.alpha_dropout`` and
``F.feature_alpha_dropout``.

Every mask comes from one place, ``keep_mask``, which draws from labkit's seeded generator
(``lk.manual_seed``) through a random op: a captured function draws a new mask every call, the
same one eager code draws from the same seed.

>>> import labkit as lk
>>> import labkit.nn.functional as F
>>> F.dropout2d(lk.ones(2, 3, 4, 4), p=0.5, training=False).shape
(2, 3, 4, 4)
"""
import math
import warnings

from ...errors import ShapeError, describe
from ...tensor import random as _random
from ...tensor.dtypes import float64
from ...tensor.ops.elementwise import add, cast, ge, mul
from ...tensor.public.inplace import inplace_flag

SELU_ALPHA_SCALED = 1.7580993408473766      # SELU's alpha times its scale: -(its lower bound)


def _check_p(name, p):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name}: probability p must be between 0 and 1, got {p}")


def keep_mask(x, p, shape=None, divide_by=1.0):
    """A mask of ``shape`` (default: ``x``'s) in ``x``'s dtype and device: each element is
    ``1 / divide_by`` with probability ``1 - p``, else 0."""
    u = _random.rand(tuple(x.shape if shape is None else shape), dtype=float64, device=x.device)
    keep = cast(ge(u, p), dtype=x.dtype)
    return keep if divide_by == 1.0 else mul(keep, 1.0 / divide_by)


@inplace_flag
def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``; identity
    when ``training`` is False.

    >>> import labkit as lk
    >>> lk.nn.functional.dropout(lk.ones(4), p=0.5, training=False).tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    _check_p("dropout", p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return mul(input, 0.0)
    return mul(input, keep_mask(input, p, divide_by=1.0 - p))


def _channel_dropout(name, input, p, training, batched_ndim):
    """Zero whole channels (every position of one channel of one example) with probability
    ``p``; ``batched_ndim`` is the rank of a batched input (an unbatched one has one less)."""
    _check_p(name, p)
    if input.ndim not in (batched_ndim - 1, batched_ndim):
        raise ShapeError(f"{name}: expects a {batched_ndim}-d (N, C, ...) or "
                         f"{batched_ndim - 1}-d (C, ...) input, got {describe(input)}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return mul(input, 0.0)
    lead = 2 if input.ndim == batched_ndim else 1
    shape = tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)
    return mul(input, keep_mask(input, p, shape, 1.0 - p))


@inplace_flag
def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) or (C, L) ``input`` with probability ``p`` (scaling the
    rest by ``1 / (1 - p)``).

    >>> import labkit as lk
    >>> _ = lk.manual_seed(0)
    >>> y = lk.nn.functional.dropout1d(lk.ones(1, 8, 5), p=0.5)
    >>> sorted(set(y.sum(-1).flatten().tolist()))
    [0.0, 10.0]
    """
    return _channel_dropout("dropout1d", input, p, training, 3)


@inplace_flag
def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) ``input`` with probability ``p``, as PyTorch 2's
    ``dropout2d``: a 3-d input is read as (N, C, L) and a 2-d one as (N, C), so it drops single
    elements, each with a warning saying which function fits instead (dropout1d, dropout), as
    PyTorch's.

    >>> import labkit as lk
    >>> lk.nn.functional.dropout2d(lk.ones(1, 2, 3, 3), p=0.0).sum().item()
    18.0
    """
    _check_p("dropout2d", p)
    nd = input.ndim
    if nd < 2:
        raise ShapeError(f"dropout2d: feature dropout needs at least 2 dimensions (N, C, ...), "
                         f"got {describe(input)}; use F.dropout for elementwise dropout")
    if nd not in (3, 4):
        warnings.warn(f"dropout2d: received a {nd}-D input {describe(input)}; dropout2d drops "
                      f"whole channels of (N, C, H, W) inputs, and PyTorch deprecates other "
                      f"ranks (on this one each (N, C) entry is dropped: elementwise for 2-D). "
                      f"Use F.dropout (nn.Dropout) for elementwise dropout.", stacklevel=3)
    elif nd == 3:
        warnings.warn(f"dropout2d: received a 3-D input {describe(input)}; as PyTorch does, it "
                      f"is read as (N, C, L) and whole channels C of each example are dropped. "
                      f"Use F.dropout1d (nn.Dropout1d) for that and silence this warning.",
                      stacklevel=3)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return mul(input, 0.0)
    shape = tuple(input.shape[:2]) + (1,) * (nd - 2)
    return mul(input, keep_mask(input, p, shape, 1.0 - p))


def _alpha(name, input, p, training, mask_shape):
    """Alpha dropout: dropped values become SELU's negative saturation, then an affine map
    restores zero mean and unit variance (PyTorch's constants)."""
    _check_p(name, p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return mul(input, 0.0)
    a = 1.0 / math.sqrt((SELU_ALPHA_SCALED ** 2 * p + 1) * (1 - p))
    keep = keep_mask(input, p, mask_shape)
    b = add(mul(keep, SELU_ALPHA_SCALED * a), -SELU_ALPHA_SCALED * a * (1 - p))
    return add(mul(input, mul(keep, a)), b)


@inplace_flag
def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: keeps the mean and variance of standardised inputs.

    >>> import labkit as lk
    >>> lk.nn.functional.alpha_dropout(lk.ones(3), 0.5).tolist()
    [1.0, 1.0, 1.0]
    """
    return _alpha("alpha_dropout", input, p, training, None)


@inplace_flag
def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout of whole channels of (N, C, *) ``input``."""
    if input.ndim < 2:
        raise ShapeError(f"feature_alpha_dropout: expects (N, C, ...) input, got "
                         f"{describe(input)}")
    return _alpha("feature_alpha_dropout", input, p, training,
                  tuple(input.shape[:2]) + (1,) * (input.ndim - 2))
