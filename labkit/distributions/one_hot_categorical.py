"""The categorical distribution drawn as one-hot vectors, as
``torch.distributions.OneHotCategorical``."""
from ..tensor import arange, eye
from . import constraints
from .categorical import Categorical
from .distribution import Distribution


def _one_hot(indices, n, like):
    """``indices`` as one-hot vectors of length ``n`` in ``like``'s dtype and device."""
    return (indices.unsqueeze(-1) == arange(n, device=like.device)).to(like.dtype)


class OneHotCategorical(Distribution):
    """One of ``K`` categories as a one-hot vector of length ``K`` (the event); parameters as
    ``Categorical``'s.

    >>> import labkit as lk
    >>> d = lk.distributions.OneHotCategorical(logits=lk.tensor([0.0, 0.0, 10.0]))
    >>> d.mode.tolist(), d.sample().shape
    ([0.0, 0.0, 1.0], (3,))
    """

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits, validate_args=False)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = _instance or OneHotCategorical.__new__(OneHotCategorical)
        new._categorical = self._categorical.expand(batch_shape)
        return self._expanded(new, batch_shape)

    @property
    def _param(self):
        return self._categorical._param

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def mean(self):
        return self._categorical.probs

    @property
    def mode(self):
        return _one_hot(self.probs.argmax(-1), self._event_shape[0], self.probs)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        indices = self._categorical.sample(sample_shape)
        return _one_hot(indices, self._event_shape[0], self.probs)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        n = self._event_shape[0]
        values = eye(n, dtype=self.probs.dtype, device=self.probs.device)
        values = values.reshape((n,) + (1,) * len(self._batch_shape) + (n,))
        if expand:
            values = values.expand(n, *self._batch_shape, n)
        return values
