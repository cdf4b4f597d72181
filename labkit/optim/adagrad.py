"""Adagrad: per-coordinate learning rates from the running sum of squared gradients."""
from ..tensor.ops.elementwise import sqrt
from .optimizer import Optimizer, as_count, in_dtype, with_weight_decay


class Adagrad(Optimizer):
    """PyTorch's Adagrad. Per step t (from 1), with gradient g of parameter p:

    ``g += weight_decay * p``; ``clr = lr / (1 + (t - 1) * lr_decay)``;
    ``sum += g * g``; ``p -= clr * g / (sqrt(sum) + eps)``. As in PyTorch, every parameter's
    ``sum`` starts at the constructor's ``initial_accumulator_value`` (a group's own value is
    not used), and the state exists from construction on.

    >>> import labkit as lk
    >>> w = lk.nn.Parameter(lk.tensor([3.0]))
    >>> opt = lk.optim.Adagrad([w], lr=0.5)
    >>> (w * w).sum().backward(); opt.step()
    >>> round(w.item(), 4)     # 3 - 0.5 * 6 / 6
    2.5
    """

    _switches = ("weight_decay", "lr_decay")

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, fused=fused))
        for group in self.param_groups:
            for p in group["params"]:
                self._state_of(p)

    def _state_of(self, p):
        state = self.state.setdefault(p, {})
        self._counter(state, "step", p)
        self._slot(state, "sum", p, self.defaults["initial_accumulator_value"])
        return state

    def _update(self, p, g, state, group, h):
        step = as_count(self._counter(state, "step", p).assign_add(1))
        acc = self._state_of(p)["sum"]
        g = with_weight_decay(p, g, group, h)
        clr = h["lr"]
        if group["lr_decay"]:
            clr = in_dtype(h.exact("lr") / (1 + (step - 1) * h.exact("lr_decay")), p)
        acc = acc.assign_add(g * g)
        p.assign_sub(g / (sqrt(acc) + h["eps"]) * clr)
