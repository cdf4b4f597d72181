"""A whole call as one entry on the tape, whose gradient rule is the caller's own.

Some calls run their ops where the tape does not see them one by one: a checkpointed function
runs with the tape off and is run again in the backward pass (``recompute``), a compiled call
runs a plan whose backward pass is another plan (``lk.compile``). ``tie`` gives such a call
one tape entry per device its inputs are on (``<name>_begin``: a 0-d host token whose inputs
are the tensors the call read), and passes each differentiable output through ``<name>_end``,
which hands its cotangent to the region. When the backward pass reaches the entries (after
every output's, since the outputs depend on them), the first asks the region for the gradients
of all its inputs at once (``Region.gradients``), and each entry returns its share; the engine
then puts them where any op's would go (``.grad`` with its hooks, ``lk.grad``'s results).

>>> import labkit as lk
>>> from labkit.autodiff.regions import Region, region_ops
>>> class Doubling(Region):                  # y = 2x, with its gradient given by hand
...     def gradients(self, cotangents):
...         return {id(self.inputs[0]): cotangents[0] * 2.0}
>>> x = lk.tensor([1.0, 2.0], requires_grad=True)
>>> with lk.no_grad():
...     y = x * 2.0
>>> [y] = Doubling(region_ops("doubling")).tie([x], [y])
>>> y.sum().backward(); x.grad.tolist()
[2.0, 2.0]
"""
import numpy as np

from ..devices import get_device
from ..tensor.dtypes import float32
from ..tensor.op import Op
from ..tensor.ops.index import zeros_like
from ..tensor.shape_rules import same_as_first


class Region:
    """One call on the tape, made with ``region_ops(name)``. Subclasses write
    ``gradients(cotangents)``: ``{index of an output: its cotangent}`` in, ``{id(input):
    gradient or None}`` out, for the ``inputs`` given to ``tie``."""

    def __init__(self, ops):
        self.ops = ops
        self.inputs = []
        self.parts = []
        self.cotangents = {}     # output index -> its cotangent, this backward pass
        self.grads = None        # id(input) -> gradient, once computed this backward pass
        self.pending = 0         # entries still to hand their gradients out

    def gradients(self, cotangents):
        raise NotImplementedError

    def tie(self, inputs, outputs):
        """``outputs`` (tensors, or None for those left out) tied to entries whose inputs are
        ``inputs`` (the tensors the outputs depend on that need a gradient)."""
        self.inputs = list(inputs)
        self.parts = _parts(self.inputs)
        self.pending = len(self.parts)
        if not self.parts:
            return list(outputs)
        begin, end = self.ops
        tokens = [begin(*p, region=self, part=k) for k, p in enumerate(self.parts)]
        return [None if o is None else end(o, *tokens, region=self, index=i)
                for i, o in enumerate(outputs)]


def _parts(tensors):
    """``tensors`` grouped by device (an op's tensor inputs share one device)."""
    groups = {}
    for t in tensors:
        groups.setdefault(t.device.name, []).append(t)
    return list(groups.values())


def _token_rule(*tensors, region, part):
    return (), float32


def _begin_kernel(xp, *arrays, region, part):
    return np.zeros((), np.float32)


def _begin_vjp(g, out, *tensors, region, part):
    """The whole call's gradient rule: computed once per backward pass (for every device's
    entry); this entry's share, by position (``tensors`` may be stand-ins for the inputs)."""
    if region.grads is None:
        cotangents, region.cotangents = region.cotangents, {}
        region.grads = region.gradients(cotangents)
    grads = tuple(region.grads.get(id(t)) for t in region.parts[part])
    region.pending -= 1
    if region.pending <= 0:
        region.grads = None
        region.pending = len(region.parts)
    return grads


def _end_kernel(xp, x, *tokens, region, index):
    return x


def _end_vjp(g, out, x, *tokens, region, index):
    region.cotangents[index] = g
    return (None,) + tuple(zeros_like(t) for t in tokens)


def region_ops(name):
    """The two ops (not registered: each belongs to its regions) of a kind of region:
    ``<name>_begin`` (the tape entry) and ``<name>_end`` (an output, unchanged, tied to it)."""
    begin = Op(f"{name}_begin", _begin_kernel, _token_rule, _begin_vjp)
    begin.out_device = lambda attrs: get_device("cpu:0")
    end = Op(f"{name}_end", _end_kernel, same_as_first, _end_vjp)
    return begin, end
