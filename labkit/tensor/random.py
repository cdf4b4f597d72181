"""Random tensors, reproducible with ``lk.manual_seed`` on every device, in PyTorch's signatures.

Values are drawn on the host from the default ``lk.Generator`` (or from ``generator=``) and then
moved to the target device, so the same seed gives the same numbers on CPU and GPU. Every draw
(``rand``, ``randn``, ``randint``, ``randperm``, ``normal``, ``bernoulli``, ``multinomial``,
dropout's masks) is a graph op (``labkit/tensor/ops/random.py``): a captured function draws new
numbers every call, the same ones eager code draws from the same seed.

>>> import labkit as lk
>>> _ = lk.manual_seed(0); x = lk.randint(0, 10, (3,)); x.dtype, x.shape
(lk.int64, (3,))
"""
import copy
import numbers

import numpy as np

from ..devices import get_device
from ..errors import DTypeError, ShapeError, describe
from .creation import _shape
from .dtypes import as_dtype, float64, get_default_dtype, int64, result_type
from .ops import elementwise as _ew
from .ops import random as _draws
from .tensor import Tensor


class Generator:
    """A random stream of its own, as ``torch.Generator``: give it as ``generator=`` to the
    data loaders, samplers and ``random_split`` so that their draws neither use nor disturb the
    stream that ``lk.manual_seed`` seeds. Unseeded, it starts from fresh entropy.

    >>> import labkit as lk
    >>> g = lk.Generator().manual_seed(42)
    >>> g.initial_seed(), lk.data.random_split(range(4), [2, 2], generator=g)[0].indices
    (42, [3, 2])
    """

    def __init__(self, device="cpu"):
        self.device = get_device(device)
        self.seed()

    def manual_seed(self, seed):
        """Restart the stream from ``seed``; returns the generator (as PyTorch's does)."""
        self._seed = int(seed)
        self._rng = np.random.default_rng(self._seed)
        return self

    def seed(self):
        """Restart the stream from a fresh non-deterministic seed, and return that seed."""
        self.manual_seed(int(np.random.SeedSequence().entropy) % 2 ** 63)
        return self._seed

    def initial_seed(self):
        """The seed the stream was last started from."""
        return self._seed

    def get_state(self):
        """The stream's position, for ``set_state`` (a dict here, a byte tensor in PyTorch)."""
        return copy.deepcopy(self._rng.bit_generator.state)

    def set_state(self, state):
        """Return the stream to a position ``get_state`` gave."""
        self._rng.bit_generator.state = state
        return self

    def __repr__(self):
        return f"lk.Generator(device='{self.device.name}', initial_seed={self._seed})"


default_generator = Generator()


def manual_seed(seed):
    """Seed labkit's random numbers (``rand``, ``randn``, dropout, shuffling, initialisation):
    reseeds ``lk.default_generator`` in place, so functions captured before draw from the new
    stream too. Returns the generator, as PyTorch's does.

    >>> import labkit as lk
    >>> _ = lk.manual_seed(3); a = lk.rand(2)
    >>> _ = lk.manual_seed(3); bool((lk.rand(2) == a).all())
    True
    """
    return default_generator.manual_seed(seed)


def seed():
    """Reseed the default generator from fresh entropy; returns the seed."""
    return default_generator.seed()


def initial_seed():
    """The seed the default generator was last started from."""
    return default_generator.initial_seed()


def get_rng_state():
    """The default generator's position (``set_rng_state`` returns to it)."""
    return default_generator.get_state()


def set_rng_state(state):
    """Return the default generator to a position ``get_rng_state`` gave."""
    default_generator.set_state(state)


def generator():
    """The NumPy Generator behind labkit's random functions (the default lk.Generator's)."""
    return default_generator._rng


def numpy_generator(generator=None):
    """The NumPy Generator a draw should use: ``generator``'s (an ``lk.Generator``, or a NumPy
    Generator as it is), or labkit's global one (seeded by ``lk.manual_seed``) when None."""
    return _draws.host_generator(_generator_of(generator))


