"""The ONNX graph being written: nodes, initializers, names, and sizes known only at run time.

``GraphBuilder`` walks a labkit graph in order and asks each node's converter (registry.py) for
the ONNX nodes that compute it. A control-flow node's branches and loop bodies get a child
builder whose values may name the outer graph's (ONNX sub-graphs read outer values by name).
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..errors import source_text
from ..graph.node import CAPTURE, CONSTANT, PLACEHOLDER, Node
from ..tensor.dtypes import as_dtype, common_np_dtype
from .dims import UNFITTED, Dim, OnnxExportError, fit, fit_attr
from .registry import CONVERTERS

ONNX_TYPES = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE,
              "float16": TensorProto.FLOAT16, "int8": TensorProto.INT8,
              "int16": TensorProto.INT16, "int32": TensorProto.INT32,
              "int64": TensorProto.INT64, "uint8": TensorProto.UINT8,
              "bool_": TensorProto.BOOL}

INT64_MAX = np.iinfo(np.int64).max


def onnx_type(dtype):
    """The ONNX element type of a labkit dtype (or NumPy dtype)."""
    return ONNX_TYPES[as_dtype(dtype).name]


class Variants:
    """What the extra traces (one per dynamic axis) say about each node: its shape and
    attributes in every trace, and the sizes of the dynamic axes in each."""

    def __init__(self, symbols, sizes):
        self.symbols = symbols          # the dynamic axes' names
        self.sizes = sizes              # sizes[k][j]: axis j's size in trace k (0: the first)
        self.twins = {}                 # node of trace 0 -> its node in each other trace

    def pair(self, graphs):
        """Record the nodes of ``graphs`` (trace 0's first) as the same node in each trace."""
        first = graphs[0]
        for other in graphs[1:]:
            if len(other.nodes) != len(first.nodes) or any(
                    a.op_name != b.op_name for a, b in zip(first.nodes, other.nodes)):
                bad = next((a for a, b in zip(first.nodes, other.nodes)
                            if a.op_name != b.op_name), first.nodes[-1])
                raise OnnxExportError(
                    f"lk.onnx.export: the traced program changes with the size of the dynamic "
                    f"axes {', '.join(self.symbols)} (first difference at {bad.op_name} node "
                    f"'{bad.name}', from {source_text(bad.source)}), so one ONNX graph cannot "
                    f"serve every size. Make the Python code independent of that size, or "
                    f"export with it fixed (leave it out of dynamic_axes).")
        for k, node in enumerate(first.nodes):
            twins = [g.nodes[k] for g in graphs[1:]]
            self.twins[node] = twins
            for name, value in node.attrs.items():
                subs = _subgraphs_of(value)
                if subs:
                    for j, sub in enumerate(subs):
                        self.pair([sub.graph] + [_subgraphs_of(t.attrs[name])[j].graph
                                                 for t in twins])

    def dims(self, node):
        twins = self.twins.get(node, [])
        shapes = [node.shape] + [t.shape for t in twins]
        out = []
        for k in range(len(node.shape)):
            d = fit([s[k] for s in shapes], self.sizes, self.symbols)
            if d is None:
                raise _node_error(node, f"its dimension {k} has sizes "
                                        f"{[s[k] for s in shapes]} in traces where "
                                        f"{self._sizes_text()}, which is neither affine in one "
                                        f"dynamic axis nor a product of them")
            out.append(d)
        return tuple(out)

    def attrs(self, node):
        twins = self.twins.get(node, [])
        out = {}
        for name, value in node.attrs.items():
            if _subgraphs_of(value) or not twins:
                out[name] = value
                continue
            f = fit_attr([value] + [t.attrs[name] for t in twins], self.sizes, self.symbols)
            if f is UNFITTED:
                raise _node_error(node, f"its attribute {name}= is "
                                        f"{[value] + [t.attrs[name] for t in twins]} in traces "
                                        f"where {self._sizes_text()}, a dependence on the "
                                        f"dynamic axes that ONNX cannot compute")
            out[name] = f
        return out

    def _sizes_text(self):
        return "; ".join(", ".join(f"{s}={v}" for s, v in zip(self.symbols, sizes))
                         for sizes in self.sizes)


def _subgraphs_of(value):
    items = value if isinstance(value, tuple) else (value,)
    return [v for v in items if hasattr(v, "out_nodes") and hasattr(v, "in_nodes")]


def _node_error(node, why):
    return OnnxExportError(
        f"lk.onnx.export: {node.op_name} node '{node.name}' (from "
        f"{source_text(node.source)}) cannot be exported with dynamic axes: {why}. Export with "
        f"fixed sizes, or compute that size from the input inside the graph.")


class GraphBuilder:
    """Writes one ONNX graph (the model's, or a branch or loop body inside it)."""

    def __init__(self, opset, variants, parent=None):
        self.opset = opset
        self.variants = variants
        self.parent = parent
        self.root = self if parent is None else parent.root
        self.nodes = []
        self.values = {}                       # labkit node -> ONNX value name (or tuple)
        if parent is None:
            self.initializers = []
            self.taken = set()
            self.consts = {}                   # small constants by (dtype, shape, bytes)
            self.symbol_values = {}            # dynamic axis -> (input name, axis)
            self.dim_cache = {}

    # ---- names and values ------------------------------------------------------------------
    def fresh(self, base):
        """A value or node name not used anywhere in the model."""
        base = str(base) or "v"
        name, k = base, 0
        while name in self.root.taken:
            k += 1
            name = f"{base}_{k}"
        self.root.taken.add(name)
        return name

    def value(self, node):
        """The ONNX name of labkit ``node``'s value (an outer graph's, in a sub-graph)."""
        b = self
        while b is not None:
            if node in b.values:
                return b.values[node]
            b = b.parent
        if node.kind in (CAPTURE, CONSTANT):     # parameters are written when first read
            return self.root._initializer_of(node)
        raise OnnxExportError(f"lk.onnx.export: internal error: node '{node.name}' is used "
                              f"before it was converted")

    @staticmethod
    def array_of(node):
        """The value of a capture (a parameter, a buffer, a tensor made while tracing) or a
        constant node, as a NumPy array on the host."""
        if node.kind == CAPTURE:
            return np.asarray(node.value.detach().cpu().numpy())
        array = node.value
        return np.asarray(array.get() if hasattr(array, "get") else array)

    def _initializer_of(self, node):
        array = self.array_of(node)
        twins = self.variants.twins.get(node)
        if twins and any(t.shape != node.shape for t in twins):
            name = self._sized_constant(node, array)
        else:
            name = self.fresh(node.name)
            self.initializers.append(numpy_helper.from_array(
                np.array(array, dtype=node.dtype.np, order="C"), name))
        self.values[node] = name
        return name

    def _sized_constant(self, node, array):
        """A constant whose shape follows a dynamic axis, as tensors made while tracing are
        (``lk.zeros(n_layers, B, H)``, ``lk.arange(T)`` in a forward): a fill or a range of
        the size computed at run time."""
        flat = array.reshape(-1)
        if flat.size == 0 or np.all(flat == flat[0]):
            fill = flat[0] if flat.size else np.zeros((), node.dtype.np)
            value = numpy_helper.from_array(np.asarray([fill], dtype=node.dtype.np))
            return self.emit("ConstantOfShape", [self.shape_of(node)], {"value": value},
                             name=node.name)
        if array.ndim == 1 and np.all(np.diff(flat) == flat[1] - flat[0]):
            start, step = flat[0], flat[1] - flat[0]
            start_v, step_v = (self.const(np.asarray(v, node.dtype.np)) for v in (start, step))
            (n,) = self.dims(node)
            count = self.cast(self.emit("Squeeze", [self.dim_value(n)]), node.dtype)
            limit = self.emit("Add", [start_v, self.emit("Mul", [count, step_v])])
            return self.emit("Range", [start_v, limit, step_v], name=node.name)
        raise _node_error(node, "it is an array made while tracing whose shape follows a "
                                "dynamic axis and whose values are neither all equal nor a "
                                "range; make it with graph ops from the input instead")

    def const(self, array, dtype=None, name="const"):
        """An initializer holding ``array`` (small ones shared)."""
        a = np.asarray(array, dtype=None if dtype is None else as_dtype(dtype).np)
        key = None
        if a.size <= 16:
            key = (a.dtype.str, a.shape, a.tobytes())
            hit = self.root.consts.get(key)
            if hit is not None:
                return hit
        n = self.fresh(name)
        self.root.initializers.append(numpy_helper.from_array(np.array(a, order="C"), n))
        if key is not None:
            self.root.consts[key] = n
        return n

    def emit(self, op_type, inputs, attrs=None, outputs=1, name=None, **kwargs):
        """Add an ONNX node; returns its output name (a list for ``outputs`` > 1). ``attrs``
        and keywords are the node's attributes (graphs, tensors, ints, floats, lists)."""
        attrs = dict(attrs or {}, **kwargs)
        base = name or op_type.lower()
        outs = [self.fresh(base if outputs == 1 else f"{base}_{i}") for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, [i if i is not None else "" for i in inputs],
                                           outs, name=self.fresh(f"{base}/{op_type}"), **attrs))
        return outs[0] if outputs == 1 else outs

    # ---- operands ----------------------------------------------------------------------------
    def operand(self, a, dtype):
        """Input ``a`` of a node (a node or a Python literal) as an ONNX value of ``dtype``."""
        dtype = as_dtype(dtype)
        if isinstance(a, Node):
            name = self.value(a)
            return name if a.dtype is dtype else self.emit("Cast", [name], to=onnx_type(dtype))
        return self.const(np.asarray(a, dtype=dtype.np), name="scalar")

    def operands(self, node, dtype=None, inputs=None):
        """The node's inputs as ONNX values; ``dtype`` (default: the dtype the op computes in
        by PyTorch's promotion of its inputs) is cast to where they differ."""
        inputs = node.inputs if inputs is None else inputs
        if dtype is None:
            dtype = compute_dtype(inputs)
        return [self.operand(a, dtype) for a in inputs]

    def cast(self, name, dtype):
        return self.emit("Cast", [name], to=onnx_type(dtype))

    # ---- sizes -------------------------------------------------------------------------------
    def dims(self, node):
        """``node``'s shape: ints, and ``Dim`` for sizes that follow a dynamic axis."""
        return self.variants.dims(node)

    def attrs(self, node):
        """``node``'s attributes, with ``Dim`` for integers that follow a dynamic axis."""
        return self.variants.attrs(node)

    def ints(self, values, name="shape"):
        """A 1-d int64 tensor of ``values`` (ints and ``Dim``s, computed at run time)."""
        if not any(isinstance(v, Dim) for v in values):
            return self.const(np.asarray([int(v) for v in values], np.int64).reshape(-1),
                              name=name)
        parts, run = [], []
        for v in values:
            if isinstance(v, Dim):
                if run:
                    parts.append(self.const(np.asarray(run, np.int64), name=name))
                    run = []
                parts.append(self.dim_value(v))
            else:
                run.append(int(v))
        if run:
            parts.append(self.const(np.asarray(run, np.int64), name=name))
        return parts[0] if len(parts) == 1 else self.emit("Concat", parts, axis=0, name=name)

    def dim_value(self, dim):
        """A 1-element int64 tensor holding ``dim`` at run time."""
        cached = self.root.dim_cache.get(dim)
        if cached is not None:
            return cached
        value = None
        for s in dim.symbols:
            source, axis = self.root.symbol_values[s]
            size = self.emit("Shape", [source], start=axis, end=axis + 1, name=f"size_{s}")
            value = size if value is None else self.emit("Mul", [value, size], name="size")
        if dim.coef.denominator != 1:
            value = self.emit("Div", [value, self.const(np.asarray([dim.coef.denominator],
                                                                   np.int64))], name="size")
        if dim.coef.numerator != 1:
            value = self.emit("Mul", [value, self.const(np.asarray([dim.coef.numerator],
                                                                   np.int64))], name="size")
        if dim.offset:
            value = self.emit("Add", [value, self.const(np.asarray([dim.offset], np.int64))],
                              name="size")
        if self.parent is None:          # a sub-graph's sizes stay in the sub-graph
            self.root.dim_cache[dim] = value
        return value

    def shape_of(self, node):
        """``node``'s shape as a 1-d int64 tensor (a constant unless it has dynamic sizes)."""
        return self.ints(self.dims(node))

    def reshape_target(self, node):
        """The shape tensor for reshaping into ``node``'s shape: a constant when at most one
        size is dynamic (that one written -1), else computed from the inputs' shapes."""
        dims = self.dims(node)
        dynamic = [k for k, d in enumerate(dims) if isinstance(d, Dim)]
        if len(dynamic) == 1:
            dims = tuple(-1 if k == dynamic[0] else d for k, d in enumerate(dims))
        return self.ints(dims)

    # ---- conversion --------------------------------------------------------------------------
    def convert(self, node):
        """Write the ONNX nodes computing labkit ``node`` (once)."""
        if node in self.values:
            return self.values[node]
        if node.kind in (CAPTURE, CONSTANT):
            return self.value(node)
        if node.kind == PLACEHOLDER:
            raise OnnxExportError(f"lk.onnx.export: placeholder '{node.name}' is not fed by "
                                  f"any input of the exported function")
        fn = CONVERTERS.get(node.op.name)
        if fn is None:
            raise OnnxExportError(
                f"lk.onnx.export: op '{node.op.name}' (node '{node.name}', from "
                f"{source_text(node.source)}) has no ONNX conversion. Write the model without "
                f"it, or register one: @lk.onnx.converter({node.op.name!r}) def convert(b, "
                f"node, ins): ... (see labkit.onnx.registry).")
        try:
            out = fn(self, node, [self.value(a) if isinstance(a, Node) else a
                                  for a in node.inputs])
        except OnnxExportError as e:
            if node.name in str(e):
                raise
            raise OnnxExportError(f"{e} (exporting {node.op.name} node '{node.name}', from "
                                  f"{source_text(node.source)})") from None
        self.values[node] = out
        return out

    def convert_all(self, nodes):
        for n in nodes:
            if n.kind == "op":
                self.convert(n)

    def sub_graph(self, sub, inputs):
        """A child builder computing labkit Subgraph ``sub`` with its input placeholders
        reading ``inputs`` (names of values visible to it); returns the builder and the names
        of the sub-graph's outputs in it."""
        child = GraphBuilder(self.opset, self.variants, parent=self)
        for node, value in zip(sub.in_nodes, inputs):
            child.values[node] = value
        inside = sorted((n for n in sub.plan(True).nodes if n not in child.values),
                        key=lambda n: n.index)
        child.convert_all(inside)
        return child, [child.value(n) for n in sub.out_nodes]

    def graph_proto(self, name, inputs, outputs):
        """This builder's nodes as an ONNX graph; ``outputs``: (value name, dtype) pairs, each
        given out through an Identity (ONNX sub-graph outputs must be made inside them)."""
        infos = []
        for value, dtype in outputs:
            out = self.emit("Identity", [value], name=f"{name}_out")
            infos.append(value_info(out, dtype, None))
        return helper.make_graph(self.nodes, name, inputs, infos)


def compute_dtype(inputs):
    """The dtype an elementwise op of these inputs (nodes and literals) computes in."""
    return as_dtype(common_np_dtype(inputs))


def value_info(name, dtype, dims):
    """An ONNX value info: ``dims`` ints, Dims (written as their text) or None (unknown)."""
    shape = None if dims is None else [d if isinstance(d, int) else str(d) for d in dims]
    return helper.make_tensor_value_info(name, onnx_type(dtype), shape)


def prune(graph_nodes, outputs):
    """The ONNX nodes that the ``outputs`` need (pattern rewrites leave dead ones behind)."""
    needed = set(outputs)
    kept = []
    for n in reversed(graph_nodes):
        if any(o in needed for o in n.output):
            kept.append(n)
            needed |= reads([n])
    return kept[::-1]


def reads(nodes):
    """The value names ONNX ``nodes`` read, their sub-graphs' (If branches, Loop bodies) too."""
    names = set()
    for n in nodes:
        names.update(i for i in n.input if i)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                names |= reads(a.g.node)
    return names
