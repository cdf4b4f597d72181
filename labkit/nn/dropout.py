"""``Dropout``: random zeroing while training, identity in eval mode."""
from . import functional as F
from .module import Module


class Dropout(Module):
    """Zero each element with probability ``p`` while training (scaling the rest by 1/(1-p));
    identity after ``model.eval()``. Masks come from labkit's seeded generator.

    >>> import labkit as lk
    >>> drop = lk.nn.Dropout(p=0.5)
    >>> drop.eval()(lk.ones(3)).tolist()
    [1.0, 1.0, 1.0]
    """

    def __init__(self, p=0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout probability must be between 0 and 1, got {p}")
        self.p = float(p)

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"
