"""What every pass shares: the history record, the pass object and its registry, the pipeline
(which passes run by default, in what order), graph rewriting, and the facts that keep passes
correct.

The facts, computed here once so that every pass reads them the same way:

- *side effects*: a stateful node (``node.stateful``: assign ops, queue ops) and an *opaque* node
  (a control-flow node whose attributes hold sub-graphs, or a node kind this module does not
  know) are never removed, merged, folded, fused or moved; the program order of side effects is
  kept because a rewritten graph keeps its nodes in their original order.
- *mutable values*: a capture reads an outside tensor by reference when the graph runs, and
  stateful ops change such tensors in place. A value that may share memory with a capture (the
  capture itself, an assign's result, a reshape/permute/getitem view of them...) is *mutable*:
  an op reading it sees whatever the last side effect before it left there. Passes that move a
  read (CSE merges a later read into an earlier one; fusion evaluates a chain where its last op
  stood) only do so when no side effect lies in between: the *epoch* of a node counts the side
  effects before it.
"""
import numbers
import time

from ... import config
from ...errors import GraphError
from ...tensor.ops import elementwise as ew
from ...tensor.ops import index as ix
from ...tensor.ops import (channel_norm, linalg, nn_kernels, recurrent_layer, reduce, shape,
                           softmax, state)
from ..node import CAPTURE, CONSTANT, PLACEHOLDER, Node, as_node, is_graph

SPECIAL_KINDS = (PLACEHOLDER, CAPTURE, CONSTANT)

# Ops whose kernel returns a new array, never a view of (or the same array as) an input. Every
# other op may hand back an input or a view of it (reshape, permute, getitem, stop_gradient,
# cast to the same dtype, assign, and any op a user declares).
# (A set: the fusion pass adds its ``fused`` op.)
FRESH_OPS = {
    ew.add, ew.sub, ew.mul, ew.div, ew.pow, ew.maximum, ew.minimum, ew.neg, ew.exp, ew.log,
    ew.sqrt, ew.abs, ew.sign, ew.tanh, ew.sigmoid, ew.relu, ew.eq, ew.ne, ew.lt, ew.le, ew.gt,
    ew.ge, ew.logical_not, ew.where, linalg.matmul, reduce.sum, reduce.max, reduce.min,
    reduce.argmax, reduce.argmin, shape.concat, ix.zeros_like, ix.index_add,
    ix._gather, ix._scatter_add, softmax.softmax_backward, softmax.log_softmax_backward,
    nn_kernels.layer_norm_affine, nn_kernels.layer_norm_affine_backward,
    channel_norm.batch_norm, channel_norm.batch_norm_backward, channel_norm.channel_moments,
    channel_norm.channel_moments_backward,
    recurrent_layer.lstm_layer, recurrent_layer.lstm_layer_backward,
}

# Stateful ops that copy their value input into their target and keep no reference to it.
ASSIGN_OPS = frozenset([state.assign, state.assign_add, state.assign_sub,
                        state.assign_add_matmul, state.assign_axpby, state.assign_lerp,
                        state.adam_update])


