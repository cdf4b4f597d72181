"""Dead-code elimination: remove values nobody uses, and ops that do nothing.

Two kinds of dead code:

- *no-ops*, which hand back their input unchanged: ``stop_gradient`` (its work was done when the
  backward pass was built), a ``reshape``/``broadcast_to`` to the shape the input already has, a
  ``cast`` to its own dtype, a ``permute`` that keeps the order (or undoes the permute before it,
  as ``x.T.T`` does), a ``to_device`` to where it already is. Their users read the input instead
  (*forwarded* in the history);
- *unused values*: a node whose value no output, no side effect and no surviving node uses
  (after forwarding, so a chain of them goes at once).

Placeholders, side effects (stateful and control-flow nodes) and the graph's outputs stay.
"""
from ...tensor.dtypes import as_dtype
from ...tensor.ops import elementwise as ew
from ...tensor.ops import shape as sh
from ..node import PLACEHOLDER, Node
from .base import Rewriter, graph_pass, has_side_effects, output_nodes


def _permute_dims(node):
    nd = len(node.shape)
    return tuple(d % nd for d in node.attrs["dims"]) if nd else ()


def noop_source(node, resolve):
    """The node whose value ``node`` merely hands on (already resolved), or None."""
    if node.kind != "op" or not node.inputs or not isinstance(node.inputs[0], Node):
        return None
    src = resolve(node.inputs[0])
    op = node.op
    if op is ew.stop_gradient:
        return src
    same = src.shape is not None and node.shape == src.shape and node.dtype is src.dtype
    if op is sh.reshape or op is sh.broadcast_to:
        if same:
            return src
        if op is sh.reshape:     # reshape of reshapes back to the start
            inner = src
            while inner.kind == "op" and inner.op is sh.reshape and isinstance(inner.inputs[0],
                                                                                 Node):
                inner = resolve(inner.inputs[0])
                if inner.shape == node.shape and inner.dtype is node.dtype:
                    return inner
        return None
    if op is ew.cast:
        return src if as_dtype(node.attrs["dtype"]) is src.dtype else None
    if op is ew.to_device:
        return src if node.device is src.device else None
    if op is sh.permute:
        dims = _permute_dims(node)
        if dims == tuple(range(len(dims))):
            return src
        if src.kind == "op" and src.op is sh.permute and isinstance(src.inputs[0], Node):
            inner = _permute_dims(src)
            if all(inner[d] == i for i, d in enumerate(dims)):
                return resolve(src.inputs[0])
    return None


@graph_pass("dce")
def dce(graph, record):
    """Forward no-ops to their input, then drop every value that nothing needs.

    >>> import labkit as lk
    >>> from labkit.graph import passes
    >>> with lk.Graph() as g:
    ...     x = lk.placeholder((2, 3), name="x")
    ...     y = x.T.T * 2.0
    >>> print(passes.dce(g).history[-1])
    dce: 4 -> 2 nodes; removed 1, forwarded 1
      removed  permute
      forwarded permute_1 to x
    """
    target = {}                     # index -> the earlier node it forwards to

    def resolve(a):
        while a.index in target:
            a = target[a.index]
        return a

    for n in graph.nodes:
        if has_side_effects(n):
            continue
        src = noop_source(n, resolve)
        if src is not None:
            target[n.index] = src
    live = {resolve(o).index for o in output_nodes(graph)}
    live.update(n.index for n in graph.nodes if n.kind == PLACEHOLDER or has_side_effects(n))
    for n in reversed(graph.nodes):
        if n.index in live and n.index not in target:
            live.update(resolve(a).index for a in n.inputs if isinstance(a, Node))
    rw = Rewriter(graph)
    for n in graph.nodes:
        if n.index in target and resolve(n).index in live:
            rw.forward(n, resolve(n))
            record.forwarded.append((n.name, resolve(n).name))
        elif n.index in live and n.index not in target:
            rw.copy(n)
        else:
            record.removed.append(n.name)
    return rw.finish()


# doctest does not look inside pass objects
__test__ = {"dce": dce.__doc__}
