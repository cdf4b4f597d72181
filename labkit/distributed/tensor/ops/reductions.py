"""Reductions, and ops along one dimension.

- ``sum`` over a split dimension leaves a partial sum on each device (no message: the caller
  decides when to add them up); a partial sum stays one. Other reductions (max, min, prod,
  argmax, all, any...) first gather a split reduced dimension.
- Ops along one dimension (ALONG_DIM: softmax, log_softmax, cumsum, gather...) need that
  dimension whole on each device; the other dimensions keep their splits.
- Ops on the last two dimensions (LEADING: tril, triu, inv, solve...) need those whole.
"""
from ....tensor.batching import ALONG_DIM, LEADING, ONE_DIM_REDUCTION, REDUCTION
from ..placement_types import Partial, Replicate, Shard
from . import Plan, normalize, register, register_family


def _reduced(dim, ndim):
    if dim is None:
        return set(range(ndim))
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    return {normalize(int(d), ndim) for d in dims} if ndim else set()


def _reduction(op, args, attrs, mesh_shape):
    x = args[0]
    gone = _reduced(attrs.get("dim"), x.ndim)
    keep = attrs.get("keepdim", False)
    linear = op.name == "sum"
    tx, out = [], []
    for m in range(len(mesh_shape)):
        p = x.placements[m]
        if isinstance(p, Shard) and p.dim in gone:
            if linear:
                tx.append(p)
                out.append(Partial())
            else:
                tx.append(Replicate())
                out.append(Replicate())
        elif isinstance(p, Shard):
            tx.append(p)
            out.append(Shard(p.dim if keep else p.dim - sum(1 for g in gone if g < p.dim)))
        elif p.is_partial() and linear:
            tx.append(p)
            out.append(Partial())
        else:
            tx.append(Replicate())
            out.append(Replicate())
    return Plan([tuple(tx)] + [None] * (len(args) - 1), out)


register_family(REDUCTION)(_reduction)
register_family(ONE_DIM_REDUCTION)(_reduction)


@register("reduction_size")
def reduction_size(op, args, attrs, mesh_shape):
    """How many elements a reduction combines: the global count, so computed from the shape
    (as ``mean`` does when shapes are known), replicated."""
    x = args[0]
    n = 1
    for d in _reduced(attrs.get("dim"), x.ndim):
        n *= x.shape[d]

    def compute(locals_, specs):
        from ....tensor.creation import full
        return {c: full((), float(n), dtype=t.dtype if t.dtype.is_floating else None,
                        device=t.device) for c, t in locals_[0].items()}
    return Plan([x.placements], (Replicate(),) * len(mesh_shape), compute=compute)


@register_family(ALONG_DIM)
def along_dim(op, args, attrs, mesh_shape):
    first = next(a for a in args if a is not None)
    d = normalize(attrs.get("dim", -1), first.ndim)
    targets, out = [], []
    for m in range(len(mesh_shape)):
        p = first.placements[m]
        keep = isinstance(p, Shard) and p.dim != d
        out.append(p if keep else Replicate())
    for a in args:
        targets.append(None if a is None else tuple(out))
    return Plan(targets, out)


@register_family(LEADING)
def leading(op, args, attrs, mesh_shape):
    first = next(a for a in args if a is not None)
    out = []
    for m in range(len(mesh_shape)):
        p = first.placements[m]
        out.append(p if isinstance(p, Shard) and p.dim < first.ndim - 2 else Replicate())
    targets = []
    for a in args:
        if a is None:
            targets.append(None)
            continue
        shift = first.ndim - a.ndim
        targets.append(tuple(Shard(p.dim - shift) if isinstance(p, Shard) and p.dim >= shift
                             else Replicate() for p in out))
    return Plan(targets, out)
