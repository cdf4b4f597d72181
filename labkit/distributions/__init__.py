"""``lk.distributions``: PyTorch's ``torch.distributions`` in its spellings, written in labkit
ops, so samples, densities and their gradients work eagerly, under ``lk.function`` and under
``lk.vmap``; random draws read labkit's generators (``lk.manual_seed``).

Normal, Uniform, Bernoulli, Categorical, OneHotCategorical, MultivariateNormal and Independent,
each with ``sample`` (``rsample`` where reparameterisable), ``log_prob``, ``entropy``, ``mean``,
``mode``, ``variance``, ``stddev``, ``batch_shape`` and ``event_shape`` (``cdf`` / ``icdf``
where PyTorch has them); ``kl_divergence`` with its registered pairs and ``register_kl``;
``constraints``; arguments validated as PyTorch does.

>>> import labkit as lk
>>> loc = lk.tensor([0.0, 1.0], requires_grad=True)
>>> d = lk.distributions.Normal(loc, 1.0)
>>> d.rsample((5,)).sum().backward(); loc.grad.tolist()
[5.0, 5.0]
"""
from . import constraints
from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import Distribution
from .independent import Independent
from .kl import kl_divergence, register_kl
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .uniform import Uniform

__all__ = ["Bernoulli", "Categorical", "Distribution", "Independent", "MultivariateNormal",
           "Normal", "OneHotCategorical", "Uniform", "constraints", "kl_divergence",
           "register_kl"]
