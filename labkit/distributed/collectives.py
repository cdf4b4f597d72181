"""Collectives in ``torch.distributed``'s spelling, over ``lk.dist``'s.

As in PyTorch they write their result into the tensors they are given (``all_reduce(t)``
changes ``t``), take ``op=ReduceOp.X``, ``group=`` and ``async_op=``, and name ranks (``src``,
``dst``) by their rank in the whole world (``group_src`` / ``group_dst``: within the group).
The data moves through ``lk.dist``'s collectives: MPI for CPU tensors, NCCL for GPU tensors
where each rank has a GPU of its own. Every rank of the group must call the same collectives
in the same order, with tensors of the same shapes and dtypes (a mismatch is an error on every
rank, not a hang). They are not recorded for autodiff.

``async_op=True`` returns a ``Work``; the collective has already completed when it is returned
(``wait()`` returns at once), so results are the same, with no overlap of communication.

>>> import labkit as lk, labkit.distributed as dist
>>> dist.init_process_group("gloo", rank=0, world_size=1)
>>> t = lk.tensor([1.0, 2.0]); dist.all_reduce(t, op=dist.ReduceOp.MAX); t.tolist()
[1.0, 2.0]
>>> dist.destroy_process_group()
"""
import enum

from .. import dist as _lk
from ..autodiff import no_grad
from ..errors import describe
from ..tensor.creation import empty
from ..tensor.public.shape import stack
from ..tensor.tensor import Tensor
from .process_group import DistError, resolve


class ReduceOp(enum.Enum):
    """How ``all_reduce``, ``reduce`` and ``reduce_scatter`` combine the ranks' values:
    ``SUM``, ``AVG``, ``PRODUCT``, ``MIN``, ``MAX`` (``BAND``, ``BOR``, ``BXOR`` are named but
    refused)."""
    SUM = "sum"
    AVG = "mean"
    PRODUCT = "prod"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"

    def __repr__(self):
        return f"<RedOpType.{self.name}>"


ReduceOp.RedOpType = ReduceOp
reduce_op = ReduceOp


class Work:
    """What a collective called with ``async_op=True`` returns. The collective has completed
    already: ``wait()`` returns True at once.

    >>> import labkit as lk, labkit.distributed as dist
    >>> dist.init_process_group("gloo", rank=0, world_size=1)
    >>> work = dist.all_reduce(lk.ones(2), async_op=True)
    >>> work.wait(), work.is_completed()
    (True, True)
    >>> dist.destroy_process_group()
    """

    def __init__(self, tensors):
        self._tensors = list(tensors)

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True

    def exception(self):
        return None

    def result(self):
        """The tensors the collective wrote."""
        return list(self._tensors)

    def get_future(self):
        return _Future(self._tensors)

    def synchronize(self):
        pass


class _Future:
    """``Work.get_future()``: already done; ``wait()`` and ``value()`` give the tensors."""

    def __init__(self, value):
        self._value = list(value)

    def done(self):
        return True

    def wait(self):
        return self._value

    def value(self):
        return self._value

    def then(self, callback):
        out = _Future([])
        out._value = callback(self)
        return out


def _done(async_op, tensors):
    return Work(tensors) if async_op else None


def _op(op, caller):
    if isinstance(op, ReduceOp):
        if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR):
            raise DistError(f"{caller}: op=ReduceOp.{op.name} is not supported; use SUM, AVG, "
                            f"PRODUCT, MIN or MAX")
        return op.value
    raise TypeError(f"{caller}: op= takes a ReduceOp (e.g. dist.ReduceOp.SUM), got {op!r}")


def _tensor(t, caller, what="tensor"):
    if not isinstance(t, Tensor):
        raise TypeError(f"{caller}: {what} must be a labkit Tensor, got {type(t).__name__}")
    return t


def _write(target, value):
    """Write ``value`` into ``target`` in place, outside autodiff (version counters move on)."""
    with no_grad():
        target.copy_(value.reshape(target.shape))


def _group_rank(pg, rank, group_rank, caller, what, required=False):
    """The group rank named by world rank ``rank`` or by ``group_rank`` (one of them; neither:
    0, unless ``required``)."""
    if group_rank is not None:
        if rank is not None:
            raise ValueError(f"{caller}: give {what} or group_{what}, not both")
        if not 0 <= group_rank < pg.size():
            raise ValueError(f"{caller}: group_{what}={group_rank} is not a rank of the group "
                             f"(0..{pg.size() - 1})")
        return group_rank
    if rank is None:
        if required:
            raise ValueError(f"{caller}: give {what}= (a world rank) or group_{what}=")
        rank = pg.ranks[0]
    if rank not in pg.ranks:
        raise ValueError(f"{caller}: {what}={rank} is not a member of the group (world ranks "
                         f"{pg.ranks})")
    return pg.ranks.index(rank)


