"""What a distribution's parameters and samples must be, as ``torch.distributions.constraints``:
each constraint's ``check(value)`` is a bool tensor of labkit ops (over the constraint's
``event_dim`` rightmost dimensions), so it works eagerly and captured.

>>> import labkit as lk
>>> from labkit.distributions import constraints
>>> constraints.positive.check(lk.tensor([1.0, -1.0])).tolist()
[True, False]
>>> constraints.simplex.check(lk.tensor([[0.5, 0.5], [0.7, 0.7]])).tolist()
[True, False]
"""
from .. import linalg
from ..tensor import Tensor, all as _all

__all__ = ["Constraint", "boolean", "dependent", "dependent_property", "greater_than",
           "greater_than_eq", "half_open_interval", "independent", "integer_interval",
           "interval", "is_dependent", "less_than", "lower_cholesky", "lower_triangular",
           "nonnegative", "nonnegative_integer", "one_hot", "positive", "positive_definite",
           "positive_integer", "real", "real_vector", "simplex", "symmetric", "unit_interval"]


class Constraint:
    """A region of values. ``check(value)`` gives a bool tensor of ``value``'s shape less the
    constraint's ``event_dim`` rightmost dimensions (``is_discrete`` for integer regions)."""

    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__.lstrip("_") + "()"


class _Dependent(Constraint):
    """A placeholder whose region depends on other values (a Uniform's support); it cannot be
    checked itself."""

    def __init__(self, *, is_discrete=False, event_dim=0):
        self.is_discrete, self.event_dim = is_discrete, event_dim

    def __call__(self, *, is_discrete=False, event_dim=0):
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, value):
        raise ValueError("cannot determine validity of a dependent constraint")


def is_dependent(constraint):
    """Whether ``constraint`` is a dependent placeholder (not checkable by itself)."""
    return isinstance(constraint, _Dependent)


class dependent_property(property):
    """A property that is also the dependent constraint (``Uniform.support``, which depends on
    ``low`` and ``high``), as PyTorch's ``constraints.dependent_property``."""

    def __init__(self, fn=None, *, is_discrete=False, event_dim=0):
        super().__init__(fn)
        self.is_discrete, self.event_dim = is_discrete, event_dim

    def __call__(self, fn):
        return dependent_property(fn, is_discrete=self.is_discrete, event_dim=self.event_dim)


class _IndependentConstraint(Constraint):
    """``base`` over ``reinterpreted_batch_ndims`` more rightmost dimensions (all must hold)."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        n = self.reinterpreted_batch_ndims
        if n:
            result = _all(result.reshape(result.shape[:result.ndim - n] + (-1,)), -1)
        return result

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        is_boolean = _all((value == 0) | (value == 1), -1)
        return is_boolean & (value.sum(-1) == 1)


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (value % 1 == 0) & (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self):
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerGreaterThan(Constraint):
    is_discrete = True

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound)

    def __repr__(self):
        return f"IntegerGreaterThan(lower_bound={self.lower_bound})"


class _Real(Constraint):
    def check(self, value):
        return value == value           # False only at NaN


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return self.lower_bound < value

    def __repr__(self):
        return f"GreaterThan(lower_bound={_text(self.lower_bound)})"


class _GreaterThanEq(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return self.lower_bound <= value

    def __repr__(self):
        return f"GreaterThanEq(lower_bound={_text(self.lower_bound)})"


class _LessThan(Constraint):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return value < self.upper_bound

    def __repr__(self):
        return f"LessThan(upper_bound={_text(self.upper_bound)})"


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self):
        return (f"Interval(lower_bound={_text(self.lower_bound)}, "
                f"upper_bound={_text(self.upper_bound)})")


class _HalfOpenInterval(_Interval):
    def check(self, value):
        return (self.lower_bound <= value) & (value < self.upper_bound)

    def __repr__(self):
        return "HalfOpen" + super().__repr__()


class _Simplex(Constraint):
    """Non-negative along the last dimension, summing to 1 (within 1e-6)."""
    event_dim = 1

    def check(self, value):
        return _all(value >= 0, -1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        same = value.tril() == value
        return _all(same.reshape(value.shape[:-2] + (-1,)), -1)


class _LowerCholesky(Constraint):
    """Lower-triangular square matrices with a positive diagonal."""
    event_dim = 2

    def check(self, value):
        positive = _all(value.diagonal(dim1=-2, dim2=-1) > 0, -1)
        return lower_triangular.check(value) & positive


class _Symmetric(Constraint):
    event_dim = 2

    def check(self, value):
        close = (value - value.mT).abs() <= 1e-6 * (1 + value.abs())
        return _all(close.reshape(value.shape[:-2] + (-1,)), -1)


class _PositiveDefinite(_Symmetric):
    """Symmetric matrices with positive eigenvalues."""

    def check(self, value):
        return super().check(value) & (linalg.eigvalsh(value).min(-1).values > 0)


class _RealVector(_IndependentConstraint):
    def __init__(self):
        super().__init__(real, 1)

    def __repr__(self):
        return "IndependentConstraint(Real(), 1)"


def _text(bound):
    return bound.tolist() if isinstance(bound, Tensor) and bound.numel() < 8 else bound


dependent = _Dependent()
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
real = _Real()
real_vector = _RealVector()
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
simplex = _Simplex()
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
symmetric = _Symmetric()
positive_definite = _PositiveDefinite()
