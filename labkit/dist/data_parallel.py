"""``DataParallel``: synchronous data-parallel training across launched workers.

Each rank holds a full replica of the model and trains on its own shard of every global batch.
At construction, rank 0's parameters and buffers are broadcast to every rank, so all replicas
start equal. Gradients are averaged over the ranks during backward: they live in a few flat
buckets (about ``bucket_cap_mb`` each, per device and dtype, last layers first), each
parameter's ``.grad`` a view into its bucket, and a bucket's allreduce starts (a non-blocking
MPI ``Iallreduce``, or NCCL on the GPU stream) as soon as the last of its gradients is in,
while backward goes on through the earlier layers. The end of the backward pass waits for
every bucket. With equal gradients on every rank the optimiser takes the same step
everywhere, so the replicas stay identical, and training matches one process on the whole
global batch (when each rank's loss is the mean over an equal shard).

The averaging runs by itself: each parameter carries a gradient hook
(``register_post_accumulate_grad_hook``), so a plain ``loss.backward()`` leaves averaged
gradients, as with PyTorch's DistributedDataParallel. Buckets start in the same order on every
rank; a parameter this rank's backward did not reach counts as zeros (its bucket starts at the
end of the pass). ``dp.backward(loss)`` also averages when a rank's loss does not reach the
parameters at all. ``with dp.no_sync():`` accumulates gradients locally (gradient
accumulation); the first backward outside it averages everything accumulated. Under
``lk.profile()`` each bucket's allreduce is an event from its start to its wait, on the lane
"allreduce", beside the backward ops. Outside a launched worker (world size 1) every step is
the plain single-process step.

>>> import labkit as lk
>>> dp = lk.dist.DataParallel(lk.nn.Linear(3, 1))
>>> opt = lk.optim.SGD(dp.parameters(), lr=0.1)
>>> x, y = lk.ones(4, 3), lk.zeros(4, 1)     # in a worker: this rank's shard of the batch
>>> loss = lk.nn.functional.mse_loss(dp(x), y)
>>> opt.zero_grad(); loss.backward(); opt.step()
"""
import contextlib
import weakref

import numpy as np

from ..autodiff.hooks import current_pass, queue_callback
from ..graph.capture import current_graph
from ..nn.module import Module
from ..profiler.events import now_ns
from ..profiler.profile import active_profile
from ..tensor.tensor import Tensor
from . import runtime
from .collectives import nccl_allreduce_, nccl_broadcast_
from .errors import DistError


class _Bucket:
    """Tensors of one device and dtype laid end to end in one flat buffer; for gradients, one
    more element per tensor at the end: 1 where this rank has its gradient, summed with the
    values, so after the allreduce it tells whether any rank had it."""

    def __init__(self, tensors, flags=False):
        first = tensors[0]
        self.device = first.device
        self.dtype = first._data.dtype
        self.tensors = tensors
        self.offsets = np.cumsum([0] + [t.numel() for t in tensors]).tolist()
        size = self.offsets[-1] + (len(tensors) if flags else 0)
        with self.device.activate():
            self.flat = self.device.xp.zeros(size, dtype=self.dtype)
        self.flags = self.flat[self.offsets[-1]:] if flags else None
        self.slots = [self.flat[lo:hi].reshape(t.shape)
                      for t, lo, hi in zip(tensors, self.offsets, self.offsets[1:])]
        self.request = None           # the running Iallreduce (CPU buffers)
        self.started_ns = None

    def views(self):
        return zip(self.tensors, self.slots)

    def start_sum(self, group):
        """Start summing the buffer over the ranks, in place (wait with ``finish``)."""
        self.started_ns = now_ns()
        if group.use_nccl(self.device):
            nccl_allreduce_(group, self.flat, "sum")     # ordered on the GPU stream
        elif self.device.type == "cpu":
            from mpi4py import MPI
            self.request = group.comm.Iallreduce(MPI.IN_PLACE, self.flat, op=MPI.SUM)
        else:                                            # GPU without NCCL: through the host
            from mpi4py import MPI
            host = self.flat.get()
            group.comm.Allreduce(MPI.IN_PLACE, host, op=MPI.SUM)
            self.flat.set(host)

    def finish(self, index):
        if self.request is not None:
            self.request.Wait()
            self.request = None
        prof = active_profile()
        if prof is not None:
            nbytes = self.flat.nbytes
            prof.record("allreduce", f"gradient bucket {index}", self.device.name,
                        self.started_ns, now_ns(), nbytes, nbytes, source="DataParallel",
                        lane="allreduce")

    def broadcast_(self, group, src):
        if group.use_nccl(self.device):
            nccl_broadcast_(group, self.flat, src)
            return
        host = self.flat if self.device.type == "cpu" else self.flat.get()
        group.comm.Bcast(host.view(np.uint8), root=src)
        if host is not self.flat:
            self.flat.set(host)


