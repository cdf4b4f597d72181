"""Activation checkpointing: run a function without keeping what its backward pass needs, and
run it again during the backward pass to get it back (``lk.utils.checkpoint`` spells it as
PyTorch does).

``recompute(fn, args, kwargs)`` runs ``fn`` with gradients off, so none of the values inside it
are kept: only its inputs are, by the entry that stands for the whole call on the tape. While it
runs, a mode on the dispatch stack notes every tensor from outside that the call's ops read
(its arguments, and the parameters its modules hold), so that entry has them all as inputs,
and the backward pass hands their gradients on exactly as if each op had been recorded (into
``.grad`` with its hooks, to ``lk.grad``'s arguments, through a captured graph). The entry's
gradient rule runs ``fn`` again, with the tape on, on stand-ins for those tensors, and takes
the gradients of the recomputed outputs with respect to the stand-ins.

Random draws are replayed: before the first draw from a generator inside the call, its position
is copied (an op, so a captured graph copies it at run time, in order with the draws), and the
recomputation draws from that copy instead: the same dropout masks, while the generator itself
moves on once, as in one plain call. Under capture the recomputation is put into the graph in
the backward pass; it reads its inputs through a marker op of its own, so common-subexpression
elimination does not merge it back into the forward pass.

The pieces are ops declared here (not registered: they belong to one call each):
``checkpoint_begin`` (the tape entry: one 0-d output on the host, one per device the call's
tensors are on), ``checkpoint_end`` (each differentiable output, unchanged, tied to the entry)
and ``checkpoint_input`` (a stand-in's marker).

>>> import labkit as lk
>>> from labkit.autodiff.recompute import recompute
>>> x = lk.tensor([1.0, 2.0], requires_grad=True)
>>> y = recompute(lambda t: (t.sin() * t).sum(), (x,), {})
>>> y.backward(); [round(v, 4) for v in x.grad.tolist()]
[1.3818, 0.077]
"""
from contextlib import nullcontext

import numpy as np

from ..devices import get_device
from ..errors import GradError, describe
from ..tensor import dispatch
from ..tensor.dispatch import WrappingMode
from ..tensor.op import needs_grad, op
from ..tensor.ops.index import zeros_like
from ..tensor.ops.random import DRAWS, copy_generator_state, host_generator
from ..tensor.shape_rules import same_as_first
from ..tensor.tensor import Tensor
from . import trees
from .engine import run_backward


class _Region:
    """One call of a checkpointed function: what it needs to run again, the tensors from outside
    it read, the generators it drew from, and the cotangents of its outputs in a backward pass."""

    def __init__(self, fn, args, kwargs, preserve_rng_state, recompute_context, check):
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.preserve = preserve_rng_state
        self.recompute_context = recompute_context
        self.check = check
        self.outside = []        # tensors from outside the call that its ops read, first use first
        self.parts = None        # ``outside`` by device: the inputs of each checkpoint_begin
        self.generators = {}     # id(generator) -> (generator, saved position, the one replayed)
        self.outputs = None      # (shape, dtype) of each output leaf that is a float tensor
        self.cotangents = {}     # output index -> its cotangent, this backward pass
        self.grads = None        # id(outside tensor) -> gradient, once recomputed
        self.pending = 0         # checkpoint_begin entries still to hand their gradients out

    def __repr__(self):
        return f"<checkpointed call of {getattr(self.fn, '__name__', 'fn')}>"


def _saved_copy(generator):
    """A NumPy Generator of ``generator``'s kind, to hold a position of it."""
    return np.random.Generator(type(host_generator(generator).bit_generator)())


class _Record(WrappingMode):
    """The first run: notes the tensors from outside the call, and saves each generator's
    position before the call's first draw from it."""

    def __init__(self, below, region):
        super().__init__(below)
        self.region = region
        self.made = set()        # ids of the tensors the call's ops made
        self.seen = set()

    def apply(self, op_, inputs, attrs):
        region = self.region
        for a in inputs:
            if isinstance(a, Tensor) and id(a) not in self.made and id(a) not in self.seen:
                self.seen.add(id(a))
                region.outside.append(a)
        if region.preserve and op_ in DRAWS:
            g = attrs.get("generator")
            if g is not None and id(g) not in region.generators:
                saved = _saved_copy(g)
                self.below.apply(copy_generator_state, (), {"generator": g, "into": saved})
                region.generators[id(g)] = (g, saved, _saved_copy(g))
        out = self.below.apply(op_, inputs, attrs)
        self.made.add(id(out))
        return out


class _Replay(WrappingMode):
    """The run in the backward pass: reads stand-ins for the tensors from outside, and draws
    from the copies of the generators' saved positions."""

    def __init__(self, below, region, standins):
        super().__init__(below)
        self.region = region
        self.standins = standins

    def apply(self, op_, inputs, attrs):
        sub = self.standins
        inputs = tuple(sub.get(id(a), a) if isinstance(a, Tensor) else a for a in inputs)
        if op_ in DRAWS:
            entry = self.region.generators.get(id(attrs.get("generator")))
            if entry is not None:
                attrs = dict(attrs, generator=entry[2])
        return self.below.apply(op_, inputs, attrs)


# ---- the ops ---------------------------------------------------------------------------------
def _token_rule(*tensors, region, part):
    from ..tensor.dtypes import float32
    return (), float32


def _begin_vjp(g, out, *tensors, region, part):
    """The whole call's gradient rule: run it again and differentiate (once per backward pass,
    for every device's entry); this entry's share of the gradients."""
    if region.grads is None:
        _backward(region)
    # by position: ``tensors`` may be stand-ins for the tensors the call read (a checkpoint
    # inside another's recomputation)
    grads = tuple(region.grads.get(id(t)) for t in region.parts[part])
    region.pending -= 1
    if region.pending <= 0:
        region.grads = None
        region.pending = len(region.parts)
    return grads


