"""Capture mode: the second branch of the single dispatch function.

While a graph is being built, ``bind`` hands every op to ``CaptureMode.apply``, which runs the
op's shape rule (no kernel) and adds a node. Tensors from outside the graph are captured by
reference (the graph reads their current value when it runs). Under capture the tape is still
recorded, so ``loss.backward()`` and ``lk.grad`` inside a captured function put the backward pass
into the graph, from the same vjp rules.
"""
import contextlib
import threading

from ..devices import default_device
from ..devices.device import requested_device
from ..errors import user_line
from ..tensor import dispatch
from ..tensor.dispatch import Mode
from ..tensor.dtypes import as_dtype, float32
from ..tensor.eager import device_beside_cpu_scalars
from ..tensor.ops.elementwise import to_device
from ..tensor.ops.random import DRAWS
from ..tensor.tape import TapeNode
from ..tensor import versions
from ..tensor.tensor import Tensor
from .grad_state import GradTracker
from .ir import PLACEHOLDER, GraphError, Node
from .symbolic import SymbolicTensor


class SymbolicTapeNode(TapeNode):
    """A tape entry whose output is a graph node rather than an array."""

    __slots__ = ()

    def output_tensor(self, linked):
        t = SymbolicTensor._of(self.out, linked)
        if linked:
            t._node = self
        return t


class CaptureMode(Mode):
    """Add each op to ``graph`` as a node instead of running it."""

    def __init__(self, graph):
        self.graph = graph
        self.grads = GradTracker()   # .grad of outside tensors during the trace
        self.role = "forward"
        # A traced function's tensor arguments (their symbolic tensors, by id -> position) and
        # what the function does to their .grad: position -> [value or None, replaces]; the
        # function sets each argument's .grad from the graph after a run (lk.function)
        self.arguments = {}
        self.argument_grads = {}

    def apply(self, op, inputs, attrs):
        g = self.graph
        args = []
        device = None
        needs_grad = False
        for a in inputs:
            if isinstance(a, Tensor):
                if isinstance(a, SymbolicTensor):
                    node = a._gnode
                    if node.graph is not g:
                        raise GraphError(
                            f"{op.name}: input {a!r} belongs to graph {node.graph.name!r}, not "
                            f"to {g.name!r}, the graph being built. A symbolic tensor cannot "
                            f"leave the graph (or function trace) that made it: return it from "
                            f"the function, or pass values between graphs as feeds.")
                else:
                    node = g.capture(a)
                if device is None:
                    device = a._device
                elif a._device is not device:       # 0-d CPU tensors beside a GPU's: moved
                    target = device_beside_cpu_scalars(op, inputs)
                    return self.apply(op, [
                        to_device(x, device=target.name) if isinstance(x, Tensor) and
                        x._device is not target else x for x in inputs], attrs)
                needs_grad = needs_grad or a._requires_grad
                args.append(node)
            elif isinstance(a, (list, tuple, dict)):
                from ..errors import DTypeError
                raise DTypeError(f"{op.name}: got a {type(a).__name__} as an input; pass tensors "
                                 f"as separate arguments")
            else:
                args.append(a)
        shape, dtype = op.shape(*inputs, **attrs)
        if op.out_device is not None:
            device = op.out_device(attrs)
        colocate = _colocation.stack
        colocation = _colocation_target(g, colocate[-1]) if colocate else None
        node = g.add_node("op", op, args, attrs, shape, dtype, device or default_device())
        request = requested_device()
        if request is not None:          # inside ``with lk.device(...)``: for placement
            node.requested_device, node.device_forced = request
        node.colocation = colocation
        node.source = user_line()
        node.stateful = op.stateful
        # a stateful op changes state (an update), except a random draw, which only moves its
        # generator on: a dropout mask belongs to the forward pass it is drawn in
        node.role = "update" if op.stateful and op not in DRAWS else self.role
        grad = needs_grad and op.vjp is not None and dispatch._state.grad_enabled
        out = SymbolicTensor._of(node, grad)
        if op.vjp is not None and dispatch._state.grad_enabled:
            # recorded for every differentiable op (trace time only), so that lk.gradients can
            # differentiate with respect to any tensor of the graph
            out._node = SymbolicTapeNode(op, inputs, attrs, node, node.device)
        return out

    @contextlib.contextmanager
    def phase(self, name):
        previous, self.role = self.role, name
        try:
            yield
        finally:
            self.role = previous

    def set_grad(self, tensor, value):
        if isinstance(tensor, SymbolicTensor):
            tensor._grad = value
            position = self.arguments.get(id(tensor))
            if position is not None:        # x.grad = ... (or zero_grad) on an argument
                self.argument_grads[position] = [value, True]
        else:
            self.grads.set(tensor, value)

    def value_before_write(self, target):
        if not isinstance(target, SymbolicTensor):
            return None
        # a node's value is never overwritten (the write rebinds ``target``): a second name will do
        old = SymbolicTensor._of(target._gnode, target._requires_grad)
        old._node = target._node
        return old

    def write_inplace(self, target, result):
        if not isinstance(target, SymbolicTensor):
            return False          # a tensor from outside: the assign op, a stateful node
        # as eagerly, a backward pass through an op that saved the value written over raises
        # (versions.py): the write counts as a version of ``target``, and of the output of the
        # op that made the value
        made_by = target._node
        versions.bump(target)
        if isinstance(made_by, SymbolicTapeNode) and made_by.out is target._gnode and \
                made_by.out_version is None:
            made_by.out_version = target._version
        target._gnode = result._gnode      # a value inside the graph: it now names the result
        target._node, target._requires_grad = result._node, result._requires_grad
        return True

    def rematerialize(self, target, value):
        if isinstance(target, SymbolicTensor) and isinstance(value, SymbolicTensor):
            target._gnode = value._gnode      # the backward pass reads the node made again
        else:
            super().rematerialize(target, value)

    def accumulate_grad(self, leaf, g):
        if isinstance(leaf, SymbolicTensor):
            leaf._grad = g if leaf._grad is None else leaf._grad + g
            position = self.arguments.get(id(leaf))
            if position is not None:        # backward() reaching an argument: its .grad
                entry = self.argument_grads.setdefault(position, [None, False])
                entry[0] = leaf._grad
        else:
            self.grads.accumulate(leaf, g)


