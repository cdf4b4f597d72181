"""Adamax: Adam with the infinity norm in place of the second moment."""
from ..tensor.ops.elementwise import abs as _abs
from ..tensor.ops.elementwise import maximum
from .optimizer import Optimizer, as_count, in_dtype, with_weight_decay


class Adamax(Optimizer):
    """PyTorch's Adamax. Per step t (from 1), with gradient g of parameter p:

    ``g += weight_decay * p``; ``m = b1 * m + (1 - b1) * g``;
    ``u = max(b2 * u, |g| + eps)``; ``p -= lr / (1 - b1**t) * m / u``.

    >>> import labkit as lk
    >>> w = lk.nn.Parameter(lk.tensor([1.0]))
    >>> opt = lk.optim.Adamax([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> round(w.item(), 4)
    0.9
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _update(self, p, g, state, group, h):
        b1 = h.exact("betas")[0]
        step = as_count(self._counter(state, "step", p).assign_add(1))
        m, u = self._slot(state, "exp_avg", p), self._slot(state, "exp_inf", p)
        g = with_weight_decay(p, g, group, h)
        m = m.assign_add((g - m) * h.derived("1-b1", lambda: in_dtype(1 - b1, p)))  # lerp_
        u = u.assign(maximum(u * h["betas"][1], _abs(g) + h["eps"]))
        clr = in_dtype(h.exact("lr") / (1 - b1 ** step), p)
        p.assign_sub(m / u * clr)
