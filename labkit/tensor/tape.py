"""The tape entry that eager autodiff records: which op made a tensor, from what.

A tensor that needs a gradient holds its ``TapeNode``; the node holds the op's inputs (so they
stay alive exactly as long as something downstream may differentiate through them) and the output
array, but not the output Tensor: there are no reference cycles, so when the last tensor of a
computation is dropped its whole tape is freed at once by reference counting, as in PyTorch.
The backward engine (labkit.autodiff) walks these nodes.

An in-place write gives the tensor written a new history (``rebind``) while the entries recorded
before it took the tensor as an input must still reach the value they read: each tensor keeps the
histories its writes replaced, stamped with the write's epoch, and the engine asks for the one an
entry saw (``history_at``). A view is the exception, as in PyTorch: it shows its base's later
writes, so an entry reading the view after its base was written reaches the written base
(``view_base`` tells which entries made views). A write through a view gives the base the written
value's history and the view a new entry of its view op over it, so this holds for a view written
through as well. A view made while nothing needed a gradient has no entry; eager mode keeps how it
was made (``view_entry``), so a write through it reaches its base, and when a write gives its
memory a history, the views of it made before take their view op over it when next read
(``regrow``).
"""
from bisect import bisect_right
from operator import itemgetter

import itertools
import weakref

from .tensor import Tensor
from .versions import epoch as _epoch, given_grad

_sequence = itertools.count()   # the order entries are recorded in (backward runs it reversed)

_make = Tensor._make


class TapeNode:
    __slots__ = ("op", "inputs", "attrs", "out", "device", "epoch", "out_version", "seq",
                 "__weakref__")

    def __init__(self, op, inputs, attrs, out, device, out_version=None):
        self.op = op
        self.inputs = inputs   # tuple of Tensors / scalars as passed to the op; None once freed
        self.attrs = attrs
        self.out = out         # the output array (the vjp's ``out`` argument)
        self.device = device
        self.epoch = _epoch[0]            # in-place writes before this entry (versions.py)
        self.out_version = out_version    # the output tensor's version counter
        self.seq = next(_sequence)        # recorded after every entry it reads from

    def output_tensor(self, linked):
        """The output as a Tensor for the vjp rule; ``linked``: part of a recorded backward."""
        return _make(self.out, self.device, linked, self if linked else None)

    def free(self):
        """Drop what backward needed; a second backward through this node is then an error."""
        self.inputs = None
        self.out = None

    @property
    def freed(self):
        return self.inputs is None

    def __repr__(self):
        return f"<TapeNode {self.op.name}{' (freed)' if self.inputs is None else ''}>"


def rebind(tensor, node, requires_grad):
    """Give ``tensor``, just written in place, the history ``node``; entries recorded before the
    write keep its earlier one (``history_at``)."""
    _epoch[0] += 1            # entries recorded from here on are after the write
    past = getattr(tensor, "_past", None)
    if past is None:
        past = tensor._past = []
    past.append((_epoch[0], tensor._node, tensor._requires_grad))
    tensor._node, tensor._requires_grad = node, requires_grad


_when = itemgetter(0)


def history_at(tensor, when):
    """``(node, requires_grad)`` of ``tensor`` as a tape entry recorded at write-epoch ``when``
    saw it: before any later in-place write rebound it."""
    past = getattr(tensor, "_past", None)
    if past:
        i = bisect_right(past, when, key=_when)
        if i < len(past):
            return past[i][1], past[i][2]
    return tensor._node, tensor._requires_grad


def first_node(tensor):
    """The entry that made ``tensor`` (before any in-place write rebound it)."""
    past = getattr(tensor, "_past", None)
    return past[0][1] if past else tensor._node


def view_entry(tensor):
    """The entry of the view op that made ``tensor``, or None if it is not a view: the one
    recorded for autodiff, or for a view made while nothing required grad, one made now from
    what eager mode kept (``_view_of``), so that a write of a value that requires grad through
    the view reaches its base (``b = zeros(3); b[:2].copy_(x)``)."""
    node = first_node(tensor)
    if node is None:
        node = getattr(tensor, "_view_of", None)
        if type(node) is tuple:
            op, inputs, attrs, made = node
            node = tensor._view_of = TapeNode(op, inputs, attrs, tensor._data, tensor._device,
                                              tensor._version)
            node.epoch = made
    return node


def view_chain(view):
    """``(entry, base)`` for the view op that made ``view``, then for the one that made that
    base, and so on up to a tensor that is not a view."""
    node = view_entry(view)
    while node is not None and type(node) is TapeNode:
        base = view_base(node)
        if base is None:
            return
        yield node, base
        node = view_entry(base)


def view_again(made, version):
    """A new entry of the view op of entry ``made`` (same inputs and attributes), reading its
    base's history as it is now: a view's history is its view op over its base's."""
    return TapeNode(made.op, made.inputs, made.attrs, made.out, made.device, version)


def gave_grad(tensor):
    """Note that a write just gave ``tensor``, which needed no gradient, a history."""
    counter = getattr(tensor, "_version", None)
    if counter is None or id(counter) in given_grad:
        return
    key = id(counter)
    given_grad[key] = (weakref.ref(tensor, lambda _, key=key: given_grad.pop(key, None)),
                       _epoch[0])


def regrow(view):
    """Give ``view``, made while its memory needed no gradient, and read after a write gave
    that memory a history, a new entry of its view op over its base's history (PyTorch
    regenerates a view's history from its base so); True if it now requires grad."""
    counter = getattr(view, "_version", None)
    given = given_grad.get(id(counter)) if counter is not None else None
    if given is None or getattr(view, "_view_of", None) is None:
        return False
    made = view_entry(view)
    if made is None or made.epoch >= given[1]:
        return False          # made after the write (or under no_grad from a tensor needing grad)
    base = view_base(made)
    if base is None or not (base._requires_grad or regrow(base)):
        return False
    rebind(view, view_again(made, counter), True)
    return True


def view_base(node):
    """The input ``node``'s output is a view of (shares its memory and version counter with),
    or None: eager mode links a view's counter to its base's (versions.share_if_view)."""
    counter = node.out_version
    if counter is None or node.inputs is None:
        return None
    for a in node.inputs:
        if isinstance(a, Tensor) and getattr(a, "_version", None) is counter:
            return a
    return None
