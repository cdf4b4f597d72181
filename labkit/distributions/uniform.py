"""The continuous uniform distribution, as ``torch.distributions.Uniform``."""
import math

from ..tensor import clamp, full_like, log, rand, where
from ..tensor.ops.checks import check_all
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all


class Uniform(Distribution):
    """Values spread evenly over the half-open interval ``[low, high)`` (broadcast).

    >>> import labkit as lk
    >>> d = lk.distributions.Uniform(0.0, lk.tensor([2.0, 4.0]))
    >>> d.mean.tolist(), d.entropy().exp().tolist()
    ([1.0, 2.0], [2.0, 4.0])
    """

    arg_constraints = {"low": constraints.dependent(is_discrete=False, event_dim=0),
                       "high": constraints.dependent(is_discrete=False, event_dim=0)}
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self.low.shape, validate_args=validate_args)
        if self._validate_args:
            check_all(self.high, self.low < self.high,
                      message=f"Uniform is not defined when low >= high (low: {self.low.shape}, "
                              f"high: {self.high.shape})")

    def expand(self, batch_shape, _instance=None):
        new = _instance or Uniform.__new__(Uniform)
        new.low, new.high = self.low.expand(*batch_shape), self.high.expand(*batch_shape)
        return self._expanded(new, batch_shape)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return full_like(self.high, math.nan)

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low) ** 2 / 12

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = rand(shape, dtype=self.low.dtype, device=self.low.device)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        inside = (self.low <= value) & (self.high > value)
        return where(inside, 0.0, -math.inf) - log(self.high - self.low)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return clamp((value - self.low) / (self.high - self.low), min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return log(self.high - self.low)
