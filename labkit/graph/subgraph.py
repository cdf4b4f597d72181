"""Sub-graphs: the traced functions that control-flow nodes carry as attributes.

``lk.cond``, ``lk.while_loop`` and ``lk.scan`` trace each Python function they are given (a
branch, a loop's condition or body) into a graph of its own, a ``Subgraph``: its inputs are
placeholders, its outputs some of its nodes, and it runs through the same compiled ``Plan`` as any
graph. Three pieces live here:

- ``trace``: trace a function with placeholders standing for its arguments. Tensors the function
  reaches by closure (symbolic tensors of an enclosing graph, or concrete tensors such as a
  model's parameters) are *lifted*: each becomes one more placeholder of the sub-graph and one
  more operand of the control-flow node, so gradients reach them like any input.
- ``Subgraph.backward``: the same sub-graph's vjp, added to it by ``lk.gradients`` (the same vjp
  rules as everywhere), seen as another ``Subgraph`` whose extra inputs are the cotangents.
- ``bind_multi``: control-flow nodes have several outputs, but a graph node has one value. The
  node's value is the tuple of outputs; one ``output`` node per element takes it apart. For the
  autodiff engine the tuple looks like a scalar: each ``output`` node's vjp stores its cotangent
  beside a marker, and the control-flow node's vjp (which the engine calls after every consumer
  of its value) collects them all and builds one backward node for all outputs at once.
"""
import functools
import numbers
import threading

from ..autodiff import trees
from ..errors import DTypeError, GraphError, ShapeError
from ..tensor import dispatch
from ..tensor.dtypes import as_dtype, float32
from ..tensor.op import op
from ..tensor.ops.elementwise import add
from ..tensor.ops.index import zeros_like
from ..tensor.tensor import Tensor
from .capture import CaptureMode, _graphs, enter_graph
from .compile import compile_graph
from .ir import Graph
from .node import CAPTURE, CONSTANT, PLACEHOLDER, Node
from .symbolic import SymbolicTensor


# ---- structures of tensors (tuples, lists, dicts, namedtuples) -----------------------------------
def _is_value(o):
    return isinstance(o, (Tensor, Like, numbers.Number))


def _refuse(what, o, path):
    if o is None:
        return None
    raise DTypeError(f"{what}: got a {type(o).__name__} ({o!r}); values here must be tensors, "
                     f"numbers, or tuples/lists/dicts of them")


def flatten_values(obj, what):
    """(leaves, spec) of a nested structure whose leaves are tensors or Python numbers (None
    is kept; anything else is an error naming ``what``)."""
    leaves = []
    return leaves, trees.flatten_into(obj, leaves, _is_value, functools.partial(_refuse, what))


def type_text(t):
    """``float32[2, 3]``: a tensor's dtype and shape as the graph listing writes them."""
    return f"{t.dtype.name}{list(t.shape)}"


def node_text(t):
    """How an error names the node behind tensor ``t``."""
    if isinstance(t, SymbolicTensor):
        n = t.node
        return f"node {n.ref()} '{n.name}' ({n.op_name}, {type_text(t)})"
    return f"a tensor ({type_text(t)})"


# ---- tracing a function into a sub-graph ---------------------------------------------------------
class SubgraphCapture(CaptureMode):
    """Capture into a sub-graph; tensors from outside it are lifted to placeholders."""

    def __init__(self, graph, parent):
        super().__init__(graph)
        ancestors = getattr(parent, "ancestors", ())
        self.ancestors = ancestors + (parent.graph,) if parent is not None else ()
        self.lifted = []     # the outside tensors, in order of first use
        self.lifts = {}      # key of an outside tensor -> its placeholder here

    def local(self, t):
        """``t`` as a tensor of this sub-graph (lifted if it comes from outside)."""
        if isinstance(t, SymbolicTensor):
            if t._gnode.graph is self.graph or t._gnode.graph not in self.ancestors:
                return t     # ours, or foreign (CaptureMode.apply explains that error)
        elif not isinstance(t, Tensor):
            return t
        key = lift_key(t)
        inner = self.lifts.get(key)
        if inner is None:
            name = getattr(t, "name", None)      # symbolic tensors and lk.Variables have one
            name = name.rsplit("/", 1)[-1] if isinstance(name, str) else "captured"
            node = self.graph.add_node(PLACEHOLDER, None, (), {}, t.shape, t.dtype, t.device,
                                       name=name)
            inner = SymbolicTensor._of(node, t._requires_grad)
            self.lifts[key] = inner
            self.lifted.append(t)    # (also keeps concrete ones, keyed by id, alive)
        return inner

    def apply(self, op, inputs, attrs):
        return super().apply(op, tuple(self.local(a) for a in inputs), attrs)


