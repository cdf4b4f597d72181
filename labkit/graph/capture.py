"""Capture mode: the second branch of the single dispatch function.

While a graph is being built, ``bind`` hands every op to ``CaptureMode.apply``, which runs the
op's shape rule (no kernel) and adds a node. Tensors from outside the graph are captured by
reference (the graph reads their current value when it runs). Under capture the tape is still
recorded, so ``loss.backward()`` and ``lk.grad`` inside a captured function put the backward pass
into the graph, from the same vjp rules.

The capture mode also keeps ``.grad`` of tensors from outside the graph (parameters), with
eager semantics. While a function is traced, every write to such a ``.grad`` goes through the
mode, which keeps, per tensor, what its gradient is now: untouched (whatever it is when the
function runs), cleared (``zero_grad``), or a value of the graph. ``backward()`` adding to an
untouched gradient that is None while tracing makes the trace assume it is None when it runs (a
*guard*, checked per call, like PyTorch's compiled code guards on ``.grad``): the new gradient
simply becomes ``.grad``, with no zeros made and added. A call that finds such a ``.grad`` set
runs a second trace that reads it when the graph runs (``read_grad``) and adds to it, so a
captured step accumulates across calls exactly as eagerly (micro-batches). After ``zero_grad``
inside the function backward simply replaces it. When the trace ends the tensors get their
gradients back, and each run of the function sets them from the graph's outputs. Optimisers and
gradient clipping read a gradient through the mode (``get_grad``): under capture, a ``.grad``
from before the trace is read when the graph runs.
"""
import contextlib
import threading

from ..devices import default_device
from ..devices.device import requested_device
from ..errors import GradError, GraphError, describe, user_line
from ..tensor import autocast, dispatch
from ..tensor.dispatch import Mode
from ..tensor.dtypes import as_dtype, float32
from ..tensor.eager import device_beside_cpu_scalars
from ..tensor.op import op
from ..tensor.ops.elementwise import add, to_device
from ..tensor.ops.random import DRAWS
from ..tensor.tape import TapeNode, rebind
from ..tensor import versions
from ..tensor.tensor import Tensor
from .node import PLACEHOLDER, Node
from .symbolic import SymbolicTensor
from . import views


# ---- .grad of outside tensors during a trace -------------------------------------------------
class GradOf:
    """The ``.grad`` of a tensor, read when a graph runs (the attribute of ``read_grad``)."""

    __slots__ = ("tensor", "missing")

    def __init__(self, tensor, missing="zeros"):
        self.tensor = tensor
        self.missing = missing

    def __repr__(self):
        return f"<.grad of {describe(self.tensor)}>"


def _read_grad_rule(source):
    return source.tensor.shape, source.tensor.dtype


@op("read_grad", shape=_read_grad_rule, vjp=None, register=False, stateful=True)
def _read_grad(xp, source):
    g = source.tensor.grad
    if g is None or g._data is None:
        if source.missing == "zeros":
            return xp.zeros(source.tensor.shape, dtype=source.tensor.dtype.np)
        raise GradError(
            f"a captured function ran, but {describe(source.tensor)} has no .grad now (it had "
            f"one when the function was traced). Run backward() before each call, or put "
            f"backward() inside the captured function.")
    return g._data


_read_grad.out_device = lambda attrs: attrs["source"].tensor.device


def read_grad(tensor, missing="zeros"):
    """The ``.grad`` of outside ``tensor`` as it is when the graph runs (``missing``: 'zeros' or
    'error' when it has none then)."""
    return _read_grad(source=GradOf(tensor, missing))


UNTOUCHED, CLEARED, SET = "untouched", "cleared", "set"


