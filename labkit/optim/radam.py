"""RAdam: Adam whose adaptive step is switched on once the variance estimate is reliable."""
from ..tensor.ops.elementwise import maximum, sqrt, where
from .adam import adam_moments
from .optimizer import Optimizer, in_dtype


class RAdam(Optimizer):
    """PyTorch's RAdam. Per step t (from 1), with gradient g of parameter p: m and v as Adam's
    (weight decay as Adam's, or decoupled); ``rho_inf = 2 / (1 - b2) - 1``,
    ``rho_t = rho_inf - 2 t b2**t / (1 - b2**t)``; ``p -= lr * m / (1 - b1**t) * r`` with
    ``r = sqrt(1 - b2**t) / (sqrt(v) + eps) * rect(rho_t)`` while ``rho_t > 5``, else 1.
    The test on rho_t is an op (``where``), so a captured step switches on its own.

    >>> import labkit as lk
    >>> w = lk.nn.Parameter(lk.tensor([1.0]))
    >>> opt = lk.optim.RAdam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> round(w.item(), 4)     # first steps: plain momentum, p -= lr * m / (1 - b1)
    0.8
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, maximize=maximize,
                                      foreach=foreach, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      differentiable=differentiable))

    def _update(self, p, g, state, group, h):
        b1, b2, step, m, v = adam_moments(self, p, g, state, group, h)
        bias2 = 1 - b2 ** step
        rho_inf = 2 / (1 - b2) - 1
        rho_t = rho_inf - 2 * step * b2 ** step / bias2
        rho = maximum(rho_t, 5.0)      # the same where it is used; no NaN where it is not
        rect = ((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho)) ** 0.5
        update = m / in_dtype(1 - b1 ** step, p) * h["lr"]
        adaptive = in_dtype(bias2 ** 0.5, p) / (sqrt(v) + h["eps"])
        p.assign_sub(where(rho_t > 5.0, update * adaptive * in_dtype(rect, p), update))
