"""``ParameterServer``: training with parameters held by server tasks, asynchronously or
synchronously with backup workers, as in TensorFlow (OSDI 2016, sections 4.4 and 6.3).

The launched ranks split into two jobs: ranks ``0 .. num_ps - 1`` are parameter-server tasks,
the others are workers. Each server holds a shard of the model:

- dense parameters are sharded *by parameter* (each goes whole to one server, balancing bytes);
- the weight of every ``lk.nn.Embedding`` is sharded *by rows* across all servers
  (``labkit.dist.sparse``): a lookup is Part (route the indices to their shards), Gather (each
  server reads its rows) and Stitch (the worker puts them back in order), and the gradient
  sent back holds only the rows that were read.

A worker's step: pull the dense parameters from every server, run the forward pass (embedding
lookups fetch their rows from the servers as they happen), backward, push the gradients to the
servers. Each server applies updates with an ``lk.optim`` optimiser built by ``optimizer_fn``;
embedding rows are updated sparsely (only the touched rows and their optimiser slots change, a
"lazy" update).

- ``mode="async"``: a server applies each push as it arrives; workers never wait for each
  other and read whatever parameters are current (their gradients may be stale).
- ``mode="sync"``: step ``t`` of a server aggregates (averages) the first ``m = n_workers -
  backup_workers`` gradients computed from step ``t``'s parameters; later ones for step ``t``
  arrive stale and are dropped (counted per worker). A worker that pushed waits for the next
  step before pulling again. With ``backup_workers > 0`` a slow worker no longer holds every
  step back: that is what backup workers are for, and ``straggler={rank: seconds}`` (a delay
  added to one worker's every step) shows it.

Messages are MPI point-to-point on a communicator of their own, and tensors travel as raw
memory (``labkit.dist.packets``): a pull's reply is one buffer holding a small header and the
server's dense parameters (which *are* views into it), received straight into the buffer
the worker's parameters view; a push is one buffer of header and dense gradients, followed
by the index and row arrays of sparse gradients. Nothing is pickled. A server waits in
``Waitany`` over one posted receive per worker, a worker in ``Recv``/``Waitall``; the
launcher tells Open MPI to yield the core while waiting, so an idle rank does not starve the
workers. Module buffers (e.g. running statistics) stay local to each worker and are not
served.

>>> import labkit as lk
>>> def model_fn():
...     return lk.nn.Sequential(lk.nn.Flatten(), lk.nn.Linear(64, 32), lk.nn.ReLU(),
...                             lk.nn.Linear(32, 10))
>>> ps = lk.dist.ParameterServer(model_fn, lambda p: lk.optim.Adam(p, lr=1e-2),
...                              mode="sync", backup_workers=1, straggler={2: 0.02})
>>> train_set, test_set = lk.data.digits()
>>> result = ps.run(train_set, steps=150, batch_size=32, n=3)     # doctest: +SKIP
>>> result.dropped    # rank 2's few gradients all come too late   # doctest: +SKIP
{1: 0, 2: 13}
>>> result.accuracy(test_set) > 0.9                                # doctest: +SKIP
True
"""
import collections
import time

import numpy as np

from ..nn.sparse import Embedding
from ..nn.functional import cross_entropy, embedding as _embedding
from ..nn.parameter import Parameter
from ..profiler.events import OpEvent
from ..profiler.profile import Profile, active_profile
from ..tensor.creation import tensor as _tensor
from ..tensor.tensor import Tensor
from . import runtime, sparse
from .errors import DistError
from .packets import Packing, put_float

MODES = ("sync", "async")
# Every message from a worker to a server is a packet on TAG_PACKET (its kind in header slot
# 0), received in order through one posted receive per worker; the index and row arrays that
# follow a gather or a push come on their own tags, received right after their packet.
TAG_PACKET, TAG_PARAMS, TAG_IDS, TAG_ROWS, TAG_GRAD = 301, 302, 303, 304, 305
PULL, GATHER, PUSH, DONE = 1, 2, 3, 4


# ---- messages ----------------------------------------------------------------------------------
def _params_packing(layout, params, server):
    """A server's reply to a pull: header (step, stop), then its dense parameters."""
    return Packing([(n, params[n].shape, params[n]._data.dtype)
                    for n in layout.dense_of(server)], header=2)


def _push_packing(layout, params, server):
    """A worker's push to a server: header (kind, step, loss, rows sent per table, whether each
    dense gradient is there), then the dense gradients of the server's parameters."""
    names = layout.dense_of(server)
    return Packing([(n, params[n].shape, params[n]._data.dtype) for n in names],
                   header=3 + len(layout.tables) + len(names))


