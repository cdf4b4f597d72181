"""Eager ops under ``lk.profile()``: a mode pushed on the mode stack times each op it passes
down, so that when no profile is open eager dispatch pays nothing for the profiler.

A CPU op is timed by the host clock around its kernel. A move between two devices
(``t.to(...)``) is recorded as a message: a ``send`` on one, a ``recv`` on the other. A GPU op is timed on the GPU: two CUDA
events on its own device's current stream, put on the host clock by the profile's anchor for
that device and step (``labkit.profiler.gpu_time``); its lane is the stream."""
from ..devices import default_device
from ..errors import user_line
from ..profiler import active_profile, register_hooks
from ..profiler.events import now_ns
from ..profiler.gpu_time import GpuSpan
from . import dispatch
from .dispatch import WrappingMode
from .eager import EagerMode
from .tensor import Tensor


class ProfilingMode(WrappingMode):
    """Time each op that the mode below runs eagerly; record it in the active profile."""

    def apply(self, op, inputs, attrs):
        prof = active_profile()
        if prof is None or not isinstance(self.below, EagerMode):
            return self.below.apply(op, inputs, attrs)
        device = next((a._device for a in inputs if isinstance(a, Tensor)), None)
        if device is None:
            device = default_device()
        if device.type == "gpu":
            return self._on_gpu(prof, device, op, inputs, attrs)
        start = now_ns()
        out = self.below.apply(op, inputs, attrs)
        end = now_ns()
        if op.out_device is not None and out._device is not device:
            _record_message(prof, op, device, out, start, end)
        else:
            _record(prof, op, inputs, out, start, end, None, None)
        return out

    def _on_gpu(self, prof, device, op, inputs, attrs):
        cuda = device.xp.cuda
        with device.activate():
            anchor = prof.gpu.anchor(device, prof.step_number)
            stream = cuda.get_current_stream()
            first, last = cuda.Event(), cuda.Event()
            first.record(stream)
            start = now_ns()
            out = self.below.apply(op, inputs, attrs)
            end = now_ns()
            last.record(stream)
        _record(prof, op, inputs, out, start, end, GpuSpan(anchor, first, last),
                prof.gpu.lane(device, stream))
        return out


def _record(prof, op, inputs, out, start, end, span, lane):
    tensors = [a._data for a in inputs if isinstance(a, Tensor)]
    shapes = where = None
    if prof.record_shapes:   # raw here; OpEvent.shape writes the text when read
        shapes = ([(a.shape, a.dtype) for a in tensors],
                  ((out._data.shape, out._data.dtype),))
    if prof.with_stack:
        where = user_line()
    prof.record(op.name, op.name, out._device.name, start, end,
                sum(a.nbytes for a in tensors), out._data.nbytes, "eager", lane=lane,
                gpu_span=span, shapes=shapes, where=where)


def _record_message(prof, op, src, out, start, end):
    """An eager move between two devices (``t.to('cpu:1')``) as a message, as a captured
    graph's Send/Recv pair shows: a ``send`` on the source device and a ``recv`` on the
    destination, named alike so that the timeline draws an arrow between them."""
    prof.messages = n = getattr(prof, "messages", 0) + 1
    nbytes = out._data.nbytes
    where = user_line() if prof.with_stack else None
    for kind, device in (("send", src), ("recv", out._device)):
        prof.record(kind, f"{kind}_{op.name}_{n}", device.name, start, end,
                    nbytes if kind == "send" else 0, nbytes if kind == "recv" else 0, "eager",
                    where=where)


def _start():
    mode = ProfilingMode(dispatch.current_mode())
    dispatch.enter_mode(mode)
    return mode


def _stop(mode):
    dispatch.leave_mode(mode)


register_hooks(_start, _stop)
