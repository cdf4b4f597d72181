"""Inference mode's eager side: what ``lk.inference_mode()`` (labkit.autodiff) switches here.

Inside inference mode grad mode is off, as under ``lk.no_grad()``, and the tensors eager ops
make are *inference tensors* (``t.is_inference()``, as in PyTorch): an op that records for
autodiff outside inference mode refuses them as inputs, and so do in-place writes and
``requires_grad_()``. ``enter`` pushes ``InferenceEagerMode`` on this thread's mode stack when
eager mode is on top; it runs each op eagerly and marks what comes out. So eager dispatch outside
inference mode pays nothing for marking, and only one flag test on ops that record
(``eager.refuse_inference_inputs``). Under graph capture, a profile or ``lk.vmap`` started
outside the block, ops go to those modes unmarked: grad mode is still off.

>>> import labkit as lk
>>> with lk.inference_mode():
...     y = lk.ones(2) * 2
>>> y.is_inference(), (lk.ones(2) * 2).is_inference()
(True, False)
"""
from . import dispatch, eager
from .eager import EagerMode


class InferenceEagerMode(EagerMode):
    """Eager execution that marks each result an inference tensor (one that records no
    history: ``lk.enable_grad()`` or ``lk.grad`` inside the block still record, unmarked)."""

    def apply(self, op, inputs, attrs):
        out = dispatch._eager_mode.apply(op, inputs, attrs)   # the debug-checking one if set
        if out._node is None:
            out._inference = True
        return out


_INFERENCE = InferenceEagerMode()


def enter(flag):
    """Switch this thread's inference mode to ``flag``; returns what ``leave`` restores."""
    if flag:
        eager._inference_used = True
    st = dispatch._state
    below, mode = (dispatch._eager_mode, _INFERENCE) if flag else (_INFERENCE,
                                                                   dispatch._eager_mode)
    pushed = None
    if st.mode is below:
        pushed = dispatch.push_mode(mode)
        pushed.__enter__()
    previous = st.inference
    st.inference = bool(flag)
    return previous, pushed


def leave(token):
    """Undo one ``enter``, given what it returned."""
    previous, pushed = token
    dispatch._state.inference = previous
    if pushed is not None:
        pushed.__exit__(None, None, None)


def is_enabled():
    """Whether this thread is inside ``lk.inference_mode()``."""
    return dispatch._state.inference


def mark(t):
    """Make ``t`` an inference tensor if inference mode is on (creation functions call it)."""
    if dispatch._state.inference:
        t._inference = True
    return t
