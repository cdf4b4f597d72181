"""The categorical distribution over ``0 .. K-1``, as ``torch.distributions.Categorical``."""
import math

import numpy as np

from ..autodiff import no_grad
from ..errors import ShapeError
from ..tensor import arange, broadcast_tensors, clamp, full, multinomial
from . import constraints
from .distribution import Distribution
from .utils import lazy_property, logits_to_probs, normalized_logits, probs_to_logits


def event_param(name, param):
    """The probabilities or logits a categorical distribution is given: at least 1-d."""
    if param.ndim < 1:
        raise ShapeError(f"`{name}` parameter must be at least one-dimensional.")
    return param


class Categorical(Distribution):
    """One of ``K`` categories (the last dimension of ``probs`` or ``logits``, which need not
    be normalised), drawn as an index; give one of the two.

    >>> import labkit as lk
    >>> d = lk.distributions.Categorical(probs=lk.tensor([0.2, 0.8]))
    >>> d.log_prob(lk.tensor(1)).exp().item(), d.sample((4,)).shape
    (0.800000011920929, (4,))
    """

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            probs = event_param("probs", probs)
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            self.logits = normalized_logits(event_param("logits", logits))
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        super().__init__(self._param.shape[:-1], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = _instance or type(self).__new__(type(self))
        shape = tuple(batch_shape) + (self._num_events,)
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(*shape))
                new._param = getattr(new, name)
        new._num_events = self._num_events
        return self._expanded(new, batch_shape)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        return self._param.shape

    @property
    def mean(self):
        return full(self._extended_shape(), math.nan, dtype=self.probs.dtype,
                    device=self.probs.device)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return self.mean

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        n = math.prod(shape[:len(shape) - len(self._batch_shape)])
        with no_grad():
            rows = self.probs.reshape(-1, self._num_events)
            drawn = multinomial(rows, n, True).T
        return drawn.reshape(shape)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = broadcast_tensors(value, self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        lowest = float(np.finfo(self.logits.dtype.np).min)
        return -(clamp(self.logits, min=lowest) * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = arange(self._num_events, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand(self._num_events, *self._batch_shape)
        return values
