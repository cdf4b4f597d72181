"""Placements (how a tensor lies along one dimension of a device mesh) and ``DTensorSpec`` (a
whole layout: mesh, one placement per mesh dimension, global shape, dtype), with the one piece
of arithmetic everything else uses: which slice of the global tensor each device holds.

- ``Shard(dim)``: the tensor is split along its dimension ``dim`` into equal chunks, one per
  device along that mesh dimension (the size must divide: labkit has no uneven shards).
- ``Replicate()``: every device along the mesh dimension holds the whole tensor.
- ``Partial()``: every device holds a tensor of the full shape, and the value is their sum.

A tensor dimension split by several mesh dimensions is split by each in turn, in the spec's
``order`` (outermost first; by default the mesh dimensions in order, as PyTorch does).

>>> from labkit.distributed.tensor.placement_types import DTensorSpec, Shard, Replicate
>>> spec = DTensorSpec(None, (Shard(0), Replicate()), (8, 3), None, mesh_shape=(2, 2))
>>> spec.local_shape, spec.local_slices((1, 0))
((4, 3), (slice(4, 8, None), slice(0, 3, None)))
"""
from ...errors import ShapeError


class Placement:
    """How a tensor lies along one mesh dimension (``Shard``, ``Replicate`` or ``Partial``)."""

    __slots__ = ()

    def is_shard(self, dim=None):
        return False

    def is_replicate(self):
        return False

    def is_partial(self):
        return False


class Shard(Placement):
    """Split along tensor dimension ``dim``: device k of the mesh dimension holds chunk k.

    >>> Shard(0), Shard(1) == Shard(1)
    (Shard(dim=0), True)
    """

    __slots__ = ("dim",)

    def __init__(self, dim):
        self.dim = int(dim)

    def is_shard(self, dim=None):
        return dim is None or dim == self.dim

    def __eq__(self, other):
        return isinstance(other, Shard) and other.dim == self.dim

    def __hash__(self):
        return hash(("Shard", self.dim))

    def __repr__(self):
        return f"Shard(dim={self.dim})"

    def __str__(self):
        return f"S({self.dim})"


class Replicate(Placement):
    """Every device along the mesh dimension holds the whole tensor."""

    __slots__ = ()

    def is_replicate(self):
        return True

    def __eq__(self, other):
        return isinstance(other, Replicate)

    def __hash__(self):
        return hash("Replicate")

    def __repr__(self):
        return "Replicate()"

    def __str__(self):
        return "R"


class Partial(Placement):
    """Each device holds a full-shape tensor; the value is their sum (``reduce_op="sum"``, the
    only one labkit has: a matmul over a sharded inner dimension gives one)."""

    __slots__ = ("reduce_op",)

    def __init__(self, reduce_op="sum"):
        if reduce_op != "sum":
            raise ValueError(f"Partial(reduce_op={reduce_op!r}): labkit's Partial placements "
                             f"are sums only (reduce_op='sum')")
        self.reduce_op = reduce_op

    def is_partial(self):
        return True

    def __eq__(self, other):
        return isinstance(other, Partial)

    def __hash__(self):
        return hash("Partial")

    def __repr__(self):
        return "Partial()"

    def __str__(self):
        return "P"


def placements_text(placements):
    """``'(S(0), R)'``: placements in PyTorch's short form, for messages."""
    return "(" + ", ".join(str(p) for p in placements) + ")"


def normalize_placements(placements, ndim, mesh_ndim, what="placements"):
    """A tuple of placements, one per mesh dimension, with negative shard dims resolved."""
    if isinstance(placements, Placement):
        placements = (placements,)
    placements = tuple(placements)
    if len(placements) != mesh_ndim:
        raise ValueError(f"{what} {placements_text(placements)}: give one placement per mesh "
                         f"dimension (the mesh has {mesh_ndim})")
    out = []
    for p in placements:
        if not isinstance(p, Placement):
            raise TypeError(f"{what}: {p!r} is not a placement; use Shard(dim), Replicate() or "
                            f"Partial()")
        if isinstance(p, Shard):
            d = p.dim + ndim if p.dim < 0 else p.dim
            if not 0 <= d < max(ndim, 1) or ndim == 0:
                raise ShapeError(f"{what}: {p!r} of a tensor with {ndim} dimension(s)")
            p = Shard(d)
        out.append(p)
    return tuple(out)


class DTensorSpec:
    """A DTensor's layout: ``mesh``, ``placements`` (one per mesh dimension), the global
    ``shape`` and ``dtype``, and ``order`` (mesh dimensions, outermost first, in which several
    shardings of one tensor dimension nest). Hashable, so it can be part of a trace's
    signature."""

    __slots__ = ("mesh", "placements", "shape", "dtype", "order", "mesh_shape")

    def __init__(self, mesh, placements, shape, dtype, order=None, mesh_shape=None):
        self.mesh = mesh
        self.placements = tuple(placements)
        self.shape = tuple(shape)
        self.dtype = dtype
        self.mesh_shape = tuple(mesh_shape if mesh_shape is not None else mesh.shape)
        default = tuple(range(len(self.placements)))
        self.order = default if order is None else tuple(order)

    def _key(self):
        return (id(self.mesh), self.placements, self.shape,
                None if self.dtype is None else self.dtype.name, self.order)

    def __eq__(self, other):
        return isinstance(other, DTensorSpec) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return (f"DTensorSpec({placements_text(self.placements)}, shape={self.shape}, "
                f"mesh={self.mesh_shape})")

    def with_(self, placements=None, shape=None, dtype=None, order=None):
        return DTensorSpec(self.mesh, self.placements if placements is None else placements,
                           self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.order if order is None else order, self.mesh_shape)

    def sharders(self, dim):
        """The mesh dimensions that split tensor dimension ``dim``, outermost first."""
        return [m for m in self.order if self.placements[m] == Shard(dim)]

    def shards(self, dim):
        """Into how many pieces tensor dimension ``dim`` is split."""
        n = 1
        for m in self.sharders(dim):
            n *= self.mesh_shape[m]
        return n

    @property
    def local_shape(self):
        return tuple(s // self.shards(d) for d, s in enumerate(self.shape))

    def local_slices(self, coord):
        """The slice of the global tensor that the device at mesh coordinate ``coord`` holds,
        one ``slice`` per tensor dimension."""
        out = []
        for d, size in enumerate(self.shape):
            lo, hi = 0, size
            for m in self.sharders(d):
                step = (hi - lo) // self.mesh_shape[m]
                lo, hi = lo + coord[m] * step, lo + (coord[m] + 1) * step
            out.append(slice(lo, hi))
        return tuple(out)

    def partial_dims(self):
        return [m for m, p in enumerate(self.placements) if p.is_partial()]


def check_divisible(what, shape, placements, mesh_shape, names=None):
    """Raise a ShapeError naming the dimension when a Shard does not divide it evenly."""
    counts = {}
    for m, p in enumerate(placements):
        if isinstance(p, Shard):
            counts.setdefault(p.dim, []).append(m)
    for d, ms in counts.items():
        n = 1
        for m in ms:
            n *= mesh_shape[m]
        if shape[d] % n:
            dims = " x ".join(f"mesh dim {names[m] if names and names[m] else m} of size "
                              f"{mesh_shape[m]}" for m in ms)
            raise ShapeError(
                f"{what}: Shard({d}) of a tensor of shape {tuple(shape)} splits dimension {d} "
                f"(size {shape[d]}) over {dims}, which does not divide it evenly (labkit has no "
                f"uneven shards). Pad or trim dimension {d} to a multiple of {n}, shard another "
                f"dimension, or use Replicate().")