# ---- what a pass did --------------------------------------------------------------------------
class PassRecord:
    """What one pass did to a graph, by node name: one entry of ``graph.history``.

    ``removed``: names of nodes dropped; ``merged``: (dropped, kept) pairs (CSE);
    ``forwarded``: (dropped no-op, the node its users now read) pairs (DCE); ``folded``: names
    of nodes replaced by constants; ``fused``: (new node, [names of the nodes it replaces]);
    ``reused``: (node, node whose dead buffer it writes into); ``notes``: anything else worth
    telling (why a candidate was left alone).

    >>> import labkit as lk
    >>> from labkit.graph import passes
    >>> with lk.Graph() as g:
    ...     x = lk.placeholder((2,), name="x")
    ...     y = (x + 1.0) * (x + 1.0)
    >>> print(passes.cse(g).history[-1].summary())
    cse: 4 -> 3 nodes; merged 1
    """

    __slots__ = ("name", "nodes_before", "nodes_after", "removed", "merged", "forwarded",
                 "folded", "fused", "reused", "notes", "seconds")

    def __init__(self, name, nodes_before):
        self.name = name
        self.nodes_before = nodes_before
        self.nodes_after = nodes_before
        self.removed = []
        self.merged = []
        self.forwarded = []
        self.folded = []
        self.fused = []
        self.reused = []
        self.notes = []
        self.seconds = 0.0

    def counts(self):
        """{'removed': n, ...} for the kinds of change this pass made (non-zero only)."""
        kinds = ("removed", "merged", "forwarded", "folded", "fused", "reused")
        return {k: len(getattr(self, k)) for k in kinds if getattr(self, k)}

    def summary(self):
        """One line: the pass, node counts before and after, and how many changes of each kind."""
        parts = [f"{k} {v}" for k, v in self.counts().items()]
        head = f"{self.name}: {self.nodes_before} -> {self.nodes_after} nodes"
        if self.nodes_after is not None and self.nodes_before is not None and \
                self.nodes_after > self.nodes_before:
            parts.append(f"added {self.nodes_after - self.nodes_before}")
        return head + ("; " + ", ".join(parts) if parts else "; no change")

    def __str__(self):
        lines = [self.summary()]
        lines += [f"  removed  {n}" for n in self.removed]
        lines += [f"  merged   {a} into {b}" for a, b in self.merged]
        lines += [f"  forwarded {a} to {b}" for a, b in self.forwarded]
        lines += [f"  folded   {n}" for n in self.folded]
        lines += [f"  fused    {new} = {' + '.join(names)}" for new, names in self.fused]
        lines += [f"  reused   {a} writes into the buffer of {b}" for a, b in self.reused]
        lines += [f"  note     {n}" for n in self.notes]
        return "\n".join(lines)

    def __repr__(self):
        return f"<PassRecord {self.summary()}>"

    def as_dict(self):
        """The record as plain data (for widgets and JSON)."""
        return {k: getattr(self, k) for k in self.__slots__}


def history_text(graph):
    """Every pass that made ``graph``, one record after the other ("(no passes)" for a raw one).

    >>> import labkit as lk
    >>> from labkit.graph import passes
    >>> with lk.Graph() as g:
    ...     x = lk.placeholder((3,), name="x")
    ...     y = x.exp() + x.exp()
    >>> print(passes.history_text(passes.run_passes(g, ["cse", "dce"])))
    cse: 4 -> 3 nodes; merged 1
      merged   exp_1 into exp
    dce: 3 -> 3 nodes; no change
    """
    return "\n".join(str(r) for r in graph.history) or "(no passes)"


PASSES = {}     # name -> GraphPass, in the order they were declared


def graph_pass(name):
    """Declare a pass: decorate ``fn(graph, record, **options) -> Graph`` to register it.

    >>> from labkit.graph.passes import graph_pass, Rewriter
    >>> @graph_pass("copy")
    ... def copy(graph, record):
    ...     return Rewriter(graph).copy_all()
    """
    def declare(fn):
        p = GraphPass(name, fn)
        PASSES[name] = p
        config.register_pass(name)
        return p
    return declare


class GraphPass:
    """A named pass: ``p(graph) -> new graph``, whose history ends with this pass's record.

    The wrapped function receives ``(graph, record)`` and returns the new graph; this object
    fills in the node counts and time, and never hands back the input graph itself.
    """

    def __init__(self, name, fn):
        self.name = name
        self.fn = fn
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__
        self.__module__ = fn.__module__

    def __call__(self, graph, outputs=None, **options):
        """Run the pass on ``graph``; ``outputs`` (tensors or nodes of it) overrides
        ``graph.outputs`` for this call."""
        if outputs is not None:
            graph = with_outputs(graph, outputs)
        record = PassRecord(self.name, len(graph.nodes))
        start = time.perf_counter()
        new = self.fn(graph, record, **options)
        if new is graph:
            new = Rewriter(graph).copy_all()
        record.seconds = time.perf_counter() - start
        record.nodes_after = len(new.nodes)
        new.history = list(graph.history) + [record]
        return new

    def __repr__(self):
        return f"<graph pass {self.name!r}>"