class _Colocation(threading.local):
    def __init__(self):
        self.stack = []


_colocation = _Colocation()


def _colocation_target(graph, tensor):
    """The name of the node of ``graph`` that ``tensor`` stands for (captured if outside)."""
    if isinstance(tensor, SymbolicTensor):
        node = tensor._gnode
        if node.graph is not graph:
            raise GraphError(f"lk.colocate_with({tensor!r}): that tensor belongs to graph "
                             f"{node.graph.name!r}, not to {graph.name!r}, the graph being built")
        return node.name
    return graph.capture(tensor).name


@contextlib.contextmanager
def colocate_with(tensor):
    """Ops made inside the block (while building a graph) run on the same device as ``tensor``.

    The placement pass puts them, and ``tensor``'s node, in one colocation group; a request
    ``with lk.device(...)`` inside the block gives way to the colocation unless forced. Outside
    graph capture it does nothing (eager ops run where their inputs are).

    >>> import labkit as lk
    >>> w = lk.Variable([1.0, 2.0], name="w")
    >>> with lk.Graph() as g:
    ...     with lk.colocate_with(w):
    ...         y = w * 2.0
    >>> g.placement()["mul"].reason
    'colocated with w (lk.colocate_with)'
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"lk.colocate_with takes a tensor (a variable, or a tensor of the graph "
                        f"being built), not {type(tensor).__name__}")
    _colocation.stack.append(tensor)
    try:
        yield
    finally:
        _colocation.stack.pop()


class _Graphs(threading.local):
    def __init__(self):
        self.stack = []


_graphs = _Graphs()


def current_graph():
    """The graph being built by this thread (None when not capturing)."""
    return _graphs.stack[-1][0] if _graphs.stack else None


def current_capture():
    return _graphs.stack[-1][1] if _graphs.stack else None


@contextlib.contextmanager
def enter_graph(graph):
    """Build ``graph``: ops inside the block become its nodes."""
    mode = CaptureMode(graph)
    _graphs.stack.append((graph, mode))
    try:
        with dispatch.push_mode(mode):
            yield mode
    finally:
        _graphs.stack.pop()


def placeholder(shape, dtype=None, name=None, device=None, requires_grad=False):
    """A graph input, fed with ``g.run(fetches, {placeholder: value})``.

    >>> import labkit as lk
    >>> with lk.Graph() as g:
    ...     x = lk.placeholder((3,), lk.float32, name="x")
    >>> x.shape
    (3,)
    """
    graph = current_graph()
    if graph is None:
        raise GraphError("lk.placeholder is for building a graph: use it inside "
                         "'with lk.Graph() as g:'")
    from ..devices import get_device
    shape = (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)
    node = graph.add_node(PLACEHOLDER, None, (), {}, shape, as_dtype(dtype) or float32,
                          get_device(device), name=name or "placeholder")
    return SymbolicTensor._of(node, requires_grad)


@contextlib.contextmanager
def name_scope(name):
    """Group the nodes made inside the block under ``name`` (shown as boxes in pictures).

    Outside graph capture it does nothing, so model code can use it in both modes.
    """
    graph = current_graph()
    if graph is None:
        yield
        return
    with graph.name_scope(name):
        yield


@contextlib.contextmanager
def role(name):
    """Mark the nodes made inside the block as ``forward``, ``backward`` or ``update``."""
    mode = current_capture()
    if mode is None:
        yield
        return
    with mode.phase(name):
        yield


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
