"""``pipeline(module, mb_args, split_spec=...)``: cut a model whose forward runs its children
in order (an ``nn.Sequential``) into stages at the split points, PyTorch's spelling.

PyTorch cuts any model by tracing it (``torch.export``); labkit cuts sequences of modules:
write the model as a ``Sequential`` of its parts (embedding, blocks, head). Each stage gets a
copy of its part of the model; a parameter used by two stages (an embedding tied to the output
layer) becomes a copy on each, kept tied by the schedule (their gradients summed).

>>> import labkit as lk
>>> net = lk.nn.Sequential(lk.nn.Linear(4, 8), lk.nn.ReLU(), lk.nn.Linear(8, 2))
>>> pipe = pipeline(net, (lk.ones(2, 4),), split_spec={"2": SplitPoint.BEGINNING})
>>> pipe.num_stages, [type(m).__name__ for m in pipe.get_stage_module(0)]
(2, ['Linear', 'ReLU'])
"""
import copy
import enum

from ...nn.container import Sequential
from .stage import PipelineStage


class SplitPoint(enum.Enum):
    """Where a stage boundary goes, relative to the named child: before it or after it."""
    BEGINNING = 1
    END = 2


class Pipe:
    """A model cut into stages: ``num_stages``, ``get_stage_module(i)``,
    ``build_stage(i, device)``."""

    def __init__(self, module, parts):
        self.module = module
        self.parts = parts                     # [[child names]] per stage
        self._tied = _tied_parameters(module, parts)

    @property
    def num_stages(self):
        return len(self.parts)

    def get_stage_module(self, stage_index):
        """A copy of the stage's part of the model (a Sequential of its children)."""
        children = dict(self.module.named_children())
        return copy.deepcopy(Sequential(*[children[n] for n in self.parts[stage_index]]))

    def build_stage(self, stage_index, device, group=None):
        """The ``PipelineStage`` of stage ``stage_index``: its part of the model, copied to
        ``device``; parameters tied to other stages marked for the schedule."""
        children = dict(self.module.named_children())
        part = Sequential(*[children[n] for n in self.parts[stage_index]])
        originals = [p for _, p in part.named_parameters()]
        copied = copy.deepcopy(part)
        stage = PipelineStage(copied, stage_index, self.num_stages, device)
        for (_, new), old in zip(copied.named_parameters(), originals):
            if id(old) in self._tied:
                stage.tied[self._tied[id(old)]] = new
        return stage

    def __repr__(self):
        return f"Pipe({self.num_stages} stages: {self.parts})"


def _tied_parameters(module, parts):
    """``{id(parameter): name}`` for parameters that more than one stage uses."""
    children = dict(module.named_children())
    users = {}
    names = {}
    for k, part in enumerate(parts):
        for n in part:
            for pname, p in children[n].named_parameters():
                users.setdefault(id(p), set()).add(k)
                names.setdefault(id(p), f"{n}.{pname}")
    return {i: names[i] for i, stages in users.items() if len(stages) > 1}


def pipeline(module, mb_args=(), mb_kwargs=None, split_spec=None):
    """Cut ``module`` (a ``Sequential``, or a module whose children run in order) into stages:
    ``split_spec`` maps a child's name to ``SplitPoint.BEGINNING`` (a new stage starts with
    it) or ``SplitPoint.END`` (one starts after it). ``mb_args``: a micro-batch's inputs, as
    PyTorch takes them (run once here, to check that the parts chain)."""
    names = [n for n, _ in module.named_children()]
    if not isinstance(module, Sequential):
        raise TypeError(f"pipeline: labkit cuts an nn.Sequential (whose forward runs its "
                        f"children in order); got {type(module).__name__}. Write the model "
                        f"as a Sequential of its parts, or build the stages by hand with "
                        f"PipelineStage(submodule, stage_index, num_stages, device)")
    split_spec = split_spec or {}
    for n in split_spec:
        if n not in names:
            raise ValueError(f"pipeline: split point {n!r} is not a child of the model "
                             f"({names})")
    parts, current = [], []
    for n in names:
        if split_spec.get(n) is SplitPoint.BEGINNING and current:
            parts.append(current)
            current = []
        current.append(n)
        if split_spec.get(n) is SplitPoint.END:
            parts.append(current)
            current = []
    if current:
        parts.append(current)
    if mb_args:
        module(*mb_args, **(mb_kwargs or {}))
    return Pipe(module, parts)
