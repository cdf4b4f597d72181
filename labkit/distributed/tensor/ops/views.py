"""Shape and indexing ops: ``reshape`` (views), ``permute``, ``expand_dims``,
``broadcast_to``, ``concat`` and ``getitem`` (slicing, and an embedding's row lookup).

A reshape keeps a split when the split dimension is the outermost of the dimensions it merges
with, or splits into an outermost piece that the split divides (``(B, T, C) -> (B, T, H, C/H)``
keeps a split of C as a split of the heads): each device then reshapes its own piece, to the
local shape. Slicing keeps the splits of dimensions it takes whole. A row lookup
``weight[idx]`` in a vocabulary split across devices looks up, on each device, the rows it
has and zeros for the others: a partial sum (PyTorch's vocabulary-parallel embedding).
"""
from ....tensor.ops.elementwise import cast, ge, logical_and, lt, mul, sub, where
from ....tensor.ops.shape import expand_dims as _expand_dims
from ....tensor.ops.shape import resolve_shape
from ..placement_types import Partial, Replicate, Shard
from . import Plan, normalize, register


# ---- reshape ------------------------------------------------------------------------------------
def _groups(a, b):
    """Dimensions of shapes ``a`` and ``b`` that hold the same elements: pairs of index lists
    (size-1 dimensions join the group on their left, or the first group)."""
    groups, i, j = [], 0, 0
    while i < len(a) or j < len(b):
        gi, gj = [], []
        pa = pb = 1
        while True:
            if pa == pb and gi and gj and (i == len(a) or a[i] != 1) and \
                    (j == len(b) or b[j] != 1):
                break
            if (pa <= pb or j == len(b)) and i < len(a):
                pa *= a[i]
                gi.append(i)
                i += 1
            elif j < len(b):
                pb *= b[j]
                gj.append(j)
                j += 1
            else:
                break
        groups.append((gi, gj))
    return groups


def _local_shape(shape, placements, mesh_shape):
    """A device's piece's shape of a tensor of ``shape`` laid out as ``placements``."""
    local = list(shape)
    for m, p in enumerate(placements):
        if isinstance(p, Shard):
            local[p.dim] //= mesh_shape[m]
    return tuple(local)


@register("reshape")
def reshape(op, args, attrs, mesh_shape):
    x = args[0]
    out_shape = resolve_shape("reshape", x.shape, attrs["shape"])
    where = {}
    for gi, gj in _groups(x.shape, out_shape):
        for d in gi:
            where[d] = (gi, gj)
    counts = {}
    for m, p in enumerate(x.placements):
        if isinstance(p, Shard):
            counts[p.dim] = counts.get(p.dim, 1) * mesh_shape[m]
    tx, out = [], []
    for m, p in enumerate(x.placements):
        if isinstance(p, Shard):
            gi, gj = where[p.dim]
            lead = next((d for d in gi if x.shape[d] != 1), None)
            target = next((d for d in gj if out_shape[d] != 1), None)
            if lead == p.dim and target is not None and out_shape[target] % counts[p.dim] == 0:
                tx.append(p)
                out.append(Shard(target))
                continue
            tx.append(Replicate())
            out.append(Replicate())
        else:
            tx.append(p)
            out.append(p)
    return Plan([tuple(tx)], out, attrs={"shape": _local_shape(out_shape, out, mesh_shape)})


@register("permute")
def permute(op, args, attrs, mesh_shape):
    x = args[0]
    dims = [normalize(d, x.ndim) for d in attrs["dims"]]
    out = [Shard(dims.index(p.dim)) if isinstance(p, Shard) else p for p in x.placements]
    return Plan([x.placements], out)


@register("expand_dims")
def expand_dims(op, args, attrs, mesh_shape):
    x = args[0]
    n = x.ndim + len(attrs["axes"])
    new = sorted(normalize(a, n) for a in attrs["axes"])
    kept = [d for d in range(n) if d not in new]
    out = [Shard(kept[p.dim]) if isinstance(p, Shard) else p for p in x.placements]
    return Plan([x.placements], out)


@register("broadcast_to")
def broadcast_to(op, args, attrs, mesh_shape):
    x = args[0]
    shape = tuple(attrs["shape"])
    lead = len(shape) - x.ndim
    out = [Shard(p.dim + lead) if isinstance(p, Shard) else
           (Replicate() if p.is_partial() else p) for p in x.placements]
    tx = [Replicate() if p.is_partial() else p for p in x.placements]
    return Plan([tuple(tx)], out, attrs={"shape": _local_shape(shape, out, mesh_shape)})


