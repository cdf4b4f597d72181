"""The autodiff tape of an eager tensor, as a graph the drawing code accepts.

An eager computation that needs gradients leaves a tape behind: each result holds the
``TapeNode`` of the op that made it, and that node holds the op's input tensors. ``tape_graph``
walks it back from one tensor (iteratively: a tape may be far deeper than Python's recursion
limit) and returns a ``TapeGraph``, whose nodes have the same attributes as the nodes of a
captured ``lk.Graph`` (``name``, ``kind``, ``op_name``, ``inputs``, ``shape``, ``dtype``,
``device``, ``scope``, ``role``), in topological order.

Leaves that require a gradient (parameters) become ``capture`` nodes, drawn as state; other
leaves (data) become ``constant`` nodes. ``backward()`` frees the tape unless it is called with
``retain_graph=True``: draw before it, or retain it.

>>> import labkit as lk
>>> w = lk.tensor([1.0, 2.0], requires_grad=True)
>>> g = tape_graph((w * 3.0).sum())
>>> [n.op_name for n in g.nodes]
['capture', 'mul', 'sum']
"""
from ..errors import LabkitError
from ..graph.node import Node
from ..tensor.tensor import Tensor


class TapeGraphNode(Node):
    """One value of a recorded computation: a leaf tensor or the output of one tape entry. A
    graph ``Node`` (belonging to no graph) that also knows whether ``backward()`` freed it."""

    __slots__ = ("freed",)

    def __init__(self, kind, op, shape, dtype, device):
        # kind: "op", "capture" (leaf needing grad) or "constant"
        super().__init__(None, "", kind, op, (), {}, shape, dtype, device)
        self.freed = False          # backward() dropped this entry's inputs

    def __repr__(self):
        return f"<TapeGraphNode {self.ref()} {self.name}: {self.op_name}>"


class TapeGraph:
    """The tape behind one tensor, with ``nodes`` in topological order (inputs first)."""

    def __init__(self, name, nodes):
        self.name = name
        self.nodes = nodes

    def __len__(self):
        return len(self.nodes)

    def __repr__(self):
        return f"<TapeGraph {self.name!r}: {len(self.nodes)} nodes>"


def tape_graph(tensor, name="tape"):
    """The recorded computation that produced ``tensor``, as a ``TapeGraph``.

    Raises LabkitError when ``tensor`` has no tape (computed without gradients, or a leaf).
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"tape_graph needs a Tensor, got {type(tensor).__name__}")
    if tensor._node is None:
        raise LabkitError(
            "this tensor has no autodiff tape to draw: it is a leaf or was computed without "
            "gradients. Make an input require gradients (lk.tensor(..., requires_grad=True)) so "
            "the eager computation records its tape, or draw a captured graph: "
            "lk.viz.graph(fn, *example_args).")
    made = {}       # id(TapeNode) or id(leaf Tensor) -> TapeGraphNode
    keep = []       # the tape objects behind ``made``'s keys, alive while we walk

    def node_for(t):
        key = id(t._node) if t._node is not None else id(t)
        n = made.get(key)
        if n is None:
            tape = t._node
            if tape is None:
                n = TapeGraphNode("capture" if t._requires_grad else "constant", None,
                                  tuple(t.shape), t.dtype, t._device)
                n.value = t
            else:
                n = TapeGraphNode("op", tape.op, tuple(t.shape), t.dtype, tape.device)
                n.attrs = dict(tape.attrs or {})
                n.freed = tape.freed
            made[key] = n
            keep.append(tape if tape is not None else t)
        return n, t._node

    root, root_tape = node_for(tensor)
    order = []
    done = set()
    stack = [(root, root_tape, False)]
    while stack:                            # iterative post-order: inputs before users
        node, tape, expanded = stack.pop()
        if id(node) in done:
            continue
        if expanded or tape is None or tape.inputs is None:
            done.add(id(node))
            order.append(node)
            continue
        stack.append((node, tape, True))
        inputs, todo = [], []
        for a in tape.inputs:
            if isinstance(a, Tensor):
                child, child_tape = node_for(a)
                inputs.append(child)
                if id(child) not in done:
                    todo.append((child, child_tape, False))
            else:
                inputs.append(a)
        node.inputs = tuple(inputs)
        stack.extend(reversed(todo))        # first input first: a left-to-right order
    counts = {}
    for i, n in enumerate(order):
        n.index = i
        base = n.op_name if n.kind == "op" else ("leaf" if n.kind == "capture" else "tensor")
        k = counts.get(base, 0)
        counts[base] = k + 1
        n.name = base if k == 0 else f"{base}_{k}"
    return TapeGraph(name, order)
