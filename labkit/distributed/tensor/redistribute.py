"""Changing a distributed tensor's placements: the plan of collectives from one layout to
another, each step along one mesh dimension.

In this order, per tensor dimension, keeping the mesh dimensions that split it in both layouts
in the same nesting (the common outermost ones):

1. *gather*: a ``Shard(d)`` that goes away becomes ``Replicate`` by an all-gather (innermost
   first, so that each gather joins neighbouring pieces);
2. *reduce*: a ``Partial`` that goes away is summed: a reduce-scatter straight to its
   ``Shard(d)`` where that is the innermost split of d, otherwise an all-reduce;
3. *split*: a ``Shard(d)`` that appears is cut from the replicated value, with no message
   (outermost first);
4. *partition*: a ``Partial`` that appears from ``Replicate`` keeps the value on the first device
   of the mesh dimension and zeros elsewhere, with no message.

Every step is made of labkit ops (``labkit.distributed.mesh_comm``), so a redistribution is
differentiable (an all-gather's gradient is a reduce-scatter) and can be captured.
"""
from .placement_types import Partial, Replicate, Shard
from ..mesh_comm import chunks, zeros_beside


def redistribute_locals(locals_, spec, placements, order=None):
    """``(new locals, new spec)``: ``locals_`` ({coordinate: tensor}, laid out as ``spec``)
    laid out as ``placements`` (nested in ``order``, default the spec's)."""
    target = spec.with_(placements=placements, order=spec.order if order is None else order)
    if target.placements == spec.placements and _same_nesting(spec, target):
        return locals_, spec
    comm = spec.mesh.comm
    cur = list(spec.placements)
    tensors = dict(locals_)
    ndim = len(spec.shape)

    def current():
        return spec.with_(placements=tuple(cur), order=target.order)

    # 1. gather: every split that is not part of the common outermost nesting
    keep = {}
    for d in range(ndim):
        now, want = spec.sharders(d), target.sharders(d)
        common = 0
        while common < min(len(now), len(want)) and now[common] == want[common]:
            common += 1
        keep[d] = common
        for m in reversed(now[common:]):
            tensors = comm.all_gather(m, tensors, d)
            cur[m] = Replicate()
    # 2. reduce the partial sums that go away
    for m, p in enumerate(cur):
        want = target.placements[m]
        if not p.is_partial() or want.is_partial():
            continue
        if isinstance(want, Shard):
            d = want.dim
            kept = spec.sharders(d)[:keep[d]]
            pending = target.sharders(d)[keep[d]:]
            if pending and pending[0] == m and all(cur[k] == Shard(d) for k in kept):
                tensors = comm.reduce_scatter(m, tensors, d)
                cur[m] = Shard(d)
                keep[d] += 1
                continue
        tensors = comm.all_reduce(m, tensors)
        cur[m] = Replicate()
    # 3. split, outermost first
    for d in range(ndim):
        for m in target.sharders(d)[keep[d]:]:
            if cur[m] == Shard(d):
                continue
            n = spec.mesh.root.mesh.shape[m]
            tensors = {c: chunks(t, d, n)[c[m]] for c, t in tensors.items()}
            cur[m] = Shard(d)
    # 4. partition into partial sums
    for m, want in enumerate(target.placements):
        if want.is_partial() and not cur[m].is_partial():
            tensors = {c: t if c[m] == 0 else zeros_beside(t) for c, t in tensors.items()}
            cur[m] = Partial()
    return tensors, current()


def _same_nesting(a, b):
    return all(a.sharders(d) == b.sharders(d) for d in range(len(a.shape)))
