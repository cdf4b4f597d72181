"""``PipelineStage``: one stage of a pipeline, a module on its device, run one micro-batch at
a time: forward (its input received from the previous stage's device), backward (the gradient
of its output received from the next stage's device, its input's gradient sent back).

A stage's computation is recorded for autodiff on its own: its input is a fresh leaf (the
received activation, detached), so the schedule decides when each micro-batch's backward runs
on each stage. Each move between devices is a ``to_device``: a message on the profiler's
timeline, a Send/Recv pair in a captured step.
"""
from ...devices import get_device
from ...tensor.creation import ones_like
from ...tensor.tensor import Tensor


def _bytes_held(outputs, inputs):
    """Bytes of the arrays the recorded computation from ``inputs`` to ``outputs`` keeps for
    backward (inputs and outputs of its tape entries), each array once."""
    seen, total = set(), 0
    stop = {id(t) for t in inputs}
    stack = [t._node for t in outputs if isinstance(t, Tensor) and t._node is not None]
    visited = set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in visited or node.inputs is None:
            continue
        visited.add(id(node))
        arrays = [node.out] + [i._data for i in node.inputs if isinstance(i, Tensor)]
        for a in arrays:
            base = a
            while getattr(base, "base", None) is not None:
                base = base.base
            if base is not None and id(base) not in seen and hasattr(base, "nbytes"):
                seen.add(id(base))
                total += base.nbytes
        for i in node.inputs:
            if isinstance(i, Tensor) and id(i) not in stop:
                stack.append(i._node)
    return total


class PipelineStage:
    """Stage ``stage_index`` of ``num_stages``: ``submodule`` on ``device`` (moved there).

    The schedules call ``forward_one_chunk`` and ``backward_one_chunk``; ``held_bytes`` is
    what the micro-batches whose backward has not run yet keep for it, now, and
    ``peak_held_bytes`` its largest value (activation memory)."""

    def __init__(self, submodule, stage_index, num_stages, device, input_args=None,
                 output_args=None, group=None):
        if not 0 <= stage_index < num_stages:
            raise ValueError(f"PipelineStage: stage_index {stage_index} is not one of "
                             f"0..{num_stages - 1}")
        self.submod = submodule
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.device = get_device(device)
        self.submod.to(self.device)
        self.tied = {}                 # key -> parameter of this stage tied to other stages'
        self._chunks = {}              # micro-batch -> (inputs, outputs, held bytes)
        self.held_bytes = 0
        self.peak_held_bytes = 0

    @property
    def is_first(self):
        return self.stage_index == 0

    @property
    def is_last(self):
        return self.stage_index == self.num_stages - 1

    def __repr__(self):
        return (f"PipelineStage({self.stage_index} of {self.num_stages} on {self.device}: "
                f"{type(self.submod).__name__})")

    def forward_one_chunk(self, mb, args):
        """Run micro-batch ``mb`` through the stage; ``args`` come from the previous stage's
        device (or the batch): moved here, detached, made leaves that require grad."""
        inputs = []
        for a in args:
            if isinstance(a, Tensor):
                a = a.detach().to(self.device)
                if a.dtype.is_floating:
                    a.requires_grad_()
            inputs.append(a)
        out = self.submod(*inputs)
        outputs = out if isinstance(out, tuple) else (out,)
        held = _bytes_held(outputs, [i for i in inputs if isinstance(i, Tensor)])
        self._chunks[mb] = (inputs, outputs, held)
        self.held_bytes += held
        self.peak_held_bytes = max(self.peak_held_bytes, self.held_bytes)
        return outputs

    def backward_one_chunk(self, mb, grads=None, loss=None, scale=1.0):
        """Backward of micro-batch ``mb``: from ``loss`` (the last stage, seeded with
        ``scale``) or from ``grads`` of the outputs (moved here from the next stage's
        device). Returns the gradients of the stage's inputs (None for non-tensors)."""
        inputs, outputs, held = self._chunks.pop(mb)
        if loss is not None:
            loss.backward(ones_like(loss) * scale)
        else:
            roots, seeds = [], []
            for o, g in zip(outputs, grads):
                if isinstance(o, Tensor) and o.requires_grad and g is not None:
                    roots.append(o)
                    seeds.append(g.to(self.device))
            from ...autodiff.engine import run_backward
            if roots:
                run_backward(roots, seeds, None, False, False, accumulate=True)
        self.held_bytes -= held
        return [i.grad if isinstance(i, Tensor) and i.requires_grad else None for i in inputs]

    def reset(self):
        self._chunks.clear()
        self.held_bytes = 0