def with_outputs(graph, outputs):
    """A view of ``graph`` (same nodes, not to be run) whose ``outputs`` are ``outputs``."""
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    view = type(graph).__new__(type(graph))
    view.__dict__.update(graph.__dict__)
    view.outputs = [as_node(graph, o) for o in outputs]
    return view


# ---- the pipeline: which passes run, in what order ------------------------------------------
PIPELINE = ["prune", "constant_folding", "cse", "dce", "arithmetic", "matmul_update", "fusion",
            "memory"]
DEVICE_PASSES = ["placement", "partition"]


def default_passes():
    """The names of the pipeline's passes that are switched on (``lk.config.disable_pass``)."""
    off = config.disabled_passes()
    return [p for p in PIPELINE if p not in off]


def _resolve(passes):
    if passes is None:
        return [PASSES[p] for p in default_passes()]
    out = []
    for p in passes:
        if isinstance(p, str):
            if p not in PASSES:
                raise ValueError(f"unknown graph pass {p!r}; the passes are {list(PASSES)}")
            p = PASSES[p]
        elif not callable(p):
            raise TypeError(f"a pass is a name or a function Graph -> Graph, not {p!r}")
        out.append(p)
    return out


def stages(graph, passes=None, outputs=None):
    """[(pass name, graph after it)] for each pass in turn (default: the default pipeline).

    >>> import labkit as lk
    >>> from labkit.graph import passes
    >>> with lk.Graph() as g:
    ...     x = lk.placeholder((4,), name="x")
    ...     y = x.exp() + x.exp()
    >>> [(name, len(step)) for name, step in passes.stages(g, ["cse", "dce"])]
    [('cse', 3), ('dce', 3)]
    """
    if outputs is not None:
        graph = with_outputs(graph, outputs)
    out = []
    for p in _resolve(passes):
        graph = p(graph)
        out.append((getattr(p, "name", getattr(p, "__name__", "pass")), graph))
    return out


def run_passes(graph, passes=None, outputs=None):
    """``graph`` after ``passes`` (names or functions; default: the pipeline's enabled passes).

    ``outputs``: the tensors (or nodes) you will fetch; default ``graph.outputs``, or for a graph
    that does not say, the nodes nothing uses. An empty list of passes returns ``graph`` itself.

    >>> import labkit as lk
    >>> from labkit.graph import passes
    >>> with lk.Graph() as g:
    ...     x = lk.placeholder((3,), name="x")
    ...     y = x.detach() * 2.0
    >>> opt = passes.run_passes(g, ["dce"], outputs=[y])
    >>> len(g), len(opt), opt.run(opt.outputs[0], {opt.node("x"): [1, 2, 3]}).tolist()
    (3, 2, [2.0, 4.0, 6.0])
    """
    steps = stages(graph, passes, outputs)
    return steps[-1][1] if steps else graph


# ---- building the next graph ------------------------------------------------------------------
_NODE_FIELDS = ("graph", "index", "name", "kind", "op", "inputs", "attrs", "shape", "dtype",
                "device", "__weakref__")
_EXTRA_FIELDS = [s for s in Node.__slots__ if s not in _NODE_FIELDS]
_GRAPH_OWN = {"nodes", "_names", "_scope", "_captures", "_lock", "_plans", "history", "outputs",
              "buffer_plan", "_ctx", "name"}


