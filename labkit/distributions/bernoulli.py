"""The Bernoulli distribution, as ``torch.distributions.Bernoulli``."""
import math
from numbers import Number

from ..autodiff import no_grad
from ..tensor import abs, arange, bernoulli, clamp, exp, log1p, where
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits


def bce_with_logits(logits, target):
    """``-(target log p + (1 - target) log(1 - p))`` for ``p = sigmoid(logits)``, without
    overflow: ``max(logits, 0) - logits * target + log1p(exp(-|logits|))``."""
    return clamp(logits, min=0) - logits * target + log1p(exp(-abs(logits)))


class Bernoulli(Distribution):
    """1 with probability ``probs`` (or ``sigmoid(logits)``), else 0; give one of the two.

    >>> import labkit as lk
    >>> d = lk.distributions.Bernoulli(probs=lk.tensor([0.25, 0.5]))
    >>> d.mean.tolist(), d.log_prob(lk.tensor([1.0, 0.0])).exp().tolist()
    ([0.25, 0.5], [0.25, 0.5])
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        given = probs if probs is not None else logits
        scalar = isinstance(given, Number)
        (param,) = broadcast_all(given)
        if probs is not None:
            self.probs = param
        else:
            self.logits = param
        self._param = param
        super().__init__(() if scalar else param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = _instance or Bernoulli.__new__(Bernoulli)
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(*batch_shape))
                new._param = getattr(new, name)
        return self._expanded(new, batch_shape)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.shape

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return where(self.probs == 0.5, math.nan, mode)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return bernoulli(self.probs.expand(*shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -bce_with_logits(logits, value)

    def entropy(self):
        return bce_with_logits(self.logits, self.probs)

    def enumerate_support(self, expand=True):
        values = arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand(2, *self._batch_shape)
        return values