def _same_as(tensors, like, caller, what):
    for i, t in enumerate(tensors):
        _tensor(t, caller, f"{what}[{i}]")
        if tuple(t.shape) != tuple(like.shape) or t.dtype != like.dtype:
            raise DistError(f"{caller}: {what}[{i}] is {describe(t)}, but must have the shape "
                            f"and dtype of {describe(like)}")


def _check_count(tensors, pg, caller, what):
    if not isinstance(tensors, (list, tuple)) or len(tensors) != pg.size():
        got = len(tensors) if isinstance(tensors, (list, tuple)) else type(tensors).__name__
        raise DistError(f"{caller}: {what} must be a list of one tensor per rank of the group "
                        f"({pg.size()}), got {got}")


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Combine ``tensor`` over the ranks with ``op``; every rank's ``tensor`` gets the result.

    >>> import labkit as lk, labkit.distributed as dist
    >>> dist.init_process_group("gloo", rank=0, world_size=1)
    >>> t = lk.tensor([3.0]); dist.all_reduce(t); t.tolist()      # 2 ranks: [6.0]
    [3.0]
    >>> dist.destroy_process_group()
    """
    pg = resolve(group, "all_reduce")
    if pg is None:
        return None
    _tensor(tensor, "all_reduce")
    _write(tensor, _lk.allreduce(tensor, _op(op, "all_reduce"), group=pg._group))
    return _done(async_op, [tensor])


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """Every rank's ``tensor`` gets rank ``src``'s values."""
    pg = resolve(group, "broadcast")
    if pg is None:
        return None
    _tensor(tensor, "broadcast")
    root = _group_rank(pg, src, group_src, "broadcast", "src", required=True)
    _write(tensor, _lk.broadcast(tensor, src=root, group=pg._group))
    return _done(async_op, [tensor])


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """``tensor_list[r]`` gets rank r's ``tensor`` (group ranks), on every rank."""
    pg = resolve(group, "all_gather")
    if pg is None:
        return None
    _tensor(tensor, "all_gather")
    _check_count(tensor_list, pg, "all_gather", "tensor_list")
    _same_as(tensor_list, tensor, "all_gather", "tensor_list")
    stacked = _lk.allgather(tensor, group=pg._group)
    for r, out in enumerate(tensor_list):
        _write(out, stacked[r])
    return _done(async_op, tensor_list)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Every rank's ``input_tensor``, in rank order, into ``output_tensor``: of shape
    ``(world * n, ...)`` (concatenated) or ``(world, n, ...)`` (stacked)."""
    pg = resolve(group, "all_gather_into_tensor")
    if pg is None:
        return None
    _tensor(output_tensor, "all_gather_into_tensor", "output_tensor")
    _tensor(input_tensor, "all_gather_into_tensor", "input_tensor")
    _check_sizes(output_tensor, input_tensor, pg, "all_gather_into_tensor",
                 "output_tensor", "input_tensor")
    _write(output_tensor, _lk.allgather(input_tensor, group=pg._group))
    return _done(async_op, [output_tensor])


def _check_sizes(big, small, pg, caller, big_name, small_name):
    """``big`` must hold one ``small`` per rank: (W * n, ...) or (W, n, ...), same dtype."""
    w, s = pg.size(), tuple(small.shape)
    shapes = [(w,) + s] + ([(w * s[0],) + s[1:]] if s else [])
    if tuple(big.shape) not in shapes or big.dtype != small.dtype:
        raise DistError(f"{caller}: {big_name} is {describe(big)}, but must hold one "
                        f"{small_name} ({describe(small)}) per rank of the group ({w}): shape "
                        f"{' or '.join(str(x) for x in shapes)}, dtype {small.dtype.name}")


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """Rank r's ``output`` gets ``input_list[r]`` combined over the ranks with ``op``."""
    pg = resolve(group, "reduce_scatter")
    if pg is None:
        return None
    _tensor(output, "reduce_scatter", "output")
    _check_count(input_list, pg, "reduce_scatter", "input_list")
    _same_as(input_list, output, "reduce_scatter", "input_list")
    part = _lk.reduce_scatter(stack(list(input_list)), _op(op, "reduce_scatter"),
                              group=pg._group)
    _write(output, part)
    return _done(async_op, [output])


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Rank r's ``output`` gets the r-th of the group's equal parts of ``input`` (shape
    ``(world * n, ...)`` or ``(world, n, ...)``), combined over the ranks with ``op``."""
    pg = resolve(group, "reduce_scatter_tensor")
    if pg is None:
        return None
    _tensor(output, "reduce_scatter_tensor", "output")
    _tensor(input, "reduce_scatter_tensor", "input")
    _check_sizes(input, output, pg, "reduce_scatter_tensor", "input", "output")
    parts = input.reshape((pg.size(),) + tuple(output.shape))
    _write(output, _lk.reduce_scatter(parts, _op(op, "reduce_scatter_tensor"),
                                      group=pg._group))
    return _done(async_op, [output])


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Rank ``dst``'s ``tensor`` gets ``tensor`` combined over the ranks with ``op``; the other
    ranks' are left as they are."""
    pg = resolve(group, "reduce")
    if pg is None:
        return None
    _tensor(tensor, "reduce")
    root = _group_rank(pg, dst, group_dst, "reduce", "dst", required=True)
    result = _lk.allreduce(tensor, _op(op, "reduce"), group=pg._group)
    if pg.rank() == root:
        _write(tensor, result)
    return _done(async_op, [tensor])


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """On rank ``dst``, ``gather_list[r]`` gets rank r's ``tensor``; the other ranks pass no
    ``gather_list``."""
    pg = resolve(group, "gather")
    if pg is None:
        return None
    _tensor(tensor, "gather")
    root = _group_rank(pg, dst, group_dst, "gather", "dst")
    mine = pg.rank() == root
    if mine:
        _check_count(gather_list, pg, "gather", "gather_list")
        _same_as(gather_list, tensor, "gather", "gather_list")
    elif gather_list:
        raise ValueError("gather: Argument ``gather_list`` must NOT be specified on "
                         "non-destination ranks.")
    stacked = _lk.allgather(tensor, group=pg._group)
    if mine:
        for r, out in enumerate(gather_list):
            _write(out, stacked[r])
    return _done(async_op, gather_list if mine else [])


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    """Rank r's ``tensor`` gets ``scatter_list[r]`` of rank ``src``; the other ranks pass no
    ``scatter_list``."""
    pg = resolve(group, "scatter")
    if pg is None:
        return None
    _tensor(tensor, "scatter")
    root = _group_rank(pg, src, group_src, "scatter", "src")
    if pg.rank() == root:
        _check_count(scatter_list, pg, "scatter", "scatter_list")
        _same_as(scatter_list, tensor, "scatter", "scatter_list")
        parts = stack(list(scatter_list))
    else:
        if scatter_list:
            raise ValueError("scatter: Argument ``scatter_list`` must NOT be specified on "
                             "non-source ranks.")
        parts = empty((pg.size(),) + tuple(tensor.shape), dtype=tensor.dtype,
                      device=tensor.device)
    _write(tensor, _lk.broadcast(parts, src=root, group=pg._group)[pg.rank()])
    return _done(async_op, [tensor])


def barrier(group=None, async_op=False, device_ids=None, timeout=None):
    """Wait until every rank of the group has called it."""
    pg = resolve(group, "barrier")
    if pg is None:
        return None
    _lk.barrier(group=pg._group)
    return _done(async_op, [])


def all_gather_object(object_list, obj, group=None):
    """``object_list[r]`` gets rank r's ``obj`` (any picklable object), on every rank."""
    pg = resolve(group, "all_gather_object")
    if pg is None:
        return None
    _check_count(object_list, pg, "all_gather_object", "object_list")
    everyone = pg._group.comm.allgather(obj) if pg._group is not None else [obj]
    object_list[:] = everyone
    return None


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Every rank's ``object_list`` (a list of picklable objects, of the same length
    everywhere) gets rank ``src``'s objects."""
    pg = resolve(group, "broadcast_object_list")
    if pg is None:
        return None
    root = _group_rank(pg, src, group_src, "broadcast_object_list", "src")
    if pg._group is not None:
        object_list[:] = pg._group.comm.bcast(list(object_list) if pg.rank() == root
                                              else None, root=root)
    return None
