"""Views of graph values: what makes eager mode's shared memory hold under capture.

Eagerly a view (``b[0]``, ``b.reshape(...)``, ``b.t()``) shares its base's memory, so a later
in-place write into either shows in the other. A captured graph has values, not memory, so capture
models the aliasing at trace time, as PyTorch's functionalization does:

- each view remembers its base and how it was made (the view op, its other inputs and attrs), and
  shares its base's version counter (``labkit.tensor.versions``), as eagerly;
- a write through a view is a functional update of its base, and of the base's base in turn: the
  base's new value is its old value with the view's region replaced (made by the view op's vjp,
  the same rule eager autodiff uses for it, ``inplace.base_after_write``); a base from outside the
  graph (a parameter) gets the new value with an ``assign`` node;
- reading a view whose group was written since the view was last made again re-derives it from its
  base's current value (``SymbolicTensor._gnode`` asks, so every reader sees the current value).

A view that cannot be modelled (a write through an expanded view, or through ``.real``; a reshape
of a view whose memory eager mode may or may not share) raises a GraphError naming the op and the
line, when (and only when) a write makes it matter.

>>> import labkit as lk
>>> def f(x):
...     b = x * 1
...     v = b[:2]
...     v.mul_(5)
...     return b.sum()
>>> float(lk.function(f)(lk.ones(3)))
11.0
"""
from ..errors import GraphError
from ..tensor import dispatch, versions
from ..tensor.tape import rebind
from ..tensor.tensor import Tensor
from .symbolic import SymbolicTensor

# view op -> why a write through such a view cannot be modelled (None: it can)
VIEW_OPS = {
    "getitem": None, "reshape": None, "permute": None, "expand_dims": None, "diagonal": None,
    "stop_gradient": None,     # detach(): the same memory, no history
    "real": "a write through .real would drop the imaginary part; write the complex tensor",
    "imag": "a write through .imag would drop the real part; write the complex tensor",
    "broadcast_to": "an expanded view repeats elements (PyTorch refuses writes through it too)",
    "broadcast_like": "an expanded view repeats elements (PyTorch refuses writes through it too)",
    "unfold": "unfold's windows overlap (PyTorch refuses writes through them too)",
}


class ViewOf:
    """How a symbolic tensor was made from ``base``: ``op(base, *rest, **attrs)``."""

    __slots__ = ("base", "op", "rest", "attrs", "out", "synced", "mode", "source", "contiguous",
                 "blocked")

    def refresh(self, view):
        """Re-derive ``view`` from its base's current value (its group was written since)."""
        counter = view._version
        if self.blocked is not None:
            raise GraphError(
                f"{self.op.name} (made at {self.source}): {self.blocked}. Under capture this "
                f"view's value after an in-place write into the tensor it views cannot be "
                f"given as eager mode would; clone() it before the write, or write out of place.")
        self.synced = counter[1]           # first: the re-derivation reads the base, not the view
        new = self.mode.apply(self.op, (self.base,) + self.rest, self.attrs)
        view._node_of = new._node_of
        rebind(view, new._node, new._requires_grad)


def _contiguous(op, inputs, attrs, base_view):
    """Whether a view's elements are its base's memory in order (eager reshape then views)."""
    if base_view is not None and not base_view.contiguous:
        return False
    if op.name in ("reshape", "expand_dims", "stop_gradient"):
        return True
    if op.name == "permute":
        return tuple(attrs["dims"]) == tuple(range(len(attrs["dims"])))
    if op.name == "getitem":
        seen_slice = False
        for s in attrs["spec"]:
            kind = s[0]
            if kind == "i" and not seen_slice:
                continue
            if kind == "s" and s[1:] == (None, None, None):
                seen_slice = True
                continue
            if kind == "s" and not seen_slice and s[3] in (None, 1):
                seen_slice = True
                continue
            return False
        return True
    return False


def note(out, op, inputs, attrs, mode, source):
    """Record ``out`` as a view of ``inputs[0]`` if ``op`` makes one (a symbolic base only)."""
    if op.name not in VIEW_OPS or not inputs or not isinstance(inputs[0], Tensor):
        return
    if op.name == "getitem" and len(inputs) > 1:          # integer/boolean index tensors: a copy
        return
    base = inputs[0]
    if not isinstance(base, SymbolicTensor):     # a view of a tensor from outside the graph
        v = ViewOf()
        v.base, v.op, v.source, v.contiguous = None, op, _where(source), False
        v.blocked = ("a view of a tensor from outside the graph (a parameter or buffer), whose "
                     "memory the graph does not update through views yet; write into the "
                     "tensor itself (w[i] = ..., w.add_(...)), which is an assign node")
        v.synced = versions.counter_of(out)[1]
        out._view = v
        return
    base_view = getattr(base, "_view", None)
    v = ViewOf()
    v.base, v.op, v.rest, v.attrs, v.out = base, op, tuple(inputs[1:]), attrs, out._node_of
    v.mode, v.source = mode, _where(source)
    v.contiguous = _contiguous(op, inputs, attrs, base_view)
    v.blocked = None
    if op.name == "reshape" and base_view is not None and not base_view.contiguous:
        v.blocked = ("a reshape of a non-contiguous view, which eager mode may copy or view")
    counter = versions.counter_of(base)
    out._version = counter
    v.synced = counter[1]
    out._view = v
    if out._node is not None:
        out._node.out_version = counter


def _where(source):
    """``file:line`` of the user's line that made a node (``Node.source``)."""
    if isinstance(source, tuple) and len(source) == 2:
        return f"{source[0]}:{source[1]}"
    return str(source) if source else "an unknown line"


def values_only(target, value):
    """``target`` with the values of ``value`` and its own history: what an eager write leaves
    that autodiff does not record (through ``detach()``, or under ``no_grad``), as a graph value:
    ``target + stop_gradient(value - target)``."""
    from ..tensor.ops.elementwise import add, stop_gradient, sub
    with dispatch.grad_enabled(True):
        return add(target, stop_gradient(sub(value, target)))


def write_through(view, value):
    """For a write of ``value`` into ``view``, give its bases their new values (before the write
    is counted, so that they are not re-derived first); returns the tensors written."""
    from ..tensor.ops.state import assign
    from ..tensor.public.inplace import base_after_write

    t = view
    chain = [view]
    while True:
        v = getattr(t, "_view", None)
        if v is None:
            break
        why = v.blocked or VIEW_OPS[v.op.name]
        if why is not None:
            raise GraphError(
                f"in-place write through a view made by {v.op.name} (at {v.source}): {why}. "
                f"Under capture it cannot be given as eager mode would; clone() the view and "
                f"write the clone, or write into the tensor itself.")
        base = v.base
        if v.op.name == "stop_gradient":
            new = values_only(base, value)     # a write through detach()
        else:
            out = SymbolicTensor._of(v.out, False)
            new = base_after_write(v.op, out, (base,) + v.rest, v.attrs, value, base)
        if isinstance(base, SymbolicTensor):
            base._node_of = new._node_of
            rebind(base, new._node, new._requires_grad)
            chain.append(base)
        else:                                   # a tensor from outside: an assign node
            with dispatch.grad_enabled(False):
                assign(base, new)
            break
        value, t = new, base
    return chain


def mark_current(chain):
    """The views of ``chain`` (a written view and its bases) hold their group's current value."""
    for t in chain:
        tv = getattr(t, "_view", None)
        if tv is not None:
            tv.synced = t._version[1]
