"""Adam: bias-corrected running averages of the gradient and of its square."""
from ..tensor.ops.elementwise import maximum, sqrt
from ..tensor.ops.state import adam_update
from ..tensor.tensor import concrete
from .optimizer import Optimizer, as_count, in_dtype, moments, with_weight_decay


def adam_moments(opt, p, g, state, group, h):
    """The start of an Adam step, shared by Adam and RAdam: the betas, the step count (advanced
    by one), weight decay applied to the gradient ``g``, and the updated moments ``m`` and
    ``v``. Returns ``(b1, b2, step, m, v)``."""
    b1, b2 = h.exact("betas")
    step = as_count(opt._counter(state, "step", p).assign_add(1))
    g = with_weight_decay(p, g, group, h)
    m, v = moments(opt._slot(state, "exp_avg", p), opt._slot(state, "exp_avg_sq", p), g, p, h)
    return b1, b2, step, m, v


class Adam(Optimizer):
    """PyTorch's Adam (L2 ``weight_decay`` added to the gradient, or decoupled as AdamW's with
    ``decoupled_weight_decay=True``; optional AMSGrad; ``maximize``).

    Per step t (from 1), with gradient g of parameter p: ``g += weight_decay * p`` (decoupled:
    ``p *= 1 - lr * weight_decay``); ``m = b1 * m + (1 - b1) * g``;
    ``v = b2 * v + (1 - b2) * g * g``;
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

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def _update(self, p, g, state, group, h):
        b1, b2, step, m, v = adam_moments(self, p, g, state, group, h)
        if group["amsgrad"]:
            vmax = self._slot(state, "max_exp_avg_sq", p)
            v = vmax.assign(maximum(vmax, v))
        step_size, bias2_sqrt = self._corrections(step, b1, b2, h, p)
        adam_update(p, m, v, step_size, bias2_sqrt, h["eps"])

    def _corrections(self, step, b1, b2, h, p):
        """``lr / (1 - b1**t)`` and ``sqrt(1 - b2**t)`` in ``p``'s dtype, from the step count
        ``step`` (float64). Eagerly, the parameters whose counts agree (all of a group's, as a
        rule) share the tensors the first of them made: the same ops on the same values, made
        once a step instead of eight 0-d ops per parameter. Under capture each parameter's
        come from its own count, read when the graph runs."""
        def make():
            return (in_dtype(h.exact("lr") / (1 - b1 ** step), p),
                    in_dtype(sqrt(1 - b2 ** step), p))
        count, lr = concrete(step), h.exact("lr")
        if count is None or not isinstance(lr, (int, float)):
            return make()
        key = (float(count), lr, b1, b2, p.dtype, p.device)
        memo = getattr(self, "_memo", None)
        if memo is None or memo[0] != key:
            memo = self._memo = (key, make())
        return memo[1]
