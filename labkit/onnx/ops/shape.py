"""Shape ops: reshape, transpose, broadcast, concatenate, pad, triangles, and unfold (im2col)."""
import numpy as np

from ..registry import converter


@converter("reshape")
def _reshape(b, node, ins):
    return b.emit("Reshape", [ins[0], b.reshape_target(node)], name=node.name)


@converter("permute")
def _permute(b, node, ins):
    nd = len(node.shape)
    return b.emit("Transpose", [ins[0]], perm=[int(d) % nd for d in node.attrs["dims"]],
                  name=node.name)


@converter("expand_dims")
def _expand_dims(b, node, ins):
    axes = node.attrs["axes"]
    axes = [axes] if isinstance(axes, int) else list(axes)
    return b.emit("Unsqueeze", [ins[0], b.const(np.asarray(axes, np.int64))], name=node.name)


@converter("broadcast_to")
def _broadcast_to(b, node, ins):
    return b.emit("Expand", [ins[0], b.shape_of(node)], name=node.name)


@converter("broadcast_like")
def _broadcast_like(b, node, ins):
    return b.emit("Expand", [ins[0], b.emit("Shape", [ins[1]])], name=node.name)


@converter("concat")
def _concat(b, node, ins):
    parts = b.operands(node, node.dtype)
    return b.emit("Concat", parts, axis=int(node.attrs.get("dim", 0)), name=node.name)


@converter("pad")
def _pad(b, node, ins):
    widths = b.attrs(node)["widths"]
    (x,) = b.operands(node, node.dtype, node.inputs[:1])
    pads = b.ints([w[0] for w in widths] + [w[1] for w in widths], name="pads")
    value = b.const(np.asarray(node.attrs.get("value", 0), node.dtype.np))
    return b.emit("Pad", [x, pads, value], mode="constant", name=node.name)


@converter("tril", "triu")
def _triangle(b, node, ins):
    k = b.const(np.asarray(int(node.attrs.get("diagonal", 0)), np.int64))
    return b.emit("Trilu", [ins[0], k], upper=int(node.op.name == "triu"), name=node.name)


@converter("one_hot")
def _one_hot(b, node, ins):
    depth = b.const(np.asarray(node.shape[-1], np.int64))
    values = b.const(np.asarray([0, 1], node.dtype.np))
    return b.emit("OneHot", [ins[0], depth, values], axis=-1, name=node.name)


@converter("unfold")
def _unfold(b, node, ins):
    """im2col: (N, C, H, W) -> (N, C, kh, kw, OH, OW), one strided slice per kernel offset
    (convolutions and pools are matched whole first, see patterns.py)."""
    attrs = node.attrs
    (kh, kw), (sh, sw) = attrs["kernel_size"], attrs["stride"]
    (ph, pw), (dh, dw) = attrs["padding"], attrs["dilation"]
    oh, ow = node.shape[-2:]
    (x,) = b.operands(node, node.dtype, node.inputs[:1])
    if ph or pw:
        pads = b.const(np.asarray([0, 0, ph, pw, 0, 0, ph, pw], np.int64))
        value = b.const(np.asarray(attrs.get("pad_value", 0.0), node.dtype.np))
        x = b.emit("Pad", [x, pads, value], mode="constant")
    axes = b.const(np.asarray([2, 3], np.int64))
    steps = b.const(np.asarray([sh, sw], np.int64))
    windows = []
    for i in range(kh):
        for j in range(kw):
            starts = b.const(np.asarray([i * dh, j * dw], np.int64))
            ends = b.const(np.asarray([i * dh + sh * (oh - 1) + 1, j * dw + sw * (ow - 1) + 1],
                                      np.int64))
            piece = b.emit("Slice", [x, starts, ends, axes, steps])
            windows.append(b.emit("Unsqueeze", [piece, b.const(np.asarray([2], np.int64))]))
    stacked = b.emit("Concat", windows, axis=2) if len(windows) > 1 else windows[0]
    return b.emit("Reshape", [stacked, b.reshape_target(node)], name=node.name)
