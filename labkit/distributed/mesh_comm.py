"""How the devices of a mesh talk: one small interface, two implementations.

Every collective a distributed tensor needs goes through a mesh's ``comm``: ``all_gather``,
``reduce_scatter`` and ``all_reduce`` along one mesh dimension, on the local tensors this
process holds (``{coordinate: tensor}``), returning the new ones. Each is made of labkit ops,
so it runs eagerly and inside ``lk.function``, and differentiates: the gradient of an
all-gather is a reduce-scatter, and the other way round; an all-reduce's is an all-reduce.

- ``VirtualComm``: the mesh is devices of this process. A collective is a ring of
  device-to-device moves (``to_device``), each step moving one chunk to the next device: the
  profiler records each as a message, and in a captured graph each is a Send/Recv pair between
  the devices' parts. Bytes per device are the ring's: ``(n-1)/n`` of the tensor for an
  all-gather or a reduce-scatter, twice that for an all-reduce.
- ``MpiComm``: the mesh is the ranks of an MPI world; each collective is one op whose kernel
  calls MPI on the ranks of that mesh dimension (a sub-communicator), through
  ``labkit.dist.collectives``.

Every collective is counted (kind, mesh dimension, bytes per device) for
``labkit.distributed.tensor.debug.CommDebugMode``.
"""
import itertools
import threading

import numpy as np

from ..devices import get_device
from ..tensor.ops.elementwise import add, mul, to_device
from ..tensor.ops.index import zeros_like
from ..tensor.ops.shape import concat, reshape
from ..tensor.op import op
from ..tensor.shape_rules import same_as_first, shape_of

# ---- counting ---------------------------------------------------------------------------------
_counters = []            # the open CommDebugMode blocks' record functions (innermost last)
_count_lock = threading.Lock()


def _count(mesh, kind, mesh_dim, tensors, bytes_per_device):
    if _counters:
        name = mesh.mesh_dim_names[mesh_dim] if mesh.mesh_dim_names else mesh_dim
        with _count_lock:
            for record in _counters:
                record(kind, name, len(tensors), bytes_per_device)


def _nbytes(t):
    n = 1
    for s in t.shape:
        n *= s
    return n * t.dtype.itemsize


def _slice_along(t, dim, lo, hi):
    index = (slice(None),) * dim + (slice(lo, hi),)
    return t[index]


def chunks(t, dim, n):
    """``t`` cut into ``n`` equal pieces along ``dim`` (views, as ops)."""
    size = t.shape[dim] // n
    return [_slice_along(t, dim, k * size, (k + 1) * size) for k in range(n)]


