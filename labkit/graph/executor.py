"""Running a graph: prune to what the fetches need, compile a flat plan, execute it.

A plan is generated as one straight-line Python function (``v3 = k3(v1, v2)`` ...) with every
kernel, literal and attribute bound in advance: at run time there is no per-node dictionary
lookup, no shape inference and no dispatch, and each intermediate is released (``del``) right
after its last use. Plans are cached per (fetches, feeds) and may run from several threads at
once: all state lives in the function's locals.

Ops that are one NumPy/CuPy call (the elementwise ufuncs, ``relu``, ``matmul``,
``sum``/``max``/``min``) are bound to that call directly, skipping their kernel wrapper. When the
graph carries a buffer plan for exactly these fetches (``graph.buffer_plan``, made by the
buffer-reuse pass), results are written with ``out=`` into the buffers of a *workspace*: one set
of arrays per concurrently running call, taken from the plan's pool at the start of a run and
given back at its end, so steady-state runs allocate only their outputs. A value fetched twice,
and a fetched constant, is handed out as a copy, so that no two results share memory.
"""
import functools

import numpy as np

from ..errors import DTypeError, describe
from ..tensor.ops import elementwise as _ew
from ..tensor.ops import linalg as _linalg
from ..tensor.ops import reduce as _reduce
from ..tensor.tensor import Tensor
from .ir import CAPTURE, CONSTANT, PLACEHOLDER, GraphError, Node

# op -> name of the array-module function that is its whole kernel
_UFUNCS = {
    _ew.add: "add", _ew.sub: "subtract", _ew.mul: "multiply", _ew.div: "true_divide",
    _ew.pow: "power", _ew.maximum: "maximum", _ew.minimum: "minimum", _ew.neg: "negative",
    _ew.exp: "exp", _ew.log: "log", _ew.sqrt: "sqrt", _ew.abs: "absolute", _ew.tanh: "tanh",
    _ew.sign: "sign", _ew.eq: "equal", _ew.ne: "not_equal", _ew.lt: "less",
    _ew.le: "less_equal", _ew.gt: "greater", _ew.ge: "greater_equal",
    _ew.logical_not: "logical_not",
}
_REDUCTIONS = {_reduce.sum: "sum", _reduce.max: "max", _reduce.min: "min"}
_fused_op = None


def _fused():
    global _fused_op
    if _fused_op is None:
        from .passes.fusion import fused
        _fused_op = fused
    return _fused_op


def direct_call(node):
    """(function, trailing literal args) computing ``node`` in one array-module call, or None.

    The function accepts ``out=``.
    """
    if node.kind != "op":
        return None
    xp = node.device.xp
    op = node.op
    if op in _UFUNCS and not node.attrs:
        return getattr(xp, _UFUNCS[op]), ()
    if op is _ew.relu:
        return xp.maximum, (0,)
    if op is _linalg.matmul:
        return xp.matmul, ()
    if op in _REDUCTIONS and isinstance(node.inputs[0], Node) and node.inputs[0].shape is not None:
        attrs = node.attrs
        axis = _reduce._axes(attrs.get("dim"), len(node.inputs[0].shape))
        return functools.partial(getattr(xp, _REDUCTIONS[op]), axis=axis,
                                 keepdims=attrs.get("keepdim", False)), ()
    return None


def writes_into(node):
    """Whether the executor can have ``node`` write its result into a given array (``out=``)."""
    if node.kind != "op" or node.shape is None or None in node.shape:
        return False
    return node.op is _fused() or direct_call(node) is not None


def needed_nodes(graph, fetch_nodes, fed, include_stateful):
    """The nodes that must run to compute ``fetch_nodes`` given the ``fed`` placeholders."""
    need = set()
    stack = list(fetch_nodes)
    if include_stateful:
        stack += [n for n in graph.nodes if n.stateful]
    while stack:
        n = stack.pop()
        if n.index in need:
            continue
        need.add(n.index)
        if n.index in fed:
            continue
        stack.extend(a for a in n.inputs if isinstance(a, Node) and a.index not in need)
    return [n for n in graph.nodes if n.index in need]


