"""NAdam: Adam with Nesterov momentum and a momentum schedule."""
import numpy as np

from ..tensor.ops.elementwise import sqrt
from .optimizer import Optimizer, as_count, in_dtype, moments, with_weight_decay


class NAdam(Optimizer):
    """PyTorch's NAdam. Per step t (from 1), with gradient g of parameter p:

    ``g += weight_decay * p`` (or ``p *= 1 - lr * weight_decay`` with
    ``decoupled_weight_decay``); ``mu_t = b1 * (1 - 0.96 ** (t * momentum_decay) / 2)``;
    ``mu_product *= mu_t``; m and v as Adam's; ``denom = sqrt(v / (1 - b2**t)) + eps``;
    ``p -= lr * (1 - mu_t) / (1 - mu_product) * g / denom``, then
    ``p -= lr * mu_{t+1} / (1 - mu_product * mu_{t+1}) * m / denom``.

    >>> import labkit as lk
    >>> w = lk.nn.Parameter(lk.tensor([1.0]))
    >>> opt = lk.optim.NAdam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> round(w.item(), 4)
    0.8944
    """

    _switches = ("weight_decay",)
    _scalar_state = {"step": np.int64, "mu_product": np.float64}

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach,
                                      capturable=capturable, differentiable=differentiable))

    def _update(self, p, g, state, group, h):
        b1, b2 = h.exact("betas")
        lr, decay = h.exact("lr"), h.exact("momentum_decay")
        step = as_count(self._counter(state, "step", p).assign_add(1))
        mu_product = self._counter(state, "mu_product", p, 1.0, np.float64)
        g = with_weight_decay(p, g, group, h)
        mu = b1 * (1.0 - 0.5 * 0.96 ** (step * decay))
        mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * decay))
        mu_product = mu_product.assign(mu_product * mu)
        m, v = moments(self._slot(state, "exp_avg", p), self._slot(state, "exp_avg_sq", p), g,
                       p, h)
        denom = sqrt(v / in_dtype(1 - b2 ** step, p)) + h["eps"]
        p.assign_sub(g / denom * in_dtype(lr * (1.0 - mu) / (1.0 - mu_product), p))
        p.assign_sub(m / denom * in_dtype(lr * mu_next / (1.0 - mu_product * mu_next), p))
