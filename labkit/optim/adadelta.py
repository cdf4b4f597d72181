"""Adadelta: steps scaled by the ratio of running RMS of past updates and of gradients."""
from ..tensor.ops.state import adadelta_delta, assign_axpby, assign_lerp
from .optimizer import Optimizer, in_dtype, with_weight_decay


class Adadelta(Optimizer):
    """PyTorch's Adadelta. Per step, with gradient g of parameter p:

    ``g += weight_decay * p``; ``sq = rho * sq + (1 - rho) * g * g``;
    ``delta = sqrt(acc + eps) / sqrt(sq + eps) * g``;
    ``acc = rho * acc + (1 - rho) * delta * delta``; ``p -= lr * delta``.

    >>> import labkit as lk
    >>> w = lk.nn.Parameter(lk.tensor([1.0]))
    >>> opt = lk.optim.Adadelta([w], lr=1.0, rho=0.0, eps=1e-6)
    >>> (w * w).sum().backward(); opt.step()
    >>> round(w.item(), 4)     # delta = sqrt(eps) / sqrt(4 + eps) * 2 ~ 1e-3
    0.999
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, capturable=capturable, foreach=foreach,
                                      differentiable=differentiable))

    def _check_group(self, group):
        super()._check_group(group)
        if not 0.0 <= group["rho"] <= 1.0:
            raise ValueError(f"Adadelta: rho must be in [0, 1], got {group['rho']}")

    def _update(self, p, g, state, group, h):
        self._counter(state, "step", p).assign_add(1)
        sq, acc = self._slot(state, "square_avg", p), self._slot(state, "acc_delta", p)
        g = with_weight_decay(p, g, group, h)
        # the running averages as ``lerp_`` (one op each, equal to PyTorch's ``mul_(rho)
        # .addcmul_(g, g, 1 - rho)`` but for rounding), the step in one op
        rest = h.derived("1-rho", lambda: in_dtype(1 - h.exact("rho"), p))
        assign_lerp(sq, g, rest, square_end=True)
        delta = adadelta_delta(g, sq, acc, h["eps"])
        assign_lerp(acc, delta, rest, square_end=True)
        assign_axpby(p, delta, 1, -h["lr"])