class GradTracker:
    """Per outside tensor: its ``.grad`` before the trace, and its state during the trace."""

    def __init__(self, assume_none=True):
        self.entries = {}       # id(tensor) -> [tensor, original grad, state, value]
        self.assume_none = assume_none
        self.guards = []        # tensors whose .grad the trace assumes is None when it runs

    def _entry(self, tensor):
        e = self.entries.get(id(tensor))
        if e is None:
            e = self.entries[id(tensor)] = [tensor, tensor._grad, UNTOUCHED, None]
        return e

    def set(self, tensor, value):
        e = self._entry(tensor)
        e[2], e[3] = (CLEARED, None) if value is None else (SET, value)
        tensor._grad = value

    def accumulate(self, tensor, g):
        e = self._entry(tensor)
        if e[2] == UNTOUCHED and self.assume_none and e[1] is None:
            value = g
            self.guards.append(tensor)
        elif e[2] == UNTOUCHED:
            value = add(read_grad(tensor), g)
        elif e[2] == CLEARED:
            value = g
        else:
            value = add(e[3], g)
        e[2], e[3] = SET, value
        tensor._grad = value

    def finish(self):
        """Give every tensor its gradient back; return [(tensor, value)] and [cleared tensors]."""
        sets, clears = [], []
        for tensor, original, state, value in self.entries.values():
            tensor._grad = original
            if state == SET:
                sets.append((tensor, value))
            elif state == CLEARED:
                clears.append(tensor)
        return sets, clears


# ---- the capture mode ---------------------------------------------------------------------------
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
        # module attributes set to a tensor of this graph (``self.mask = mask`` in a forward):
        # (id(obj), name) -> (obj, name, value before the trace); see note_attribute
        self.attribute_writes = {}

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
        views.note(out, op, inputs, attrs, self, node.source)
        return out

    @contextlib.contextmanager
    def phase(self, name):
        previous, self.role = self.role, name
        try:
            yield
        finally:
            self.role = previous

    def get_grad(self, tensor):
        g = tensor._grad
        if g is None or isinstance(g, SymbolicTensor):
            return g
        return read_grad(tensor, missing="error")   # from before the trace: read at run time

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
        if not dispatch._state.grad_enabled and target._requires_grad and \
                not result._requires_grad:
            result = views.values_only(target, result)    # as eagerly: values, not history
        made_by = target._node
        written = views.write_through(target, result)   # a view's bases, as eager memory
        versions.bump(target)
        if isinstance(made_by, SymbolicTapeNode) and made_by.out is target._gnode and \
                made_by.out_version is None:
            made_by.out_version = target._version
        target._gnode = result._gnode      # a value inside the graph: it now names the result
        rebind(target, result._node, result._requires_grad)
        views.mark_current(written)
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


_UNSET = object()


def note_attribute(obj, name, value, before=_UNSET):
    """``obj.name = value`` with ``value`` a symbolic tensor of the graph being built (a module
    caching a mask in its forward). A traced function (``lk.function``) fetches it from the graph
    and sets the attribute to its value after each run, so the object never keeps a symbolic
    tensor; a trace that fails puts back ``before`` (``_UNSET``: the attribute did not exist)."""
    mode = current_capture()
    if mode is not None and value._gnode.graph is mode.graph:
        mode.attribute_writes.setdefault((id(obj), name), (obj, name, before))


def restore_attributes(mode):
    """Undo the attribute writes ``note_attribute`` recorded (a trace that failed)."""
    for obj, name, before in mode.attribute_writes.values():
        if before is _UNSET:
            try:
                delattr(obj, name)
            except AttributeError:
                pass
        else:
            setattr(obj, name, before)


@contextlib.contextmanager
def enter_graph(graph):
    """Build ``graph``: ops inside the block become its nodes."""
    mode = CaptureMode(graph)
    _graphs.stack.append((graph, mode))
    try:
        # inside an autocast region, ops are cast before they are captured, as eagerly
        with dispatch.push_mode(mode), autocast.over(mode):
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
    # None: a size given only by the fed value (TensorFlow's unknown batch dimension)
    shape = (int(shape),) if isinstance(shape, int) else \
        tuple(None if s is None else int(s) for s in shape)
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
