"""Collectives on labkit tensors: ``allreduce``, ``broadcast``, ``allgather``, ``reduce_scatter``
and ``barrier``, called by every worker together.

CPU tensors go through MPI (mpi4py); GPU tensors through NCCL (CuPy) when every worker has a
GPU of its own, else through MPI by way of host memory. Each collective returns a new tensor on
the input's device and leaves its input unchanged; results carry no gradient history.

Every rank must call the same collectives in the same order with tensors of the same shape and
dtype. The public collectives check that (one small exchange of shapes first) and raise the
same ``DistError`` on every rank when they disagree, rather than hanging.

Outside a launched worker the world has one rank and each collective returns a copy.

>>> import labkit as lk
>>> lk.dist.allreduce(lk.tensor([1.0, 2.0]), op="mean").tolist()
[1.0, 2.0]
>>> lk.dist.allgather(lk.tensor([1.0, 2.0])).shape
(1, 2)
"""
import numpy as np

from ..errors import DTypeError, describe
from ..tensor.tensor import Tensor
from . import runtime
from .buffers import empty as _empty
from .errors import DistError

OPS = ("sum", "mean", "max", "min", "prod")


# ---- argument checks -------------------------------------------------------------------------
def _check_tensor(name, tensor):
    if not isinstance(tensor, Tensor):
        raise TypeError(f"lk.dist.{name} takes a labkit Tensor, got {type(tensor).__name__}; "
                        f"wrap data first, e.g. lk.tensor(x)")
    return tensor


def _check_op(name, op, tensor):
    if op not in OPS:
        raise ValueError(f"lk.dist.{name}: unknown op {op!r}; use one of {', '.join(OPS)}")
    kind = tensor.dtype.np.kind
    if kind == "b" and op in ("sum", "mean"):
        raise DTypeError(f"lk.dist.{name}(op={op!r}) of a bool tensor ({describe(tensor)}): "
                         f"cast it first (t.int() to count, t.float() for a fraction), or use "
                         f"op='max' (any) / op='min' (all)")
    if kind in "iu" and op == "mean":
        raise DTypeError(f"lk.dist.{name}(op='mean') of an integer tensor ({describe(tensor)}) "
                         f"would truncate: cast it to float first (t.float())")
    return op


def _agree(name, group, facts):
    """Exchange ``facts`` (shape, dtype, ...) so every rank checks all ranks called ``name`` alike;
    raise the same DistError on every rank if not."""
    everyone = group.comm.allgather(facts)
    if any(f != everyone[0] for f in everyone):
        rows = "; ".join(f"rank {r}: {f}" for r, f in enumerate(everyone))
        raise DistError(f"lk.dist.{name}: the ranks called it with different arguments ({rows}). "
                        f"Every rank must pass a tensor of the same shape and dtype (and the same "
                        f"op/src), in the same order of collectives.")


# ---- array helpers ---------------------------------------------------------------------------
def _contig(array):
    """``array`` if C-contiguous, else a C-contiguous copy (0-d arrays stay 0-d)."""
    return array if array.flags.c_contiguous else array.copy(order="C")


def _wire(array):
    """A contiguous array MPI can reduce: bool travels as bytes (float16 is widened before)."""
    array = _contig(array)
    if array.dtype == np.bool_:
        return array.view(np.uint8)
    return array


def _mpi_op(op):
    from mpi4py import MPI
    return {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN,
            "prod": MPI.PROD}[op]


def _finish_mean(out, op, size):
    if op == "mean":
        np.divide(out, out.dtype.type(size), out=out)
    return out


def _to_host(tensor):
    return tensor.numpy()


def _from_host(array, device):
    if device.type == "cpu":
        return Tensor._make(array, device)
    with device.activate():
        return Tensor._make(device.xp.asarray(array), device)


# ---- MPI implementations (host arrays) ---------------------------------------------------------
def _mpi_allreduce(comm, host, op, size):
    send = host
    if host.dtype == np.float16:          # reduce in float32, as MPI has no half type
        send = host.astype(np.float32)
    send = _wire(send)
    out = _empty(send.shape, send.dtype)
    comm.Allreduce(send, out, op=_mpi_op(op))
    _finish_mean(out, op, size)
    return out.view(host.dtype) if host.dtype == np.bool_ else out.astype(host.dtype, copy=False)


def _mpi_broadcast(comm, host, src):
    buf = _empty(host.shape, host.dtype)
    if comm.Get_rank() == src:
        buf[...] = host
    comm.Bcast(_raw(buf), root=src)
    return buf


