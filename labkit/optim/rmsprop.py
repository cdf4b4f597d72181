"""RMSProp: gradients scaled by a running average of their squares."""
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

    def _update(self, xp, p, g, state, group, scratch):
        s0, s1 = scratch
        alpha, momentum = group["alpha"], group["momentum"]
        if "square_avg" not in state:
            state["step"] = 0
            state["square_avg"] = xp.zeros_like(p)
            if momentum > 0:
                state["momentum_buffer"] = xp.zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = xp.zeros_like(p)
        state["step"] += 1
        if group["weight_decay"]:
            xp.multiply(p, group["weight_decay"], out=s0)
            g = xp.add(s0, g, out=s0)
        sq = state["square_avg"]
        sq *= alpha
        xp.multiply(g, g, out=s1)
        s1 *= 1.0 - alpha
        sq += s1
        if group["centered"]:
            ga = state["grad_avg"]
            ga *= alpha
            xp.multiply(g, 1.0 - alpha, out=s1)
            ga += s1
            xp.multiply(ga, ga, out=s1)
            xp.subtract(sq, s1, out=s1)
            xp.sqrt(s1, out=s1)
        else:
            xp.sqrt(sq, out=s1)
        s1 += group["eps"]
        xp.divide(g, s1, out=s1)                       # g / avg
        if momentum > 0:
            buf = state.setdefault("momentum_buffer", xp.zeros_like(p))
            buf *= momentum
            buf += s1
            xp.multiply(buf, group["lr"], out=s1)
        else:
            s1 *= group["lr"]
        xp.subtract(p, s1, out=p)


RMSprop = RMSProp   # PyTorch's spelling
