"""Whole convolutions and max pools, found in the graph and written as ONNX Conv / MaxPool.

labkit builds ``conv2d`` and ``max_pool2d`` from primitives (unfold, then a matrix product or
an argmax), so a captured graph holds those pieces; the converters of their last op look back
for the whole pattern and, where it is there, write the one ONNX op a runtime has a fast
kernel for. The pieces' own conversions stay correct on their own (``unfold`` as strided
slices) and are dropped from the model when nothing else reads them.
"""
from ...graph.node import Node
from ..registry import CONVERTERS, converter


def _op(a, name, **attrs):
    """``a`` if it is a node of op ``name`` with these attribute values, else None."""
    if not isinstance(a, Node) or a.kind != "op" or a.op.name != name:
        return None
    for k, v in attrs.items():
        if a.attrs.get(k) != v:
            return None
    return a


def _geometry(unfold):
    g = unfold.attrs
    (ph, pw) = g["padding"]
    return dict(kernel_shape=list(g["kernel_size"]), strides=list(g["stride"]),
                pads=[ph, pw, ph, pw], dilations=list(g["dilation"]))


def _conv(node):
    """``permute(reshape(add?(matmul(reshape(W), reshape(permute(unfold(x))))), ...)`` as
    (x, W, bias or None, unfold node, groups), or None."""
    r = _op(node.inputs[0], "reshape")
    if node.attrs.get("dims") != (1, 0, 2, 3) or r is None:
        return None
    top, bias = r.inputs[0], None
    add = _op(top, "add")
    if add is not None:
        b_reshape = _op(add.inputs[1], "reshape")
        if b_reshape is None or len(b_reshape.inputs[0].shape or ()) != 1:
            return None
        bias, top = b_reshape.inputs[0], add.inputs[0]
    groups = 1
    mm = _op(top, "matmul")
    if mm is None:
        grouped = _op(top, "reshape")
        mm = grouped and _op(grouped.inputs[0], "matmul")
        if mm is None or len(mm.shape) != 3:
            return None
        groups = mm.shape[0]
    if mm.attrs.get("transpose_a") or mm.attrs.get("transpose_b"):
        return None
    w_reshape, cols = _op(mm.inputs[0], "reshape"), _op(mm.inputs[1], "reshape")
    if w_reshape is None or cols is None:
        return None
    perm = _op(cols.inputs[0], "permute", dims=(1, 2, 3, 0, 4, 5))
    unfold = perm and _op(perm.inputs[0], "unfold")
    weight = w_reshape.inputs[0]
    if unfold is None or unfold.attrs.get("pad_value", 0.0) != 0.0 or \
            len(weight.shape or ()) != 4:
        return None
    return unfold.inputs[0], weight, bias, unfold, groups


def _write_conv(b, node, x, weight, bias, unfold, groups):
    inputs = [b.value(x), b.value(weight)] + ([b.value(bias)] if bias is not None else [])
    return b.emit("Conv", inputs, group=groups, name=node.name, **_geometry(unfold))


def _max_pool(node):
    """``reshape(gather(flat, argmax(flat, 2), 2))`` with ``flat = reshape(unfold(x, -inf))``
    as (x, unfold node), or None."""
    gather = _op(node.inputs[0], "gather", dim=2)
    if gather is None:
        return None
    flat, where = gather.inputs[0], _op(gather.inputs[1], "argmax", dim=2, keepdim=True)
    if where is None or where.inputs[0] is not flat or _op(flat, "reshape") is None:
        return None
    unfold = _op(flat.inputs[0], "unfold")
    if unfold is None or unfold.attrs.get("pad_value") != float("-inf") or \
            len(node.shape) != 4:
        return None
    return unfold.inputs[0], unfold


def _write_max_pool(b, node, x, unfold):
    return b.emit("MaxPool", [b.value(x)], name=node.name, **_geometry(unfold))


def _pattern(op_name, match, write):
    """Convert ``op_name`` nodes that end a pattern with ``write``, others as before."""
    plain = CONVERTERS[op_name]

    @converter(op_name)
    def convert(b, node, ins):
        found = match(node)
        return plain(b, node, ins) if found is None else write(b, node, *found)
    return convert


_pattern("permute", _conv, _write_conv)
_pattern("reshape", _max_pool, _write_max_pool)
