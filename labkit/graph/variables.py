"""State in the graph: ``lk.Variable`` and the Save/Restore ops.

A ``Variable`` is a tensor that owns a mutable buffer. Reading it is reading a tensor, and
``v.assign(x)``, ``v.assign_add(x)``, ``v.assign_sub(x)`` are the ops of ``labkit.tensor.ops.state``
(atomic: concurrent updates from several threads are never lost). So a variable works eagerly,
and a graph captures it by reference: every run of the graph reads its current value and its
assign nodes update it in place (an optimiser's update rule lives in the graph like any other
computation).

``save_variables`` and ``restore_variables`` are stateful ops too: they write a checkpoint of
named variables in the ``lk.save`` format (so ``lk.load`` reads it as a dict of tensors), and
read one back *into* the variables, in place, so every graph holding them sees the restored
values.

>>> import labkit as lk
>>> v = lk.Variable([1.0, 2.0], name="v")
>>> _ = v.assign_add(lk.ones(2))
>>> v.tolist()
[2.0, 3.0]
>>> with lk.Graph() as g:
...     step = v.assign_add(1.0)
>>> _ = g.run(step); v.tolist()
[3.0, 4.0]
"""
import itertools
import os

import numpy as np

from ..errors import CheckpointError, DTypeError, ShapeError, describe
from ..tensor.checkpoint import load as _load_checkpoint
from ..tensor.checkpoint import save as _save_checkpoint
from ..tensor.creation import tensor as _tensor
from ..tensor.dtypes import int64
from ..tensor.op import op
from ..tensor.ops.elementwise import add, ne
from ..tensor.ops.state import _lock
from ..tensor.tensor import Tensor
from .symbolic import SymbolicTensor, TracingError

_unnamed = itertools.count()


class Variable(Tensor):
    """A tensor that owns a mutable buffer: model weights, optimiser slots, counters.

    ``Variable(value, name=None, device=None, trainable=True, dtype=None)`` copies ``value``
    (numbers, lists, arrays or a tensor) into a new buffer. A floating-point variable with
    ``trainable=True`` has ``requires_grad=True``, so ``loss.backward()`` fills ``v.grad`` and
    an optimiser can train it. Update it with ``assign`` / ``assign_add`` / ``assign_sub``;
    inside ``lk.function`` or ``with lk.Graph()`` those become nodes that update the buffer
    each time the graph runs.

    >>> import labkit as lk
    >>> counter = lk.Variable(0, name="counter")          # int64, not trainable
    >>> @lk.function
    ... def tick():
    ...     return counter.assign_add(1)
    >>> _ = tick(); _ = tick(); counter.item()
    2
    >>> w = lk.Variable(lk.zeros(3), name="w")
    >>> w.requires_grad, w.name
    (True, 'w')
    """

    __slots__ = ("name", "trainable")

    def __init__(self, value, name=None, device=None, trainable=True, dtype=None):
        if isinstance(value, SymbolicTensor):
            raise TracingError(
                f"lk.Variable needs a concrete initial value, but {value!r} is symbolic (it "
                f"exists only when the graph runs). Create the variable outside the function, "
                f"from a value, and assign the computed value to it: v.assign(x).")
        src = _tensor(value, dtype=dtype, device=device)
        array = src._data
        if isinstance(value, Tensor) and array is value._data:
            array = array.copy()       # own the buffer: never alias the value passed in
        self._data = array
        self._device = src._device
        self._requires_grad = False
        self._grad = None
        self._node = None
        self.name = str(name) if name is not None else _default_name()
        self.trainable = bool(trainable)
        if self.trainable and self.dtype.is_floating:
            self._requires_grad = True

    @classmethod
    def _own(cls, array, device, name, trainable=False):
        """A variable around ``array`` (no copy): for slots made by optimisers and restores."""
        t = cls._make(array, device)
        t.name = name
        t.trainable = trainable
        return t

    def read_value(self):
        """A snapshot of the current value (a new tensor that later assigns do not change).

        >>> import labkit as lk
        >>> v = lk.Variable([1.0]); before = v.read_value(); _ = v.assign(5.0)
        >>> before.tolist(), v.tolist()
        ([1.0], [5.0])
        """
        return ne(self, False) if self.dtype.name == "bool_" else add(self, 0)

    def __repr__(self):
        return f"Variable {self.name!r} containing:\n" + super().__repr__()


def _default_name():
    n = next(_unnamed)
    return "Variable" if n == 0 else f"Variable_{n}"


# ---- Save / Restore as ops ----------------------------------------------------------------
def _count_rule(*variables, **attrs):
    return (), int64


