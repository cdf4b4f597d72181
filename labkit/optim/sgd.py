"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay."""
from ..tensor.ops.elementwise import cast
from ..tensor.ops.state import assign_axpby
from .optimizer import Optimizer, with_weight_decay


class SGD(Optimizer):
    """PyTorch's SGD. Per step, with gradient g of parameter p (``-g`` with ``maximize``):

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

    _switches = ("weight_decay", "momentum", "dampening")
    _internal_state = ("step",)    # (with dampening) whether the buffer has had its first step

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def _check_group(self, group):
        super()._check_group(group)
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("SGD: Nesterov momentum needs momentum > 0 and dampening = 0")

    def _update(self, p, g, state, group, h):
        # with momentum and no Nesterov the decay goes into the buffer by itself (one pass, no
        # decayed copy of the gradient): buf = momentum * buf + scale * g + scale * wd * p
        decay_in_buffer = group["momentum"] and not group["nesterov"] and group["weight_decay"]
        if not decay_in_buffer:
            g = with_weight_decay(p, g, group, h)
        if group["momentum"]:
            # The buffer starts at zero, so ``momentum * buf + g`` is exactly PyTorch's first
            # step (buf = g) with no Python test on the step number (which a trace would fix).
            momentum = h["momentum"]
            if group["dampening"]:   # the first step takes g undamped: pick the factor with an op
                # (a buffer loaded without a count has had its first step: count from 1)
                start = 1 if "momentum_buffer" in state else 0
                step = self._counter(state, "step", p, start).assign_add(1)
            buf = self._slot(state, "momentum_buffer", p)
            scale = 1.0 - cast(step != 1, dtype=p.dtype.name) * h["dampening"] \
                if group["dampening"] else 1
            buf = assign_axpby(buf, g, momentum, scale)
            if decay_in_buffer:
                buf = assign_axpby(buf, p, 1, h["weight_decay"] * scale)
            g = g + buf * momentum if group["nesterov"] else buf
            assign_axpby(p, g, 1, -h["lr"])
        else:       # (a captured step's graph pass makes this one GEMM where g is a product)
            p.assign_sub(g * h["lr"])
