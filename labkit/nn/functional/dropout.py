"""``F.dropout``."""
from ...tensor import random as _random
from ...tensor.creation import tensor as _tensor
from ...tensor.ops.elementwise import mul


def dropout(x, p=0.5, training=True):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``; identity
    when ``training`` is False. The mask comes from labkit's seeded generator.

    >>> import labkit as lk
    >>> lk.nn.functional.dropout(lk.ones(4), p=0.5, training=False).tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be between 0 and 1, got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return mul(x, 0.0)
    keep = _random.generator().random(x.shape) >= p
    mask = _tensor((keep / (1.0 - p)).astype(x.dtype.np), device=x.device)
    return mul(x, mask)
