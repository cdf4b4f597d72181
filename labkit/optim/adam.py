"""Adam: bias-corrected running averages of the gradient and of its square."""
from ..tensor.ops.elementwise import maximum, sqrt
from .optimizer import Optimizer, as_count, in_dtype


class Adam(Optimizer):
    """PyTorch's Adam (L2 ``weight_decay`` added to the gradient, optional AMSGrad).

    Per step t (from 1), with gradient g of parameter p: ``g += weight_decay * p``;
    ``m = b1 * m + (1 - b1) * g``; ``v = b2 * v + (1 - b2) * g * g``;
    ``p -= lr / (1 - b1**t) * m / (sqrt(v) / sqrt(1 - b2**t) + eps)``
    (with ``amsgrad``, the running maximum of v is used in place of v). The step count t is a
    0-d int64 slot advanced with ``assign_add``; the bias corrections are computed from it with
    ops, so a captured step keeps counting.

    >>> import labkit as lk
    >>> w = lk.nn.Parameter(lk.tensor([1.0]))
    >>> opt = lk.optim.Adam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> round(w.item(), 4)     # the first Adam step moves each coordinate by about lr
    0.9
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 amsgrad=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad))

    def _check_group(self, group):
        super()._check_group(group)
        b1, b2 = group["betas"]
        if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
            raise ValueError(f"Adam: betas must each be in [0, 1), got {group['betas']}")
        if group["eps"] < 0:
            raise ValueError(f"Adam: eps must be >= 0, got {group['eps']}")

    def _update(self, p, g, state, group):
        b1, b2 = group["betas"]
        step = as_count(self._counter(state, "step", p).assign_add(1))
        m, v = self._slot(state, "exp_avg", p), self._slot(state, "exp_avg_sq", p)
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        m = m.assign_add((g - m) * (1.0 - b1))                  # PyTorch's lerp_(g, 1 - b1)
        v = v.assign_add((g * g - v) * (1.0 - b2))
        if group["amsgrad"]:
            vmax = self._slot(state, "max_exp_avg_sq", p)
            v = vmax.assign(maximum(vmax, v))
        step_size = in_dtype(group["lr"] / (1.0 - b1 ** step), p)
        bias2_sqrt = in_dtype(sqrt(1.0 - b2 ** step), p)
        p.assign_sub(m / (sqrt(v) / bias2_sqrt + group["eps"]) * step_size)