@register("concat")
def concat(op, args, attrs, mesh_shape):
    first = args[0]
    d = normalize(attrs.get("dim", 0), first.ndim)
    out = []
    for m in range(len(mesh_shape)):
        ps = [a.placements[m] for a in args]
        p = first.placements[m]
        if isinstance(p, Shard) and p.dim != d:
            out.append(p)
        elif all(q.is_partial() for q in ps):
            out.append(Partial())
        else:
            out.append(Replicate())
    return Plan([tuple(out) for _ in args], out)


# ---- indexing ------------------------------------------------------------------------------------
def _basic_dims(spec, ndim):
    """For an index of ints, slices, None and ... only: ``(kept, taken)``: for each input
    dimension the output dimension it becomes (None if an int removes it), and the input
    dimensions a slice cuts (not taken whole)."""
    items = list(spec)
    if any(it[0] == "e" for it in items):
        k = next(i for i, it in enumerate(items) if it[0] == "e")
        used = sum(1 for it in items if it[0] in ("s", "i"))
        items = items[:k] + [("s", None, None, None)] * (ndim - used) + items[k + 1:]
    used = sum(1 for it in items if it[0] in ("s", "i"))
    items += [("s", None, None, None)] * (ndim - used)
    kept, cut, d, o = {}, set(), 0, 0
    for it in items:
        if it[0] == "n":
            o += 1
        elif it[0] == "i":
            kept[d] = None
            cut.add(d)
            d += 1
        elif it[0] == "s":
            kept[d] = o
            if it[1:] != (None, None, None):
                cut.add(d)
            d += 1
            o += 1
        else:
            return None
    return kept, cut


@register("getitem")
def getitem(op, args, attrs, mesh_shape):
    x, idx = args[0], args[1:]
    spec = attrs["spec"]
    if not idx:
        basic = _basic_dims(spec, x.ndim)
        if basic is not None:
            kept, cut = basic
            tx, out = [], []
            for p in x.placements:
                if isinstance(p, Shard) and (p.dim in cut or kept.get(p.dim) is None):
                    tx.append(Replicate())
                    out.append(Replicate())
                elif isinstance(p, Shard):
                    tx.append(p)
                    out.append(Shard(kept[p.dim]))
                else:
                    tx.append(p)
                    out.append(p)
            return Plan([tuple(tx)], out)
    if len(idx) == 1 and spec[0] == ("t", 0) and all(
            it == ("s", None, None, None) for it in spec[1:]):
        return _lookup(args, mesh_shape)
    return Plan([None if a is None else (Replicate(),) * len(mesh_shape) for a in args],
                (Replicate(),) * len(mesh_shape))


def _lookup(args, mesh_shape):
    """``weight[idx]`` (rows of ``weight`` at integer ``idx``), as ``F.embedding`` does."""
    w, idx = args
    tw, ti, out = [], [], []
    masked = []
    for m in range(len(mesh_shape)):
        pw, pi = w.placements[m], idx.placements[m]
        if pw == Shard(0):                      # a vocabulary split: partial sums
            tw.append(pw)
            ti.append(Replicate())
            out.append(Partial())
            masked.append(m)
        elif isinstance(pw, Shard):             # a feature split follows to the output
            tw.append(pw)
            ti.append(Replicate())
            out.append(Shard(pw.dim - 1 + idx.ndim))
        elif isinstance(pi, Shard):             # split indices give split rows
            tw.append(Replicate() if pw.is_replicate() else pw)
            ti.append(pi)
            out.append(Shard(pi.dim) if not pw.is_partial() else Replicate())
            if pw.is_partial():
                tw[-1], ti[-1] = Replicate(), Replicate()
        else:
            tw.append(pw if pw.is_partial() else Replicate())
            ti.append(Replicate())
            out.append(pw if pw.is_partial() else Replicate())
    compute = None
    if masked:
        def compute(locals_, specs):
            return _masked_lookup(locals_, specs[0])
    return Plan([tuple(tw), tuple(ti)], out, compute=compute)


def _masked_lookup(locals_, spec):
    """Each device looks up the rows of its vocabulary range ``[lo, hi)`` and zeros the rest."""
    weights, indices = locals_
    out = {}
    for c, w in weights.items():
        rows = spec.local_slices(c)[0]
        i = indices[c]
        inside = logical_and(ge(i, rows.start), lt(i, rows.stop))
        safe = where(inside, sub(i, rows.start), 0)
        got = w[safe]
        keep = cast(inside, dtype=w.dtype.name)
        for _ in range(w.ndim - 1):
            keep = _expand_dims(keep, axes=(-1,))
        out[c] = mul(got, keep)
    return out