def _control(kind, a=0, b=0):
    return np.array([kind, a, b], np.int64)


def _now():
    return time.perf_counter_ns()


def _host(tensor):
    return np.array(tensor.numpy(force=True), copy=True)


# ---- how the model is split over the servers -------------------------------------------------
class Layout:
    """Which server holds what: ``dense`` maps a parameter name to its server (largest
    parameters first, each to the least loaded server; ``load`` is each server's bytes),
    ``tables`` maps the name of each embedding weight to its row bounds
    (``sparse.row_bounds``), and ``padding`` an embedding weight's ``padding_idx`` (rows that
    are never updated).

    >>> import labkit as lk
    >>> model = lk.nn.Sequential(lk.nn.Embedding(10, 4), lk.nn.Linear(4, 2))
    >>> layout = Layout(model, num_ps=2)
    >>> layout.dense, {k: v.tolist() for k, v in layout.tables.items()}
    ({'1.weight': 0, '1.bias': 1}, {'0.weight': [0, 5, 10]})
    """

    def __init__(self, model, num_ps):
        self.num_ps = num_ps
        self.tables, self.padding, self.modules = {}, {}, {}
        for name, module in model.named_modules():
            if isinstance(module, Embedding):
                key = f"{name}.weight" if name else "weight"
                self.tables[key] = sparse.row_bounds(module.num_embeddings, num_ps)
                self.padding[key] = module.padding_idx
                self.modules[key] = name
        # largest first, each to the server holding the fewest bytes so far: balanced bytes
        dense = [(name, p._data.nbytes) for name, p in model.named_parameters()
                 if name not in self.tables and p.requires_grad]
        load = [0] * num_ps
        where = {}
        for name, nbytes in sorted(dense, key=lambda d: -d[1]):
            server = min(range(num_ps), key=lambda s: (load[s], s))
            where[name] = server
            load[server] += nbytes
        self.dense = {name: where[name] for name, _ in dense}      # in the model's order
        self.load = load

    def dense_of(self, server):
        return [name for name, s in self.dense.items() if s == server]


# ---- the server's sparse update ----------------------------------------------------------------
class _RowOptimizer:
    """Applies ``optimizer_fn``'s rule to some rows of one table shard: a temporary parameter
    holds the rows, and the optimiser's slots (momentum, moments...) are row slices of full
    slots kept here, so untouched rows and their slots stay exactly as they were. Step counters
    (0-d slots) are one per shard."""

    def __init__(self, table, optimizer_fn):
        self.table = table
        self.opt = optimizer_fn([table])
        self.full = {}
        self.rows = None
        self.opt._slot = self._slot          # route slot creation through the row slices
        self.opt._counter = self._counter
        self.touched = 0

    def _slot(self, state, name, p, fill=0.0):
        from ..graph.variables import Variable
        t = state.get(name)
        if t is None:
            full = self.full.get(name)
            if full is None:
                full = self.full[name] = np.full_like(self.table._data, fill)
            t = state[name] = Variable._own(full[self.rows], p.device, name)
        return t

    def _counter(self, state, name, p, start=0):
        from ..graph.variables import Variable
        t = self.full.get(name)
        if t is None:
            t = self.full[name] = Variable._own(np.full((), start, dtype=np.int64),
                                                p.device, name)
        state[name] = t
        return t

    def apply(self, rows, grad):
        if not len(rows):
            return
        self.rows = rows
        tmp = Parameter(Tensor._make(self.table._data[rows], self.table.device))
        tmp.grad = Tensor._make(np.asarray(grad, dtype=self.table._data.dtype),
                                self.table.device)
        self.opt.param_groups[0]["params"] = [tmp]
        self.opt.state = collections.defaultdict(dict)
        self.opt.step()
        self.table._data[rows] = tmp._data
        for name, slot in self.opt.state[tmp].items():
            if slot.ndim == self.table.ndim:
                self.full[name][rows] = slot._data
        self.opt.state = collections.defaultdict(dict)
        self.opt.param_groups[0]["params"] = [self.table]
        self.touched += len(rows)


