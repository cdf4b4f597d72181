"""Partition: a Send/Recv pair on every edge that crosses devices.

After placement, a node may read a value that lives on another device. Partitioning puts a
``send`` on the value's device, as early as it can (just after the value is made; for a value
that may change, such as a variable, after the last side effect before the read), and a
``recv`` on the reader's device just before the reader, which then reads the ``recv``. One pair
serves every reader of a value on one device; a value that may change between reads (a
variable read before and after an assign) gets a pair per state it is read in. A ``t.to(d)``
whose input is on another device *is* such an edge: the pair replaces it (*forwarded* in the
history).

The executor then runs each device's nodes, in their order, on that device's worker thread;
``send`` and ``recv`` meet in a rendezvous keyed by the pair's name and the run's step
(``labkit.graph.rendezvous``). A ``send`` of a value that may still change on its device (a
variable, a value held in a buffer the executor reuses) sends a snapshot (``copy=True``).

Stateful nodes keep their order: the graph keeps its nodes in their original order, the pairs
are inserted among them, and each device runs its own nodes in that order. A recv waits only
for a send placed earlier in that order, so the parts cannot wait for each other in a circle.

>>> import labkit as lk
>>> from labkit.graph import passes
>>> lk.devices.configure(cpus=2)
>>> with lk.Graph() as g:
...     x = lk.placeholder((2, 2), name="x")
...     with lk.device("cpu:1"):
...         y = x @ x
>>> part = passes.partition(passes.placement(g))
>>> [(n.name, n.device.name) for n in part.nodes]
[('x', 'cpu:0'), ('send_x', 'cpu:0'), ('recv_x', 'cpu:1'), ('matmul', 'cpu:1')]
>>> part.node("recv_x").attrs
{'name': 'send_x', 'src': 'cpu:0', 'dst': 'cpu:1'}
>>> lk.devices.configure(cpus=1)
"""
from ..node import Node
from ..rendezvous import recv, send
from .base import (Rewriter, alias_classes, epochs, graph_pass, has_side_effects,
                   mutable_values)
from .memory import BufferPlan


def _is_to_device(node):
    return node.kind == "op" and node.op.name == "to_device" and node.op.out_device is not None


def partition_graph(graph):
    """``(new graph, {old node index: new node}, pairs, forwarded)``: ``pairs`` lists
    ``(send name, value name, source device, destination device, copy)``, ``forwarded`` the
    ``(to_device name, recv name)`` that a pair replaced.

    The mapping sends a forwarded ``to_device`` to the ``recv`` that replaced it. The graph's
    buffer plan, if any, is carried over to the new node numbers.
    """
    find = alias_classes(graph)
    mutable = mutable_values(graph, find)
    epoch = epochs(graph)
    bp = graph.buffer_plan
    pooled = {find(i) for i in bp.slot_of} if bp is not None else set()

    # where each send goes: right after its value is made (a value that cannot change), or
    # after the last side effect before its first reader (a value that can)
    last_effect, effect = [], -1
    for n in graph.nodes:
        last_effect.append(effect)
        if has_side_effects(n):
            effect = n.index
    sends_after = {}        # old index -> [(key, value node)] to send after that node
    first_reader = {}       # key -> old index of the first reader
    for n in graph.nodes:
        for a in n.inputs:
            if isinstance(a, Node) and n.device is not None and a.device.name != n.device.name:
                key = (a.index, n.device.name, epoch[n.index] if a.index in mutable else None)
                if key not in first_reader:
                    first_reader[key] = n.index
                    at = max(a.index, last_effect[n.index]) if a.index in mutable else a.index
                    sends_after.setdefault(at, []).append((key, a, n.device))

    rw = Rewriter(graph)
    sent = {}           # key -> new send node
    made = {}           # key -> new recv node
    pairs = []
    forwarded = []
    for n in graph.nodes:
        dst = n.device
        inputs = []
        for a in n.inputs:
            if not isinstance(a, Node) or dst is None or a.device.name == dst.name:
                inputs.append(rw.arg(a) if isinstance(a, Node) else a)
                continue
            key = (a.index, dst.name, epoch[n.index] if a.index in mutable else None)
            r = made.get(key)
            if r is None:
                r = made[key] = _recv(rw, sent[key], a, n)
            inputs.append(r)
        if _is_to_device(n) and isinstance(n.inputs[0], Node) and \
                n.inputs[0].device.name != dst.name:
            rw.map[n.index] = inputs[0]          # the pair is the transfer
            forwarded.append((n.name, inputs[0].name))
        else:
            rw.copy(n, inputs)
        for key, value, to in sends_after.get(n.index, ()):
            copy = value.index in mutable or find(value.index) in pooled
            s = sent[key] = _send(rw, value, to, copy)
            pairs.append((s.name, value.name, value.device.name, to.name, copy))
    new = rw.finish()
    new.partitioned = True
    if bp is not None:
        slot_of = {rw.map[i].index: s for i, s in bp.slot_of.items() if i in rw.map}
        new.buffer_plan = BufferPlan([rw.map[i].index for i in bp.outputs], slot_of,
                                     bp.buffers)
    return new, dict((i, node) for i, node in rw.map.items()), pairs, forwarded


def _send(rw, value, dst, copy):
    """Append a send of ``value`` (on its device) to ``dst`` to the new graph."""
    src = value.device
    s = rw.add("op", send, (rw.arg(value),), {}, value.shape, value.dtype, src,
               f"send_{value.name}", like=value)
    s.attrs = {"name": s.name, "src": src.name, "dst": dst.name, "copy": copy}
    s.requested_device = None
    s.placement_reason = f"partition: sends {value.name} to {dst.name}"
    return s


def _recv(rw, s, value, reader):
    """Append the recv (on ``reader`` 's device) that takes what send ``s`` sent."""
    a = s.attrs
    r = rw.add("op", recv, (s,), {"name": a["name"], "src": a["src"], "dst": a["dst"]},
               value.shape, value.dtype, reader.device, f"recv_{value.name}", like=reader)
    r.requested_device = None
    r.placement_reason = f"partition: receives {value.name} from {a['src']}"
    return r


@graph_pass("partition")
def partition(graph, record):
    """Insert a Send/Recv pair on every edge between nodes on different devices.

    >>> import labkit as lk
    >>> from labkit.graph import passes
    >>> lk.devices.configure(cpus=2)
    >>> with lk.Graph() as g:
    ...     x = lk.placeholder((3,), name="x")
    ...     y = (x * 2.0).to("cpu:1").exp()
    >>> print(passes.partition(g).history[-1])
    partition: 4 -> 5 nodes; forwarded 1, added 1
      forwarded to_device to recv_mul
      note     1 send/recv pair(s)
      note     send_mul: mul cpu:0 -> cpu:1
    >>> lk.devices.configure(cpus=1)
    """
    new, _, pairs, forwarded = partition_graph(graph)
    record.forwarded.extend(forwarded)
    record.notes.append(f"{len(pairs)} send/recv pair(s)")
    for name, value, src, dst, copy in pairs:
        record.notes.append(f"{name}: {value} {src} -> {dst}{' (a snapshot)' if copy else ''}")
    return new


# doctest does not look inside pass objects
__test__ = {"partition": partition.__doc__}
