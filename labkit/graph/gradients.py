"""``lk.gradients(ys, xs)``: add the backward graph to a graph (``tf.gradients`` style).

It is the same engine and the same vjp rules as eager autodiff, run under capture: each vjp op
becomes a node (marked ``backward``), so graph-mode gradients are a graph transform, not a
second set of rules. Any tensor of the graph can be differentiated against.
"""
from ..autodiff.engine import run_backward
from ..errors import GradError
from ..tensor.creation import ones
from ..tensor.tensor import Tensor
from .capture import current_graph, enter_graph
from .symbolic import SymbolicTensor


def gradients(ys, xs, grad_ys=None):
    """Symbolic d(sum of ys)/d(x) for each x in ``xs``, as tensors of the same graph.

    >>> import labkit as lk
    >>> with lk.Graph() as g:
    ...     x = lk.placeholder((), lk.float32, name="x")
    ...     (dx,) = lk.gradients(x * x * x, [x])
    >>> g.run(dx, {x: 2.0}).item()
    12.0
    """
    ys = [ys] if isinstance(ys, Tensor) else list(ys)
    xs = [xs] if isinstance(xs, Tensor) else list(xs)
    graph = next((t.graph for t in ys if isinstance(t, SymbolicTensor)), None)
    if graph is None:
        raise GradError("lk.gradients works on tensors of a graph; for eager tensors use "
                        "lk.grad or .backward()")
    for t in ys + xs:
        if isinstance(t, SymbolicTensor) and t.graph is not graph:
            raise GradError(f"lk.gradients: {t!r} belongs to graph {t.graph.name!r}, not to "
                            f"{graph.name!r}")
    if grad_ys is None:
        grad_ys = [None] * len(ys)
    elif isinstance(grad_ys, Tensor):
        grad_ys = [grad_ys]
    ctx = enter_graph(graph) if current_graph() is not graph else None
    if ctx is not None:
        ctx.__enter__()
    try:
        cots = [g if g is not None else ones(y.shape, dtype=y.dtype, device=y.device)
                for y, g in zip(ys, grad_ys)]
        roots = [(y, c) for y, c in zip(ys, cots)
                 if y._node is not None or any(y is x for x in xs)]
        results = run_backward([r for r, _ in roots], [c for _, c in roots], xs,
                               retain_graph=True, create_graph=True, accumulate=False,
                               follow_all=True)
        from ..tensor.ops.index import zeros_like
        return [r if r is not None else zeros_like(x) for r, x in zip(results, xs)]
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)
