"""Control flow: ``lk.cond`` as ONNX If, ``lk.while_loop`` and ``lk.scan`` as ONNX Loop."""
import numpy as np

from ...tensor.dtypes import bool_
from ..builder import GraphBuilder, value_info
from ..dims import OnnxExportError
from ..registry import converter


@converter("output")
def _output(b, node, ins):
    """Element ``index`` of a control-flow node's outputs."""
    return b.value(node.inputs[0])[node.attrs["index"]]


def _as_bool(b, name, dtype):
    return name if dtype is bool_ else b.cast(name, bool_)


@converter("cond")
def _cond(b, node, ins):
    pred, *operands = node.inputs
    flag = _as_bool(b, ins[0], pred.dtype)
    branches = []
    for k, sub in enumerate(node.attrs["branches"]):
        child, outs = b.sub_graph(sub, ins[1:])
        branches.append(child.graph_proto(
            f"{node.name}/{'then' if k == 0 else 'else'}",
            [], [(o, n.dtype) for o, n in zip(outs, sub.out_nodes)]))
    n = len(node.attrs["branches"][0].outputs)
    outs = b.emit("If", [flag], then_branch=branches[0], else_branch=branches[1], outputs=n,
                  name=node.name)
    return tuple(outs) if n > 1 else (outs,)


def _formal(b, name, dtype, shape=None):
    """A formal input of a loop body: a fresh name and its value info."""
    n = b.fresh(name)
    return n, value_info(n, dtype, shape)


@converter("while")
def _while(b, node, ins):
    attrs = node.attrs
    cond, body, n_vars = attrs["cond"], attrs["body"], attrs["n_vars"]
    values, outside = ins[:n_vars], ins[n_vars:]
    first, (pred,) = b.sub_graph(cond, values + outside)
    b.nodes.extend(first.nodes)
    keep_going = _as_bool(b, pred, cond.out_nodes[0].dtype)
    i_name, i_info = _formal(b, f"{node.name}/i", "int64", [])
    c_name, c_info = _formal(b, f"{node.name}/cond_in", bool_, [])
    carried = [_formal(b, f"{node.name}/var{k}", n.dtype) for k, n in
               enumerate(body.in_nodes[:n_vars])]
    step, new = b.sub_graph(body, [c[0] for c in carried] + outside)
    test, (again,) = step.sub_graph(cond, new + outside)
    step.nodes.extend(test.nodes)
    again = _as_bool(step, again, cond.out_nodes[0].dtype)
    graph = step.graph_proto(f"{node.name}/body", [i_info, c_info] + [c[1] for c in carried],
                             [(again, bool_)] + [(v, n.dtype) for v, n in
                                                 zip(new, body.out_nodes)])
    limit = attrs.get("max_iterations")
    trip = b.const(np.asarray(limit, np.int64)) if limit is not None else None
    outs = b.emit("Loop", [trip, keep_going] + values, body=graph, outputs=n_vars,
                  name=node.name)
    return tuple(outs) if n_vars > 1 else (outs,)


@converter("scan")
def _scan(b, node, ins):
    attrs = node.attrs
    body, n_carry, n_xs, length = attrs["body"], attrs["n_carry"], attrs["n_xs"], attrs["length"]
    if attrs.get("n_saved"):
        raise OnnxExportError("a scan that keeps values for its gradient; export without "
                              "gradients (lk.onnx.export traces under lk.no_grad)")
    carry, xs, outside = ins[:n_carry], ins[n_carry:n_carry + n_xs], ins[n_carry + n_xs:]
    i_name, i_info = _formal(b, f"{node.name}/t", "int64", [])
    c_name, c_info = _formal(b, f"{node.name}/cond_in", bool_, [])
    carried = [_formal(b, f"{node.name}/carry{k}", n.dtype) for k, n in
               enumerate(body.in_nodes[:n_carry])]
    scope = GraphBuilder(b.opset, b.variants, parent=b)      # x[t] of each xs, then the body
    slices = [scope.emit("Gather", [x, i_name], axis=0) for x in xs]
    step, new = scope.sub_graph(body, [c[0] for c in carried] + slices + outside)
    step.nodes[:0] = scope.nodes
    n_ys = len(body.out_nodes) - n_carry
    graph = step.graph_proto(f"{node.name}/body", [i_info, c_info] + [c[1] for c in carried],
                             [(c_name, bool_)] + [(v, n.dtype) for v, n in
                                                  zip(new, body.out_nodes)])
    trip = b.const(np.asarray(length, np.int64))
    true = b.const(np.asarray(True))
    outs = b.emit("Loop", [trip, true] + carry, body=graph, outputs=n_carry + n_ys,
                  name=node.name)
    outs = outs if isinstance(outs, list) else [outs]
    return tuple(outs)