class Rewriter:
    """Builds the next graph from ``old``, node by node, in the old order.

    ``copy(node)`` copies a node with its inputs mapped to the new graph; ``forward(node, to)``
    makes every later use of ``node`` read ``to`` instead (``node`` is dropped); ``add(...)``
    appends a new node. ``finish()`` maps ``old.outputs`` and checks the result.

    A pass that drops every ``tanh`` whose input is a ``tanh`` (tanh is not idempotent: this
    only shows the tools)::

        @graph_pass("no_double_tanh")
        def no_double_tanh(graph, record):
            rw = Rewriter(graph)
            for n in graph.nodes:
                src = n.inputs[0] if n.op_name == "tanh" else None
                if src is not None and src.op_name == "tanh":
                    rw.forward(n, src)
                    record.forwarded.append((n.name, src.name))
                else:
                    rw.copy(n)
            return rw.finish()
    """

    def __init__(self, old):
        self.old = old
        new = type(old)(old.name)
        new._names = dict(old._names)
        for k, v in old.__dict__.items():     # attributes other layers keep on a graph
            if k not in _GRAPH_OWN:
                new.__dict__[k] = v
        self.new = new
        self.map = {}           # old index -> new Node

    def arg(self, a):
        """An input of an old node, as the new graph sees it."""
        if isinstance(a, Node):
            try:
                return self.map[a.index]
            except KeyError:
                raise GraphError(f"pass error: node {a.name} was dropped but is still used\n"
                                 f"{self.old}") from None
        return a

    def copy(self, node, inputs=None):
        """A copy of old ``node`` in the new graph (same name and fields), inputs mapped."""
        ins = tuple(self.arg(a) for a in node.inputs) if inputs is None else tuple(inputs)
        n = Node(self.new, node.name, node.kind, node.op, ins, node.attrs, node.shape,
                 node.dtype, node.device)
        for slot in _EXTRA_FIELDS:
            try:
                setattr(n, slot, getattr(node, slot))
            except AttributeError:
                pass
        self._append(n)
        self.map[node.index] = n
        return n

    def add(self, kind, op, inputs, attrs, shape, dtype, device, name, like=None,
            exact_name=False):
        """A new node (inputs already in the new graph); scope and role copied from ``like``.
        ``exact_name``: take ``name`` as it is (a node that replaces the old one of that name)."""
        n = Node(self.new, name if exact_name else self.new._unique(name), kind, op, inputs,
                 attrs, shape, dtype, device)
        n.stateful = bool(getattr(op, "stateful", False))
        if like is not None:
            n.scope, n.role, n.source = like.scope, like.role, like.source
            n.requested_device = like.requested_device
        self._append(n)
        return n

    def forward(self, node, to):
        """Every use of old ``node`` now reads old node ``to`` (already mapped) instead."""
        self.map[node.index] = self.map[to.index]

    def _append(self, n):
        n.index = len(self.new.nodes)
        self.new.nodes.append(n)

    def copy_all(self):
        for n in self.old.nodes:
            self.copy(n)
        return self.finish()

    def finish(self):
        new = self.new
        new._captures = {id(n.value): n for n in new.nodes if n.kind == CAPTURE}
        new.outputs = [self.arg(o) for o in output_nodes(self.old)]
        new.lint()
        return new


# ---- facts about nodes ------------------------------------------------------------------------
_PLAIN = frozenset([int, float, str, bool, type(None)])


