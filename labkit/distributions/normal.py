"""The normal (Gaussian) distribution, as ``torch.distributions.Normal``."""
import math

from ..tensor import erf, erfinv, log, randn
from . import constraints
from .distribution import Distribution
from .utils import HALF_LOG_TWO_PI, broadcast_all


class Normal(Distribution):
    """The normal distribution of mean ``loc`` and standard deviation ``scale`` (broadcast).

    >>> import labkit as lk
    >>> d = lk.distributions.Normal(lk.tensor([0.0, 1.0]), 2.0)
    >>> d.batch_shape, d.sample((3,)).shape
    ((2,), (3, 2))
    >>> round(d.log_prob(lk.tensor([0.0, 1.0]))[0].item(), 4)
    -1.6121
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = _instance or Normal.__new__(Normal)
        new.loc, new.scale = self.loc.expand(*batch_shape), self.scale.expand(*batch_shape)
        return self._expanded(new, batch_shape)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.scale ** 2

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -((value - self.loc) ** 2) / (2 * self.scale ** 2) - log(self.scale) - \
            HALF_LOG_TWO_PI

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + erf((value - self.loc) / (self.scale * math.sqrt(2))))

    def icdf(self, value):
        return self.loc + self.scale * erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + HALF_LOG_TWO_PI + log(self.scale)
