"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay."""
from .optimizer import Optimizer


class SGD(Optimizer):
    """PyTorch's SGD. Per step, with gradient g of parameter p:

    ``g += weight_decay * p``; with momentum, ``buf = g`` on the first step and then
    ``buf = momentum * buf + (1 - dampening) * g``, and ``g = g + momentum * buf`` (Nesterov)
    or ``g = buf``; finally ``p -= lr * g``.

    >>> import labkit as lk
    >>> w = lk.nn.Parameter(lk.tensor([1.0]))
    >>> opt = lk.optim.SGD([w], lr=0.5, momentum=0.9)
    >>> for _ in range(2):
    ...     opt.zero_grad(); (w * w).sum().backward(); opt.step()
    >>> round(w.item(), 4)    # 1 - 0.5*2 = 0; then buf = 0.9*2 + 0 = 1.8, w = 0 - 0.9
    -0.9
    """

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))

    def _check_group(self, group):
        super()._check_group(group)
        if group["momentum"] < 0:
            raise ValueError(f"SGD: momentum must be >= 0, got {group['momentum']}")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("SGD: Nesterov momentum needs momentum > 0 and dampening = 0")

    def _update(self, xp, p, g, state, group, scratch):
        s0, s1 = scratch
        lr, momentum, wd = group["lr"], group["momentum"], group["weight_decay"]
        if wd:
            xp.multiply(p, wd, out=s0)
            g = xp.add(s0, g, out=s0)
        if momentum:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = xp.array(g, copy=True)
            else:
                buf *= momentum
                xp.multiply(g, 1.0 - group["dampening"], out=s1)
                buf += s1
            if group["nesterov"]:
                xp.multiply(buf, momentum, out=s1)
                g = xp.add(g, s1, out=s0)
            else:
                g = buf
        xp.multiply(g, lr, out=s1)
        xp.subtract(p, s1, out=p)
