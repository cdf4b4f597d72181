"""State: in-place updates of a tensor's buffer as ops (``assign``, ``assign_add``, ``assign_sub``).

Because updates are ops, an optimiser's rule is the same code eagerly and inside a captured
graph, where the update runs in program order as a node of the graph. Updates are atomic: a lock
per buffer means concurrent ``assign_add`` s from several threads never lose an update. The
result is the updated tensor itself (it shares the buffer), and carries no gradient.

>>> import labkit as lk
>>> v = lk.zeros(2)
>>> _ = v.assign_add(lk.ones(2))
>>> v.tolist()
[1.0, 1.0]
"""
import threading

import numpy as np

from ...errors import DTypeError, ShapeError, describe
from ..op import op
from ..shape_rules import broadcast_shapes, dtype_of, shape_of

_LOCKS = [threading.Lock() for _ in range(64)]


def _lock(array):
    return _LOCKS[(id(array) >> 4) % len(_LOCKS)]


def _assign_rule(name):
    def rule(target, value):
        out = broadcast_shapes(name, target, value)
        if out != shape_of(target):
            raise ShapeError(f"{name}: cannot write {describe(value)} into {describe(target)}: "
                             f"the value must broadcast to the target's shape")
        if not target.dtype.is_floating and (isinstance(value, float) or (
                hasattr(value, "dtype") and dtype_of(value).is_floating)):
            raise DTypeError(f"{name}: writing {describe(value)} into {describe(target)} would "
                             f"lose the fraction; cast explicitly")
        return shape_of(target), target.dtype
    return rule


@op("assign", shape=_assign_rule("assign"), vjp=None, stateful=True, writes=0)
def assign(xp, target, value):
    """Overwrite ``target`` in place with ``value`` (broadcast); returns ``target``."""
    if target.dtype.kind in "iub" and getattr(value, "dtype", np.asarray(value).dtype).kind == "f":
        raise TypeError("float value into an integer target")
    with _lock(target):
        target[...] = value
    return target


@op("assign_add", shape=_assign_rule("assign_add"), vjp=None, stateful=True, writes=0)
def assign_add(xp, target, value):
    """``target += value`` in place, atomically; returns ``target``."""
    with _lock(target):
        xp.add(target, value, out=target, casting="same_kind")
    return target


@op("assign_sub", shape=_assign_rule("assign_sub"), vjp=None, stateful=True, writes=0)
def assign_sub(xp, target, value):
    """``target -= value`` in place, atomically; returns ``target``."""
    with _lock(target):
        xp.subtract(target, value, out=target, casting="same_kind")
    return target