class Plan:
    """A compiled schedule for one (fetches, feeds) pair of a graph."""

    def __init__(self, graph, fetch_nodes, feed_nodes, include_stateful=False):
        self.graph = graph
        self.fetch_nodes = list(fetch_nodes)
        self.feed_nodes = list(feed_nodes)
        fed = {n.index for n in self.feed_nodes}
        self.nodes = needed_nodes(graph, self.fetch_nodes, fed, include_stateful)
        for n in self.nodes:
            if n.kind == PLACEHOLDER and n.index not in fed:
                raise GraphError(
                    f"placeholder '{n.name}' ({n.dtype.name}{list(n.shape)}) must be fed: the "
                    f"fetches depend on it. Pass it in feeds: g.run(fetches, {{{n.name}: value}})")
        bp = getattr(graph, "buffer_plan", None)
        self.buffer_plan = bp if bp is not None and bp.matches(
            n.index for n in self.fetch_nodes) else None
        self._pool = []        # workspaces (lists of buffers) not in use by a running call
        self.fn, self.source = self._compile(fed)

    def _new_workspace(self):
        out = []
        for shape, dtype, device in self.buffer_plan.buffers:
            with device.activate():
                out.append(device.xp.empty(shape, dtype.np))
        return out

    def stats(self):
        """{'ops': op nodes run, 'into_buffers': how many write into reused buffers,
        'buffers': buffers per workspace, 'workspace_bytes', 'workspaces': made so far}."""
        bp = self.buffer_plan
        ops = sum(1 for n in self.nodes if n.kind == "op")
        into = sum(1 for n in self.nodes if bp is not None and n.index in bp.slot_of)
        return {"ops": ops, "into_buffers": into,
                "buffers": len(bp.buffers) if bp else 0,
                "workspace_bytes": bp.nbytes() if bp else 0,
                "workspaces": self._made}

    def _compile(self, fed):
        ns = {"_np_asarray": np.asarray}
        lines = []
        bp = self.buffer_plan
        slot_of = {} if bp is None else {i: s for i, s in bp.slot_of.items()}
        self._made = 0
        if bp is not None and bp.buffers:
            run_nodes = {n.index for n in self.nodes}
            slot_of = {i: s for i, s in slot_of.items() if i in run_nodes}
            ns["_pool"] = self._pool

            def new_workspace():
                self._made += 1
                return self._new_workspace()
            ns["_new_ws"] = new_workspace
            names = ", ".join(f"b{k}" for k in range(len(bp.buffers)))
            lines += ["try:", "    _ws = _pool.pop()", "except IndexError:",
                      "    _ws = _new_ws()", f"{names}, = _ws"]
        last_use = {}
        for n in self.nodes:
            for a in n.inputs:
                if isinstance(a, Node):
                    last_use[a.index] = n.index
        keep = {n.index for n in self.fetch_nodes}
        args = [f"f{i}" for i in range(len(self.feed_nodes))]
        feed_pos = {n.index: i for i, n in enumerate(self.feed_nodes)}
        dels = {}
        for idx, last in last_use.items():
            if idx not in keep:
                dels.setdefault(last, []).append(idx)
        for n in self.nodes:
            v = f"v{n.index}"
            if n.index in fed:
                lines.append(f"{v} = f{feed_pos[n.index]}")
            elif n.kind == CAPTURE:
                ns[f"c{n.index}"] = n.value
                lines.append(f"{v} = c{n.index}._data")
            elif n.kind == CONSTANT:
                ns[f"c{n.index}"] = n.value
                lines.append(f"{v} = c{n.index}")
            else:
                call_args = []
                for j, a in enumerate(n.inputs):
                    if isinstance(a, Node):
                        call_args.append(f"v{a.index}")
                    else:
                        ns[f"l{n.index}_{j}"] = a
                        call_args.append(f"l{n.index}_{j}")
                direct = direct_call(n)
                if direct is not None:
                    fn, extra = direct
                    for j, a in enumerate(extra):
                        ns[f"e{n.index}_{j}"] = a
                        call_args.append(f"e{n.index}_{j}")
                    ns[f"k{n.index}"] = fn
                else:
                    ns[f"k{n.index}"] = functools.partial(n.op.kernel, n.device.xp, **n.attrs)
                if n.index in slot_of:
                    call_args.append(f"out=b{slot_of[n.index]}")
                lines.append(f"{v} = k{n.index}({', '.join(call_args)})")
                if n.shape == ():   # NumPy gives 0-d results back as scalars
                    xp_name = f"xp{n.index}"
                    ns[xp_name] = n.device.xp.asarray
                    lines.append(f"{v} = {xp_name}({v})")
            for d in dels.get(n.index, ()):
                lines.append(f"del v{d}")
        if "_pool" in ns:
            lines.append("_pool.append(_ws)")
        outs, handed = [], set()
        for n in self.fetch_nodes:   # results never share memory with each other
            copy = n.index in handed or n.kind == CONSTANT
            handed.add(n.index)
            outs.append(f"v{n.index}.copy()" if copy else f"v{n.index}")
        outs = ", ".join(outs)
        lines.append(f"return ({outs}{',' if len(self.fetch_nodes) == 1 else ''})")
        src = f"def plan({', '.join(args)}):\n" + "\n".join("    " + ln for ln in lines) + "\n"
        exec(compile(src, f"<labkit plan of graph {self.graph.name!r}>", "exec"), ns)
        return ns["plan"], src

    def __call__(self, *feed_arrays):
        return self.fn(*feed_arrays)


