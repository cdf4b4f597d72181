"""Batch dimensions of a distribution read as event dimensions, as
``torch.distributions.Independent``."""
from . import constraints
from .distribution import Distribution
from .utils import sum_rightmost


class Independent(Distribution):
    """``base_distribution`` with its ``reinterpreted_batch_ndims`` rightmost batch dimensions
    made part of the event: ``log_prob`` and ``entropy`` sum over them.

    >>> import labkit as lk
    >>> d = lk.distributions.Independent(lk.distributions.Normal(lk.zeros(3), 1.0), 1)
    >>> d.batch_shape, d.event_shape, d.log_prob(lk.zeros(3)).shape
    ((), (3,), ())
    """

    arg_constraints = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        batch = base_distribution.batch_shape
        if reinterpreted_batch_ndims > len(batch):
            raise ValueError(f"Expected reinterpreted_batch_ndims <= "
                             f"len(base_distribution.batch_shape), actual "
                             f"{reinterpreted_batch_ndims} vs {len(batch)}")
        shape = batch + base_distribution.event_shape
        event_dim = reinterpreted_batch_ndims + len(base_distribution.event_shape)
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        super().__init__(shape[:len(shape) - event_dim], shape[len(shape) - event_dim:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = _instance or Independent.__new__(Independent)
        batch_shape = tuple(batch_shape)
        n = self.reinterpreted_batch_ndims
        new.base_dist = self.base_dist.expand(batch_shape + self._event_shape[:n])
        new.reinterpreted_batch_ndims = n
        return self._expanded(new, batch_shape)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def has_enumerate_support(self):
        return not self.reinterpreted_batch_ndims and self.base_dist.has_enumerate_support

    @property
    def support(self):
        result = self.base_dist.support
        if self.reinterpreted_batch_ndims:
            result = constraints.independent(result, self.reinterpreted_batch_ndims)
        return result

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def enumerate_support(self, expand=True):
        if self.reinterpreted_batch_ndims:
            raise NotImplementedError("Enumeration over cartesian product is not implemented")
        return self.base_dist.enumerate_support(expand=expand)

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"
