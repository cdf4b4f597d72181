"""``.grad`` of outside tensors inside a captured function, with eager semantics.

While a function is traced, every write to the ``.grad`` of a tensor from outside the graph
(a parameter) goes through the capture mode, which keeps, per tensor, what its gradient is now:
untouched (whatever it is when the function runs), cleared (``zero_grad``), or a value of the
graph. ``backward()`` adding to an untouched gradient that is None while tracing makes the trace
assume it is None when it runs (a *guard*, checked per call, like PyTorch's compiled code guards
on ``.grad``): the new gradient simply becomes ``.grad``, with no zeros made and added. A call
that finds such a ``.grad`` set runs a second trace that reads it when the graph runs
(``read_grad``) and adds to it, so a captured step accumulates across calls exactly as eagerly
(micro-batches). After ``zero_grad`` inside the function backward simply replaces it. When the
trace ends the tensors get their gradients back, and each run of the function sets them from
the graph's outputs.
"""
from ..errors import GradError, describe
from ..tensor.op import op
from ..tensor.ops.elementwise import add


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