def holds_graph(value):
    """Whether an attribute value is (or contains) a graph or a sub-graph."""
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) in _PLAIN:
            continue
        if is_graph(v) or is_graph(getattr(v, "graph", None)):
            return True
        if isinstance(v, (tuple, list)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
    return False


def is_opaque(node):
    """A node passes must leave alone: a control-flow node (attributes holding sub-graphs), or
    a node of a kind this module does not know."""
    if node.kind not in ("op",) + SPECIAL_KINDS:
        return True
    return node.kind == "op" and any(holds_graph(v) for v in node.attrs.values())


def has_side_effects(node):
    return node.stateful or is_opaque(node)


def users(graph):
    """For each node index, the indices of the nodes that use it (once each, in order)."""
    out = [[] for _ in graph.nodes]
    for n in graph.nodes:
        seen = set()
        for a in n.inputs:
            if isinstance(a, Node) and a.index not in seen:
                seen.add(a.index)
                out[a.index].append(n.index)
    return out


def output_nodes(graph):
    """What passes must keep computable: ``graph.outputs``, or when the graph does not say
    (``outputs`` is None, e.g. a graph built with ``with lk.Graph()``), the nodes no other node
    uses. Run passes with ``outputs=[...]`` to say which values you will fetch."""
    if graph.outputs is not None:
        return list(graph.outputs)
    used = {a.index for n in graph.nodes for a in n.inputs if isinstance(a, Node)}
    return [n for n in graph.nodes if n.index not in used]


def output_indices(graph):
    return {o.index for o in output_nodes(graph)}


def epochs(graph):
    """For each node, how many side-effecting nodes come before it."""
    out, count = [], 0
    for n in graph.nodes:
        out.append(count)
        if has_side_effects(n):
            count += 1
    return out


def alias_classes(graph):
    """``find(i)``: a representative of the nodes whose values may share memory with node i's.

    An op not known to return a fresh array may return (a view of) any of its inputs; an assign
    returns its target; a side effect or a control-flow node may return any of its inputs.
    """
    parent = list(range(len(graph.nodes)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for n in graph.nodes:
        if n.kind in SPECIAL_KINDS or (n.op in FRESH_OPS and not has_side_effects(n)):
            continue
        ins = n.inputs[:1] if n.op in ASSIGN_OPS else n.inputs
        for a in ins:
            if isinstance(a, Node):
                ra, rb = find(n.index), find(a.index)
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
    return find


def mutable_values(graph, find=None):
    """Indices of nodes whose value may share memory with state that side effects change: a
    capture, a side effect's result, what a side effect writes into (an assign's target, any
    input of another side effect), and every view of those."""
    find = find or alias_classes(graph)
    roots = set()
    for n in graph.nodes:
        if n.kind == CAPTURE or has_side_effects(n):
            roots.add(find(n.index))
            if has_side_effects(n):
                targets = n.inputs[:1] if n.op in ASSIGN_OPS else n.inputs
                roots.update(find(a.index) for a in targets if isinstance(a, Node))
    return {n.index for n in graph.nodes if find(n.index) in roots}


def unwritten_scalars(graph):
    """Indices of 0-d floating-point captures that no side effect of the graph writes into
    (a learning rate that changes between runs): a read of one may move across side effects
    within a run."""
    find = alias_classes(graph)
    written = set()
    for n in graph.nodes:
        if has_side_effects(n):
            written.add(find(n.index))
            targets = n.inputs[:1] if n.op in ASSIGN_OPS else n.inputs
            written.update(find(a.index) for a in targets if isinstance(a, Node))
    return {n.index for n in graph.nodes if n.kind == CAPTURE and n.shape == () and
            n.dtype.is_floating and find(n.index) not in written}


def reads_mutable(node, mutable):
    return any(isinstance(a, Node) and a.index in mutable for a in node.inputs)


def scalar_factor(node):
    """(tensor node, number) when ``node`` is ``mul(tensor, number)`` or ``mul(number, tensor)``
    with a Python number (not a bool), else None."""
    if node.kind != "op" or node.op is not ew.mul or node.attrs or len(node.inputs) != 2:
        return None
    x, y = node.inputs
    for t, s in ((x, y), (y, x)):
        if isinstance(t, Node) and not isinstance(s, (Node, bool)) and \
                isinstance(s, numbers.Real):
            return t, s
    return None


def literal_key(value):
    """A hashable key for a literal input that tells 1, 1.0, True and -0.0 / 0.0 apart."""
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)


def freeze(value):
    """A hashable, type-exact form of an attribute value (TypeError when there is none)."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,) + tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return ("dict",) + tuple(sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, (bool, int, float, str)) or value is None:
        return literal_key(value)
    hash(value)
    return ("object", type(value).__name__, value)