@op("save_variables", shape=_count_rule, vjp=None, register=False, stateful=True)
def _save_kernel(xp, *arrays, path, names):
    """Write the variables' current values to ``path`` as ``{name: tensor}`` (atomically)."""
    from ..devices import device_of_array
    snapshot = {}
    for name, array in zip(names, arrays):
        with _lock(array):     # a consistent value even while other runs assign to it
            copy = array.copy()
        snapshot[name] = Tensor._make(copy, device_of_array(copy))
    _save_checkpoint(snapshot, path)
    return xp.asarray(len(arrays), dtype=np.int64)


@op("restore_variables", shape=_count_rule, vjp=None, register=False, stateful=True)
def _restore_kernel(xp, *arrays, path, names):
    """Read ``path`` (written by ``save_variables`` or ``lk.save``) into the variables."""
    saved = _load_checkpoint(path)
    if not isinstance(saved, dict):
        raise CheckpointError(f"restore_variables: {path!r} holds a {type(saved).__name__}, "
                              f"not a dict of name -> tensor; write it with lk.save_variables")
    missing = [n for n in names if n not in saved]
    if missing:
        raise CheckpointError(f"restore_variables: {path!r} has no value for the variable(s) "
                              f"{missing}; it holds {sorted(map(str, saved))}")
    values = []
    for name, array in zip(names, arrays):
        value = saved[name]
        host = value.numpy(force=True) if isinstance(value, Tensor) else np.asarray(value)
        if tuple(host.shape) != tuple(array.shape):
            raise ShapeError(f"restore_variables: variable {name!r} has shape "
                             f"{tuple(array.shape)}, but {path!r} holds shape "
                             f"{tuple(host.shape)} for it")
        if host.dtype != array.dtype:
            raise DTypeError(f"restore_variables: variable {name!r} is {array.dtype}, but "
                             f"{path!r} holds {host.dtype} for it; cast one of them")
        values.append(host)
    for array, host in zip(arrays, values):      # all checked first: nothing half-restored
        with _lock(array):
            array[...] = host if xp is np else xp.asarray(host)
    return xp.asarray(len(arrays), dtype=np.int64)


def _named(variables, where):
    if isinstance(variables, dict):
        names, vs = [str(k) for k in variables], list(variables.values())
    else:
        vs = [variables] if isinstance(variables, Tensor) else list(variables)
        names = [getattr(v, "name", None) for v in vs]
        unnamed = [describe(v) for v, n in zip(vs, names) if not n]
        if unnamed:
            raise TypeError(f"{where}: {', '.join(unnamed)} has no name; pass lk.Variables, "
                            f"or a dict of name -> tensor")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"{where}: several variables are named {dupes}; give each one its "
                         f"own name (lk.Variable(..., name=...)), or pass a dict of name -> "
                         f"variable")
    for v in vs:
        if not isinstance(v, Tensor):
            raise TypeError(f"{where}: expected tensors, got {type(v).__name__}")
    return names, vs


def save_variables(variables, path):
    """Save the variables' values to ``path`` with a Save op (eagerly: now; in a graph: a node).

    ``variables``: a list of named ``lk.Variable`` s, or a dict ``{name: tensor}``. The file
    is an ordinary labkit checkpoint: ``lk.load(path)`` gives ``{name: tensor}``. Returns the
    op's result, the number of variables written.

    >>> import os, tempfile, labkit as lk
    >>> path = os.path.join(tempfile.mkdtemp(), "vars.lk")
    >>> w = lk.Variable([1.0, 2.0], name="w")
    >>> int(lk.save_variables([w], path))
    1
    >>> lk.load(path)["w"].tolist()
    [1.0, 2.0]
    """
    names, vs = _named(variables, "save_variables")
    return _save_kernel(*vs, path=os.fspath(path), names=tuple(names))


def restore_variables(variables, path):
    """Read the values saved at ``path`` into the variables, in place (a Restore op).

    Every graph holding these variables sees the restored values. Shapes and dtypes must
    match; nothing is written unless every variable can be restored.

    >>> import os, tempfile, labkit as lk
    >>> path = os.path.join(tempfile.mkdtemp(), "vars.lk")
    >>> w = lk.Variable([1.0, 2.0], name="w")
    >>> _ = lk.save_variables([w], path); _ = w.assign(0.0)
    >>> _ = lk.restore_variables([w], path); w.tolist()
    [1.0, 2.0]
    """
    names, vs = _named(variables, "restore_variables")
    return _restore_kernel(*vs, path=os.fspath(path), names=tuple(names))
