"""Adam: bias-corrected running averages of the gradient and of its square."""
import math

from .optimizer import Optimizer


class Adam(Optimizer):
    """PyTorch's Adam (L2 ``weight_decay`` added to the gradient, optional AMSGrad).

    Per step t (from 1), with gradient g of parameter p: ``g += weight_decay * p``;
    ``m = b1 * m + (1 - b1) * g``; ``v = b2 * v + (1 - b2) * g * g``;
    ``p -= lr / (1 - b1**t) * m / (sqrt(v) / sqrt(1 - b2**t) + eps)``
    (with ``amsgrad``, the running maximum of v is used in place of v).

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

    def _update(self, xp, p, g, state, group, scratch):
        s0, s1 = scratch
        b1, b2 = group["betas"]
        if "exp_avg" not in state:
            state["step"] = 0
            state["exp_avg"] = xp.zeros_like(p)
            state["exp_avg_sq"] = xp.zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = xp.zeros_like(p)
        state["step"] += 1
        t = state["step"]
        if group["weight_decay"]:
            xp.multiply(p, group["weight_decay"], out=s0)
            g = xp.add(s0, g, out=s0)
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m *= b1
        xp.multiply(g, 1.0 - b1, out=s1)
        m += s1
        v *= b2
        xp.multiply(g, g, out=s1)
        s1 *= 1.0 - b2
        v += s1
        if group["amsgrad"]:
            v = state.setdefault("max_exp_avg_sq", xp.zeros_like(p))
            xp.maximum(v, state["exp_avg_sq"], out=v)
        xp.sqrt(v, out=s1)
        s1 /= math.sqrt(1.0 - b2 ** t)
        s1 += group["eps"]
        xp.divide(m, s1, out=s1)
        s1 *= group["lr"] / (1.0 - b1 ** t)
        xp.subtract(p, s1, out=p)
