"""Random draws as ops: each reads and advances a generator (an ``lk.Generator``) when it runs.

They are stateful ops with no tensor inputs (TensorFlow's stateful random ops): eagerly an op
draws at once; under capture it is a node of the graph that draws afresh every time the graph
runs, so a captured function does not freeze the values it saw when it was traced. Graphs run
their side effects in program order, so the same seed gives the same numbers eagerly and
captured. Values are drawn on the host by NumPy and then put on the op's device, so a seed also
gives the same numbers on CPU and GPU.

The attributes: ``shape``, ``dtype`` (a labkit DType), ``device`` (a name), ``generator`` (the
``lk.Generator`` drawn from; the public functions put the default one there when none is given,
and ``lk.manual_seed`` reseeds that object in place), and the parameters of the distribution.

>>> import labkit as lk
>>> from labkit.tensor.ops.random import uniform
>>> from labkit.tensor.random import default_generator
>>> uniform(shape=(2,), dtype=lk.float64, device="cpu:0", generator=default_generator).shape
(2,)
"""
import numpy as np

from ...devices import get_device
from ...errors import DTypeError, ShapeError, describe
from ..dtypes import int64
from ..op import op


def _rule(shape, dtype, **attrs):
    return tuple(shape), dtype


def host_generator(generator):
    """The NumPy Generator behind ``generator`` (an lk.Generator or a NumPy Generator)."""
    return getattr(generator, "_rng", generator)


def _random_op(name, draw, doc):
    """A stateful op with no inputs whose kernel is ``draw(numpy_generator, shape, **params)``
    cast to ``dtype`` and put on the op's device."""
    def kernel(xp, shape, dtype, device, generator, **params):
        values = draw(host_generator(generator), tuple(shape), **params)
        return xp.asarray(np.asarray(values).astype(dtype.np, copy=False))
    kernel.__name__, kernel.__doc__ = name, doc
    declared = op(name, shape=_rule, vjp=None, register=False, stateful=True)(kernel)
    declared.out_device = lambda attrs: get_device(attrs["device"])
    return declared


uniform = _random_op("uniform", lambda rng, shape: rng.random(shape),
                     "Samples uniform in [0, 1).")
normal = _random_op("normal", lambda rng, shape: rng.standard_normal(shape),
                    "Standard normal samples.")
integers = _random_op("integers", lambda rng, shape, low, high: rng.integers(low, high, shape),
                      "Integers uniform in [low, high).")
permutation = _random_op("permutation", lambda rng, shape: rng.permutation(shape[0]),
                         "A random permutation of 0..n-1 (``shape`` is (n,)).")


def _multinomial_rule(weights, num_samples, replacement, generator):
    if weights.ndim not in (1, 2):
        raise ShapeError(f"multinomial: expects 1-D or 2-D weights, got {describe(weights)}")
    if not weights.dtype.is_floating:
        raise DTypeError(f"multinomial: the weights must be floating-point, got "
                         f"{describe(weights)}; convert with x.float()")
    if num_samples <= 0:
        raise ShapeError(f"multinomial: num_samples must be positive, got {num_samples}")
    _check_enough_categories(weights.shape[-1], num_samples, replacement)
    return tuple(weights.shape[:-1]) + (num_samples,), int64


def _check_enough_categories(k, num_samples, replacement):
    if not replacement and k is not None and num_samples > k:
        raise ShapeError(f"multinomial: cannot draw {num_samples} samples from {k} categories "
                         f"without replacement; pass replacement=True")


@op("multinomial", shape=_multinomial_rule, vjp=None, register=False, stateful=True)
def multinomial(xp, weights, num_samples, replacement, generator):
    """Indices drawn from the categories of each row of ``weights`` (non-negative, need not sum
    to 1), ``num_samples`` per row, each category at most once unless ``replacement``."""
    w = np.atleast_2d(weights.get() if xp is not np else weights).astype(np.float64)
    rows, k = w.shape
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ShapeError("multinomial: the weights contain inf, nan or a negative value")
    if np.any(w.sum(axis=1) <= 0):
        raise ShapeError("multinomial: a row of weights sums to 0 (no category can be drawn)")
    _check_enough_categories(k, num_samples, replacement)     # eagerly no shape rule runs
    rng = host_generator(generator)
    if not replacement:
        with np.errstate(divide="ignore"):
            # exponential races: the first num_samples arrivals are a draw without replacement
            # (categories of weight 0 never arrive: they come last, in order, as in PyTorch)
            keys = rng.exponential(size=(rows, k)) / w
        out = np.argsort(keys, axis=1, kind="stable")[:, :num_samples]
    else:
        cdf = np.cumsum(w, axis=1) / w.sum(axis=1, keepdims=True)
        cdf[:, -1] = 1.0
        offset = np.arange(rows)[:, None]
        u = rng.random((rows, num_samples))
        out = np.searchsorted((cdf + offset).ravel(), (u + offset).ravel(), side="right")
        out = out.reshape(rows, num_samples) - offset * k
    out = out.astype(np.int64)
    return xp.asarray(out if weights.ndim == 2 else out[0])


def _no_output(generator, into):
    from ..dtypes import bool_
    return (), bool_


@op("copy_generator_state", shape=_no_output, vjp=None, register=False, stateful=True)
def copy_generator_state(xp, generator, into):
    """Put the generator ``into`` where ``generator`` is now (both lk.Generators or NumPy
    Generators of one kind of bit generator): draws from ``into`` then repeat what
    ``generator`` draws next. A stateful op, so a captured graph copies the position at run time,
    in program order with the draws (activation checkpointing replays dropout masks with it)."""
    host_generator(into).bit_generator.state = host_generator(generator).bit_generator.state
    return xp.zeros((), dtype=bool)


# every op on generators only (the random draws, and copying a generator's position): stateful
# (it moves its generator on), but not an update of the program's state, so a captured graph
# runs it in the role of the pass it is in (a dropout mask: forward). Each has a ``generator``
# attribute, the generator it reads.
DRAWS = frozenset({uniform, normal, integers, permutation, multinomial, copy_generator_state})
