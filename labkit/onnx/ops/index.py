"""Indexing: ``x[...]`` (slices, integers, None, Ellipsis, one index tensor) and gather."""
import numpy as np

from ..builder import INT64_MAX
from ..dims import Dim, OnnxExportError
from ..registry import converter


def _consumes(item):
    return 0 if item[0] in ("n", "b", "e") else 1


@converter("getitem")
def _getitem(b, node, ins):
    spec = b.attrs(node)["spec"]
    x = ins[0]
    index_nodes = node.inputs[1:]
    ndim = node.inputs[0].ndim
    if sum(item[0] == "t" for item in spec) > 1:
        raise OnnxExportError("indexing with several index tensors at once (x[i, j]) has no "
                              "ONNX conversion; index one dimension at a time")
    rest = ndim - sum(_consumes(item) for item in spec)
    axis, out_axis = 0, 0
    slices, picks, new_axes = [], [], []
    for item in spec:
        kind = item[0]
        if kind == "s":
            start, stop, step = item[1:]
            if (start, stop, step) != (None, None, None):
                slices.append((axis, start, stop, step))
            axis, out_axis = axis + 1, out_axis + 1
        elif kind == "i":
            picks.append((axis, item[1], None))
            axis += 1
        elif kind == "t":
            index = index_nodes[item[1]]
            if index.dtype.name == "bool_":
                raise OnnxExportError("indexing with a boolean mask gives a size known only at "
                                      "run time; use lk.where instead of x[mask] in an "
                                      "exported model")
            picks.append((axis, None, item[1]))
            axis, out_axis = axis + 1, out_axis + index.ndim
        elif kind == "e":
            axis, out_axis = axis + rest, out_axis + rest
        elif kind == "n" or (kind == "b" and item[1]):
            new_axes.append(out_axis)
            out_axis += 1
        else:
            raise OnnxExportError(f"index item {item} has no ONNX conversion")
    if slices:
        starts, ends, axes, steps = [], [], [], []
        for a, start, stop, step in slices:
            step = 1 if step is None else step
            if start is None:
                start = 0 if step > 0 else INT64_MAX
            if stop is None:
                stop = INT64_MAX if step > 0 else -INT64_MAX
            starts.append(start), ends.append(stop), axes.append(a), steps.append(step)
        x = b.emit("Slice", [x, b.ints(starts, "starts"), b.ints(ends, "ends"),
                             b.const(np.asarray(axes, np.int64)),
                             b.const(np.asarray(steps, np.int64))])
    for a, k, t in sorted(picks, key=lambda p: -p[0]):
        if t is None:
            if isinstance(k, Dim):
                raise OnnxExportError(f"an integer index that follows a dynamic axis ({k})")
            index = b.const(np.asarray(k, np.int64))
        else:
            index = ins[1 + t]
        x = b.emit("Gather", [x, index], axis=a)
    if new_axes:
        x = b.emit("Unsqueeze", [x, b.const(np.asarray(new_axes, np.int64))])
    return b.emit("Identity", [x], name=node.name)


@converter("gather")
def _gather(b, node, ins):
    return b.emit("GatherElements", [ins[0], ins[1]], axis=int(node.attrs["dim"]),
                  name=node.name)