def feed_array(node, value):
    """``value`` as an array for placeholder ``node``; clear errors for wrong shape or dtype."""
    if isinstance(value, Tensor):
        if value._data is None:
            raise GraphError(f"feed for '{node.name}': {value!r} is symbolic; feed a value")
        if value.device is not node.device:
            value = value.to(node.device)
        array = value._data
        if array.dtype != node.dtype.np:
            raise DTypeError(f"feed for placeholder '{node.name}': expected {node.dtype.name}, got "
                             f"{describe(value)}; convert with .to(dtype=lk.{node.dtype.name})")
    else:
        host = np.asarray(value)
        if host.dtype != node.dtype.np:
            if isinstance(value, np.ndarray) or (host.dtype.kind == "f" and
                                                 node.dtype.np.kind in "iub"):
                raise DTypeError(f"feed for placeholder '{node.name}': expected "
                                 f"{node.dtype.name}, got an array of {host.dtype}; convert it "
                                 f"first (e.g. .astype(np.{node.dtype.np}))")
            host = host.astype(node.dtype.np)
        array = host if node.device.type == "cpu" else node.device.xp.asarray(host)
    if tuple(array.shape) != node.shape:
        raise GraphError(f"feed for placeholder '{node.name}': expected shape {node.shape}, got "
                         f"{tuple(array.shape)}")
    return array


def _flatten_fetches(fetches):
    if isinstance(fetches, dict):
        keys = list(fetches)
        return [fetches[k] for k in keys], lambda vals: dict(zip(keys, vals))
    if isinstance(fetches, (list, tuple)):
        kind = type(fetches)
        return list(fetches), lambda vals: kind(vals)
    return [fetches], lambda vals: vals[0]


def run_graph(graph, fetches, feeds=None):
    from .capture import as_node
    items, rebuild = _flatten_fetches(fetches)
    fetch_nodes = [as_node(graph, t) for t in items]
    feeds = feeds or {}
    feed_nodes, feed_values = [], []
    for k, v in feeds.items():
        node = as_node(graph, k) if not isinstance(k, str) else graph.node(k)
        if node.kind != PLACEHOLDER:
            raise GraphError(f"feeds: '{node.name}' is a {node.op_name}, not a placeholder; "
                             f"only placeholders can be fed")
        feed_nodes.append(node)
        feed_values.append(feed_array(node, v))
    key = (tuple(n.index for n in fetch_nodes), tuple(n.index for n in feed_nodes))
    plan = graph._plans.get(key)
    if plan is None:
        with graph._lock:
            plan = graph._plans.get(key)
            if plan is None:
                plan = Plan(graph, fetch_nodes, feed_nodes)
                graph._plans[key] = plan
    arrays = plan(*feed_values)
    return rebuild([Tensor._make(a, n.device) for a, n in zip(arrays, fetch_nodes)])
