"""Sharding propagation: for each op, given its inputs' placements, which placements to bring
the inputs to and which placements its result has, so that the op can run on every device's
local tensors alone.

A rule is looked up by the op's name (``register``), else by the family the op was declared in
(``labkit.tensor.batching``: ELEMENTWISE, REDUCTION, ALONG_DIM, LEADING; the same families give
ops their batching rules). A rule gets one ``Arg`` per input (None for a Python number or an
attribute-like input) and the op's attributes, and returns a ``Plan``. Each mesh dimension is
decided on its own, and where several choices would do, the one that moves the fewest bytes
wins (``cheapest``).

An op with no rule is an error naming it and its inputs' placements: labkit never guesses.
"""
from ....errors import ShapeError
from ..placement_types import Partial, Replicate, Shard, placements_text

_by_name = {}
_by_family = {}


class Arg:
    """What a rule knows of one tensor input: placements (one per mesh dimension), global
    shape, dtype, nesting order; ``plain``: a tensor that is not distributed (replicated)."""

    __slots__ = ("placements", "shape", "dtype", "order", "plain", "mesh_shape")

    def __init__(self, placements, shape, dtype, order, plain, mesh_shape):
        self.placements, self.shape, self.dtype = tuple(placements), tuple(shape), dtype
        self.order, self.plain, self.mesh_shape = order, plain, mesh_shape

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def nbytes(self):
        n = self.dtype.itemsize
        for s in self.shape:
            n *= s
        return n


class Plan:
    """A rule's answer: ``inputs`` (target placements per input, None for non-tensors), ``out``
    (the result's placements), ``attrs`` (the local op's attributes, when they differ: a
    reshape to the local shape), ``compute`` (``compute(locals, specs) -> {coord: tensor}``,
    given each input's locals and layout after redistribution, for
    an op that is more than one local op per device, e.g. a masked lookup in a vocabulary
    shard). The result nests its splits in the first distributed input's order."""

    __slots__ = ("inputs", "out", "attrs", "compute")

    def __init__(self, inputs, out, attrs=None, compute=None):
        self.inputs, self.out, self.attrs = inputs, tuple(out), attrs
        self.compute = compute


def register(*names):
    """Declare the rule of the ops named ``names``."""
    def deco(rule):
        for n in names:
            _by_name[n] = rule
        return rule
    return deco


def register_family(family):
    """Declare the rule of every op declared in batching ``family``."""
    def deco(rule):
        _by_family[family] = rule
        return rule
    return deco


def rule_for(op):
    rule = _by_name.get(op.name)
    if rule is None and op.family is not None:
        rule = _by_family.get(op.family)
    return rule


def no_rule_error(op, args, attrs):
    parts = ", ".join(
        "a number" if a is None else
        f"{'plain tensor' if a.plain else 'DTensor'} {list(a.shape)} "
        f"{placements_text(a.placements)}" for a in args)
    extra = f" with {attrs}" if attrs else ""
    return ShapeError(
        f"{op.name} has no sharding rule for distributed tensors: it was given ({parts}){extra}. "
        f"labkit does not guess how placements pass through an op. Bring the inputs to one "
        f"device's value first (dt.full_tensor(), or dt.redistribute(placements=[Replicate()] "
        f"* mesh.ndim) and compute on each local), or declare a rule with "
        f"labkit.distributed.tensor.ops.register({op.name!r}).")


# ---- costs ----------------------------------------------------------------------------------------
def move_cost(arg, m, target):
    """Bytes per device (roughly) to bring ``arg`` from its placement on mesh dim ``m`` to
    ``target``: splitting and partitioning are free, gathering and reducing are not."""
    if arg is None:
        return 0
    p = arg.placements[m]
    if p == target:
        return 0
    n = arg.mesh_shape[m]
    if p.is_replicate():
        return 1            # no message; but among free choices, leaving it is better
    if isinstance(p, Shard):
        return arg.nbytes * (n - 1) // n + (1 if target.is_partial() else 0)
    return arg.nbytes * (2 if target.is_replicate() else 1) * (n - 1) // n   # a partial sum


def cheapest(args, m, candidates):
    """The candidate ``(targets, out)`` whose targets cost least on mesh dim ``m`` (the first
    listed among equals)."""
    best, best_cost = None, None
    for targets, out in candidates:
        cost = sum(move_cost(a, m, t) for a, t in zip(args, targets) if a is not None)
        if best is None or cost < best_cost:
            best, best_cost = (targets, out), cost
    return best


def normalize(dim, ndim):
    return dim + ndim if dim < 0 else dim


from . import matmul, nn, pointwise, reductions, views  # noqa: E402,F401  (rules register)

__all__ = ["Arg", "Plan", "register", "register_family", "rule_for", "Partial", "Replicate",
           "Shard"]
