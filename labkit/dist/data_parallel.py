"""``DataParallel``: synchronous data-parallel training across launched workers.

Each rank holds a full replica of the model and trains on its own shard of every global batch.
At construction, rank 0's parameters and buffers are broadcast to every rank, so all replicas
start equal. After each backward pass, ``sync_gradients()`` averages the gradients over the
ranks: they are packed into a few flat buckets (about ``bucket_cap_mb`` each, per device and
dtype, last layers first) and each bucket is allreduced at once, which costs a few large
messages instead of one per parameter. With equal gradients on every rank the optimiser takes
the same step everywhere, so the replicas stay identical, and training matches one process
on the whole global batch (when each rank's loss is the mean over an equal shard).

The averaging runs by itself: each parameter carries a gradient hook
(``register_post_accumulate_grad_hook``), and the first one to fire in a backward pass queues
``sync_gradients()`` for the end of that pass, so a plain ``loss.backward()`` leaves averaged
gradients, as with PyTorch's DistributedDataParallel. Every rank's backward must reach the
model's parameters; ``dp.backward(loss)`` also averages when a rank's loss does not depend on
them (its gradients count as zeros). Outside a launched worker (world size 1) every step is the
plain single-process step.

>>> import labkit as lk
>>> dp = lk.dist.DataParallel(lk.nn.Linear(3, 1))
>>> opt = lk.optim.SGD(dp.parameters(), lr=0.1)
>>> x, y = lk.ones(4, 3), lk.zeros(4, 1)     # in a worker: this rank's shard of the batch
>>> loss = lk.nn.functional.mse_loss(dp(x), y)
>>> opt.zero_grad(); loss.backward(); opt.step()
"""
import weakref

import numpy as np

from ..autodiff.hooks import current_pass, queue_callback
from ..nn.module import Module
from ..tensor.tensor import Tensor
from . import runtime
from .collectives import nccl_allreduce_
from .errors import DistError


class _Bucket:
    """Tensors of one device and dtype laid end to end in one flat buffer."""

    def __init__(self, tensors):
        first = tensors[0]
        self.device = first.device
        self.dtype = first._data.dtype
        self.tensors = tensors
        self.offsets = np.cumsum([0] + [t.numel() for t in tensors]).tolist()
        with self.device.activate():
            self.flat = self.device.xp.empty(self.offsets[-1], dtype=self.dtype)

    def views(self):
        for t, lo, hi in zip(self.tensors, self.offsets, self.offsets[1:]):
            yield t, self.flat[lo:hi]

    def allreduce_(self, group, op):
        if group.use_nccl(self.device):
            nccl_allreduce_(group, self.flat, op)
            return
        from mpi4py import MPI
        host = self.flat if self.device.type == "cpu" else self.flat.get()
        group.comm.Allreduce(MPI.IN_PLACE, host, op=MPI.SUM)
        if op == "mean":
            np.divide(host, host.dtype.type(group.size), out=host)
        if host is not self.flat:
            self.flat.set(host)

    def broadcast_(self, group, src):
        if group.use_nccl(self.device):
            import cupy
            with self.device.activate():
                group.nccl().bcast(self.flat.data.ptr, self.flat.size,
                                   _nccl_type(self.flat.dtype), src,
                                   cupy.cuda.get_current_stream().ptr)
            return
        host = self.flat if self.device.type == "cpu" else self.flat.get()
        group.comm.Bcast(host.view(np.uint8), root=src)
        if host is not self.flat:
            self.flat.set(host)


def _nccl_type(dtype):
    from .collectives import _nccl_type as table
    return table(dtype)


def _buckets(tensors, cap_bytes):
    """Split ``tensors`` (in order) into buckets of one device and dtype, about ``cap_bytes``."""
    out, current, size = [], [], 0
    for t in tensors:
        key = (t.device, t._data.dtype)
        if current and (key != (current[0].device, current[0]._data.dtype)
                        or size + t._data.nbytes > cap_bytes):
            out.append(_Bucket(current))
            current, size = [], 0
        current.append(t)
        size += t._data.nbytes
    if current:
        out.append(_Bucket(current))
    return out


def _owns(array):
    """Whether ``array`` can be overwritten in place: contiguous, writeable, not a view."""
    flags = array.flags
    return flags.c_contiguous and getattr(flags, "writeable", True) and array.base is None


def _write(target, source):
    """Copy ``source`` (a flat view) into ``target``'s array in place."""
    xp = target.device.xp
    xp.copyto(target._data, source.reshape(target.shape))