@op("checkpoint_begin", shape=_token_rule, vjp=_begin_vjp, register=False)
def checkpoint_begin(xp, *arrays, region, part):
    """The tape entry of a checkpointed call: a 0-d zero on the host whose inputs are the
    tensors from outside the call on one device."""
    return np.zeros((), np.float32)


checkpoint_begin.out_device = lambda attrs: get_device("cpu:0")


def _end_vjp(g, out, x, *tokens, region, index):
    region.cotangents[index] = g
    return (None,) + tuple(zeros_like(t) for t in tokens)


@op("checkpoint_end", shape=same_as_first, vjp=_end_vjp, register=False)
def checkpoint_end(xp, x, *tokens, region, index):
    """Output ``index`` of a checkpointed call, unchanged, tied to the call's tape entries."""
    return x


@op("checkpoint_input", shape=same_as_first, vjp=lambda g, out, x, region: (g,),
    register=False)
def checkpoint_input(xp, x, region):
    """A tensor from outside a checkpointed call, as the recomputation reads it (unchanged)."""
    return x


# ---- running it ------------------------------------------------------------------------------
def _parts(tensors):
    """``tensors`` grouped by device (an op's tensor inputs share one device)."""
    groups = {}
    for t in tensors:
        groups.setdefault(t.device.name, []).append(t)
    return list(groups.values())


def recompute(fn, args, kwargs, preserve_rng_state=True, context_fn=None, check=True):
    """``fn(*args, **kwargs)``, keeping only what is needed to run it again in the backward pass
    (see the module's docstring). ``context_fn()`` gives two context managers, for the first run
    and for the recomputation. ``check``: the recomputation must give outputs of the same shapes
    and dtypes (else a GradError)."""
    first, again = context_fn() if context_fn is not None else (nullcontext(), nullcontext())
    if not dispatch.is_grad_enabled():
        with first:
            return fn(*args, **kwargs)
    region = _Region(fn, args, kwargs, preserve_rng_state, again, check)
    with first, dispatch.grad_enabled(False), \
            dispatch.push_mode(_Record(dispatch.current_mode(), region)):
        out = fn(*args, **kwargs)
    leaves, spec, _ = trees.flatten(out)
    wanted = [i for i, leaf in enumerate(leaves)
              if isinstance(leaf, Tensor) and leaf.dtype.is_floating]
    if not wanted:
        return out
    region.outputs = [(i, tuple(leaves[i].shape), leaves[i].dtype) for i in wanted]
    region.parts = _parts(region.outside)
    region.pending = len(region.parts)
    tokens = [checkpoint_begin(*p, region=region, part=k) for k, p in enumerate(region.parts)]
    for i in wanted:
        leaves[i] = checkpoint_end(leaves[i], *tokens, region=region, index=i)
    return trees.unflatten(spec, leaves)


def _backward(region):
    """Run the call again with the tape on; ``region.grads``: the gradient of each tensor from
    outside with respect to the cotangents the outputs got. When the backward pass is itself
    recorded (``create_graph=True``, ``lk.grad`` of a tensor that requires grad), so is this,
    and the gradients lead back to the tensors from outside."""
    nested = dispatch.is_grad_enabled()
    cotangents, region.cotangents = region.cotangents, {}
    wanted = [t for t in region.outside if t.dtype.is_floating and needs_grad(t)]
    standins, links = {}, []
    with dispatch.grad_enabled(nested):
        for t in wanted:
            s = checkpoint_input(t, region=region)
            # a leaf while the recomputation is differentiated, so that differentiating it stops
            # here; linked to ``t`` again afterwards, so a recorded gradient leads back to it
            links.append((s, s._node))
            s._node = None
            standins[id(t)] = s.requires_grad_()
        for g, saved, replayed in region.generators.values():
            copy_generator_state(generator=saved, into=replayed)
    try:
        with region.recompute_context, dispatch.grad_enabled(True), \
                dispatch.push_mode(_Replay(dispatch.current_mode(), region, standins)):
            out = region.fn(*region.args, **region.kwargs)
        roots, cots = _roots(region, trees.flatten(out)[0], cotangents)
        targets = [standins[id(t)] for t in wanted]
        grads = run_backward(roots, cots, targets, retain_graph=nested, create_graph=nested,
                             accumulate=False) if roots and targets else [None] * len(targets)
    finally:
        for s, node in links:
            s._node = node
    region.grads = {id(t): g for t, g in zip(wanted, grads)}


def _roots(region, leaves, cotangents):
    """The recomputed outputs that got a cotangent, and those cotangents; checks that the
    recomputation gave what the first run gave."""
    roots, cots = [], []
    for i, shape, dtype in region.outputs:
        leaf = leaves[i] if i < len(leaves) else None
        if region.check and not (isinstance(leaf, Tensor) and tuple(leaf.shape) == shape
                                 and leaf.dtype == dtype):
            got = describe(leaf) if isinstance(leaf, Tensor) else type(leaf).__name__
            raise GradError(
                f"{region!r}: run again in the backward pass, the function gave {got} as output "
                f"{i}, but {dtype.name}{list(shape)} the first time. A checkpointed function "
                f"must compute the same thing both times: no Python or NumPy randomness, no "
                f"change of modules or globals between forward and backward.")
        g = cotangents.get(i)
        if g is not None and leaf._requires_grad:
            roots.append(leaf)
            cots.append(g)
    return roots, cots
