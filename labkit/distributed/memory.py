"""What each device holds over a training step, by what holds it: ``memory_trace`` collects
the parameters, gradients and optimiser state (what stays, per device), and what comes and
goes: parameters FSDP gathered (``labkit.distributed.fsdp.gathered_memory``, sampled at each
gather and release) and the activations a pipeline's micro-batches keep for backward (sampled
after each action of the last ``step``). ``lk.viz.memory(trace)`` draws it, the peak marked.

>>> import labkit as lk
>>> trace = memory_trace(lk.nn.Linear(3, 2))
>>> trace.devices(), trace.peak()["cpu:0"][1]
(['cpu:0'], 32)
"""
from .tensor.debug import memory_per_device

STAYING = ("parameters", "gradients", "optimizer")


class MemoryTrace:
    """``staying``: ``{device: {kind: bytes}}`` for what the step keeps throughout;
    ``samples``: ``[(time ns, device, kind, bytes)]`` for what comes and goes (each sample
    is the bytes of that kind on that device from then on)."""

    def __init__(self):
        self.staying = {}
        self.samples = []

    def devices(self):
        names = set(self.staying) | {d for _, d, _, _ in self.samples}
        return sorted(names, key=lambda n: (n.split(":")[0], int(n.split(":")[1])
                                            if n.split(":")[-1].isdigit() else 0))

    def kinds(self):
        moving = []
        for _, _, k, _ in self.samples:
            if k not in moving:
                moving.append(k)
        return [k for k in STAYING if any(k in v for v in self.staying.values())] + moving

    def series(self, device):
        """``[(time, {kind: bytes})]`` on ``device``: what it holds after each sample."""
        now = {k: self.staying.get(device, {}).get(k, 0) for k in STAYING}
        out = [(None, dict(now))]
        for t, d, k, b in sorted(self.samples, key=lambda s: s[0]):
            if d == device:
                now[k] = b
                out.append((t, dict(now)))
        return out

    def peak(self):
        """``{device: (time or None, bytes)}``: the most each device held, and when."""
        out = {}
        for d in self.devices():
            best = max(self.series(d), key=lambda s: sum(s[1].values()))
            out[d] = (best[0], sum(best[1].values()))
        return out

    def _repr_svg_(self):
        from ..viz.memory import memory
        return memory(self).svg()


def memory_trace(module=None, optimizer=None, gathered=None, schedule=None):
    """The trace of a step: ``module`` (a model, or a list of modules: a pipeline's stages'),
    ``optimizer`` (its state), ``gathered`` (FSDP's ``gathered_memory``, after the step),
    ``schedule`` (a pipeline schedule, after ``step``)."""
    trace = MemoryTrace()
    modules = module if isinstance(module, (list, tuple)) else [module] if module else []
    for i, m in enumerate(modules):
        rows = memory_per_device(m, optimizer if i == len(modules) - 1 else None)
        for d, row in rows.items():
            mine = trace.staying.setdefault(d, {k: 0 for k in STAYING})
            for k, b in row.items():
                mine[k] += b
    if gathered is not None:
        for t, per_device in gathered.samples:
            for d in trace.devices() or per_device:
                trace.samples.append((t, d, "gathered parameters", per_device.get(d, 0)))
    if schedule is not None:          # a device's activations: its stages' together
        held, device_of = {}, {}
        for action, device, _, end, stage_held in schedule.records:
            held[action.stage], device_of[action.stage] = stage_held, device
            total = sum(b for s, b in held.items() if device_of[s] == device)
            trace.samples.append((end, device, "activations", total))
    return trace