def lift_key(t):
    return ("node", t._gnode) if isinstance(t, SymbolicTensor) else ("tensor", id(t))


class _entered:
    """Build ``mode.graph`` with ``mode`` (capture's ``enter_graph`` with a mode of our own)."""

    def __init__(self, mode):
        self.mode = mode

    def __enter__(self):
        _graphs.stack.append((self.mode.graph, self.mode))
        self._push = dispatch.push_mode(self.mode)
        self._push.__enter__()
        self._grad = dispatch.grad_enabled(True)   # sub-graphs keep their tape: for vjps later
        self._grad.__enter__()
        return self.mode

    def __exit__(self, *exc):
        try:
            self._grad.__exit__(*exc)
            self._push.__exit__(*exc)
        finally:
            _graphs.stack.pop()
        return False


def next_name(graph, base):
    """The name ``graph`` will give the next node called ``base`` (for sub-graph scopes)."""
    prefix = "/".join(graph._scope)
    name = f"{prefix}/{base}" if prefix else base
    n = graph._names.get(name, 0)
    return name if n == 0 else f"{name}_{n}"


def constant(graph, value, like=None):
    """A constant node of ``graph`` holding a Python number."""
    from ..tensor.creation import tensor
    dtype = like.dtype if like is not None else None
    t = tensor(value, dtype=dtype, device=like.device if like is not None else None)
    node = graph.add_node(CONSTANT, None, (), {}, t.shape, t.dtype, t.device, name="constant")
    node.value = t._data
    return SymbolicTensor._of(node)


class Traced:
    """What ``trace`` returns: the sub-graph, its capture mode (with what it lifted), its input
    placeholders, its outputs and the structure of its result."""

    def __init__(self, graph, mode, inputs, outputs, spec):
        self.graph, self.mode, self.inputs, self.outputs, self.spec = \
            graph, mode, inputs, outputs, spec


class Like:
    """Stands for a tensor of this shape, dtype and device when tracing (e.g. one slice of a
    scanned sequence): it becomes a placeholder like a tensor argument would."""

    def __init__(self, shape, dtype, device, requires_grad=False, name="arg"):
        self.shape, self.dtype, self.device = tuple(shape), dtype, device
        self._requires_grad, self.name = requires_grad, name


def trace(fn, args, scope, what, like=None):
    """Trace ``fn(*args)`` into a new sub-graph whose nodes are named under ``scope``.

    ``args`` is a list of arguments (nested structures allowed): each tensor (or ``Like``) leaf
    becomes a placeholder, any other leaf is passed as is. Numbers in the result become
    constants, of the dtype of the matching leaf of ``like`` where one is given.
    """
    parent = _graphs.stack[-1][1] if _graphs.stack else None
    graph = Graph(scope)
    graph._scope = [scope]
    mode = SubgraphCapture(graph, parent)
    inputs = []
    sym_args = []
    for a in args:
        leaves, spec = flatten_values(a, what)
        sym = []
        for leaf in leaves:
            if isinstance(leaf, (Tensor, Like)):
                name = leaf.name.rsplit("/", 1)[-1] if isinstance(leaf, (SymbolicTensor, Like)) \
                    else "arg"
                node = graph.add_node(PLACEHOLDER, None, (), {}, leaf.shape, leaf.dtype,
                                      leaf.device, name=name)
                leaf = SymbolicTensor._of(node, leaf._requires_grad)
                inputs.append(leaf)
            sym.append(leaf)
        sym_args.append(trees.unflatten(spec, sym))
    with _entered(mode):
        result = fn(*sym_args)
        leaves, spec = flatten_values(result, f"{what} (its result)")
        like = list(like or ())
        outputs = [mode.local(v) if isinstance(v, Tensor) else
                   constant(graph, v, like[i] if i < len(like) else None)
                   for i, v in enumerate(leaves)]
    return Traced(graph, mode, inputs, outputs, spec)


