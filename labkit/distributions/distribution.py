"""The ``Distribution`` base class, as ``torch.distributions.Distribution``.

A distribution has a ``batch_shape`` (independent distributions of one family side by side) and
an ``event_shape`` (the shape of one draw); ``sample(sample_shape)`` gives
``sample_shape + batch_shape + event_shape`` values. Arguments are validated as PyTorch does
(on unless ``validate_args=False`` or ``Distribution.set_default_validate_args(False)``): each
parameter against its ``arg_constraints`` entry when the distribution is made, each value given
to ``log_prob`` against the ``support``. The checks are ``check_all`` ops, so a captured
function checks every call's values when it runs, and a failure raises ``ValueError``
(``lk.ConstraintError``) naming the parameter, the constraint and the values.
"""
from ..autodiff import no_grad
from ..errors import ShapeError
from ..tensor import Tensor, exp
from ..tensor.ops.checks import check_all
from . import constraints
from .utils import lazy_property


class Distribution:
    """Base class of the distributions. Subclasses set ``arg_constraints`` and ``support`` and
    define what they can of ``rsample``/``sample``, ``log_prob``, ``cdf``, ``icdf``,
    ``entropy``, ``mean``, ``mode``, ``variance``, ``enumerate_support``."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = True          # PyTorch's default (``__debug__``)
    arg_constraints = {}
    support = None

    @staticmethod
    def set_default_validate_args(value):
        """Whether distributions made from now on validate their arguments (True unless set)."""
        if value not in (True, False):
            raise ValueError(f"set_default_validate_args takes True or False, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = tuple(batch_shape)
        self._event_shape = tuple(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if not self._validate_args:
            return
        for param, constraint in self.arg_constraints.items():
            if constraints.is_dependent(constraint):
                continue       # checked by the subclass, or by its support
            if param not in self.__dict__ and isinstance(getattr(type(self), param, None),
                                                         lazy_property):
                continue       # not given (probs when made from logits)
            value = getattr(self, param)
            check_all(value, constraint.check(value),
                      message=f"Expected parameter {param} ({type(value).__name__} of shape "
                              f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                              f"constraint {constraint!r}")

    # ---- shapes -----------------------------------------------------------------------------
    @property
    def batch_shape(self):
        """The shape over which the parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self):
        """The shape of one sample (without batching)."""
        return self._event_shape

    def _extended_shape(self, sample_shape=()):
        return _shape(sample_shape) + self._batch_shape + self._event_shape

    def expand(self, batch_shape, _instance=None):
        """This distribution with its parameters broadcast to ``batch_shape``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement expand")

    def _expanded(self, new, batch_shape):
        """``new``, a copy of this distribution whose parameters ``expand`` has broadcast,
        given its shapes and this one's validation setting (arguments not checked again)."""
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    # ---- moments ----------------------------------------------------------------------------
    @property
    def mean(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement variance")

    @property
    def stddev(self):
        """The standard deviation, ``variance.sqrt()``."""
        return self.variance.sqrt()

    # ---- drawing and densities --------------------------------------------------------------
    def sample(self, sample_shape=()):
        """Values of shape ``sample_shape + batch_shape + event_shape``, without gradients."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        """Reparameterised values: differentiable with respect to the parameters."""
        raise NotImplementedError(f"{type(self).__name__} does not implement rsample (its "
                                  f"has_rsample is False): use sample()")

    def sample_n(self, n):
        """``n`` samples (PyTorch's old spelling of ``sample((n,))``)."""
        return self.sample((n,))

    def log_prob(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement log_prob")

    def cdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement cdf")

    def icdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement icdf")

    def entropy(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement entropy")

    def perplexity(self):
        """``exp(entropy)``."""
        return exp(self.entropy())

    def enumerate_support(self, expand=True):
        raise NotImplementedError(f"{type(self).__name__} does not implement "
                                  f"enumerate_support")

    # ---- validation -------------------------------------------------------------------------
    def _validate_sample(self, value):
        """Raise ValueError unless ``value`` is a tensor that fits ``batch_shape +
        event_shape`` and lies in the support."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        shape = tuple(value.shape)
        n = len(self._event_shape)
        if shape[len(shape) - n:] != self._event_shape:
            raise ValueError(f"The right-most size of value must match event_shape: {shape} vs "
                             f"{self._event_shape}.")
        expected = self._batch_shape + self._event_shape
        for i, j in zip(reversed(shape), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: "
                                 f"{shape} vs {expected}.")
        support = self.support
        if support is None or constraints.is_dependent(support):
            return
        check_all(value, support.check(value),
                  message=f"Expected value argument ({type(value).__name__} of shape {shape}) "
                          f"to be within the support ({support!r}) of the distribution "
                          f"{self!r}")

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(f"{p}: {_summary(self.__dict__[p])}" for p in names)
        return f"{type(self).__name__}({args})"


def _shape(sample_shape):
    if isinstance(sample_shape, int):
        return (sample_shape,)
    try:
        return tuple(int(n) for n in sample_shape)
    except TypeError:
        raise ShapeError(f"sample_shape must be a tuple of ints, got {sample_shape!r}") from None


def _summary(value):
    # (shapes only: reading a value would be a read to the host in a captured function)
    return tuple(value.shape) if isinstance(value, Tensor) else value
