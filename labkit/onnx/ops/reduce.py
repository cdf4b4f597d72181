"""Reductions, arg-reductions, cumulative sums and the softmax family."""
import numpy as np

from ...tensor.dtypes import int32
from ..registry import converter


def _axes(b, node):
    dim = b.attrs(node).get("dim")
    if dim is None:
        return None
    return [dim] if isinstance(dim, int) else list(dim)


def reduce(b, op_type, x, axes, keepdim, name=None):
    """``op_type`` (ReduceSum, ReduceMax...) of ``x`` over ``axes`` (None: all), written for the
    opset: axes are an input from opset 13 (ReduceSum) or 18 (the others), an attribute before."""
    keep = int(bool(keepdim))
    if axes is None:
        return b.emit(op_type, [x], keepdims=keep, name=name)
    as_input = op_type == "ReduceSum" or b.opset >= 18
    if as_input:
        return b.emit(op_type, [x, b.const(np.asarray(axes, np.int64))], keepdims=keep,
                      name=name)
    return b.emit(op_type, [x], axes=axes, keepdims=keep, name=name)


def _reduction(op_type):
    def convert(b, node, ins):
        (x,) = b.operands(node, node.dtype, node.inputs[:1])
        return reduce(b, op_type, x, _axes(b, node), node.attrs.get("keepdim", False),
                      name=node.name)
    return convert


converter("sum")(_reduction("ReduceSum"))
converter("prod")(_reduction("ReduceProd"))
converter("max")(_reduction("ReduceMax"))
converter("min")(_reduction("ReduceMin"))


@converter("any", "all")
def _any_all(b, node, ins):
    """any / all as the largest / smallest of the truth values, as int32 (ONNX reduces no bools)."""
    x = node.inputs[0]
    truth = ins[0] if x.dtype.name == "bool_" else \
        b.emit("Not", [b.emit("Equal", [ins[0], b.operand(0, x.dtype)])])
    op_type = "ReduceMax" if node.op.name == "any" else "ReduceMin"
    r = reduce(b, op_type, b.cast(truth, int32), _axes(b, node), node.attrs.get("keepdim", False))
    return b.cast(r, node.dtype)


@converter("argmax", "argmin")
def _arg(b, node, ins):
    x = ins[0]
    dim = node.attrs.get("dim")
    keepdim = node.attrs.get("keepdim", False)
    if dim is None:
        x, dim = b.emit("Reshape", [x, b.const(np.asarray([-1], np.int64))]), 0
        if keepdim:
            r = b.emit("ArgMax" if node.op.name == "argmax" else "ArgMin", [x], axis=0,
                       keepdims=0)
            return b.emit("Reshape", [r, b.ints([1] * node.inputs[0].ndim)], name=node.name)
    return b.emit("ArgMax" if node.op.name == "argmax" else "ArgMin", [x], axis=int(dim),
                  keepdims=int(bool(keepdim)), select_last_index=0, name=node.name)


@converter("vector_norm")
def _norm(b, node, ins):
    (x,) = b.operands(node, node.dtype, node.inputs[:1])
    order = node.attrs.get("ord", 2.0)
    axes, keep = _axes(b, node), node.attrs.get("keepdim", False)
    if order == 2:
        return reduce(b, "ReduceL2", x, axes, keep, name=node.name)
    if order == 1:
        return reduce(b, "ReduceL1", x, axes, keep, name=node.name)
    if order == float("inf"):
        return reduce(b, "ReduceMax", b.emit("Abs", [x]), axes, keep, name=node.name)
    p = b.const(np.asarray(order, node.dtype.np))
    total = reduce(b, "ReduceSum", b.emit("Pow", [b.emit("Abs", [x]), p]), axes, keep)
    inv = b.const(np.asarray(1.0 / order, node.dtype.np))
    return b.emit("Pow", [total, inv], name=node.name)


@converter("cumsum")
def _cumsum(b, node, ins):
    (x,) = b.operands(node, node.dtype, node.inputs[:1])
    axis = b.const(np.asarray(int(node.attrs["dim"]), np.int64))
    return b.emit("CumSum", [x, axis], reverse=int(bool(node.attrs.get("reverse", False))),
                  name=node.name)


@converter("softmax", "log_softmax")
def _softmax(b, node, ins):
    (x,) = b.operands(node, node.dtype, node.inputs[:1])
    return b.emit("Softmax" if node.op.name == "softmax" else "LogSoftmax", [x],
                  axis=int(node.attrs.get("dim", -1)), name=node.name)


@converter("reduction_size")
def _reduction_size(b, node, ins):
    """How many elements a reduction over ``dim`` averages (a mean's divisor)."""
    x = node.inputs[0]
    dims = b.dims(x)
    dim = node.attrs.get("dim")
    axes = range(len(dims)) if dim is None else ([dim] if isinstance(dim, int) else dim)
    picked = [dims[a] for a in axes]
    if not any(not isinstance(d, int) for d in picked):
        n = 1
        for d in picked:
            n *= d
        return b.const(np.asarray(n, node.dtype.np), name=node.name)
    shape = b.emit("Shape", [ins[0]])
    sizes = b.emit("Gather", [shape, b.const(np.asarray([a % len(dims) for a in axes],
                                                        np.int64))])
    n = reduce(b, "ReduceProd", sizes, None, False)
    return b.cast(n, node.dtype)
