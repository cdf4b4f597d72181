"""Elementwise ops (every op declared in the ELEMENTWISE family: arithmetic, math functions,
comparisons, ``where``, casts, GELU...): inputs broadcast against each other, so a split of one
input's dimension is the same split of the result's, and of every other input that is not
broadcast along it.

Partial sums pass through the ops that are linear in them: ``add`` / ``sub`` of partial sums (a
replicated term joins as a partial sum on one device), ``mul`` by replicated values, ``div`` of
a partial sum, ``neg``, casts, copies. Any other op sums them first.
"""
from ....tensor.batching import ELEMENTWISE
from ..placement_types import Partial, Replicate, Shard
from . import Plan, cheapest, register_family

_LINEAR_ONE = frozenset({"neg", "clone", "stop_gradient", "cast", "zeros_like"})


def _broadcast_shape(args):
    nd = max(a.ndim for a in args if a is not None)
    out = [1] * nd
    for a in args:
        if a is None:
            continue
        for i, s in enumerate(a.shape):
            j = nd - a.ndim + i
            if s != 1:
                out[j] = s
    return tuple(out), nd


def _linear(op, args, attrs, partial):
    """Whether ``op`` maps partial sums on the inputs marked in ``partial`` to a partial sum."""
    name = op.name
    tensors = [i for i, a in enumerate(args) if a is not None]
    numbers = len(args) - len(tensors)
    if name == "cast":
        from ....tensor.dtypes import as_dtype
        return as_dtype(attrs["dtype"]).is_floating
    if name in _LINEAR_ONE:
        return True
    if name in ("add", "sub"):
        return numbers == 0             # a number would be added once per device
    if name == "mul":
        return sum(partial[i] for i in tensors) == 1
    if name == "div":
        return partial.get(0, False) and not partial.get(1, False)
    return False


@register_family(ELEMENTWISE)
def pointwise(op, args, attrs, mesh_shape):
    shape, nd = _broadcast_shape(args)
    targets = [None if a is None else [None] * len(mesh_shape) for a in args]
    out = []
    for m in range(len(mesh_shape)):
        shard_dims = [p.dim + nd - a.ndim for a in args if a is not None
                      for p in (a.placements[m],) if isinstance(p, Shard)]
        partial = {i: a.placements[m].is_partial() for i, a in enumerate(args) if a is not None}
        candidates = []
        for d in dict.fromkeys(shard_dims):
            tg = []
            for a in args:
                if a is None:
                    tg.append(None)
                    continue
                k = d - (nd - a.ndim)
                tg.append(Replicate() if k < 0 or (a.shape[k] == 1 and shape[d] != 1)
                          else Shard(k))
            candidates.append((tg, Shard(d)))
        if any(partial.values()) and _linear(op, args, attrs, partial):
            if op.name in ("add", "sub"):
                tg = [None if a is None else Partial() for a in args]
            else:
                tg = [None if a is None else a.placements[m] if a.placements[m].is_partial()
                      else Replicate() for a in args]
            candidates.append((tg, Partial()))
        candidates.append(([None if a is None else Replicate() for a in args], Replicate()))
        chosen, placement = cheapest(args, m, candidates)
        for t, c in zip(targets, chosen):
            if t is not None:
                t[m] = c
        out.append(placement)
    return Plan([None if t is None else tuple(t) for t in targets], out)