def align_lifted(traced_list):
    """Give every traced function a placeholder for every tensor any of them lifted.

    Returns the outside tensors (the extra operands of the control-flow node) and, for each
    traced function, its placeholders for them in the same order.
    """
    order, seen = [], set()
    for tr in traced_list:
        for t in tr.mode.lifted:
            k = lift_key(t)
            if k not in seen:
                seen.add(k)
                order.append(t)
    per = []
    for tr in traced_list:
        extra = []
        for t in order:
            inner = tr.mode.lifts.get(lift_key(t))
            if inner is None:   # used by another branch only: an input this one ignores
                inner = tr.mode.local(t)
            extra.append(inner)
        per.append(extra)
    return order, per


# ---- the sub-graph object held in a control-flow node's attributes -------------------------------
class Subgraph:
    """A graph with input placeholders and output nodes, run by a compiled plan.

    Several Subgraphs may view one graph: a branch and its vjp share the branch's graph (the vjp
    recomputes the forward values it needs). ``stateful``: the forward view has side effects
    (an ``assign_add`` in a branch), so its control-flow node must never be pruned.
    """

    def __init__(self, graph, inputs, outputs, label, stateful=None, backward_of=None):
        self.graph = graph
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.label = label
        self._lock = threading.Lock()
        self._plans = {}
        self._backward = {}
        self.backward_of = backward_of
        include = backward_of is None
        plan = self.plan(include)    # compiled now: a malformed sub-graph fails at trace time
        self.stateful = include and any(n.stateful for n in plan.nodes) \
            if stateful is None else stateful

    @property
    def in_nodes(self):
        return [t.node for t in self.inputs]

    @property
    def out_nodes(self):
        return [t.node for t in self.outputs]

    def plan(self, include_stateful=True):
        """The compiled plan: input arrays in, a tuple of output arrays out."""
        p = self._plans.get(include_stateful)
        if p is None:
            with self._lock:
                p = self._plans.get(include_stateful)
                if p is None:
                    p = compile_graph(self.graph, self.out_nodes, self.in_nodes,
                                      include_stateful=include_stateful, what=self.label)[1]
                    self._plans[include_stateful] = p
        return p

    def pure_plan(self, what):
        """The plan without side effects, for recomputing values in a gradient; GraphError if
        the outputs themselves depend on a stateful node (recomputing would repeat it)."""
        p = self.plan(False)
        bad = [n for n in p.nodes if n.stateful]
        if bad:
            n = bad[0]
            raise GraphError(
                f"{what}: the gradient would recompute {self.label}, whose outputs depend on "
                f"stateful node {n.ref()} '{n.name}' ({n.op_name}), repeating its side effect. "
                f"Move the state update out of the loop or branch, or keep its result out of "
                f"the values you differentiate (e.g. use v.detach() after the update).")
        return p

    def backward(self, out_idx, in_idx, what):
        """This sub-graph's vjp as a Subgraph: inputs are this one's inputs followed by one
        cotangent per output in ``out_idx``; outputs are the gradients for the inputs in
        ``in_idx`` (added to this graph by ``lk.gradients``, cached per index set)."""
        key = (tuple(out_idx), tuple(in_idx))
        bwd = self._backward.get(key)
        if bwd is not None:
            return bwd
        g = self.graph
        self.pure_plan(what)
        with enter_graph(g), g.name_scope("grad"):
            cots = []
            for i in out_idx:
                y = self.outputs[i]
                node = g.add_node(PLACEHOLDER, None, (), {}, y.shape, y.dtype, y.device,
                                  name=f"cotangent{i}")
                cots.append(SymbolicTensor._of(node))
            xs = [self.inputs[j] for j in in_idx]
            grads = _gradients([self.outputs[i] for i in out_idx], xs, cots)
        bwd = Subgraph(g, self.inputs + cots, grads, f"{self.label}/grad",
                       stateful=False, backward_of=self)
        bwd.pure_plan(what)
        self._backward[key] = bwd
        return bwd

    def __repr__(self):
        return f"<{self.label}: {len(self.inputs)} in, {len(self.outputs)} out>"

    def listing_lines(self):
        """Lines for ``print(graph)``: this sub-graph's own nodes, under a header."""
        ins = ", ".join(n.ref() for n in self.in_nodes)
        outs = ", ".join(n.ref() for n in self.out_nodes)
        shown = {n.index: n for n in self.plan(self.backward_of is None).nodes}
        shown.update((n.index, n) for n in self.in_nodes)
        nodes = [shown[i] for i in sorted(shown)]
        return [f"{self.label} ({ins}) -> ({outs}):"] + \
            ["  " + ln for ln in self.graph.listing(nodes).splitlines()]


