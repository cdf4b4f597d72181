"""One value of a graph: a ``Node`` is one op applied to earlier nodes and Python literals, or
one of the special kinds (a placeholder fed at run time, a capture of an outside tensor read by
reference, a constant). Everything that walks graphs (passes, the executor, capture, export)
reads nodes through this module; ``labkit.graph.ir`` holds the ``Graph`` that owns them.
"""
from ..errors import GraphError
from .symbolic import SymbolicTensor

PLACEHOLDER, CAPTURE, CONSTANT = "placeholder", "capture", "constant"
SPECIAL = (PLACEHOLDER, CAPTURE, CONSTANT)


class Node:
    """One value of a graph: ``op`` applied to ``inputs`` (Nodes or Python literals)."""

    __slots__ = ("graph", "index", "name", "op", "kind", "inputs", "attrs", "shape", "dtype",
                 "device", "requested_device", "scope", "value", "stateful", "role",
                 "device_forced", "colocation", "placement_reason", "source", "__weakref__")

    def __init__(self, graph, name, kind, op, inputs, attrs, shape, dtype, device):
        self.graph = graph
        self.index = -1
        self.name = name
        self.kind = kind            # "op" or one of SPECIAL
        self.op = op                # the Op object for kind == "op"
        self.inputs = tuple(inputs)
        self.attrs = dict(attrs)
        self.shape = None if shape is None else tuple(shape)
        self.dtype = dtype
        self.device = device        # assigned device
        self.requested_device = None   # Device asked for with ``with lk.device(...)``
        self.device_forced = False     # the request was made with force=True
        self.colocation = None         # name of the node it must share a device with
        self.placement_reason = None   # why it is on ``device`` (set by the placement pass)
        self.scope = ""
        self.value = None           # CONSTANT: the array; CAPTURE: the captured Tensor
        self.stateful = False       # has a side effect: never pruned from a function's plan
        self.role = "forward"       # forward | backward | update (for pictures)
        self.source = None          # (filename, line) of the user's code that made it (traced)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def op_name(self):
        return self.op.name if self.kind == "op" else self.kind

    def ref(self):
        return f"%{self.index}"

    def __repr__(self):
        return f"<Node {self.ref()} {self.name}: {self.op_name} {type_text(self)}>"


def type_text(node):
    """``float32[2, ?]``: a node's dtype and shape as listings write them."""
    shape = "?" if node.shape is None else ", ".join("?" if s is None else str(s)
                                                    for s in node.shape)
    return f"{node.dtype.name if node.dtype else '?'}[{shape}]"


def arg_text(a):
    """An input of a node as listings write it: ``%3`` for a node, the repr of a literal."""
    if isinstance(a, Node):
        return a.ref()
    return repr(a)


# ---- how a plan calls a node's kernel (read by the executor and the buffer-reuse pass) -----
def direct_call(node):
    """The function computing ``node`` into a given array (``f(*inputs, out=array)``), from its
    op's declaration (``Op.into``), or None."""
    if node.kind != "op" or node.op.into is None:
        return None
    return node.op.into(node.device.xp, **node.attrs) if node.attrs else \
        node.op.into(node.device.xp)


def writes_into(node):
    """Whether a plan can have ``node`` write its result into a given array (``out=``)."""
    if node.kind != "op" or node.shape is None or None in node.shape:
        return False
    return node.op.into is not None


def is_graph(value):
    """Whether ``value`` is a graph (it owns nodes: ``add_node``). Passes ask this of a node's
    attributes, where control-flow nodes keep their sub-graphs, without importing
    ``labkit.graph.ir``, whose ``Graph.run`` reaches up to the compiler that runs the passes."""
    return callable(getattr(value, "add_node", None))


def as_node(graph, t):
    """The node of ``graph`` that tensor ``t`` stands for (GraphError if it is another graph's)."""
    if isinstance(t, SymbolicTensor):
        if t._gnode.graph is not graph:
            raise GraphError(f"fetch {t!r} belongs to graph {t._gnode.graph.name!r}, not to "
                             f"{graph.name!r}: fetch tensors of the graph you run")
        return t._gnode
    if isinstance(t, Node):
        if t.graph is not graph:
            raise GraphError(f"node {t.name} belongs to another graph")
        return t
    raise GraphError(f"cannot fetch {type(t).__name__} {t!r}: fetch symbolic tensors of the graph")