def _raw(array):
    """The array's bytes as a flat uint8 view: broadcast and gather copy bits, whatever the type."""
    return array.reshape(-1).view(np.uint8) if array.size else array.view(np.uint8)


def _mpi_allgather(comm, host, size):
    send = _contig(host)
    out = _empty((size,) + send.shape, send.dtype)
    comm.Allgather(_raw(send), _raw(out))
    return out


def _mpi_reduce_scatter(comm, host, op, size):
    send = host.astype(np.float32) if host.dtype == np.float16 else host
    send = _wire(send)
    out = _empty((send.shape[0] // size,) + send.shape[1:], send.dtype)
    comm.Reduce_scatter_block(send, out, op=_mpi_op(op))
    _finish_mean(out, op, size)
    return out.view(host.dtype) if host.dtype == np.bool_ else out.astype(host.dtype, copy=False)


# ---- NCCL implementations (CuPy arrays, one GPU per rank) ---------------------------------------
def _nccl_type(dtype):
    from cupy.cuda import nccl
    table = {np.float16: nccl.NCCL_FLOAT16, np.float32: nccl.NCCL_FLOAT32,
             np.float64: nccl.NCCL_FLOAT64, np.int32: nccl.NCCL_INT32,
             np.int64: nccl.NCCL_INT64, np.uint8: nccl.NCCL_UINT8, np.bool_: nccl.NCCL_UINT8}
    return table[np.dtype(dtype).type]


def _nccl_op(op):
    from cupy.cuda import nccl
    return {"sum": nccl.NCCL_SUM, "mean": nccl.NCCL_SUM, "max": nccl.NCCL_MAX,
            "min": nccl.NCCL_MIN, "prod": nccl.NCCL_PROD}[op]


def nccl_allreduce_(group, array, op="sum"):
    """Allreduce a contiguous CuPy array in place through NCCL (used by DataParallel too)."""
    import cupy
    comm = group.nccl()
    with group.device.activate():
        stream = cupy.cuda.get_current_stream()
        comm.allReduce(array.data.ptr, array.data.ptr, array.size, _nccl_type(array.dtype),
                       _nccl_op(op), stream.ptr)
        if op == "mean":
            array /= array.dtype.type(group.size)
    return array


def _nccl_allreduce(group, array, op):
    out = array.copy()                      # contiguous copy; reduced in place
    return nccl_allreduce_(group, out, op)


def nccl_broadcast_(group, array, src):
    """Broadcast a contiguous CuPy array from rank ``src`` in place through NCCL."""
    import cupy
    with group.device.activate():
        group.nccl().bcast(array.data.ptr, array.size, _nccl_type(array.dtype), src,
                           cupy.cuda.get_current_stream().ptr)
    return array


def _nccl_broadcast(group, array, src):
    return nccl_broadcast_(group, array.copy(), src)


def _nccl_allgather(group, array):
    import cupy
    send = _contig(array)
    with group.device.activate():
        out = cupy.empty((group.size,) + send.shape, dtype=send.dtype)
        group.nccl().allGather(send.data.ptr, out.data.ptr, send.size, _nccl_type(send.dtype),
                               cupy.cuda.get_current_stream().ptr)
    return out


def _nccl_reduce_scatter(group, array, op):
    import cupy
    send = _contig(array)
    with group.device.activate():
        out = cupy.empty((send.shape[0] // group.size,) + send.shape[1:], dtype=send.dtype)
        group.nccl().reduceScatter(send.data.ptr, out.data.ptr, out.size,
                                   _nccl_type(send.dtype), _nccl_op(op),
                                   cupy.cuda.get_current_stream().ptr)
        if op == "mean":
            out /= out.dtype.type(group.size)
    return out


# ---- the public collectives ----------------------------------------------------------------------
def _group(group):
    """The Group a collective runs in: ``group`` (a sub-group, made by
    ``labkit.distributed.new_group``), or this worker's whole world (None outside a worker)."""
    return runtime.group() if group is None else group


def _local_copy(tensor):
    return Tensor._make(tensor._data.copy(), tensor.device)


def allreduce(tensor, op="sum", group=None):
    """Combine ``tensor`` across all ranks elementwise; every rank gets the result.

    ``op``: "sum", "mean", "max", "min" or "prod". Returns a new tensor (same shape, dtype and
    device); the input is unchanged. Every rank must pass a tensor of the same shape and dtype.
    ``group``: the ranks of a sub-group only (every collective here takes it; ranks such as
    ``src`` are then ranks within the group); default, every rank.

    >>> import labkit as lk
    >>> lk.dist.allreduce(lk.tensor([1.0, 5.0]), op="max").tolist()   # one rank here
    [1.0, 5.0]

    In a launched function, e.g. ``lk.dist.launch(f, n=2)`` with
    ``def f(): return lk.dist.allreduce(lk.tensor([lk.dist.rank() + 1.0])).item()``,
    each rank returns 3.0.
    """
    _check_tensor("allreduce", tensor)
    _check_op("allreduce", op, tensor)
    g = _group(group)
    if g is None or g.size == 1:
        return _local_copy(tensor)
    _agree("allreduce", g, (tuple(tensor.shape), tensor.dtype.name, op))
    if g.use_nccl(tensor.device):
        return Tensor._make(_nccl_allreduce(g, tensor._data, op), tensor.device)
    return _from_host(_mpi_allreduce(g.comm, _to_host(tensor), op, g.size), tensor.device)


def broadcast(tensor, src=0, group=None):
    """Every rank gets rank ``src``'s values of ``tensor``.

    Every rank passes a tensor of the same shape and dtype (the others' values are ignored);
    returns a new tensor.

    >>> import labkit as lk
    >>> lk.dist.broadcast(lk.tensor([3, 4]), src=0).tolist()
    [3, 4]
    """
    _check_tensor("broadcast", tensor)
    g = _group(group)
    size = g.size if g is not None else 1
    if not isinstance(src, (int, np.integer)) or not 0 <= src < size:
        raise ValueError(f"lk.dist.broadcast: src={src!r} is not a rank; ranks are "
                         f"0..{size - 1}")
    if g is None or g.size == 1:
        return _local_copy(tensor)
    _agree("broadcast", g, (tuple(tensor.shape), tensor.dtype.name, int(src)))
    if g.use_nccl(tensor.device):
        return Tensor._make(_nccl_broadcast(g, tensor._data, int(src)), tensor.device)
    return _from_host(_mpi_broadcast(g.comm, _to_host(tensor), int(src)), tensor.device)


def allgather(tensor, group=None):
    """Every rank's ``tensor``, stacked along a new first dimension (rank order): a tensor of
    shape ``(world_size, *tensor.shape)``, the same on every rank.

    >>> import labkit as lk
    >>> lk.dist.allgather(lk.tensor([1, 2])).tolist()
    [[1, 2]]
    """
    _check_tensor("allgather", tensor)
    g = _group(group)
    if g is None or g.size == 1:
        return Tensor._make(tensor._data[None].copy(), tensor.device)
    _agree("allgather", g, (tuple(tensor.shape), tensor.dtype.name))
    if g.use_nccl(tensor.device):
        return Tensor._make(_nccl_allgather(g, tensor._data), tensor.device)
    return _from_host(_mpi_allgather(g.comm, _to_host(tensor), g.size), tensor.device)


def reduce_scatter(tensor, op="sum", group=None):
    """Reduce ``tensor`` across ranks and give each rank its slice of the result along dim 0.

    ``tensor``'s first dimension must divide by the world size W; rank r gets rows
    ``r*k .. (r+1)*k - 1`` (k = shape[0] // W) of ``allreduce(tensor, op)``. This is half an
    allreduce, the building block of sharded optimisers.

    >>> import labkit as lk
    >>> lk.dist.reduce_scatter(lk.tensor([[1.0], [2.0]])).tolist()   # one rank: all rows
    [[1.0], [2.0]]
    """
    _check_tensor("reduce_scatter", tensor)
    _check_op("reduce_scatter", op, tensor)
    g = _group(group)
    size = g.size if g is not None else 1
    if tensor.ndim == 0 or tensor.shape[0] % size:
        raise DistError(f"lk.dist.reduce_scatter: the first dimension of {describe(tensor)} must "
                        f"divide by the world size {size}, so each rank gets an equal slice; pad "
                        f"or trim it first")
    if g is None or g.size == 1:
        return _local_copy(tensor)
    _agree("reduce_scatter", g, (tuple(tensor.shape), tensor.dtype.name, op))
    if g.use_nccl(tensor.device):
        return Tensor._make(_nccl_reduce_scatter(g, tensor._data, op), tensor.device)
    return _from_host(_mpi_reduce_scatter(g.comm, _to_host(tensor), op, g.size), tensor.device)


def barrier(group=None):
    """Wait until every rank has reached this call (a no-op outside a launched worker).

    >>> import labkit as lk
    >>> lk.dist.barrier()
    """
    g = _group(group)
    if g is None or g.size == 1:
        return
    if g.device.type == "gpu":
        with g.device.activate():
            g.device.xp.cuda.get_current_stream().synchronize()
    g.comm.Barrier()
