"""Symbolic tensors: what code sees while a graph is being captured.

A ``SymbolicTensor`` is a Tensor with a shape, dtype and device but no values: it names a node of
the graph being built. All operators and methods work on it (they go through the same dispatch);
anything that needs a value now (``bool(t)``, ``t.item()``, ``np.asarray(t)``) is a tracing
mistake, and raises a TracingError that names the node and says what to use instead.
"""
import sys
import threading

from ..errors import LabkitError, source_text, user_line
from ..tensor.tensor import Tensor


class TracingError(LabkitError, TypeError):
    """Something that needs a concrete value was asked of a symbolic tensor during capture."""


class GraphBreak(TracingError):
    """What ``lk.compile`` cannot put in a graph (a value read into Python, ``print`` of a
    traced tensor, a call of an ``lk.compiler.disable`` d function): the call runs eagerly,
    or with ``fullgraph=True`` this is raised."""


class _Breaking(threading.local):
    depth = 0           # > 0 while lk.compile traces on this thread: print() breaks the graph


breaking = _Breaking()


def _tracing_error(what, node, message):
    """A TracingError that also says, in short (``.what``), what needed which node's value:
    ``lk.compile`` records it as the reason of a graph break."""
    error = TracingError(message)
    error.what = f"{what} needs the value of node '{node.name}' ({node.op_name})"
    return error


class SymbolicTensor(Tensor):
    """A placeholder for a value of a graph node (shape, dtype, device known; values not)."""

    __slots__ = ("_node_of", "_view")

    @classmethod
    def _of(cls, node, requires_grad=False):
        t = cls._make(None, node.device, requires_grad)
        t._node_of = node
        t._view = None
        return t

    @property
    def _gnode(self):
        """The node this tensor names now: a view whose base was written since it was made is
        made again from the base first (labkit/graph/views.py)."""
        view = getattr(self, "_view", None)
        if view is not None and view.synced != self._version[1]:
            view.refresh(self)
        return self._node_of

    @_gnode.setter
    def _gnode(self, node):
        self._node_of = node

    @property
    def node(self):
        """The graph node this tensor stands for."""
        return self._gnode

    @property
    def graph(self):
        return self._gnode.graph

    @property
    def name(self):
        return self._gnode.name

    @property
    def shape(self):
        return self._gnode.shape

    @property
    def ndim(self):
        return len(self._gnode.shape)

    @property
    def dtype(self):
        return self._gnode.dtype

    def numel(self):
        n = 1
        for s in self._gnode.shape:
            n *= s
        return n

    def __len__(self):
        if not self._gnode.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._gnode.shape[0]

    def _concrete(self, what, instead):
        n = self._gnode
        where = user_line(sys._getframe(1))
        at = f" The line: {source_text(where)}." if where is not None else ""
        raise _tracing_error(
            what, n,
            f"{what} needs a concrete value, but this tensor is symbolic: it stands for node "
            f"{n.ref()} '{n.name}' ({n.op_name}, {n.dtype.name}{list(n.shape or ())}) of graph "
            f"{n.graph.name!r}, whose value exists only when the graph runs. {instead}{at} To "
            f"debug with real values, run eagerly: lk.config.run_functions_eagerly(True).")

    def __bool__(self):
        self._concrete("Python control flow on a tensor (if/while/and/or, bool(t))",
                       "Put data-dependent choices in the graph with lk.cond, lk.where or "
                       "lk.while_loop.")

    def item(self):
        self._concrete("t.item()", "Return the tensor from the function instead.")

    def numpy(self, *, force=False):
        self._concrete("t.numpy()", "Return the tensor from the function instead.")

    def tolist(self):
        self._concrete("t.tolist()", "Return the tensor from the function instead.")

    def __array__(self, dtype=None, copy=None):
        self._concrete("NumPy (np.asarray, a NumPy function)", "Use labkit ops inside a "
                       "captured function.")

    def __float__(self):
        self._concrete("float(t)", "Keep it a tensor.")

    def __int__(self):
        self._concrete("int(t)", "Keep it a tensor.")

    def __index__(self):
        self._concrete("using a tensor as a Python int (an index, range(n), a size)",
                       "To index, use lk.take / lk.gather; to loop a data-dependent number of "
                       "times, use lk.while_loop or lk.scan; or pass a Python int argument.")

    def __repr__(self):
        n = self._gnode
        shape = ", ".join("?" if s is None else str(s) for s in (n.shape or ()))
        return (f"SymbolicTensor({n.name!r}, op={n.op_name}, shape=({shape}), "
                f"dtype={n.dtype}, device='{getattr(n.device, 'name', n.device)}')")

    def __str__(self):
        if breaking.depth:
            self._concrete("print() / str() of a traced tensor", "Print it outside the "
                           "compiled function, or return it.")
        return self.__repr__()

    def __format__(self, spec):
        if breaking.depth:
            self._concrete("formatting a traced tensor (an f-string, print)", "Print it outside "
                           "the compiled function, or return it.")
        return format(self.__repr__(), spec)

    def __dlpack__(self, *args, **kwargs):
        self._concrete("DLPack export", "Export the function's result instead.")

    def detach(self):
        from ..tensor.ops.elementwise import stop_gradient
        return stop_gradient(self)

    def backward(self, gradient=None, retain_graph=None, create_graph=False):
        from ..autodiff.engine import backward
        backward(self, gradient, retain_graph=True if retain_graph is None else retain_graph,
                 create_graph=create_graph)