def _buckets(tensors, cap_bytes, flags=False):
    """Split ``tensors`` (in order) into buckets of one device and dtype, about ``cap_bytes``."""
    out, current, size = [], [], 0
    for t in tensors:
        key = (t.device, t._data.dtype)
        if current and (key != (current[0].device, current[0]._data.dtype)
                        or size + t._data.nbytes > cap_bytes):
            out.append(_Bucket(current, flags))
            current, size = [], 0
        current.append(t)
        size += t._data.nbytes
    if current:
        out.append(_Bucket(current, flags))
    return out


def _write(target, source):
    """Copy ``source`` (a flat view) into ``target``'s array in place."""
    xp = target.device.xp
    xp.copyto(target._data, source.reshape(target.shape))


class _Plan:
    """The gradient buckets of one parameter set, and the state of the pass that fills them."""

    def __init__(self, params, key, cap_bytes):
        # last layers first: their gradients are ready first in a backward pass
        self.buckets = _buckets(list(reversed(params)), cap_bytes, flags=True)
        self.key = key
        self.where = {}               # id(param) -> (bucket index, slot index)
        for b, bucket in enumerate(self.buckets):
            for k, p in enumerate(bucket.tensors):
                self.where[id(p)] = (b, k)
        self.reset()

    def reset(self):
        self.pass_id = None
        self.filled = [[False] * len(b.tensors) for b in self.buckets]
        self.missing = [len(b.tensors) for b in self.buckets]
        self.started = 0              # buckets are started in order: 0 .. started - 1 are

