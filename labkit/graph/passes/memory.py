"""Buffer reuse (memory planning): let ops write their results into buffers whose last use has
passed, instead of allocating new arrays on every run.

The pass decides, for the graph's outputs, which node writes into which *buffer*; the executor
then allocates those buffers once per concurrently running plan (a workspace, kept between runs)
and calls the kernels with ``out=``. In steady state a run allocates only what it hands out (its
outputs) and what the kernels that cannot write into a given buffer make.

Which values may live in a reused buffer, and for how long:

- only results of kernels that can write into a given array (elementwise ufunc ops, ``relu``,
  ``matmul``, ``sum``/``max``/``min``, fused nodes), with a known, non-empty shape;
- never a value that may share memory with a capture, a placeholder (the caller's array), a
  constant, an output (it is handed to the caller), a side effect's argument (a queue may keep
  it) or a control-flow node: views count, since a ``reshape``/``permute``/``getitem`` of a value
  may be the same memory. Values that may share memory form one *alias class*;
- a buffer is free again after the last use of any value of its class.

A single-ufunc op may write over its own input when that input dies there (``x = x * 2 + 1``
runs in one buffer). The buffer plan is recorded on the graph (``graph.buffer_plan``) and in the
history (*reused*: which node writes into the buffer that which earlier node had).
"""
from ...tensor.ops import elementwise as ew
from ..node import CAPTURE, CONSTANT, PLACEHOLDER, Node, writes_into
from .base import (ASSIGN_OPS, Rewriter, alias_classes, graph_pass, has_side_effects,
                   output_nodes)

# single ufuncs: reading an input and writing the result over it, element by element, is safe
INPLACE_OPS = frozenset([
    ew.add, ew.sub, ew.mul, ew.div, ew.pow, ew.maximum, ew.minimum, ew.neg, ew.exp, ew.log,
    ew.sqrt, ew.abs, ew.tanh, ew.relu,
])


class BufferPlan:
    """Which buffer each planned node of a graph writes into, for one set of outputs.

    ``slot_of``: {node index: buffer number}; ``buffers``: [(shape, dtype, device)] for each
    buffer; ``outputs``: the output node indices the plan was made for (the executor uses it
    only for exactly those fetches).

    >>> import labkit as lk
    >>> from labkit.graph import passes
    >>> with lk.Graph() as g:
    ...     x = lk.placeholder((8, 8), name="x")
    ...     y = ((x + 1.0).exp() * 2.0).sum()
    >>> passes.memory(g).buffer_plan
    <BufferPlan: 3 values in 1 buffers, 256 bytes>
    """

    __slots__ = ("outputs", "slot_of", "buffers")

    def __init__(self, outputs, slot_of, buffers):
        self.outputs = tuple(outputs)
        self.slot_of = dict(slot_of)
        self.buffers = list(buffers)

    def matches(self, fetch_indices):
        return tuple(fetch_indices) == self.outputs

    def nbytes(self):
        """Bytes held by one workspace (one set of buffers)."""
        total = 0
        for shape, dtype, _ in self.buffers:
            size = 1
            for s in shape:
                size *= s
            total += size * dtype.np.itemsize
        return total

    def __repr__(self):
        return (f"<BufferPlan: {len(self.slot_of)} values in {len(self.buffers)} buffers, "
                f"{self.nbytes()} bytes>")


def _classes(graph, outputs):
    """The alias classes' ``find``, and the set of pinned class representatives."""
    find = alias_classes(graph)
    pinned = set()
    for n in graph.nodes:
        if n.kind in (PLACEHOLDER, CAPTURE, CONSTANT) or has_side_effects(n):
            pinned.add(find(n.index))
            if has_side_effects(n) and n.op not in ASSIGN_OPS:   # a queue may keep its inputs
                pinned.update(find(a.index) for a in n.inputs if isinstance(a, Node))
    pinned.update(find(o.index) for o in outputs)
    return find, pinned


def plan_buffers(graph, outputs=None):
    """(BufferPlan, [(node name, name of the node whose buffer it takes)]) for ``graph`` and
    ``outputs`` (default: the graph's), without changing the graph."""
    outputs = output_nodes(graph) if outputs is None else list(outputs)
    find, pinned = _classes(graph, outputs)
    last = {}
    for n in graph.nodes:
        c = find(n.index)
        last[c] = max(last.get(c, -1), n.index)
        for a in n.inputs:
            if isinstance(a, Node):
                ca = find(a.index)
                last[ca] = max(last.get(ca, -1), n.index)
    free_at = {}
    for c, p in last.items():
        free_at.setdefault(p, []).append(c)
    slot_of, buffers, holder = {}, [], []
    held = {}           # class -> [buffer numbers]
    free = {}           # (shape, dtype, device) -> [buffer numbers]
    reused = []

    def release(c):
        for s in held.pop(c, ()):
            free.setdefault(buffers[s], []).append(s)

    for n in graph.nodes:
        i = n.index
        c = find(i)
        if c not in pinned and writes_into(n) and n.shape:
            key = (n.shape, n.dtype, n.device)
            slot = None
            if n.op in INPLACE_OPS:
                slot = _inplace_slot(n, key, find, last, held, slot_of, buffers)
            if slot is None and free.get(key):
                slot = free[key].pop()
            if slot is None:
                slot = len(buffers)
                buffers.append(key)
                holder.append(None)
            else:
                reused.append((n.name, holder[slot]))
            slot_of[i] = slot
            holder[slot] = n.name
            held.setdefault(c, []).append(slot)
        for dead in free_at.get(i, ()):
            release(dead)
    outs = [o.index for o in outputs]
    return BufferPlan(outs, slot_of, buffers), reused


def _inplace_slot(n, key, find, last, held, slot_of, buffers):
    """A buffer of an input of ``n`` that dies at ``n`` and that ``n`` may overwrite."""
    node_ins = [a for a in n.inputs if isinstance(a, Node)]
    for a in node_ins:
        s = slot_of.get(a.index)
        if s is None or buffers[s] != key:
            continue
        c = find(a.index)
        if last.get(c) != n.index or any(find(b.index) == c for b in node_ins if b is not a):
            continue
        slots = held.get(c, [])
        if s in slots:
            slots.remove(s)
            return s
    return None


@graph_pass("memory")
def memory(graph, record):
    """Plan which results reuse dead buffers; the executor writes them there with ``out=``.

    >>> import labkit as lk
    >>> from labkit.graph import passes
    >>> with lk.Graph() as g:
    ...     x = lk.placeholder((64, 64), name="x")
    ...     y = ((x * 2.0).exp() + 1.0).sum()
    >>> print(passes.memory(g).history[-1])
    memory: 5 -> 5 nodes; reused 2
      reused   exp writes into the buffer of mul
      reused   add writes into the buffer of exp
      note     3 value(s) in 1 buffer(s), 16384 bytes in all
    """
    rw = Rewriter(graph)
    new = rw.copy_all()
    plan, reused = plan_buffers(new)
    new.buffer_plan = plan
    record.reused.extend(reused)
    record.notes.append(f"{len(plan.slot_of)} value(s) in {len(plan.buffers)} buffer(s), "
                        f"{plan.nbytes()} bytes in all")
    return new


# doctest does not look inside pass objects
__test__ = {"memory": memory.__doc__}
