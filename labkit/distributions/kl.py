"""``kl_divergence(p, q)`` and ``register_kl``, as ``torch.distributions.kl``: the function for
a pair of distribution types is the registered one for the most specific pair of their
classes (a warning where two orders of specificity disagree, as PyTorch's).

>>> import labkit as lk
>>> D = lk.distributions
>>> D.kl_divergence(D.Normal(0.0, 1.0), D.Normal(1.0, 1.0)).item()
0.5
"""
import math
import warnings

from ..errors import ShapeError
from ..tensor import full_like, log, where
from .bernoulli import Bernoulli
from .categorical import Categorical
from .independent import Independent
from .multivariate_normal import (MultivariateNormal, batch_mahalanobis, half_log_det,
                                  solve_lower)
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .uniform import Uniform
from .utils import broadcast_shape, sum_rightmost

_KL_REGISTRY = {}     # (type_p, type_q) -> fn
_KL_MEMOIZE = {}      # (type_p, type_q) -> the fn found for them


def register_kl(type_p, type_q):
    """Decorator registering ``fn(p, q)`` as KL(p || q) for ``type_p`` and ``type_q`` (and
    their subclasses, unless something more specific is registered).

    >>> import labkit as lk
    >>> class Coin(lk.distributions.Bernoulli):
    ...     pass
    >>> @lk.distributions.register_kl(Coin, Coin)
    ... def _kl_coins(p, q):
    ...     return p.probs * 0
    >>> lk.distributions.kl_divergence(Coin(0.5), Coin(0.25)).item()
    0.0
    """
    for t in (type_p, type_q):
        if not isinstance(t, type):
            raise TypeError(f"register_kl takes distribution classes, got {t!r}")

    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        _KL_MEMOIZE.clear()
        return fn
    return decorator


def _rank(types, cls):
    """How specific a registered class is for ``cls``: its place in ``cls``'s MRO."""
    return cls.__mro__.index(types)


def _dispatch_kl(type_p, type_q):
    matches = [(p, q) for p, q in _KL_REGISTRY if issubclass(type_p, p) and issubclass(type_q, q)]
    if not matches:
        return None
    left = min(matches, key=lambda m: (_rank(m[0], type_p), _rank(m[1], type_q)))
    right = min(matches, key=lambda m: (_rank(m[1], type_q), _rank(m[0], type_p)))
    if _KL_REGISTRY[left] is not _KL_REGISTRY[right]:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). Please "
                      f"register_kl({left[0].__name__}, {right[1].__name__})", RuntimeWarning,
                      stacklevel=3)
    return _KL_REGISTRY[left]


def kl_divergence(p, q):
    """KL(p || q), the expectation under ``p`` of ``log p - log q``, batched over the two
    distributions' (broadcast) batch shapes; NotImplementedError for a pair with no rule."""
    key = type(p), type(q)
    fn = _KL_MEMOIZE.get(key)
    if fn is None:
        fn = _KL_MEMOIZE[key] = _dispatch_kl(*key)
    if fn is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{type(p).__name__} and q type {type(q).__name__}")
    return fn(p, q)


def _softplus(x):
    return log(1 + (-x.abs()).exp()) + x.clamp(min=0)


def _infinite_where(cond, value):
    return where(cond, math.inf, value)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale) ** 2
    t1 = ((p.loc - q.loc) / q.scale) ** 2
    return 0.5 * (var_ratio + t1 - 1 - log(var_ratio))


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = log((q.high - q.low) / (p.high - p.low))
    return _infinite_where((q.low > p.low) | (q.high < p.high), result)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (_softplus(-q.logits) - _softplus(-p.logits))
    t1 = where(p.probs == 0, 0.0, _infinite_where(q.probs == 0, t1))
    t2 = (1 - p.probs) * (_softplus(q.logits) - _softplus(p.logits))
    t2 = where(p.probs == 1, 0.0, _infinite_where(q.probs == 1, t2))
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = _infinite_where((q.probs == 0).expand_as(t), t)
    t = where((p.probs == 0).expand_as(t), 0.0, t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ShapeError("KL-divergence between two Multivariate Normals with different event "
                         "shapes cannot be computed")
    lp, lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    n = p.event_shape[0]
    batch = broadcast_shape(lq.shape[:-2], lp.shape[:-2])
    # trace(Sq^-1 Sp) = ||Lq^-1 Lp||^2 (Frobenius)
    term2 = (solve_lower(lq, lp.expand(*batch, n, n)) ** 2).sum((-2, -1))
    term3 = batch_mahalanobis(lq, q.loc - p.loc)
    return half_log_det(lq) - half_log_det(lp) + 0.5 * (term2 + term3 - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independent distributions with different "
                                  "reinterpreted_batch_ndims is not implemented")
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    width = p.high - p.low
    t1 = log(math.sqrt(2 * math.pi) * q.scale / width)
    t2 = width ** 2 / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2) ** 2
    return t1 + 0.5 * (t2 + t3) / q.scale ** 2


@register_kl(Normal, Uniform)
def _kl_normal_uniform(p, q):
    return full_like(p.loc, math.inf)      # a normal's mass outside any interval
