"""Convolutions and max pools written as ONNX Conv / MaxPool.

``conv2d`` is one op, written as Conv; a bias added after it (``add(conv2d(x, W), bias
reshaped to (O, 1, 1))``) is folded into that Conv. ``max_pool2d`` with ``return_indices`` is
built from unfold, argmax and gather, so a captured graph holds those pieces; the converter of
its last op looks back for the whole pattern and, where it is there, writes the one ONNX op a
runtime has a fast kernel for. The pieces' own conversions stay correct on
their own (``unfold`` as strided slices) and are dropped from the model when nothing else reads
them. ``max_pool2d`` without indices is one op, ``max_pool``, written as MaxPool directly.
"""
from ...graph.node import Node
from ..dims import OnnxExportError
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


def _conv_attrs(node):
    a = node.attrs
    (ph, pw) = a["padding"]
    return dict(kernel_shape=list(node.inputs[1].shape[2:]), strides=list(a["stride"]),
                pads=[ph, pw, ph, pw], dilations=list(a["dilation"]), group=a["groups"])


@converter("conv2d")
def _conv2d(b, node, ins):
    return b.emit("Conv", [b.value(node.inputs[0]), b.value(node.inputs[1])], name=node.name,
                  **_conv_attrs(node))


def _conv_bias(node):
    """``add(conv2d(x, W), reshape(bias, (O, 1, 1)))`` as (conv node, bias), or None."""
    conv, r = _op(node.inputs[0], "conv2d"), _op(node.inputs[1], "reshape")
    if conv is None or r is None or len(r.inputs[0].shape or ()) != 1 or \
            tuple(r.shape) != (conv.shape[1], 1, 1):
        return None
    return conv, r.inputs[0]


def _write_conv_bias(b, node, conv, bias):
    inputs = [b.value(conv.inputs[0]), b.value(conv.inputs[1]), b.value(bias)]
    return b.emit("Conv", inputs, name=node.name, **_conv_attrs(conv))


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


@converter("max_pool")
def _max_pool_op(b, node, ins):
    if len(node.shape) != 4:
        raise OnnxExportError(f"lk.onnx.export: max_pool node '{node.name}' pools a "
                              f"{len(node.shape)}-d tensor; ONNX's MaxPool takes (N, C, H, W)")
    a = node.attrs
    ((top, bottom), (left, right)) = a["padding"]
    return b.emit("MaxPool", [b.value(node.inputs[0])], name=node.name,
                  kernel_shape=list(a["kernel_size"]), strides=list(a["stride"]),
                  pads=[top, left, bottom, right], dilations=list(a["dilation"]))


def _pattern(op_name, match, write):
    """Convert ``op_name`` nodes that end a pattern with ``write``, others as before."""
    plain = CONVERTERS[op_name]

    @converter(op_name)
    def convert(b, node, ins):
        found = match(node)
        return plain(b, node, ins) if found is None else write(b, node, *found)
    return convert


_pattern("add", _conv_bias, _write_conv_bias)
_pattern("reshape", _max_pool, _write_max_pool)
