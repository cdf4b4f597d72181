"""An in-place update by a matrix product becomes one op that accumulates the product.

``w -= (a @ b) * s`` (and ``w += ...``; the factor on the product, on either operand, or
none) becomes ``assign_add_matmul(w, a, b, alpha=-s)``: on the CPU one BLAS GEMM that adds
into ``w`` (``beta=1``) instead of a product, a pass scaling it and a pass over ``w``. It is
what SGD's weight update in a captured training step turns into. The matmul's transpose flags
(a weight gradient is ``matmul(h, dz, transpose_a=True)``) carry over to the new op.

It applies when the product is a 2-D matmul of floating-point values of the target's dtype and
shape, whose only user is the update (and a factor's multiply's only user is the product); the
factor is a Python number, and at most one factor may be a 0-d tensor (the learning rate of a
captured optimiser step, which a scheduler changes between runs): it becomes the new op's
``scale`` input. The new op runs where the update stood, so it reads the operands
later than the matmul did: when a side effect lies in between, it applies only if neither
operand may share memory with state (``base.mutable_values``). The result differs from the
original only by rounding.
"""
from ..node import Node
from ...tensor.ops import elementwise as ew
from ...tensor.ops import linalg, state
from .base import (Rewriter, epochs, graph_pass, mutable_values, output_indices, scalar_factor,
                   unwritten_scalars, users)

_SIGN = {state.assign_add: 1.0, state.assign_sub: -1.0}


class _Facts:
    def __init__(self, graph):
        self.use = users(graph)
        self.outputs = output_indices(graph)
        self.epoch = epochs(graph)
        self.mutable = mutable_values(graph)
        self.unwritten = unwritten_scalars(graph)

    def only_feeds(self, node, user):
        """``node`` is an op result read by ``user`` alone and not fetched."""
        return isinstance(node, Node) and node.kind == "op" and \
            self.use[node.index] == [user.index] and node.index not in self.outputs


def _factor(node, scales):
    """``(x, number)`` when ``node`` is ``x`` times a Python number; ``(x, 1.0)`` when it is
    ``x`` times a 0-d floating-point tensor (a learning rate read when the graph runs), which
    then goes into ``scales`` with the multiply, if none is there yet; else None."""
    scaled = scalar_factor(node)
    if scaled is not None or scales or node.kind != "op" or node.op is not ew.mul or \
            node.attrs or len(node.inputs) != 2:
        return scaled
    x, y = node.inputs
    for t, s in ((x, y), (y, x)):
        if isinstance(t, Node) and isinstance(s, Node) and s.shape == () and t.shape != () \
                and s.dtype.is_floating:
            scales.append((s, node))
            return t, 1.0
    return None


def _match(update, facts):
    """(a, b, alpha, [nodes folded in], the matmul's transpose flags, [0-d scale]) when
    ``update`` can become assign_add_matmul, else None."""
    if update.kind != "op" or update.op not in _SIGN or update.attrs:
        return None
    target, value = update.inputs
    if not isinstance(target, Node) or not facts.only_feeds(value, update):
        return None
    alpha, folded, scales = _SIGN[update.op], [], []
    scaled = _factor(value, scales)
    if scaled is not None and facts.only_feeds(scaled[0], value):
        folded.append(value)
        value, factor = scaled
        alpha *= factor
    else:
        scales.clear()
    if value.op is not linalg.matmul:
        return None
    folded.append(value)
    operands = []
    for operand in value.inputs:
        found = list(scales)
        scaled = _factor(operand, found) if isinstance(operand, Node) else None
        if scaled is not None and facts.only_feeds(operand, value):
            folded.append(operand)
            operand, factor = scaled
            alpha *= factor
            scales = found
        operands.append(operand)
    a, b = operands
    dtype = target.dtype
    for x in (a, b):
        if not isinstance(x, Node) or x.shape is None or len(x.shape) != 2 or None in x.shape \
                or x.dtype != dtype:
            return None
    if not dtype.is_floating or value.shape != target.shape or \
            any(n.dtype != dtype for n in folded):
        return None
    if any(facts.epoch[n.index] != facts.epoch[update.index] for n in folded) and \
            (a.index in facts.mutable or b.index in facts.mutable):
        return None
    # the scale is read where the update stands, not where its multiply stood
    if any(s.index in facts.mutable and s.index not in facts.unwritten and
           facts.epoch[user.index] != facts.epoch[update.index] for s, user in scales):
        return None
    return a, b, float(alpha), folded, dict(value.attrs), [s for s, _ in scales]


@graph_pass("matmul_update")
def matmul_update(graph, record):
    """Turn ``w -= (a @ b) * s`` into one ``assign_add_matmul(w, a, b, alpha=-s)``.

    >>> import labkit as lk
    >>> from labkit.graph import passes
    >>> w = lk.zeros((784, 256))
    >>> with lk.Graph() as g:
    ...     h = lk.placeholder((128, 784), name="h")
    ...     dz = lk.placeholder((128, 256), name="dz")
    ...     step = w.assign_sub(h.transpose() @ (dz * 0.01))
    >>> opt = passes.matmul_update(g)
    >>> print(opt.history[-1])
    matmul_update: 7 -> 5 nodes; fused 1
      fused    assign_sub = assign_sub + matmul + mul
    >>> print(opt.listing().splitlines()[-1].split(":")[0].strip())
    %4 = assign_add_matmul(%3, %2, %1, alpha=-0.01)
    """
    facts = _Facts(graph)
    found = {}
    for n in graph.nodes:
        m = _match(n, facts)
        if m is not None:
            found[n.index] = m
    dropped = {f.index for m in found.values() for f in m[3]}
    rw = Rewriter(graph)
    for n in graph.nodes:
        if n.index in dropped:
            continue
        if n.index not in found:
            rw.copy(n)
            continue
        a, b, alpha, folded, flags, scales = found[n.index]
        inputs = (rw.arg(n.inputs[0]), rw.arg(a), rw.arg(b)) + tuple(rw.arg(s) for s in scales)
        rw.map[n.index] = rw.add("op", state.assign_add_matmul, inputs,
                                 dict(flags, alpha=alpha), n.shape, n.dtype, n.device, n.name,
                                 like=n, exact_name=True)
        record.fused.append((n.name, [n.name] + [f.name for f in folded]))
    return rw.finish()


# doctest does not look inside pass objects
__test__ = {"matmul_update": matmul_update.__doc__}
