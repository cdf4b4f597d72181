"""Common-subexpression elimination: compute each distinct value once.

Two nodes are the same computation when they apply the same op, with the same attributes, to
the same inputs (the same nodes, or literals of the same type and value: ``1``, ``1.0`` and
``True`` differ, and so do ``0.0`` and ``-0.0``); for ``add``, ``mul``, ``maximum``, ``minimum``,
``eq`` and ``ne`` the order of the two inputs does not matter. Equal constants are one constant.
The later node is dropped and its users read the earlier one (*merged* in the history).

Never merged: side effects (two ``assign_add`` s are two updates), placeholders, and two reads of
mutable state (a capture, or a view of it) with a side effect in between: ``p * 2`` before and
after ``p.assign_sub(...)`` are different values.
"""
from ...tensor.ops import elementwise as ew
from ..node import CONSTANT, Node
from .base import (Rewriter, epochs, freeze, graph_pass, has_side_effects, literal_key,
                   mutable_values, reads_mutable)

COMMUTATIVE = frozenset([ew.add, ew.mul, ew.maximum, ew.minimum, ew.eq, ew.ne])
MAX_CONSTANT_BYTES = 1 << 16     # larger constants are not compared


def _constant_key(node):
    value = node.value
    if getattr(value, "nbytes", MAX_CONSTANT_BYTES + 1) > MAX_CONSTANT_BYTES:
        return None
    data = value.get() if hasattr(value, "get") else value
    return ("constant", node.dtype, node.shape, node.device, data.tobytes())


def _op_key(node, canon, mutable, epoch):
    try:
        attrs = freeze(node.attrs)
    except TypeError:           # an attribute that cannot be compared
        return None
    ins = tuple(("node", canon[a.index]) if isinstance(a, Node) else literal_key(a)
                for a in node.inputs)
    if node.op in COMMUTATIVE and len(ins) == 2:
        ins = tuple(sorted(ins, key=repr))
    key = (node.op, attrs, ins, node.dtype, node.shape, node.device)
    if reads_mutable(node, mutable):
        key += (("epoch", epoch),)
    return key


@graph_pass("cse")
def cse(graph, record):
    """Merge nodes that compute the same value into the first of them.

    >>> import labkit as lk
    >>> from labkit.graph import passes
    >>> with lk.Graph() as g:
    ...     x = lk.placeholder((2,), name="x")
    ...     y = x.exp() + x.exp()
    >>> print(passes.cse(g).history[-1])
    cse: 4 -> 3 nodes; merged 1
      merged   exp_1 into exp
    """
    mutable = mutable_values(graph)
    epoch = epochs(graph)
    canon = {}
    seen = {}
    rw = Rewriter(graph)
    for n in graph.nodes:
        key = None
        if n.kind == CONSTANT:
            key = _constant_key(n)
        elif n.kind == "op" and not has_side_effects(n):
            key = _op_key(n, canon, mutable, epoch[n.index])
        kept = seen.get(key) if key is not None else None
        if kept is None:
            rw.copy(n)
            canon[n.index] = n.index
            if key is not None:
                seen[key] = n
        else:
            rw.forward(n, kept)
            canon[n.index] = canon[kept.index]
            record.merged.append((n.name, kept.name))
    return rw.finish()


# doctest does not look inside pass objects
__test__ = {"cse": cse.__doc__}