def _generator_of(generator):
    """The generator a random op reads: ``generator`` (an lk.Generator or a NumPy Generator), or
    the default lk.Generator."""
    if generator is None:
        return default_generator
    if isinstance(generator, (Generator, np.random.Generator)):
        return generator
    raise TypeError(f"generator= takes an lk.Generator (or a NumPy Generator), got "
                    f"{type(generator).__name__}")


def _draw(op, shape, dtype, device, generator, requires_grad=False, **params):
    """Run the random op ``op`` (see ops/random.py) for a tensor of ``shape`` and ``dtype``."""
    t = op(shape=tuple(shape), dtype=dtype, device=get_device(device).name,
           generator=_generator_of(generator), **params)
    if requires_grad:
        t.requires_grad = True   # checks the dtype, with a clear error for integers
    return t


def _concrete(x):
    """Whether ``x`` holds values now (not a symbolic tensor of a trace): checks of values are
    made only then."""
    return not isinstance(x, Tensor) or x._data is not None


def _float_dtype(name, dtype):
    if not dtype.is_floating:
        raise DTypeError(f"{name}: draws floating-point values, but the dtype is {dtype}; pass "
                         f"a float dtype (dtype=lk.float32), or use lk.randint for integers")
    return dtype


def rand(*shape, generator=None, dtype=None, device=None, requires_grad=False):
    """Uniform samples in [0, 1) (float32 by default)."""
    d = _float_dtype("rand", as_dtype(dtype) or get_default_dtype())
    return _draw(_draws.uniform, _shape(shape), d, device, generator, requires_grad)


def randn(*shape, generator=None, dtype=None, device=None, requires_grad=False):
    """Standard normal samples (float32 by default)."""
    d = _float_dtype("randn", as_dtype(dtype) or get_default_dtype())
    return _draw(_draws.normal, _shape(shape), d, device, generator, requires_grad)


def rand_like(input, *, dtype=None, device=None, requires_grad=False):
    """``rand`` in ``input``'s shape (and dtype and device, unless given).

    >>> import labkit as lk
    >>> lk.rand_like(lk.zeros(2, dtype=lk.float64)).dtype
    lk.float64
    """
    return rand(input.shape, dtype=dtype or _float_dtype("rand_like", input.dtype),
                device=device or input.device, requires_grad=requires_grad)


def randn_like(input, *, dtype=None, device=None, requires_grad=False):
    """``randn`` in ``input``'s shape (and dtype and device, unless given)."""
    return randn(input.shape, dtype=dtype or _float_dtype("randn_like", input.dtype),
                 device=device or input.device, requires_grad=requires_grad)


def _integers(name, low, high, size, dtype, device, requires_grad, generator=None):
    low, high = int(low), int(high)
    if low >= high:
        raise ShapeError(f"{name}: low={low} must be less than high={high} (values are drawn "
                         f"from [low, high))")
    d = as_dtype(dtype) or int64
    shape = _shape((size,) if isinstance(size, int) else (tuple(size),))
    return _draw(_draws.integers, shape, d, device, generator, requires_grad, low=low, high=high)


def randint(*args, size=None, low=None, high=None, generator=None, dtype=None, device=None,
            requires_grad=False):
    """Integers uniform in [low, high) (int64 by default): ``randint(high, size)`` or
    ``randint(low, high, size)``, ``size`` a tuple; keywords too.

    >>> import labkit as lk
    >>> lk.randint(3, 5, (2, 2)).shape, int(lk.randint(1, (4,)).max())
    ((2, 2), 0)
    """
    args = list(args)
    if size is None:
        if not args:
            raise TypeError("randint() needs a size: randint(high, size) or "
                            "randint(low, high, size)")
        size = args.pop()
    if high is None:
        if not args:
            raise TypeError("randint() needs high: randint(high, size) or randint(low, high, "
                            "size)")
        high = args.pop()
    if low is None:
        low = args.pop() if args else 0
    if args:
        raise TypeError("randint() takes at most low, high and size as positional arguments")
    return _integers("randint", low, high, size, dtype, device, requires_grad, generator)