class DataParallel(Module):
    """Wrap ``module`` for synchronous data-parallel training; call it like the module.

    - ``module``: the model; the same architecture must be built on every rank.
    - ``bucket_cap_mb``: size of the flat buffers gradients are averaged in (default 25).

    Per step: each rank computes the loss on its shard, then ``loss.backward()`` (gradients
    come out averaged over the ranks), then ``opt.step()``.

    >>> import labkit as lk
    >>> def train():
    ...     lk.manual_seed(0)
    ...     model = lk.dist.DataParallel(lk.nn.Linear(4, 2))
    ...     opt = lk.optim.SGD(model.parameters(), lr=0.1)
    ...     x = lk.randn(8, 4)[lk.dist.rank()::lk.dist.world_size()]   # this rank's shard
    ...     loss = model(x).sum() / 8
    ...     opt.zero_grad(); loss.backward(); opt.step()
    ...     return model.module.weight.numpy()
    >>> a, b = lk.dist.launch(train, n=2)                   # doctest: +SKIP
    >>> bool((a == b).all())                                 # doctest: +SKIP
    True
    """

    def __init__(self, module, bucket_cap_mb=25.0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel wraps an lk.nn.Module, got {type(module).__name__}")
        if not bucket_cap_mb > 0:
            raise ValueError(f"DataParallel: bucket_cap_mb must be > 0, got {bucket_cap_mb}")
        self.module = module
        self.bucket_cap_mb = float(bucket_cap_mb)
        self._grad_buckets = None
        self._grad_key = None
        self._queued_in = None        # the backward pass whose end will average the gradients
        self._syncs = 0               # gradient averagings done (dp.backward checks for one)
        self._check_replicas()
        self.broadcast_state()
        me = weakref.ref(self)        # the hooks must not keep the wrapper alive
        self._hook_handles = [
            p.register_post_accumulate_grad_hook(lambda _, me=me: _grad_ready(me))
            for p in module.parameters() if p.requires_grad]

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _check_replicas(self):
        group = runtime.group()
        if group is None or group.size == 1:
            return
        mine = [(name, tuple(p.shape), p.dtype.name) for name, p in
                self.module.named_parameters()]
        everyone = group.comm.allgather(mine)
        bad = [r for r, theirs in enumerate(everyone) if theirs != everyone[0]]
        if bad:
            raise DistError(
                f"DataParallel: the model on rank(s) {', '.join(map(str, bad))} differs from "
                f"rank 0's (parameter names, shapes or dtypes). Build the same model on every "
                f"rank (same constructor arguments) before wrapping it.")

    def broadcast_state(self, src=0):
        """Overwrite every rank's parameters and buffers with rank ``src``'s, in place."""
        group = runtime.group()
        if group is None or group.size == 1:
            return
        tensors = list(self.module.parameters()) + list(self.module.buffers())
        for bucket in _buckets(tensors, self.bucket_cap_mb * 2 ** 20):
            if group.rank == src:
                for t, view in bucket.views():
                    view[...] = t._data.reshape(-1)
            bucket.broadcast_(group, src)
            if group.rank != src:
                for t, view in bucket.views():
                    _write(t, view)

    def _plan(self):
        """The gradient buckets, rebuilt when the parameters (or their dtype/device) change."""
        params = [p for p in self.module.parameters() if p.requires_grad]
        key = [(p, p._data.dtype, p.device) for p in params]
        old = self._grad_key
        if old is None or len(old) != len(key) or any(
                a[0] is not b[0] or a[1] != b[1] or a[2] is not b[2] for a, b in zip(key, old)):
            # last layers first: their gradients are ready first in a backward pass
            self._grad_buckets = _buckets(list(reversed(params)), self.bucket_cap_mb * 2 ** 20)
            self._grad_key = key
        return self._grad_buckets

    def sync_gradients(self):
        """Average every parameter's ``.grad`` over the ranks, in buckets (call after backward).

        A parameter that got no gradient on any rank keeps ``grad=None``; one that got a
        gradient on some ranks only counts zeros for the others.
        """
        self._syncs += 1
        group = runtime.group()
        if group is None or group.size == 1:
            return
        buckets = self._plan()
        params = [t for b in buckets for t in b.tensors]
        have = np.array([p.grad is not None for p in params], dtype=np.uint8)
        from mpi4py import MPI
        group.comm.Allreduce(MPI.IN_PLACE, have, op=MPI.MAX)
        i = 0
        for bucket in buckets:
            start = i
            for p, view in bucket.views():
                if p.grad is not None:
                    view[...] = p.grad._data.reshape(-1)
                else:
                    view[...] = 0
                i += 1
            bucket.allreduce_(group, "mean")
            for k, (p, view) in enumerate(bucket.views()):
                if not have[start + k]:
                    continue
                grad = p.grad
                if grad is not None and _owns(grad._data):
                    _write(grad, view)
                else:
                    p.grad = Tensor._make(view.reshape(p.shape).copy(), p.device)

    def backward(self, loss, **kwargs):
        """``loss.backward(**kwargs)``; averages the gradients even when this rank's loss does
        not reach the parameters (its gradients count as zeros on the other ranks)."""
        before = self._syncs
        if loss.requires_grad:
            loss.backward(**kwargs)
        if self._syncs == before:
            self.sync_gradients()



def _grad_ready(dp_ref):
    """A parameter's gradient hook: the first in a backward pass queues the averaging."""
    dp = dp_ref()
    if dp is not None and dp._queued_in != current_pass():
        dp._queued_in = current_pass()
        queue_callback(dp.sync_gradients)