# ---- the server task ---------------------------------------------------------------------------
class _Server:
    def __init__(self, ps, comm, layout, model, steps):
        from ..devices import get_device
        cpu = get_device("cpu:0")
        self.ps, self.comm, self.layout, self.steps = ps, comm, layout, steps
        self.me = comm.Get_rank()
        self.workers = list(range(ps.num_ps, comm.Get_size()))
        params = dict(model.named_parameters())
        # the parameters are views into the buffer a pull's reply sends: no copy to send them
        self.reply = _params_packing(layout, params, self.me)
        self.reply_buf = self.reply.empty()
        self.dense = {}
        for name, view in self.reply.views(self.reply_buf).items():
            view[...] = _host(params[name])
            self.dense[name] = Parameter(Tensor._make(view, cpu))
        self.replying = []                        # sends of reply_buf still in flight
        self.opt = ps.optimizer_fn(list(self.dense.values())) if self.dense else None
        self.tables = {}
        for name, bounds in layout.tables.items():
            lo, hi = bounds[self.me], bounds[self.me + 1]
            shard = Parameter(Tensor._make(_host(params[name])[lo:hi], cpu))
            self.tables[name] = _RowOptimizer(shard, ps.optimizer_fn)
        self.table_names = list(layout.tables)
        self.push = _push_packing(layout, params, self.me)
        self.spare = []                           # push buffers free for the next receive
        self.step = 0
        self.done = False
        self.pending = []                         # (worker, min_step) pulls waiting for a step
        self.buffer = []                          # sync: accepted pushes of this step
        self.m = len(self.workers) - ps.backup_workers
        self.accepted = {w: 0 for w in self.workers}
        self.dropped = {w: 0 for w in self.workers}
        self.pushes = {w: [] for w in self.workers}   # per worker, in order: "applied"/"dropped"...
        self.events = []                          # (name, start_ns, end_ns, pushes applied)

    def _receive(self, worker):
        """A push buffer, and the receive of the next packet from ``worker`` into it."""
        buf = self.spare.pop() if self.spare else self.push.empty()
        return buf, self.comm.Irecv(buf, source=worker, tag=TAG_PACKET)

    def serve(self):
        from mpi4py import MPI
        posted = [self._receive(w) for w in self.workers]
        requests = [r for _, r in posted]
        bufs = [b for b, _ in posted]
        finished = 0
        while finished < len(self.workers):
            i = MPI.Request.Waitany(requests)     # blocks: no polling
            src, buf = self.workers[i], bufs[i]
            head = self.push.header(buf)
            kind = int(head[0])
            if kind == PUSH:
                self._push(src, buf)              # keeps buf (sync) or gives it back
            elif kind == PULL:
                self.pending.append((src, int(head[1])))
                self._answer_pulls()
            elif kind == GATHER:
                self._gather(src, self.table_names[int(head[1])], int(head[2]))
            if kind == DONE:
                finished += 1
                requests[i] = MPI.REQUEST_NULL
                self.spare.append(buf)
                continue
            if kind != PUSH:
                self.spare.append(buf)
            bufs[i], requests[i] = self._receive(src)
        self._settle()

    def _settle(self):
        """Wait until every reply sent from ``reply_buf`` has left (before changing it)."""
        from mpi4py import MPI
        MPI.Request.Waitall(self.replying)
        self.replying = []

    def _gather(self, src, name, n):
        local = np.empty(n, np.int64)
        self.comm.Recv(local, source=src, tag=TAG_IDS)
        rows = np.ascontiguousarray(sparse.gather(self.tables[name].table._data, local))
        self.comm.Send(rows, dest=src, tag=TAG_ROWS)

    def _answer_pulls(self):
        keep = []
        for src, min_step in self.pending:
            if self.done or self.step >= min_step:
                self.replying.append(self.comm.Isend(self.reply_buf, dest=src, tag=TAG_PARAMS))
            else:
                keep.append((src, min_step))
        self.pending = keep

    def _read_push(self, src, buf):
        """The push in ``buf`` as a dict, with its sparse rows received from ``src``."""
        head = self.push.header(buf)
        rows = {}
        for t, name in enumerate(self.table_names):
            n = int(head[3 + t])
            if n:
                shard = self.tables[name].table._data
                local = np.empty(n, np.int64)
                grad = np.empty((n,) + shard.shape[1:], shard.dtype)
                self.comm.Recv(local, source=src, tag=TAG_IDS)
                self.comm.Recv(grad, source=src, tag=TAG_GRAD)
                rows[name] = (local, grad)
        have = head[3 + len(self.table_names):]
        dense = self.push.views(buf)
        return {"step": int(head[1]), "buf": buf, "sparse": rows,
                "dense": {n: dense[n] for j, n in enumerate(self.dense) if have[j]}}

    def _push(self, src, buf):
        msg = self._read_push(src, buf)
        msg["push"] = (src, len(self.pushes[src]))   # the worker's how-manieth push it is
        if self.done:
            self.pushes[src].append("late")       # after the last step: neither used nor dropped
            self.spare.append(buf)
            return
        if self.ps.mode == "async":
            self.accepted[src] += 1
            self.pushes[src].append("applied")
            self._apply([msg])
        elif msg["step"] == self.step:
            self.accepted[src] += 1
            self.pushes[src].append("applied")
            self.buffer.append(msg)
            if len(self.buffer) < self.m:
                return
            self._apply(self.buffer)
            self.buffer = []
        else:                                     # computed from an older step: too late
            self.dropped[src] += 1
            self.pushes[src].append("dropped")
            self.spare.append(buf)
            return
        self.step += 1
        if self.step >= self.steps:
            self.done = True
        self.reply.header(self.reply_buf)[:] = [self.step, self.done]
        self._answer_pulls()

    def _apply(self, msgs):
        start = _now()
        self._settle()                            # the parameters are about to change
        scale = 1.0 / len(msgs)
        if self.opt is not None:
            for name, p in self.dense.items():
                grads = [m["dense"][name] for m in msgs if name in m["dense"]]
                if grads:
                    g = grads[0] * scale if len(grads) == 1 else np.sum(grads, axis=0) * scale
                    p.grad = Tensor._make(np.asarray(g, dtype=p._data.dtype), p.device)
            self.opt.step()
            self.opt.zero_grad()
        for name, rows in self.tables.items():
            parts = [m["sparse"][name] for m in msgs if name in m["sparse"]]
            if parts:
                local, grad = sparse.combine_rows([i for i, _ in parts], [g for _, g in parts])
                rows.apply(local, grad * scale)
        self.spare.extend(m["buf"] for m in msgs)
        self.events.append(("ps.apply", start, _now(), [m["push"] for m in msgs]))

    def report(self):
        return {"role": "ps", "rank": self.me, "steps": self.step,
                "dense": {n: p._data.copy() for n, p in self.dense.items()},
                "tables": {n: r.table._data.copy() for n, r in self.tables.items()},
                "rows_updated": {n: r.touched for n, r in self.tables.items()},
                "accepted": self.accepted, "dropped": self.dropped, "pushes": self.pushes,
                "events": self.events}


