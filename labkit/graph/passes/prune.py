"""Pruning: keep only the part of the graph that its outputs need (TensorFlow's "prune to the
fetches"), plus every side effect and every placeholder.

A node survives if an output depends on it, if it has a side effect (a stateful or control-flow
node: a captured training step runs its ``assign`` s whether or not their results are fetched),
or if a side effect depends on it. Placeholders always survive: they are the graph's inputs, and
``lk.function`` feeds them by position.
"""
from ..node import PLACEHOLDER, Node
from .base import Rewriter, graph_pass, has_side_effects, output_nodes


@graph_pass("prune")
def prune(graph, record):
    """Drop every node that no output and no side effect needs.

    >>> import labkit as lk
    >>> from labkit.graph import passes
    >>> with lk.Graph() as g:
    ...     x = lk.placeholder((2,), name="x")
    ...     y = x * 2.0
    ...     unused = x.exp()
    >>> print(passes.prune(g, outputs=[y]).history[-1])
    prune: 3 -> 2 nodes; removed 1
      removed  exp
    """
    keep = set()
    stack = [o.index for o in output_nodes(graph)]
    stack += [n.index for n in graph.nodes if n.kind == PLACEHOLDER or has_side_effects(n)]
    while stack:
        i = stack.pop()
        if i in keep:
            continue
        keep.add(i)
        stack.extend(a.index for a in graph.nodes[i].inputs
                     if isinstance(a, Node) and a.index not in keep)
    rw = Rewriter(graph)
    for n in graph.nodes:
        if n.index in keep:
            rw.copy(n)
        else:
            record.removed.append(n.name)
    return rw.finish()


# doctest does not look inside pass objects
__test__ = {"prune": prune.__doc__}