class DataParallel(Module):
    """Wrap ``module`` for synchronous data-parallel training; call it like the module.

    - ``module``: the model; the same architecture must be built on every rank.
    - ``bucket_cap_mb``: size of the flat buffers gradients are averaged in (default 25).

    Per step: each rank computes the loss on its shard, then ``loss.backward()`` (gradients
    come out averaged over the ranks, each ``.grad`` a view into a bucket), then
    ``opt.step()``. ``with dp.no_sync():`` around the backward passes of all but the last
    micro-batch accumulates gradients without communicating.

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
        self._grad_plan = None
        self._sync_enabled = True     # False inside no_sync()
        self._queued_in = None        # the backward pass whose end will average the gradients
        self._syncs = 0               # gradient averagings done (dp.backward checks for one)
        self._plan()                  # checks that every rank built the same model
        self.broadcast_state()
        me = weakref.ref(self)        # the hooks must not keep the wrapper alive
        self._hook_handles = [
            p.register_post_accumulate_grad_hook(lambda p, me=me: _grad_ready(me, p))
            for p in module.parameters() if p.requires_grad]

    def forward(self, *args, **kwargs):
        self._refuse_capture()
        return self.module(*args, **kwargs)

    def _refuse_capture(self):
        """A captured step (``lk.function``, ``lk.compile``) runs no eager backward pass, so no
        gradient hook would average anything: with several ranks, say so instead."""
        group = runtime.group()
        if group is not None and group.size > 1 and current_graph() is not None:
            raise DistError(
                f"{type(self).__name__} inside a captured function (lk.function / lk.compile): "
                f"it averages gradients during eager backward passes, which a captured step "
                f"does not run, so the ranks would train apart. Capture the model inside it "
                f"(DDP(lk.compile(model))) and run the step eagerly, or call the step eagerly.")

    def _check_replicas(self, group):
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
        self._broadcast(list(self.module.parameters()) + list(self.module.buffers()), src)

    def _broadcast(self, tensors, src):
        """Overwrite every rank's ``tensors`` with rank ``src``'s, in place, in buckets."""
        group = runtime.group()
        if group is None or group.size == 1 or not tensors:
            return
        for bucket in _buckets(tensors, self.bucket_cap_mb * 2 ** 20):
            if group.rank == src:
                for t, view in bucket.views():
                    view[...] = t._data
            bucket.broadcast_(group, src)
            if group.rank != src:
                for t, view in bucket.views():
                    _write(t, view)

    def _plan(self):
        """The gradient buckets, rebuilt (and the replicas checked alike, the one exchange of
        shapes and dtypes) when the parameters or their dtype/device change; None for a world
        of one."""
        group = runtime.group()
        if group is None or group.size == 1:
            return None
        params = [p for p in self.module.parameters() if p.requires_grad]
        plan = self._grad_plan
        if plan is None or len(plan.key) != len(params) or any(
                a is not p or dt != p._data.dtype or dev is not p.device
                for (a, dt, dev), p in zip(plan.key, params)):
            self._check_replicas(group)
            key = [(p, p._data.dtype, p.device) for p in params]
            plan = self._grad_plan = _Plan(params, key, self.bucket_cap_mb * 2 ** 20)
        return plan

    @property
    def require_backward_grad_sync(self):
        """Whether backward passes average the gradients over the ranks (True; False inside
        ``no_sync()``). PyTorch's DistributedDataParallel has it too, and gradient accumulation
        is often written by setting it: ``model.require_backward_grad_sync = (micro_step ==
        steps - 1)`` keeps all but the last micro-batch's gradients local.

        >>> import labkit as lk
        >>> dp = lk.dist.DataParallel(lk.nn.Linear(2, 1))
        >>> dp.require_backward_grad_sync = False
        >>> with dp.no_sync():
        ...     pass
        >>> dp.require_backward_grad_sync
        False
        """
        return self._sync_enabled

    @require_backward_grad_sync.setter
    def require_backward_grad_sync(self, value):
        self._sync_enabled = bool(value)

    @contextlib.contextmanager
    def no_sync(self):
        """Within this block backward passes accumulate gradients locally, with no
        communication; the first backward after it averages everything accumulated (as
        PyTorch's ``DistributedDataParallel.no_sync``).

        >>> import labkit as lk
        >>> dp = lk.dist.DataParallel(lk.nn.Linear(2, 1))
        >>> with dp.no_sync():
        ...     dp(lk.ones(1, 2)).sum().backward()     # micro-batch 1: kept local
        >>> dp(lk.ones(1, 2)).sum().backward()         # micro-batch 2: averaged with 1
        >>> dp.module.bias.grad.tolist()
        [2.0]
        """
        before, self._sync_enabled = self._sync_enabled, False
        try:
            yield self
        finally:
            self._sync_enabled = before

    def _ready(self, p):
        """Parameter ``p``'s gradient is complete for this pass: put it in its bucket and start
        every bucket that is full, in order."""
        plan = self._grad_plan
        if plan is None or plan.pass_id != current_pass():   # the first gradient of a pass
            plan = self._plan()
            if plan is None:
                return
            plan.reset()
            plan.pass_id = current_pass()
        group = runtime.group()
        b, k = plan.where[id(p)]
        if plan.filled[b][k] or b < plan.started:
            return
        self._fill(plan.buckets[b], k, p, group.size)
        plan.filled[b][k] = True
        plan.missing[b] -= 1
        while plan.started < len(plan.buckets) and not plan.missing[plan.started]:
            plan.buckets[plan.started].start_sum(group)
            plan.started += 1

    @staticmethod
    def _fill(bucket, k, p, size):
        """Put ``p``'s gradient, divided by the world size, in its slot (the sum over the ranks
        is then the mean), and point ``p.grad`` at the slot."""
        slot = bucket.slots[k]
        grad = p.grad
        xp = bucket.device.xp
        scale = bucket.dtype.type(1.0 / size)
        if grad is None:
            slot[...] = 0
            bucket.flags[k] = 0
            return
        xp.multiply(grad._data, scale, out=slot)       # in place when it is the slot already
        bucket.flags[k] = 1
        if grad._data is not slot:
            p.grad = Tensor._make(slot, p.device)

    def sync_gradients(self):
        """Average every parameter's ``.grad`` over the ranks (the end of each backward pass
        calls it; call it yourself after gradients were made another way).

        A parameter that got no gradient on any rank keeps ``grad=None``; one that got a
        gradient on some ranks only counts zeros for the others.
        """
        self._syncs += 1
        plan = self._grad_plan
        if plan is None or plan.pass_id != current_pass():
            plan = self._plan()              # called outside the pass that filled it
            if plan is None:
                return
            plan.reset()
        group = runtime.group()
        try:
            for b in range(plan.started, len(plan.buckets)):
                bucket = plan.buckets[b]
                for k, p in enumerate(bucket.tensors):
                    if not plan.filled[b][k]:
                        self._fill(bucket, k, p, group.size)
                bucket.start_sum(group)
            plan.started = len(plan.buckets)
        finally:
            for b in range(plan.started):
                plan.buckets[b].finish(b)
            plan.reset()
        for bucket in plan.buckets:
            flags = bucket.flags if bucket.device.type == "cpu" else bucket.flags.get()
            for k, (p, slot) in enumerate(bucket.views()):
                if flags[k] > 0 and (p.grad is None or p.grad._data is not slot):
                    p.grad = Tensor._make(slot, p.device)     # zeros here, used elsewhere

    def backward(self, loss, **kwargs):
        """``loss.backward(**kwargs)``; averages the gradients even when this rank's loss does
        not reach the parameters (its gradients count as zeros on the other ranks)."""
        before = self._syncs
        if loss.requires_grad:
            loss.backward(**kwargs)
        if self._syncs == before and self._sync_enabled:
            self.sync_gradients()


def _grad_ready(dp_ref, p):
    """A parameter's gradient hook: hand the gradient to its bucket; the first hook of a pass
    queues the wait for all buckets at the pass's end."""
    dp = dp_ref()
    if dp is None or not dp._sync_enabled:
        return
    if dp._queued_in != current_pass():
        dp._queued_in = current_pass()
        queue_callback(dp.sync_gradients)
    dp._ready(p)
