"""Eager ops under ``lk.profile()``: a mode pushed on the mode stack times each op it passes
down, so that when no profile is open eager dispatch pays nothing for the profiler."""
from ..errors import user_line
from ..profiler import active_profile, register_hooks
from ..profiler.events import now_ns
from . import dispatch
from .dispatch import Mode
from .eager import EagerMode
from .tensor import Tensor


class ProfilingMode(Mode):
    """Time each op that the mode below runs eagerly; record it in the active profile."""

    def __init__(self, below):
        self.below = below

    def apply(self, op, inputs, attrs):
        if not isinstance(self.below, EagerMode):
            return self.below.apply(op, inputs, attrs)
        prof = active_profile()
        device = next((a._device for a in inputs if isinstance(a, Tensor)), None)
        gpu = None
        if device is not None and device.type == "gpu":
            # GPU durations come from CUDA events on the stream, not from host clocks
            cuda = device.xp.cuda
            gpu = (cuda.Event(), cuda.Event())
            gpu[0].record()
        start = now_ns()
        out = self.below.apply(op, inputs, attrs)
        end_ns = now_ns()
        if gpu is not None:
            gpu[1].record()
        if prof is not None:
            tensors = [a._data for a in inputs if isinstance(a, Tensor)]
            shapes = where = None
            if prof.record_shapes:   # raw here; OpEvent.shape writes the text when read
                shapes = ([(a.shape, a.dtype) for a in tensors],
                          ((out._data.shape, out._data.dtype),))
            if prof.with_stack:
                where = user_line()
            prof.record(op.name, op.name, out._device.name, start, end_ns,
                        sum(a.nbytes for a in tensors), out._data.nbytes, "eager",
                        gpu_events=gpu, shapes=shapes, where=where)
        return out

    def phase(self, name):
        return self.below.phase(name)

    def set_grad(self, tensor, value):
        self.below.set_grad(tensor, value)

    def accumulate_grad(self, leaf, g):
        self.below.accumulate_grad(leaf, g)


def _start():
    st = dispatch._state
    mode = ProfilingMode(st.mode)
    st.stack.append(mode)
    st.mode = mode
    return mode


def _stop(mode):
    st = dispatch._state
    if mode in st.stack:
        st.stack.remove(mode)
    st.mode = st.stack[-1]


register_hooks(_start, _stop)
