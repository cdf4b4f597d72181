"""Arithmetic rewrites that compute the same value with less work.

One rewrite so far: a scalar factor on a matmul's result moves onto its smaller operand,
``(A @ B) * s  ->  A @ (B * s)``. An optimiser's ``p -= lr * (h.T @ dz)`` then scales the small
``dz`` (batch x out) instead of the weight-sized gradient (in x out), one pass over far fewer
elements. It applies when the factor is a Python number, or a 0-d tensor read from outside the
graph that no node of the graph writes (the learning rate of a captured optimiser step, which a
scheduler changes between runs: reading it earlier in a run reads the same value), the
matmul's only user is that multiply, the matmul's result is not an output, and the operand is
smaller than the result; both are floating-point of one dtype. Of two operands the same size,
the one that is not a transposed view is scaled. The new nodes take the matmul's place in the
order, so no read moves across a side effect (but that of such a 0-d factor, which no side
effect changes). The result differs from the original only by rounding.
"""
import math

from ..node import Node
from ...tensor.ops import elementwise as ew
from ...tensor.ops import linalg, shape
from .base import (Rewriter, graph_pass, output_indices, scalar_factor, unwritten_scalars,
                   users)


def _known(node):
    return isinstance(node, Node) and node.shape is not None and None not in node.shape


def _factor(node, scalars):
    """(tensor node, factor) for ``mul(tensor, number)`` or ``mul(tensor, s)`` with ``s`` one of
    ``scalars`` (either order), else None."""
    found = scalar_factor(node)
    if found is not None or node.kind != "op" or node.op is not ew.mul or node.attrs or \
            len(node.inputs) != 2:
        return found
    x, y = node.inputs
    for t, s in ((x, y), (y, x)):
        if isinstance(t, Node) and isinstance(s, Node) and s.index in scalars and t.shape != ():
            return t, s
    return None


def _scaled_matmuls(graph):
    """{matmul index: (multiply node, factor, operand position)} for every rewrite that
    applies."""
    use = users(graph)
    outputs = output_indices(graph)
    scalars = unwritten_scalars(graph)
    found = {}
    for n in graph.nodes:
        factor = _factor(n, scalars)
        if factor is None:
            continue
        m, s = factor
        if m.kind != "op" or m.op is not linalg.matmul or m.index in outputs or \
                use[m.index] != [n.index] or not _known(m) or not m.dtype.is_floating or \
                n.dtype != m.dtype or n.shape != m.shape:
            continue
        x, y = m.inputs
        if not (_known(x) and _known(y)) or x.dtype != m.dtype or y.dtype != m.dtype:
            continue
        # the smaller operand; of two the same size, not a transposed view (scaling one would
        # write a transposed copy, several times slower than a straight pass); an operand the
        # matmul transposes itself (its flag) is a plain array and scales as one
        pos = min((0, 1), key=lambda i: (math.prod(m.inputs[i].shape),
                                         m.inputs[i].op is shape.permute))
        if math.prod(m.inputs[pos].shape) < math.prod(m.shape):
            found[m.index] = (n, s, pos)
    return found


@graph_pass("arithmetic")
def arithmetic(graph, record):
    """Move a scalar factor on a matmul's result onto its smaller operand.

    >>> import labkit as lk
    >>> from labkit.graph import passes
    >>> with lk.Graph() as g:
    ...     h = lk.placeholder((128, 784), name="h")
    ...     dz = lk.placeholder((128, 256), name="dz")
    ...     step = (h.transpose() @ dz) * 0.01
    >>> opt = passes.arithmetic(g)
    >>> print(opt.history[-1])
    arithmetic: 5 -> 5 nodes; fused 1
      fused    matmul = matmul + mul
    >>> for line in opt.listing().splitlines()[-2:]:
    ...     print(line.split(":")[0].strip())
    %3 = mul(%1, 0.01)
    %4 = matmul(%2, %3)
    """
    found = _scaled_matmuls(graph)
    rw = Rewriter(graph)
    done = {}
    for n in graph.nodes:
        if n.index in found:         # emit mul(operand, s), then the matmul, in n's place
            mul_node, s, pos = found[n.index]
            ins = [rw.arg(a) for a in n.inputs]
            operand = ins[pos]
            if isinstance(s, Node) and s.index not in rw.map:   # a capture: read it here
                rw.copy(s)
            ins[pos] = rw.add("op", ew.mul, (operand, rw.arg(s)), {}, operand.shape,
                              operand.dtype, operand.device, mul_node.name, like=mul_node,
                              exact_name=True)
            new = rw.add("op", linalg.matmul, tuple(ins), n.attrs, n.shape, n.dtype, n.device,
                         n.name, like=n, exact_name=True)
            done[mul_node.index] = new
            record.fused.append((n.name, [n.name, mul_node.name]))
        elif n.index in done:
            rw.map[n.index] = done[n.index]
        elif n.index not in rw.map:
            rw.copy(n)
    return rw.finish()


# doctest does not look inside pass objects
__test__ = {"arithmetic": arithmetic.__doc__}
