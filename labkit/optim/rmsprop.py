"""RMSProp: gradients scaled by a running average of their squares."""
from ..tensor.ops.elementwise import sqrt
from .optimizer import Optimizer


class RMSProp(Optimizer):
    """PyTorch's RMSprop. Per step, with gradient g of parameter p:

    ``g += weight_decay * p``; ``sq = alpha * sq + (1 - alpha) * g * g``;
    ``avg = sqrt(sq) + eps``, or with ``centered=True``:
    ``ga = alpha * ga + (1 - alpha) * g`` and ``avg = sqrt(sq - ga * ga) + eps``;
    with momentum ``buf = momentum * buf + g / avg`` and ``p -= lr * buf``, else
    ``p -= lr * g / avg``.

    >>> import labkit as lk
    >>> w = lk.nn.Parameter(lk.tensor([1.0]))
    >>> opt = lk.optim.RMSProp([w], lr=0.01, alpha=0.0, eps=0.0)
    >>> (w * w).sum().backward(); opt.step()
    >>> round(w.item(), 4)     # sq = g*g, so p -= lr * sign(g)
    0.99
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                 centered=False):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered))

    def _check_group(self, group):
        super()._check_group(group)
        if not 0.0 <= group["alpha"] <= 1.0:
            raise ValueError(f"RMSProp: alpha must be in [0, 1], got {group['alpha']}")
        for name in ("eps", "momentum"):
            if group[name] < 0:
                raise ValueError(f"RMSProp: {name} must be >= 0, got {group[name]}")

    def _update(self, p, g, state, group):
        alpha, momentum = group["alpha"], group["momentum"]
        self._counter(state, "step", p).assign_add(1)
        sq = self._slot(state, "square_avg", p)
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        sq = sq.assign_add((g * g - sq) * (1.0 - alpha))
        if group["centered"]:
            ga = self._slot(state, "grad_avg", p)
            ga = ga.assign_add((g - ga) * (1.0 - alpha))
            avg = sqrt(sq - ga * ga) + group["eps"]
        else:
            avg = sqrt(sq) + group["eps"]
        if momentum > 0:
            buf = self._slot(state, "momentum_buffer", p)
            buf = buf.assign(buf * momentum + g / avg)
            p.assign_sub(buf * group["lr"])
        else:
            p.assign_sub(g / avg * group["lr"])


RMSprop = RMSProp   # PyTorch's spelling
