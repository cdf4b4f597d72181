"""The graph IR: a ``Graph`` of ``Node`` s, each one op applied to earlier nodes and literals.

Every node has one output. A node is a placeholder (a value fed at run time), a capture (a
tensor from outside the graph, read by reference when the graph runs: parameters that an
optimiser updates are seen at their current value), a constant, or an op application. Nodes are
kept in the order they were added, which is a topological order.

``print(graph)`` gives one line per node, like a small assembly language::

    %0 = placeholder()              : float32[8, 8]  @cpu:0   x
    %1 = mul(%0, 1.0001)            : float32[8, 8]  @cpu:0
"""
import contextlib
import json
import threading

import numpy as np

from .. import display
from ..errors import GraphError
from ..tensor.dtypes import as_dtype
from ..tensor.op import REGISTRY
from .node import (CAPTURE, CONSTANT, PLACEHOLDER, SPECIAL, Node,  # noqa: F401 (ir.Node as before)
                   arg_text, type_text)


class Graph:
    """A dataflow graph. Build one explicitly (TensorFlow style) or get one from ``lk.function``.

    >>> import labkit as lk
    >>> with lk.Graph() as g:
    ...     x = lk.placeholder((2,), lk.float32, name="x")
    ...     y = x * 2.0 + 1.0
    >>> g.run(y, {x: [1.0, 2.0]}).tolist()
    [3.0, 5.0]
    """

    def __init__(self, name="graph"):
        self.name = name
        self.nodes = []
        self._names = {}
        self._scope = []
        self._captures = {}     # id(tensor) -> capture node
        self._lock = threading.Lock()
        self._plans = {}
        self.history = []       # what each optimisation pass did (see labkit.graph.passes)
        self.outputs = None     # nodes its user fetches, kept by passes (None: the unused)
        self.buffer_plan = None  # set by the buffer-reuse pass, read by the executor

    # ---- building ------------------------------------------------------------------------------
    def _unique(self, base, scoped=True):
        prefix = "/".join(self._scope) if scoped else ""
        name = f"{prefix}/{base}" if prefix else base
        n = self._names.get(name, 0)
        self._names[name] = n + 1
        return name if n == 0 else f"{name}_{n}"

    def add_node(self, kind, op, inputs, attrs, shape, dtype, device, name=None, scoped=True):
        node = Node(self, self._unique(name or (op.name if kind == "op" else kind), scoped),
                    kind, op, inputs, attrs, shape, dtype, device)
        node.scope = "/".join(self._scope)
        node.index = len(self.nodes)
        self.nodes.append(node)
        self._plans.clear()
        return node

    def capture(self, tensor):
        """The node reading ``tensor`` (from outside the graph) by reference at run time."""
        node = self._captures.get(id(tensor))
        if node is None:
            name = getattr(tensor, "name", None)     # an lk.Variable is shown by its name
            named = isinstance(name, str) and bool(name)
            # a named tensor (parameter, variable) keeps its own name in any scope it is read in
            node = self.add_node(CAPTURE, None, (), {}, tensor.shape, tensor.dtype, tensor.device,
                                 name=name if named else "capture", scoped=not named)
            node.value = tensor
            self._captures[id(tensor)] = node
        return node

    @contextlib.contextmanager
    def name_scope(self, name):
        self._scope.append(str(name))
        try:
            yield
        finally:
            self._scope.pop()

    def __enter__(self):
        from .capture import enter_graph
        self._ctx = enter_graph(self)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        ctx, self._ctx = self._ctx, None
        return ctx.__exit__(*exc)

    # ---- inspection ----------------------------------------------------------------------------
    def __len__(self):
        return len(self.nodes)

    def node(self, name):
        for n in self.nodes:
            if n.name == name:
                return n
        raise GraphError(f"graph {self.name!r} has no node named {name!r}")

    def listing(self, nodes=None):
        lines = []
        for n in (self.nodes if nodes is None else nodes):
            if n.kind == "op":
                args = [arg_text(a) for a in n.inputs]
                args += [f"{k}={v!r}" for k, v in n.attrs.items() if k != "res"]
                call = f"{n.op.name}({', '.join(args)})"
            elif n.kind == CONSTANT:
                call = f"constant({_short(n.value)})"
            else:
                call = f"{n.kind}()"
            dev = f"@{n.device.name}" if n.device is not None else ""
            lines.append(f"{n.ref():>5} = {call:<40} : {type_text(n):<18} {dev:<7} {n.name}")
            for sub in _subgraphs(n):   # control flow: each sub-graph indented under its node
                lines.extend("        " + ln for ln in sub.listing_lines())
        return "\n".join(lines)

    def __str__(self):
        return f"Graph {self.name!r} ({len(self.nodes)} nodes)\n" + self.listing()

    def __repr__(self):
        return f"<Graph {self.name!r}: {len(self.nodes)} nodes>"

    def _repr_svg_(self):         # notebook display: lk.viz.graph(self)
        picture = display.drawing("graph", self)
        return None if picture is None else picture._repr_svg_()

    def _repr_mimebundle_(self, include=None, exclude=None):
        picture = display.drawing("graph", self)
        return None if picture is None else picture._repr_mimebundle_(include, exclude)

    def lint(self):
        """Check that every input is an earlier node of this graph; raise GraphError otherwise."""
        for i, n in enumerate(self.nodes):
            if n.index != i or n.graph is not self:
                raise GraphError(f"node {n.name} has index {n.index} at position {i}\n{self}")
            for a in n.inputs:
                if isinstance(a, Node) and (a.graph is not self or a.index >= i):
                    raise GraphError(f"node {n.name} uses {a.name}, which is not an earlier "
                                     f"node of this graph\n{self}")

    def placement(self):
        """For every node: its device and why it is there (explicit, colocated, heuristic...).

        A graph that has not been placed yet is placed (on a copy) for the report; a graph
        from ``lk.function`` that spans devices already was.

        >>> import labkit as lk
        >>> with lk.Graph() as g:
        ...     x = lk.placeholder((2,), name="x")
        ...     y = x * 2.0
        >>> g.placement()["mul"].device
        'cpu:0'
        """
        from .passes.placement import placement_report
        return placement_report(self)

    # ---- running -----------------------------------------------------------------------------------
    def run(self, fetches, feeds=None):
        """Run the part of the graph that ``fetches`` need, with ``feeds`` for placeholders.

        ``fetches``: a tensor, a list/tuple, or a dict of them; the result has the same form
        (NumPy-backed Tensors). Safe to call from several threads at once.
        """
        from .compile import run_graph
        return run_graph(self, fetches, feeds)

    # ---- serialisation -----------------------------------------------------------------------
    def to_json(self):
        """A JSON string describing the graph (ops by name, constants inline)."""
        out = []
        for n in self.nodes:
            if n.kind == CAPTURE:
                raise GraphError(f"to_json: node {n.name} captures an outside tensor by "
                                 f"reference, which a JSON file cannot hold; feed it instead")
            out.append({
                "name": n.name, "kind": n.kind, "op": n.op.name if n.kind == "op" else None,
                "inputs": [{"node": a.index} if isinstance(a, Node) else {"literal": a}
                           for a in n.inputs],
                "attrs": {k: _jsonable(v) for k, v in n.attrs.items()},
                "shape": None if n.shape is None else list(n.shape),
                "dtype": n.dtype.name if n.dtype else None,
                "device": n.device.name if n.device else None, "scope": n.scope,
                "role": n.role, "stateful": n.stateful,
                "value": None if n.kind != CONSTANT else {"data": np.asarray(n.value).tolist()},
            })
        return json.dumps({"name": self.name, "nodes": out})

    @classmethod
    def from_json(cls, text):
        """Rebuild a graph written by ``to_json``; ops are looked up in the op registry."""
        from ..devices import get_device
        spec = json.loads(text)
        g = cls(spec["name"])
        for d in spec["nodes"]:
            op = None
            if d["kind"] == "op":
                op = REGISTRY.get(d["op"])
                if op is None:
                    raise GraphError(f"from_json: unknown op {d['op']!r} (node {d['name']}); "
                                     f"declare it before loading")
            inputs = [g.nodes[a["node"]] if "node" in a else _from_jsonable(a["literal"])
                      for a in d["inputs"]]
            attrs = {k: _from_jsonable(v) for k, v in d["attrs"].items()}
            dtype = as_dtype(d["dtype"]) if d["dtype"] else None
            node = g.add_node(d["kind"], op, inputs, attrs, d["shape"], dtype,
                              get_device(d["device"]) if d["device"] else None)
            node.name, node.scope, node.role = d["name"], d["scope"], d["role"]
            node.stateful = d["stateful"]
            if d["kind"] == CONSTANT:
                node.value = np.asarray(d["value"]["data"], dtype=dtype.np).reshape(node.shape)
        return g


def _subgraphs(node):
    """The sub-graphs (branches, loop bodies) a control-flow node holds in its attributes."""
    for v in node.attrs.values():
        for item in (v if isinstance(v, tuple) else (v,)):
            if hasattr(item, "listing_lines"):
                yield item


def _short(value):
    a = np.asarray(value) if not hasattr(value, "get") else value.get()
    if a.size <= 4:
        return np.array2string(a, separator=", ")
    return f"<{a.size} values>"


def _jsonable(v):
    if isinstance(v, tuple):
        return {"tuple": [_jsonable(x) for x in v]}
    if isinstance(v, float) and not np.isfinite(v):
        return {"float": repr(v)}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    raise GraphError(f"to_json: attribute value {v!r} of type {type(v).__name__} cannot be "
                     f"written as JSON")


def _from_jsonable(v):
    if isinstance(v, dict):
        if "tuple" in v:
            return tuple(_from_jsonable(x) for x in v["tuple"])
        if "float" in v:
            return float(v["float"])
    if isinstance(v, list):
        return [_from_jsonable(x) for x in v]
    return v