# ---- the worker task ---------------------------------------------------------------------------
class _Worker:
    def __init__(self, ps, comm, layout, model):
        self.ps, self.comm, self.layout, self.model = ps, comm, layout, model
        self.me = comm.Get_rank()
        self.servers = list(range(ps.num_ps))
        self.params = dict(model.named_parameters())
        self.lookups = []                        # this step: (table name, unique ids, leaf)
        self.table_names = list(layout.tables)
        # replies land in buffers whose views are the model's parameters (on a CPU worker)
        self.replies = [_params_packing(layout, self.params, s) for s in self.servers]
        self.reply_bufs = [r.empty() for r in self.replies]
        self.reply_views = [r.views(b) for r, b in zip(self.replies, self.reply_bufs)]
        for views in self.reply_views:
            for name, view in views.items():
                p = self.params[name]
                view[...] = _host(p)
                if p.device.type == "cpu":
                    p._data = view
        self.pushes = [_push_packing(layout, self.params, s) for s in self.servers]
        self.push_bufs = [pk.empty() for pk in self.pushes]
        self.sending = []                        # (request, buffer) of sends still in flight
        modules = dict(model.named_modules())
        for name, module_name in layout.modules.items():
            module = modules[module_name]
            module.forward = self._lookup_forward(name, module)

    def _lookup_forward(self, name, module):
        from mpi4py import MPI
        bounds = self.layout.tables[name]
        table = self.table_names.index(name)
        weight = self.params[name]

        def forward(indices):
            ids = np.asarray(indices.numpy(force=True), dtype=np.int64)
            unique, inverse = np.unique(ids.reshape(-1), return_inverse=True)
            local, positions = sparse.part(unique, bounds)
            pieces = [np.empty((len(local[s]),) + tuple(weight.shape[1:]), weight._data.dtype)
                      if len(local[s]) else None for s in self.servers]
            waits = [self.comm.Irecv(pieces[s], source=s, tag=TAG_ROWS)
                     for s in self.servers if pieces[s] is not None]
            for s in self.servers:                       # Part: one request per shard
                if pieces[s] is not None:
                    self.comm.Send(_control(GATHER, table, len(local[s])), dest=s,
                                   tag=TAG_PACKET)
                    self.comm.Send(np.ascontiguousarray(local[s]), dest=s, tag=TAG_IDS)
            MPI.Request.Waitall(waits)                   # Gather, on each shard
            rows = sparse.stitch(positions, pieces, len(unique))       # Stitch
            leaf = _tensor(rows, requires_grad=True)
            self.lookups.append((name, unique, leaf))
            pad = module.padding_idx
            local_pad = None
            if pad is not None:
                hit = np.flatnonzero(unique == pad)
                local_pad = int(hit[0]) if len(hit) else None
            return _embedding(_tensor(inverse.reshape(ids.shape)), leaf, local_pad)
        return forward

    def pull(self, min_steps):
        from mpi4py import MPI
        waits = [self.comm.Irecv(self.reply_bufs[s], source=s, tag=TAG_PARAMS)
                 for s in self.servers]
        for s in self.servers:
            self.comm.Send(_control(PULL, min_steps[s]), dest=s, tag=TAG_PACKET)
        MPI.Request.Waitall(waits)
        for views in self.reply_views:
            for name, view in views.items():
                p = self.params[name]
                if p._data is not view:                  # a GPU worker: copy to the device
                    p._data[...] = p.device.xp.asarray(view)
        heads = [r.header(b) for r, b in zip(self.replies, self.reply_bufs)]
        return [int(h[0]) for h in heads], any(int(h[1]) for h in heads)

    def _flush(self):
        from mpi4py import MPI
        MPI.Request.Waitall([r for r, _ in self.sending])
        self.sending = []

    def push(self, steps, loss):
        self._flush()                            # the last push's buffers are free again
        sparse_grads = [{} for _ in self.servers]
        by_table = {}
        for name, unique, leaf in self.lookups:
            if leaf.grad is None:
                continue
            by_table.setdefault(name, ([], []))
            by_table[name][0].append(unique)
            by_table[name][1].append(_host(leaf.grad))
        for name, (ids, grads) in by_table.items():
            ids, grad = sparse.combine_rows(ids, grads)
            pad = self.layout.padding[name]
            if pad is not None:
                keep = ids != pad
                ids, grad = ids[keep], grad[keep]
            local, positions = sparse.part(ids, self.layout.tables[name])
            for s in self.servers:
                if len(local[s]):
                    sparse_grads[s][name] = (np.ascontiguousarray(local[s]),
                                             np.ascontiguousarray(grad[positions[s]]))
        for s in self.servers:
            packing, buf = self.pushes[s], self.push_bufs[s]
            head = packing.header(buf)
            head[0], head[1] = PUSH, steps[s]
            put_float(head, 2, loss)
            for t, name in enumerate(self.table_names):
                head[3 + t] = len(sparse_grads[s][name][0]) if name in sparse_grads[s] else 0
            views = packing.views(buf)
            for j, name in enumerate(views):
                grad = self.params[name].grad
                head[3 + len(self.table_names) + j] = grad is not None
                if grad is not None:
                    np.copyto(views[name], grad.numpy(force=True))
            self.sending.append((self.comm.Isend(buf, dest=s, tag=TAG_PACKET), buf))
            for name in self.table_names:
                if name in sparse_grads[s]:
                    local, grad = sparse_grads[s][name]
                    self.sending.append((self.comm.Isend(local, dest=s, tag=TAG_IDS), local))
                    self.sending.append((self.comm.Isend(grad, dest=s, tag=TAG_GRAD), grad))
        self.lookups = []

    def work(self, batches, loss_fn):
        delay = self.ps.straggler.get(self.me, 0.0)
        sync = self.ps.mode == "sync"
        min_steps = [0] * len(self.servers)
        timeline = []
        prof = active_profile()
        while True:
            t0 = _now()
            steps, stop = self.pull(min_steps)
            if stop:
                break
            t1 = _now()
            if delay:
                time.sleep(delay)
            t2 = _now()
            inputs, targets = next(batches)
            loss = loss_fn(self.model(inputs), targets)
            self.model.zero_grad()
            loss.backward()
            t3 = _now()
            value = float(loss.item())
            self.push(steps, value)
            t4 = _now()
            timeline.append({"rank": self.me, "step": steps[0], "start_ns": t0, "pulled_ns": t1,
                             "computing_ns": t2, "computed_ns": t3, "end_ns": t4,
                             "loss": value})
            if prof is not None:
                for op, a, b in (("ps.pull", t0, t1), ("ps.straggle", t1, t2),
                                 ("ps.compute", t2, t3), ("ps.push", t3, t4)):
                    if b > a:
                        prof.record(op, f"step {steps[0]}", runtime.device().name, a, b,
                                    source="parameter_server")
                prof.step()
            if sync:
                min_steps = [s + 1 for s in steps]
        for s in self.servers:
            self.comm.Send(_control(DONE), dest=s, tag=TAG_PACKET)
        self._flush()
        return {"role": "worker", "rank": self.me, "timeline": timeline,
                "pull_bytes": sum(b.nbytes for b in self.reply_bufs),
                "push_bytes": sum(b.nbytes for b in self.push_bufs)}


