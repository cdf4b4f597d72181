"""``matmul`` (with its ``transpose_a`` / ``transpose_b`` forms: ``F.linear``), the rule behind
tensor parallelism: per mesh dimension, the product of

- rows split (``a`` split along M, or along a batch dimension) by a replicated ``b``: rows split;
- a replicated ``a`` by columns split (``b`` split along N): columns split (column-parallel);
- ``a`` and ``b`` both split along the inner dimension K: partial sums (row-parallel);
- a partial sum by a replicated value: a partial sum;

whichever moves the fewest bytes from where the inputs are.
"""
from ..placement_types import Partial, Replicate, Shard
from . import Plan, cheapest, register


def _roles(ndim, transpose, first):
    """Each dimension's role: ('batch', k) for the k-th batch dimension from the right, 'M'
    (rows of ``a``), 'N' (columns of ``b``) or 'K' (the inner dimension)."""
    if ndim == 1:
        return ["K"]
    lead = [("batch", ndim - 3 - i) for i in range(ndim - 2)]
    if first:
        return lead + (["K", "M"] if transpose else ["M", "K"])
    return lead + (["N", "K"] if transpose else ["K", "N"])


@register("matmul")
def matmul(op, args, attrs, mesh_shape):
    a, b = args
    ra = _roles(a.ndim, attrs.get("transpose_a", False), True)
    rb = _roles(b.ndim, attrs.get("transpose_b", False), False)
    nb = max(a.ndim - 2 if a.ndim > 1 else 0, b.ndim - 2 if b.ndim > 1 else 0)
    out_ndim = nb + (a.ndim > 1) + (b.ndim > 1)
    out_m = nb if a.ndim > 1 else None
    out_n = out_ndim - 1 if b.ndim > 1 else None

    def dim_of(roles, role):
        return roles.index(role) if role in roles else None

    def batch_dim(roles, arg, k):       # the dim of batch k (from the right), if not broadcast
        d = dim_of(roles, ("batch", k))
        return d if d is not None and arg.shape[d] != 1 else None

    ta, tb, out = [], [], []
    for m in range(len(mesh_shape)):
        cands = []
        for k in range(nb):
            da, db = batch_dim(ra, a, k), batch_dim(rb, b, k)
            if da is None and db is None:
                continue
            cands.append(([Shard(da) if da is not None else Replicate(),
                           Shard(db) if db is not None else Replicate()], Shard(nb - 1 - k)))
        if out_m is not None:
            cands.append(([Shard(dim_of(ra, "M")), Replicate()], Shard(out_m)))
        if out_n is not None:
            cands.append(([Replicate(), Shard(dim_of(rb, "N"))], Shard(out_n)))
        cands.append(([Shard(dim_of(ra, "K")), Shard(dim_of(rb, "K"))], Partial()))
        cands.append(([Partial(), Replicate()], Partial()))
        cands.append(([Replicate(), Partial()], Partial()))
        cands.append(([Replicate(), Replicate()], Replicate()))
        # a partial sum on both sides cannot stay one: (a1 + a2) (b1 + b2) != a1 b1 + a2 b2
        (xa, xb), placement = cheapest(args, m, cands)
        ta.append(xa)
        tb.append(xb)
        out.append(placement)
    return Plan([tuple(ta), tuple(tb)], out)
