"""Constant folding: compute, once and before running, every value that depends only on
constants.

A node folds when it is an op (not stateful, not control flow) whose inputs are all constant
nodes or literals: its kernel runs now, on its device, and a constant node of the same name
takes its place. Constants left without users go too. Captures are never constants: they read an
outside tensor by reference each run (a parameter an optimiser updates), so nothing computed from
them folds. A result larger than ``MAX_FOLDED_BYTES`` that is larger than its inputs stays a
computation (folding ``broadcast_to`` of a scalar to a big shape would only cost memory).

An op whose value is not a function of its inputs (random numbers) must be declared
``stateful=True`` so that it is never folded.
"""
import numpy as np

from ..node import CONSTANT, Node
from .base import Rewriter, graph_pass, has_side_effects, output_indices

MAX_FOLDED_BYTES = 1 << 20


def _fold(node, values):
    xp = node.device.xp
    args = [values[a.index] if isinstance(a, Node) else a for a in node.inputs]
    with np.errstate(all="ignore"):
        out = node.op.kernel(xp, *args, **node.attrs)
    out = xp.asarray(out)
    if out.dtype != node.dtype.np:
        out = out.astype(node.dtype.np)
    if tuple(out.shape) != node.shape:
        raise ValueError(f"kernel gave shape {tuple(out.shape)}, the rule {node.shape}")
    return out


@graph_pass("constant_folding")
def constant_folding(graph, record):
    """Replace every computation on constants alone by its value.

    >>> import numpy as np
    >>> import labkit as lk
    >>> from labkit.graph import passes
    >>> from labkit.graph.ir import CONSTANT
    >>> with lk.Graph() as g:
    ...     x = lk.placeholder((2,), name="x")
    ...     c = g.add_node(CONSTANT, None, (), {}, (2,), lk.float32, x.device, name="c")
    ...     c.value = np.array([1.0, 2.0], np.float32)
    ...     y = x * lk.SymbolicTensor._of(c).exp()
    >>> print(passes.constant_folding(g).history[-1])
    constant_folding: 4 -> 3 nodes; removed 1, folded 1
      removed  c
      folded   exp
    """
    values = {}
    folded = set()
    for n in graph.nodes:
        if n.kind == CONSTANT:
            values[n.index] = n.value
            continue
        if n.kind != "op" or has_side_effects(n) or n.shape is None or None in n.shape:
            continue
        ins = [a for a in n.inputs if isinstance(a, Node)]
        if not all(a.index in values for a in ins):
            continue
        biggest = max((getattr(values[a.index], "nbytes", 0) for a in ins), default=0)
        size = int(np.prod(n.shape)) * n.dtype.np.itemsize
        if size > MAX_FOLDED_BYTES and size > biggest:
            record.notes.append(f"{n.name} not folded: its value ({size} bytes) would be larger "
                                f"than its inputs and than {MAX_FOLDED_BYTES} bytes")
            continue
        try:
            values[n.index] = _fold(n, values)
        except Exception as exc:     # left to fail (or not) at run time, as without the pass
            record.notes.append(f"{n.name} not folded: {type(exc).__name__}: {exc}")
            continue
        folded.add(n.index)
    outputs = output_indices(graph)
    needed = set(outputs)
    for n in graph.nodes:
        if n.index not in values:
            needed.update(a.index for a in n.inputs if isinstance(a, Node))
    rw = Rewriter(graph)
    for n in graph.nodes:
        if n.index not in values:
            rw.copy(n)
        elif n.index not in needed:
            (record.folded if n.index in folded else record.removed).append(n.name)
        elif n.index in folded:
            c = rw.add(CONSTANT, None, (), {}, n.shape, n.dtype, n.device, n.name, like=n,
                       exact_name=True)
            c.value = values[n.index]
            rw.map[n.index] = c
            record.folded.append(n.name)
        else:
            rw.copy(n)
    return rw.finish()


# doctest does not look inside pass objects
__test__ = {"constant_folding": constant_folding.__doc__}