def _batches(dataset, batch_size, seed):
    """An endless stream of shuffled batches (a new order each epoch, reproducible by seed)."""
    from ..data.loader import DataLoader
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, seed=seed,
                        drop_last=len(dataset) >= batch_size)
    while True:
        yield from loader


def _default_loss(output, target):
    return cross_entropy(output, target)


# ---- the public class --------------------------------------------------------------------------
class ParameterServer:
    """Train ``model_fn()`` with its parameters on parameter-server tasks.

    - ``model_fn``: builds the model (called on every rank after ``lk.manual_seed(seed)``, so
      all start from the same values); ``lk.nn.Embedding`` weights are sharded by rows.
    - ``optimizer_fn``: ``params -> lk.optim`` optimiser, used by the servers.
    - ``num_ps``: how many of the launched ranks are servers (ranks ``0 .. num_ps - 1``).
    - ``mode``: "async" (apply every push as it arrives) or "sync" (aggregate the first
      ``n_workers - backup_workers`` gradients of each step, drop the rest).
    - ``backup_workers``: (sync) how many workers' gradients each step may do without.
    - ``straggler``: ``{rank: seconds}``, a delay added to every step of those worker ranks.
    - ``loss_fn``: ``(model output, targets) -> loss``; cross-entropy by default.
    - ``profile``: also record every op of each rank with ``lk.profile()`` (the step phases
      pull / straggle / compute / push / apply are always recorded); a dict of
      ``lk.profile``'s options records with them, e.g. ``profile={"record_shapes": True,
      "with_stack": True}`` for each op's shapes and source line.

    ``run(dataset, steps, batch_size, n)`` launches ``n`` ranks and returns a
    ``ParameterServerResult``; inside your own ``lk.dist.launch`` or ``Cluster.run``, call
    ``ps.train(dataset, steps, batch_size)`` on every rank and ``ps.collect(results)`` on the
    list they return. ``steps`` counts updates applied by each server (in async mode one per
    push, so each of ``k`` workers computes about ``steps / k`` gradients).

    >>> import labkit as lk
    >>> ps = lk.dist.ParameterServer(lambda: lk.nn.Linear(64, 10),
    ...                              lambda p: lk.optim.SGD(p, lr=0.1), mode="async")
    >>> ps
    ParameterServer(num_ps=1, mode='async')
    """

    def __init__(self, model_fn, optimizer_fn, num_ps=1, mode="sync", backup_workers=0,
                 straggler=None, loss_fn=None, seed=0, profile=False):
        if mode not in MODES:
            raise ValueError(f"ParameterServer: mode={mode!r} is not one of "
                             f"{', '.join(map(repr, MODES))}")
        if isinstance(num_ps, bool) or not isinstance(num_ps, int) or num_ps < 1:
            raise ValueError(f"ParameterServer: num_ps must be a positive int, got {num_ps!r}")
        if not isinstance(backup_workers, int) or backup_workers < 0:
            raise ValueError(f"ParameterServer: backup_workers must be an int >= 0, got "
                             f"{backup_workers!r}")
        if mode == "async" and backup_workers:
            raise ValueError("ParameterServer: backup_workers only applies to mode='sync' "
                             "(async training never waits for a worker)")
        straggler = dict(straggler or {})
        for r, delay in straggler.items():
            if not isinstance(r, int) or r < num_ps or not delay >= 0:
                raise ValueError(f"ParameterServer: straggler={{{r!r}: {delay!r}}}: keys are "
                                 f"worker ranks (>= num_ps={num_ps}), values seconds >= 0")
        self.model_fn, self.optimizer_fn = model_fn, optimizer_fn
        self.loss_fn = loss_fn or _default_loss
        self.num_ps, self.mode, self.backup_workers = num_ps, mode, backup_workers
        if isinstance(profile, dict):
            unknown = set(profile) - {"record_shapes", "with_stack"}
            if unknown:
                raise ValueError(f"ParameterServer: profile={profile!r}: "
                                 f"{', '.join(sorted(map(repr, unknown)))} is not an option of "
                                 f"lk.profile (record_shapes, with_stack)")
            profile = dict(profile)
        else:
            profile = {} if profile else None
        self.straggler, self.seed, self.profile = straggler, seed, profile

    def __repr__(self):
        extra = f", backup_workers={self.backup_workers}" if self.backup_workers else ""
        extra += f", straggler={self.straggler}" if self.straggler else ""
        return f"ParameterServer(num_ps={self.num_ps}, mode={self.mode!r}{extra})"

    # -- travelling to the workers: user callables go by value (notebook, test file, script) --
    def __getstate__(self):
        import sys

        from .pickling import dumps
        from .worker import _by_value
        state = dict(self.__dict__)
        fns = (state.pop("model_fn"), state.pop("optimizer_fn"), state.pop("loss_fn"))
        modules = {getattr(f, "__module__", None) for f in fns}
        state["_fns"] = dumps(fns, by_value=[sys.modules[m] for m in modules if _by_value(m)])
        return state

    def __setstate__(self, state):
        import cloudpickle
        state = dict(state)
        self.model_fn, self.optimizer_fn, self.loss_fn = cloudpickle.loads(state.pop("_fns"))
        self.__dict__.update(state)

    # -- running --
    def _check_world(self, size):
        workers = size - self.num_ps
        if workers < 1:
            raise DistError(f"ParameterServer: {size} rank(s) for num_ps={self.num_ps} leaves no "
                            f"worker; launch at least {self.num_ps + 1} ranks")
        if self.backup_workers >= workers:
            raise DistError(f"ParameterServer: backup_workers={self.backup_workers} must be "
                            f"fewer than the {workers} workers (each step needs at least one "
                            f"gradient)")
        bad = [r for r in self.straggler if r >= size]
        if bad:
            raise DistError(f"ParameterServer: straggler rank(s) {bad} do not exist in a world "
                            f"of {size}")

    def _build(self):
        from ..tensor.random import manual_seed
        manual_seed(self.seed)
        return self.model_fn()

    def train(self, dataset, steps, batch_size=32):
        """Run this rank's part (call on every launched rank): a server serves until the
        workers are done, a worker trains. Returns a plain dict for ``collect``."""
        group = runtime.group()
        if group is None:
            raise DistError("ParameterServer.train runs on launched workers: use "
                            "ps.run(dataset, steps, batch_size, n=...) from a notebook, or call "
                            "ps.train inside lk.dist.launch / Cluster.run")
        self._check_world(group.size)
        from ..profiler.profile import profile as _profile
        comm = group.comm.Dup()                 # the servers' traffic apart from collectives
        try:
            model = self._build()
            layout = Layout(model, self.num_ps)
            comm.Barrier()      # every rank is ready: no worker starts training alone
            with (_nullcontext() if self.profile is None else _profile(**self.profile)) as prof:
                if comm.Get_rank() < self.num_ps:
                    server = _Server(self, comm, layout, model, int(steps))
                    server.serve()
                    out = server.report()
                else:
                    worker = _Worker(self, comm, layout, model)
                    index = comm.Get_rank() - self.num_ps
                    stream = _batches(dataset, batch_size, self.seed + 1 + index)
                    out = worker.work(stream, self.loss_fn)
            if prof is not None:
                out["ops"] = [e.as_dict() for e in prof.events
                              if e.source != "parameter_server"]
            return out
        finally:
            comm.Free()

    def run(self, dataset, steps, batch_size=32, n=3, output="none", timeout=120):
        """Launch ``n`` ranks (``num_ps`` servers, the rest workers), train, end the ranks, and
        return a ``ParameterServerResult``."""
        from .launcher import launch
        self._check_world(n)
        return self.collect(launch(self.train, dataset, steps, batch_size, n=n, output=output,
                                   timeout=timeout))

    def collect(self, results):
        """Merge what ``train`` returned on each rank into a ``ParameterServerResult``."""
        return ParameterServerResult(self, results)


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