def _flat_chunks(t, n):
    """``t`` flattened and cut into ``n`` pieces as even as they can be (some may be empty)."""
    flat = reshape(t, shape=(-1,))
    total = flat.shape[0]
    bounds = [total * k // n for k in range(n + 1)]
    return [_slice_along(flat, 0, bounds[k], bounds[k + 1]) for k in range(n)]


# ---- one process: virtual devices ---------------------------------------------------------------
class VirtualComm:
    """Collectives among devices of this process, as rings of device-to-device moves."""

    def __init__(self, mesh):
        self.mesh = mesh
        self._coords = [tuple(int(i) for i in c) for c in np.ndindex(*mesh.mesh.shape)]
        self._devices = {c: get_device(f"{mesh.device_type}:{int(mesh.mesh[c])}")
                         for c in self._coords}

    def coordinates(self):
        return list(self._coords)

    def device(self, coord):
        return self._devices[coord]

    def groups(self, mesh_dim, coords):
        """The coordinates in ``coords`` grouped by every mesh dimension but ``mesh_dim``, each
        group in order along ``mesh_dim``."""
        out = {}
        for c in coords:
            out.setdefault(c[:mesh_dim] + c[mesh_dim + 1:], []).append(c)
        return [sorted(g, key=lambda c: c[mesh_dim]) for g in out.values()]

    def _ring(self, mesh_dim, tensors, each):
        out = {}
        for group in self.groups(mesh_dim, tensors):
            devices = [self._devices[c] for c in group]
            results = each([tensors[c] for c in group], devices)
            out.update(zip(group, results))
        return out

    def all_gather(self, mesh_dim, tensors, dim):
        """Each device gets the concatenation along ``dim`` of its group's tensors."""
        t = next(iter(tensors.values()))
        n = self.mesh.mesh.shape[mesh_dim]
        _count(self.mesh, "all_gather", mesh_dim, tensors, (n - 1) * _nbytes(t))
        return self._ring(mesh_dim, tensors, lambda xs, ds: _ring_all_gather(xs, ds, dim))

    def reduce_scatter(self, mesh_dim, tensors, dim):
        """Device k of each group gets chunk k (along ``dim``) of the group's sum."""
        t = next(iter(tensors.values()))
        n = self.mesh.mesh.shape[mesh_dim]
        _count(self.mesh, "reduce_scatter", mesh_dim, tensors, (n - 1) * _nbytes(t) // n)
        return self._ring(mesh_dim, tensors,
                          lambda xs, ds: _ring_reduce_scatter([chunks(x, dim, len(xs))
                                                               for x in xs], ds))

    def all_reduce(self, mesh_dim, tensors):
        """Every device of each group gets the group's sum (a reduce-scatter and an
        all-gather of the flattened tensor, so every device adds in the same order)."""
        t = next(iter(tensors.values()))
        n = self.mesh.mesh.shape[mesh_dim]
        _count(self.mesh, "all_reduce", mesh_dim, tensors, 2 * (n - 1) * _nbytes(t) // n)

        def each(xs, ds):
            parts = _ring_reduce_scatter([_flat_chunks(x, len(xs)) for x in xs], ds)
            whole = _ring_all_gather(parts, ds, 0)
            return [reshape(w, shape=tuple(x.shape)) for w, x in zip(whole, xs)]
        return self._ring(mesh_dim, tensors, each)

    def replicate(self, t, coords, dims):
        """A plain tensor as every coordinate's local: moved to each device (one value in one
        process, so its gradient is the sum of what each device gives back)."""
        return {c: to_device(t, device=self._devices[c].name) for c in coords}


def _ring_all_gather(xs, devices, dim):
    """Ring all-gather: at step s, device i receives from device i-1 the piece that started
    s devices back. Returns each device's concatenation of every piece, in order."""
    n = len(xs)
    have = [{i: xs[i]} for i in range(n)]
    for step in range(1, n):
        for i in range(n):
            j = (i - step) % n
            have[i][j] = to_device(have[(i - 1) % n][j], device=devices[i].name)
    return [concat(*[have[i][j] for j in range(n)], dim=dim) if n > 1 else xs[0]
            for i in range(n)]


def _ring_reduce_scatter(pieces, devices):
    """Ring reduce-scatter of ``pieces[i][j]`` (device i's contribution to piece j): piece j's
    running sum starts on device j+1 and moves one device on per step, each adding its own
    contribution, until it ends on device j after n-1 steps."""
    n = len(pieces)
    acc = {j: pieces[(j + 1) % n][j] for j in range(n)}
    at = {j: (j + 1) % n for j in range(n)}
    for _ in range(1, n):
        for j in range(n):
            nxt = (at[j] + 1) % n
            acc[j] = add(to_device(acc[j], device=devices[nxt].name), pieces[nxt][j])
            at[j] = nxt
    return [acc[j] for j in range(n)]


# ---- MPI ranks ---------------------------------------------------------------------------------
class _Group:
    """An MPI sub-communicator (the ranks along one mesh dimension), hashable by identity so
    that it can be an op's attribute."""

    _ids = itertools.count()

    def __init__(self, comm, name):
        self.comm, self.size, self.rank = comm, comm.Get_size(), comm.Get_rank()
        self.name = f"{name}#{next(self._ids)}"

    def __repr__(self):
        return f"<ranks along mesh dim {self.name}>"


def _host(xp, x):
    return x if xp is np else xp.asnumpy(x)


def _back(xp, host):
    return host if xp is np else xp.asarray(host)


def _all_gather_kernel(xp, x, group, dim):
    from ..dist.collectives import _mpi_allgather
    stacked = _mpi_allgather(group.comm, np.ascontiguousarray(_host(xp, x)), group.size)
    return _back(xp, np.concatenate(list(stacked), axis=dim))


def _reduce_scatter_kernel(xp, x, group, dim):
    from ..dist.collectives import _mpi_reduce_scatter
    host = np.ascontiguousarray(np.moveaxis(_host(xp, x), dim, 0))
    out = _mpi_reduce_scatter(group.comm, host, "sum", group.size)
    return _back(xp, np.ascontiguousarray(np.moveaxis(out, 0, dim)))


def _all_reduce_kernel(xp, x, group):
    from ..dist.collectives import _mpi_allreduce
    return _back(xp, _mpi_allreduce(group.comm, np.ascontiguousarray(_host(xp, x)), "sum",
                                    group.size))


def _gather_rule(x, group, dim):
    shape = list(shape_of(x))
    shape[dim] *= group.size
    return tuple(shape), x.dtype


def _scatter_rule(x, group, dim):
    shape = list(shape_of(x))
    shape[dim] //= group.size
    return tuple(shape), x.dtype


# Collectives are stateful ops: every rank runs them in program order, none is merged, folded
# or dropped by one rank's graph passes and not another's.
mpi_all_gather = op("mpi_all_gather", shape=_gather_rule, register=False, stateful=True,
                    vjp=lambda g, out, x, group, dim: (mpi_reduce_scatter(g, group=group,
                                                                          dim=dim),))(
    _all_gather_kernel)
mpi_reduce_scatter = op("mpi_reduce_scatter", shape=_scatter_rule, register=False,
                        stateful=True,
                        vjp=lambda g, out, x, group, dim: (mpi_all_gather(g, group=group,
                                                                          dim=dim),))(
    _reduce_scatter_kernel)
mpi_all_reduce = op("mpi_all_reduce", shape=lambda x, group: (shape_of(x), x.dtype),
                    register=False, stateful=True,
                    vjp=lambda g, out, x, group: (mpi_all_reduce(g, group=group),))(
    _all_reduce_kernel)
# A value every rank holds alike (a plain tensor on each rank): identity going forward; its
# gradient, which each rank holds a part of, summed over the ranks going back (Megatron's f).
mpi_replicated = op("mpi_replicated", shape=lambda x, group: (shape_of(x), x.dtype),
                    register=False, stateful=True,
                    vjp=lambda g, out, x, group: (mpi_all_reduce(g, group=group),))(
    lambda xp, x, group: x.copy())


class MpiComm:
    """Collectives among the ranks of an MPI world, one device (and one coordinate) each."""

    def __init__(self, mesh, rank):
        from ..dist import runtime
        g = runtime.group()
        self.mesh = mesh
        where = np.argwhere(mesh.mesh == rank)
        self.coord = tuple(int(i) for i in where[0])
        self.local_device = g.device
        self._groups = {}
        comm = g.comm
        shape = mesh.mesh.shape
        for m in range(len(shape)):
            others = self.coord[:m] + self.coord[m + 1:]
            color = int(np.ravel_multi_index(others, shape[:m] + shape[m + 1:])) if others \
                else 0
            self._groups[m] = _Group(comm.Split(color, key=self.coord[m]),
                                     mesh.mesh_dim_names[m] if mesh.mesh_dim_names else m)

    def coordinates(self):
        return [self.coord]

    def device(self, coord):
        if tuple(coord) != self.coord:
            raise ValueError(f"mesh coordinate {coord} is another rank's; this rank holds "
                             f"{self.coord}")
        return self.local_device

    def all_gather(self, mesh_dim, tensors, dim):
        group = self._groups[mesh_dim]
        t = tensors[self.coord]
        _count(self.mesh, "all_gather", mesh_dim, tensors, (group.size - 1) * _nbytes(t))
        return {self.coord: mpi_all_gather(t, group=group, dim=dim)}

    def reduce_scatter(self, mesh_dim, tensors, dim):
        group = self._groups[mesh_dim]
        t = tensors[self.coord]
        _count(self.mesh, "reduce_scatter", mesh_dim, tensors,
               (group.size - 1) * _nbytes(t) // group.size)
        return {self.coord: mpi_reduce_scatter(t, group=group, dim=dim)}

    def all_reduce(self, mesh_dim, tensors):
        group = self._groups[mesh_dim]
        t = tensors[self.coord]
        _count(self.mesh, "all_reduce", mesh_dim, tensors,
               2 * (group.size - 1) * _nbytes(t) // group.size)
        return {self.coord: mpi_all_reduce(t, group=group)}

    def replicate(self, t, coords, dims):
        """A plain tensor (this rank's copy, the same on the ranks along mesh ``dims``) as this
        rank's local; one that needs a gradient gets the whole of it on every rank (the
        ranks' shares summed in backward, as Megatron's f)."""
        if t._requires_grad:
            for m in dims:
                t = mpi_replicated(t, group=self._groups[m])
        return {self.coord: t}


def zeros_beside(t):
    """Zeros of ``t``'s shape, dtype and device, as an op (so it is captured like the rest).
    For a ``t`` that requires grad, ``t * 0``: the zeros still depend on ``t``, so its
    gradient (zero) is computed, as on the device that keeps the value, and every MPI rank's
    backward reaches the same leaves (and so calls the same collectives)."""
    if t._requires_grad:
        return mul(t, 0.0)
    return zeros_like(t)
