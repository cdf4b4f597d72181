"""``lk.inference_mode()``: PyTorch's ``torch.inference_mode``, for evaluation and serving.

Like ``lk.no_grad()`` it records no tape (it is the same machinery, grad mode switched off); in
addition the tensors made inside are *inference tensors* (``t.is_inference()``), which cannot
be used later in a computation that records for autodiff, changed in place, or given
``requires_grad`` outside inference mode: each of those is an error saying to ``x.clone()``
first (the clone is a normal tensor). See ``labkit.tensor.inference``.

>>> import labkit as lk
>>> model = lk.nn.Linear(3, 2)
>>> with lk.inference_mode():
...     y = model(lk.ones(1, 3))
...     inside = lk.is_inference_mode_enabled()
>>> inside, lk.is_inference_mode_enabled(), y.requires_grad, y.is_inference()
(True, False, False, True)
"""
from ..tensor import inference
from .functional import _GradMode


class inference_mode(_GradMode):
    """Context manager / decorator: no tape is recorded inside, and tensors made inside are
    inference tensors.

    The forms PyTorch has: ``with lk.inference_mode():``, ``@lk.inference_mode()``,
    ``@lk.inference_mode`` (bare), and ``lk.inference_mode(False)``, which turns inference mode
    off again inside an enclosing one and turns grad mode on, as PyTorch's does. Blocks nest;
    each restores what was there before. Unlike PyTorch's, ``lk.enable_grad()`` and ``lk.grad``
    inside the block do record (``lk.grad`` works there as ``torch.func.grad`` does).

    >>> import labkit as lk
    >>> @lk.inference_mode
    ... def predict(x):
    ...     return x * 2
    >>> predict(lk.ones(2, requires_grad=True)).requires_grad
    False
    >>> with lk.inference_mode():
    ...     with lk.inference_mode(False):
    ...         print(lk.is_inference_mode_enabled(), lk.is_grad_enabled())
    False True
    """

    def __new__(cls, mode=True):
        if isinstance(mode, bool):
            return super().__new__(cls)
        if callable(mode):                  # bare @lk.inference_mode on a function
            return cls()(mode)
        raise TypeError(f"lk.inference_mode(mode): mode must be True or False (or the function "
                        f"to decorate), got {type(mode).__name__} {mode!r}")

    def __init__(self, mode=True):
        super().__init__()
        self.mode = mode
        self._flag = not mode

    def _recreate_cm(self):
        return type(self)(self.mode)

    def _switch(self):
        return super()._switch(), inference.enter(self.mode)

    def _restore(self, previous):
        grad, token = previous
        inference.leave(token)
        super()._restore(grad)

    def __repr__(self):
        return f"lk.inference_mode(mode={self.mode})"


def is_inference_mode_enabled():
    """Whether this thread is inside ``lk.inference_mode()`` (and not turned off again by
    ``lk.inference_mode(False)``).

    >>> import labkit as lk
    >>> lk.is_inference_mode_enabled()
    False
    """
    return inference.is_enabled()