class ParameterServerResult:
    """What a parameter-server run produced.

    - ``model``: ``model_fn()`` holding the trained parameters (embedding tables stitched back
      from their row shards); ``accuracy(dataset)`` scores it on (inputs, labels) batches.
    - ``dropped`` / ``accepted``: per worker rank, gradients the servers dropped as too late /
      used (counted on server 0; sync mode drops, async mode never does).
    - ``steps``: updates applied by each server; ``rows_updated``: per table, the rows updated
      in all (sum over steps of the rows each update touched).
    - ``timeline``: one dict per worker step: ``rank``, ``step`` (the server step its
      parameters came from), ``start_ns``, ``pulled_ns``, ``computing_ns`` (after the
      straggler's delay), ``computed_ns``, ``end_ns``, ``loss`` and ``status`` ("applied",
      "dropped" or "late" at server 0).
    - ``profile``: an ``lk.profiler.Profile`` with one track per rank (pull, straggle, compute,
      push on workers; apply on servers; every op too with ``profile=True``), for
      ``lk.viz.timeline`` and ``export_chrome_trace``. A pull or push names its servers and
      carries the bytes of its dense packets; an arrow (``profile.flows``) joins each push
      to the server's apply that used it.
    - ``losses``: each worker's losses in step order.
    """

    def __init__(self, ps, results):
        self.ps = ps
        servers = [r for r in results if r["role"] == "ps"]
        workers = [r for r in results if r["role"] == "worker"]
        self.steps = [s["steps"] for s in servers]
        head = servers[0]
        self.dropped = dict(head["dropped"])
        self.accepted = dict(head["accepted"])
        self.rows_updated = {}
        for s in servers:
            for name, count in s["rows_updated"].items():
                self.rows_updated[name] = self.rows_updated.get(name, 0) + count
        self.timeline = []
        for w in workers:
            statuses = head["pushes"][w["rank"]]
            for row, status in zip(w["timeline"], statuses):
                self.timeline.append(dict(row, status=status))
        self.losses = {w["rank"]: [row["loss"] for row in w["timeline"]] for w in workers}
        self.model = self._assemble(servers)
        self.profile = self._profile(results)

    def _assemble(self, servers):
        model = self.ps._build()
        state = {}
        for s in servers:
            state.update(s["dense"])
        for name in servers[0]["tables"]:
            state[name] = np.concatenate([s["tables"][name] for s in servers])   # Stitch
        model.load_state_dict(state, strict=False)
        return model

    def _profile(self, results):
        prof = Profile()
        servers = ", ".join(str(r) for r in range(self.ps.num_ps))
        servers = f"rank{'s' if self.ps.num_ps > 1 else ''} {servers}"
        pushes, applies = {}, []          # worker rank -> its push events; (apply, pushes)
        for r in results:
            track = f"rank {r['rank']} ({'server' if r['role'] == 'ps' else 'worker'})"
            if r["role"] == "ps":
                for op, a, b, used in r["events"]:
                    e = OpEvent(op, op, track, "parameter server", a, b, 0, 0, 0,
                                "parameter_server")
                    prof.events.append(e)
                    applies.append((e, used))
            else:
                mine = pushes[r["rank"]] = []
                phases = (("ps.pull", "start_ns", "pulled_ns", f"pull from {servers}",
                           r["pull_bytes"]),
                          ("ps.straggle", "pulled_ns", "computing_ns", "", 0),
                          ("ps.compute", "computing_ns", "computed_ns", "", 0),
                          ("ps.push", "computed_ns", "end_ns", f"push to {servers}",
                           r["push_bytes"]))
                for row in r["timeline"]:
                    e = None
                    for op, a, b, what, nbytes in phases:
                        if row[b] > row[a]:
                            e = OpEvent(op, f"step {row['step']}" + (f": {what}" if what else ""),
                                        track, "steps", row[a], row[b], nbytes, nbytes,
                                        row["step"], "parameter_server")
                            prof.events.append(e)
                    mine.append(e if e is not None and e.op == "ps.push" else None)
            for e in r.get("ops", ()):
                prof.events.append(OpEvent(e["op"], e["name"], track, "ops", e["start_ns"],
                                           e["start_ns"] + e["duration_ns"], e["bytes_in"],
                                           e["bytes_out"], e["step"], e["source"],
                                           shapes=e.get("shape"), where=e.get("line")))
        for apply, used in applies:
            for worker, k in used:
                push = pushes.get(worker, [])[k] if k < len(pushes.get(worker, [])) else None
                if push is not None:
                    prof.flows.append((push, apply))
        if prof.events:
            prof.start_ns = min(e.start_ns for e in prof.events)
            prof.end_ns = max(e.end_ns for e in prof.events)
        return prof

    def accuracy(self, dataset, batch_size=512):
        """Fraction of ``dataset`` ((inputs, labels) samples) the trained model gets right."""
        from ..autodiff import no_grad
        from ..data.loader import DataLoader
        correct = 0
        with no_grad():
            for inputs, labels in DataLoader(dataset, batch_size=batch_size):
                correct += int((self.model(inputs).argmax(dim=1) == labels).sum().item())
        return correct / len(dataset)

    def __repr__(self):
        return (f"<ParameterServerResult: {self.ps.mode}, {len(self.losses)} worker(s), "
                f"server steps {self.steps}, dropped {self.dropped}>")