def randint_like(input, low=0, high=None, *, dtype=None, device=None, requires_grad=False):
    """``randint`` in ``input``'s shape (and dtype and device, unless given):
    ``randint_like(x, high)`` or ``randint_like(x, low, high)``.

    >>> import labkit as lk
    >>> lk.randint_like(lk.zeros(3, dtype=lk.int64), 5, 6).tolist()
    [5, 5, 5]
    """
    if high is None:
        low, high = 0, low
    return _integers("randint_like", low, high, input.shape, dtype or input.dtype,
                     device or input.device, requires_grad)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of 0..n-1 (int64 by default).

    >>> import labkit as lk
    >>> sorted(lk.randperm(4).tolist())
    [0, 1, 2, 3]
    """
    d = as_dtype(dtype) or int64
    return _draw(_draws.permutation, (int(n),), d, device, generator, requires_grad)


def _host(x):
    """A tensor's values as a float64 NumPy array, or a number as it is."""
    return x.numpy(force=True).astype(np.float64) if isinstance(x, Tensor) else x


def bernoulli(input, p=None, *, generator=None):
    """Ones with probability ``input`` (a tensor of probabilities), zeros otherwise, in
    ``input``'s dtype; ``bernoulli(input, p)``: probability ``p`` (a number or a tensor) in
    ``input``'s shape.

    >>> import labkit as lk
    >>> lk.bernoulli(lk.tensor([0.0, 1.0])).tolist(), lk.bernoulli(lk.zeros(2), p=1.0).tolist()
    ([0.0, 1.0], [1.0, 1.0])
    """
    probs = input if p is None else p
    if p is None and not input.dtype.is_floating:
        raise DTypeError(f"bernoulli: the probabilities must be floating-point, got "
                         f"{describe(input)}; convert with x.float()")
    if _concrete(probs):
        values = np.asarray(_host(probs))
        if np.any((values < 0) | (values > 1)) or np.any(np.isnan(values)):
            raise ShapeError("bernoulli: probabilities must lie in [0, 1]")
    u = _draw(_draws.uniform, input.shape, float64, input.device, generator)
    return _ew.cast(_ew.lt(u, probs), dtype=input.dtype)


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Indices drawn from the categories of each row of ``input`` (1-D or 2-D, non-negative
    weights that need not sum to 1): ``num_samples`` per row (int64), each category at most
    once unless ``replacement``.

    >>> import labkit as lk
    >>> lk.multinomial(lk.tensor([0.0, 1.0, 0.0]), 2, replacement=True).tolist()
    [1, 1]
    """
    if int(num_samples) <= 0:
        raise ShapeError(f"multinomial: num_samples must be positive, got {num_samples}")
    return _draws.multinomial(input, num_samples=int(num_samples), replacement=bool(replacement),
                              generator=_generator_of(generator))


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False):
    """Normal samples: ``normal(mean, std)`` with a tensor mean and/or std (their broadcast
    shape, their dtype) or ``normal(mean, std, size)`` with numbers (float32 by default).

    >>> import labkit as lk
    >>> lk.normal(lk.zeros(3), 0.0).tolist(), lk.normal(2.0, 0.0, (2,)).tolist()
    ([0.0, 0.0, 0.0], [2.0, 2.0])
    """
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    for t in tensors:
        if not t.dtype.is_floating:
            raise DTypeError(f"normal: mean and std must be floating-point, got {describe(t)}")
    if tensors:
        if size is not None:
            raise TypeError("normal: size is for numbers; with a tensor mean or std the "
                            "result takes their shape")
        shape = np.broadcast_shapes(*(t.shape for t in tensors))
        d = as_dtype(dtype) or result_type(*(t.dtype for t in tensors))
        device = device or tensors[0].device
    else:
        if size is None:
            raise TypeError("normal(mean, std, size): with numbers for mean and std, give "
                            "the size")
        shape = _shape((size,) if isinstance(size, numbers.Integral) else (tuple(size),))
        d = as_dtype(dtype) or get_default_dtype()
    if _concrete(std) and np.any(np.asarray(_host(std)) < 0):
        raise ShapeError("normal: std must be >= 0")
    z = _draw(_draws.normal, shape, float64, device, generator)
    out = _ew.cast(_ew.add(_ew.mul(z, std), mean), dtype=d)       # in float64, then d
    if requires_grad:
        out.requires_grad = True
    return out
