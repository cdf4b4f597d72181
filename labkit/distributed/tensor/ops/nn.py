"""The layers' own ops: ``layer_norm`` (normalising over whole trailing dimensions) and
``nll_loss`` (the end of ``cross_entropy``).

A loss over a batch split across devices is a partial sum: each device adds up the losses of
its rows, and a mean divides by the whole batch's count (or total target weight), which the
devices add up first (a small all-reduce): every row then counts the same as on one device.
"""
from ....tensor.ops.elementwise import div, stop_gradient, sub
from ....tensor.ops.index import zeros_like
from ..placement_types import Partial, Replicate, Shard
from . import Plan, register


@register("layer_norm", "layer_norm_affine")
def layer_norm(op, args, attrs, mesh_shape):
    """Split over the rows (not the normalised dimensions); a weight and bias whole."""
    x = args[0]
    first_normalised = x.ndim - attrs["ndim"]
    out = [p if isinstance(p, Shard) and p.dim < first_normalised else Replicate()
           for p in x.placements]
    return Plan([tuple(out)] + [(Replicate(),) * len(mesh_shape) for _ in args[1:]], out)


@register("nll_loss")
def nll_loss(op, args, attrs, mesh_shape):
    lp, target = args[0], args[1]
    weights = args[2:]
    reduction = attrs.get("reduction", "mean")
    classes = 1 if lp.ndim > 1 else 0

    def target_dim(d):              # the target's dimension for log_probs' dimension d
        return None if d == classes else (d if d < classes else d - 1)

    tl, tt, out, split = [], [], [], []
    for m, p in enumerate(lp.placements):
        if isinstance(p, Shard) and target_dim(p.dim) is not None:
            tl.append(p)
            tt.append(Shard(target_dim(p.dim)))
            out.append(Shard(target_dim(p.dim)) if reduction == "none" else Partial())
            split.append(m)
        else:
            tl.append(Replicate())
            tt.append(Replicate())
            out.append(Replicate())
    targets = [tuple(tl), tuple(tt)] + [(Replicate(),) * len(mesh_shape) for _ in weights]
    if reduction == "none" or not split:
        return Plan(targets, out)
    ignore = attrs.get("ignore_index", -100)

    def compute(locals_, specs):
        lps, tgts, ws = locals_[0], locals_[1], locals_[2:]
        sums, counts = {}, {}
        for c, x in lps.items():
            w = [wl[c] for wl in ws]
            sums[c] = op(x, tgts[c], *w, reduction="sum", ignore_index=ignore)
            if reduction == "mean":
                minus_one = sub(zeros_like(stop_gradient(x)), 1.0)
                counts[c] = op(minus_one, tgts[c], *w, reduction="sum", ignore_index=ignore)
        if reduction == "sum":
            return sums
        comm = specs[0].mesh.comm
        for m in split:                  # the whole batch's count, on every device
            counts = comm.all_reduce(m, counts)
        return {c: div(s, counts[c]) for c, s in sums.items()}
    return Plan(targets, out, compute=compute)
