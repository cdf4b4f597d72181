"""RMSprop: gradients scaled by a running average of their squares."""
from ..tensor.ops.elementwise import sqrt
from .optimizer import Optimizer, in_dtype, with_weight_decay


class RMSprop(Optimizer):
    """PyTorch's RMSprop. Per step, with gradient g of parameter p:

    ``g += weight_decay * p``; ``sq = alpha * sq + (1 - alpha) * g * g``;
    ``avg = sqrt(sq) + eps``, or with ``centered=True``:
    ``ga = alpha * ga + (1 - alpha) * g`` and ``avg = sqrt(sq - ga * ga) + eps``;
    with momentum ``buf = momentum * buf + g / avg`` and ``p -= lr * buf``, else
    ``p -= lr * g / avg``. ``RMSProp`` is the same class.

    >>> import labkit as lk
    >>> w = lk.nn.Parameter(lk.tensor([1.0]))
    >>> opt = lk.optim.RMSprop([w], lr=0.01, alpha=0.0, eps=0.0)
    >>> (w * w).sum().backward(); opt.step()
    >>> round(w.item(), 4)     # sq = g*g, so p -= lr * sign(g)
    0.99
    """

    _switches = ("weight_decay", "momentum")

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps,
                                      centered=centered, weight_decay=weight_decay,
                                      capturable=capturable, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable))

    def _check_group(self, group):
        super()._check_group(group)
        if not 0.0 <= group["alpha"]:
            raise ValueError(f"RMSprop: alpha must be >= 0, got {group['alpha']}")

    def _update(self, p, g, state, group, h):
        alpha = h["alpha"]
        self._counter(state, "step", p).assign_add(1)
        sq = self._slot(state, "square_avg", p)
        g = with_weight_decay(p, g, group, h)
        rest = h.derived("1-alpha", lambda: in_dtype(1 - h.exact("alpha"), p))
        sq = sq.assign(sq * alpha + g * rest * g)
        if group["centered"]:
            ga = self._slot(state, "grad_avg", p)
            ga = ga.assign_add((g - ga) * rest)                 # lerp_(g, 1 - alpha)
            avg = sqrt(sq - ga * ga) + h["eps"]
        else:
            avg = sqrt(sq) + h["eps"]
        if group["momentum"]:
            buf = self._slot(state, "momentum_buffer", p)
            buf = buf.assign(buf * h["momentum"] + g / avg)
            p.assign_sub(buf * h["lr"])
        else:
            p.assign_sub(g / avg * h["lr"])


RMSProp = RMSprop   # labkit's earlier spelling