def _gradients(ys, xs, cots):
    """d(ys . cots)/d(xs) in the current graph (which holds them all)."""
    from .gradients import gradients
    results = [None] * len(xs)
    roots = [(y, c) for y, c in zip(ys, cots) if y._node is not None]
    if roots:
        results = list(gradients([y for y, _ in roots], xs, [c for _, c in roots]))
    else:
        results = [zeros_like(x) for x in xs]
    for y, c in zip(ys, cots):    # an output that is an input as is: its cotangent passes through
        if y._node is None:
            for j, x in enumerate(xs):
                if x is y:
                    results[j] = add(results[j], c)
    return results


# ---- several outputs from one node ---------------------------------------------------------------
class OutputsToken(SymbolicTensor):
    """The tuple-valued node of a control-flow op, as autodiff sees it: a float32 scalar, so the
    engine can add up the markers that its ``output`` nodes' vjps return."""

    __slots__ = ()

    @property
    def shape(self):
        return ()

    @property
    def ndim(self):
        return 0

    @property
    def dtype(self):
        return float32


_PENDING = {}   # id(marker) -> (marker, output index, cotangent), until the node's vjp runs


def _output_rule(t, index, shape, dtype):
    return shape, as_dtype(dtype)


def _output_vjp(g, out, t, index, shape, dtype):
    # The cotangent waits beside a marker (a concrete zero, so no node is added); the engine
    # adds up the markers of all outputs (fan-in) and hands the sum to the control-flow node.
    dev = t.device
    marker = Tensor._make(dev.xp.zeros((), dtype=float32.np), dev)
    _PENDING[id(marker)] = (marker, index, g)
    return (marker,)


@op("output", shape=_output_rule, vjp=_output_vjp, register=False)
def output(xp, t, index, shape, dtype):
    """Element ``index`` of a control-flow node's tuple of outputs."""
    return t[index]


def bind_multi(cf_op, inputs, attrs, specs):
    """Apply the multi-output ``cf_op``; returns its node and one tensor per (shape, dtype) in
    ``specs`` (its ``output`` nodes, named under the node's name)."""
    node_t = cf_op(*inputs, **attrs)
    tok = OutputsToken._of(node_t.node, node_t._requires_grad)
    tok._node = node_t._node
    graph = node_t.node.graph
    outs = []
    with graph.name_scope(node_t.node.name.rsplit("/", 1)[-1]):
        for i, (shape, dtype) in enumerate(specs):
            o = output(tok, index=i, shape=tuple(shape), dtype=dtype.name)
            if not dtype.is_floating:
                o._requires_grad = False
            outs.append(o)
    return node_t.node, outs


def collect_cotangents(g_tok, n):
    """The cotangents the ``output`` nodes stored for a control-flow node's ``n`` outputs:
    ``g_tok`` is one marker, or the sum of several (add nodes over captured markers)."""
    cots = [None] * n
    stack = [g_tok]
    while stack:
        item = stack.pop()
        if isinstance(item, Node):
            if item.kind == CAPTURE:
                stack.append(item.value)
            elif item.kind == "op" and item.op.name == "add":
                stack.extend(a for a in item.inputs if isinstance(a, Node))
            continue
        if isinstance(item, SymbolicTensor):
            stack.append(item.node)
            continue
        hit = _PENDING.pop(id(item), None)
        if hit is not None:
            _, i, g = hit
            cots[i] = g if cots[i] is None else add(cots[i], g)
    return cots


def wants_grad(x):
    """Whether a vjp should produce a cotangent for input ``x`` (a float tensor that requires
    grad, or any float tensor while ``lk.gradients`` asks for all)."""
    if not isinstance(x, Tensor) or not x.dtype.is_floating:
        return False
    return x._requires_grad or getattr(dispatch._state, "grad_all", True)


def check_scalar(t, what, remedy):
    if t.shape != () and t.numel() != 1:
        raise ShapeError(f"{what} must be a single value (shape ()), but it is {node_text(t)}. "
                         f"{remedy}")
