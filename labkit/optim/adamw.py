"""AdamW: Adam with decoupled weight decay (its own module, as in ``torch.optim``)."""
from .adam import Adam


class AdamW(Adam):
    """PyTorch's AdamW: Adam with decoupled weight decay (``p *= 1 - lr * weight_decay`` before
    the Adam step), ``weight_decay=0.01`` by default.

    >>> import labkit as lk
    >>> w = lk.nn.Parameter(lk.tensor([1.0]))
    >>> opt = lk.optim.AdamW([w], lr=0.1, weight_decay=0.5)
    >>> (w * w).sum().backward(); opt.step()
    >>> round(w.item(), 4)     # 1 * (1 - 0.1 * 0.5) - 0.1
    0.85
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
