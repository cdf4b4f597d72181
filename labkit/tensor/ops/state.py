"""State: in-place updates of a tensor's buffer as ops (``assign``, ``assign_add``, ``assign_sub``,
and ``assign_add_matmul``, which the graph pass ``matmul_update`` makes optimiser updates into).

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
import types

import numpy as np

from ...devices import host_blas
from ...errors import DTypeError, ShapeError, describe
from ..op import BatchFamily, op
from ..shape_rules import broadcast_shapes, dtype_of, shape_of
from .elementwise import mul
from .linalg import matmul, matmul_batch, transposed
from .shape import aligned, moved

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


def _batched_target(name, target, d):
    """The target of an in-place update under lk.vmap, batch dimension first (a view, so the
    update still goes into the target's memory)."""
    if d is None:
        raise ShapeError(
            f"{name} inside lk.vmap: the value written differs from example to example, but the "
            f"target {describe(target)} is one tensor shared by all of them. Map over the target "
            f"too (give it an in_axes), or write outside the vmapped function.")
    return moved(target, d)


def _update(op):
    def rule(inputs, bdims):
        (target, value), (dt, dv) = inputs, bdims
        target = _batched_target(op.name, target, dt)
        return op(target, value if dv is None else aligned(value, dv, target.ndim - 1)), 0
    return rule


# in-place updates of a batched target (an unbatched value broadcasts as for one example)
UPDATE = BatchFamily(_update)


@op("assign", shape=_assign_rule("assign"), vjp=None, stateful=True, writes=0, batch=UPDATE)
def assign(xp, target, value):
    """Overwrite ``target`` in place with ``value`` (broadcast); returns ``target``."""
    if target.dtype.kind in "iub" and getattr(value, "dtype", np.asarray(value).dtype).kind == "f":
        raise TypeError("float value into an integer target")
    with _lock(target):
        target[...] = value
    return target


@op("assign_add", shape=_assign_rule("assign_add"), vjp=None, stateful=True, writes=0,
    batch=UPDATE)
def assign_add(xp, target, value):
    """``target += value`` in place, atomically; returns ``target``."""
    with _lock(target):
        xp.add(target, value, out=target, casting="same_kind")
    return target


@op("assign_sub", shape=_assign_rule("assign_sub"), vjp=None, stateful=True, writes=0,
    batch=UPDATE)
def assign_sub(xp, target, value):
    """``target -= value`` in place, atomically; returns ``target``."""
    with _lock(target):
        xp.subtract(target, value, out=target, casting="same_kind")
    return target


def _assign_matmul_rule(target, a, b, *scale, alpha=1.0, transpose_a=False, transpose_b=False):
    name = "assign_add_matmul"
    if not all(dtype_of(x).is_floating for x in (target, a, b) + scale):
        raise DTypeError(f"{name}: needs floating-point tensors; got target {describe(target)}, "
                         f"{describe(a)} @ {describe(b)}"
                         + (f", scale {describe(scale[0])}" if scale else ""))
    if len(scale) > 1 or (scale and shape_of(scale[0]) != ()):
        raise ShapeError(f"{name}: the optional scale is one 0-d tensor, got "
                         f"{', '.join(describe(s) for s in scale)}")
    shape, dtype = matmul.shape(a, b, transpose_a=transpose_a, transpose_b=transpose_b)
    return _assign_rule(name)(target, types.SimpleNamespace(shape=shape, dtype=dtype))


# Below this many elements in the target, one more pass over it costs less than reaching BLAS
# through ctypes (about 6 us a call).
_BLAS_MIN_SIZE = 16384


def _assign_matmul_batch(inputs, bdims, alpha=1.0, **flags):
    (target, a, b), (dt, da, db) = inputs[:3], bdims[:3]
    target = _batched_target("assign_add_matmul", target, dt)
    if da is None and db is None:
        update, du = matmul(a, b, **{k: v for k, v in flags.items() if v}), None
    else:
        update, du = matmul_batch((a, b), (da, db), **flags)
    if alpha != 1.0:
        update = mul(update, alpha)
    for scale, ds in zip(inputs[3:], bdims[3:]):
        if ds is not None and du is None:
            update, du = mul(aligned(scale, ds, update.ndim), update), 0
        else:
            update = mul(update, scale if ds is None else aligned(scale, ds, update.ndim - 1))
    return assign_add(target, update if du is None else aligned(update, du, target.ndim - 1)), 0


@op("assign_add_matmul", shape=_assign_matmul_rule, vjp=None, stateful=True, writes=0,
    batch=_assign_matmul_batch)
def assign_add_matmul(xp, target, a, b, *scale, alpha=1.0, transpose_a=False,
                      transpose_b=False):
    """``target += alpha * scale * (a @ b)`` in place, atomically; returns ``target``.
    ``scale`` (optional) is a 0-d tensor read when the op runs (a learning rate that a
    scheduler changes); ``transpose_a`` / ``transpose_b`` as for ``matmul``.

    On the CPU, for a large float32/float64 target, this is one BLAS GEMM that accumulates into
    ``target`` (``beta=1``, ``labkit.devices.host_blas``) instead of a product and a second pass
    over ``target``. A captured optimiser step gets it from the graph pass ``matmul_update``.

    >>> import labkit as lk
    >>> from labkit.tensor.ops.state import assign_add_matmul
    >>> w = lk.ones((2, 2))
    >>> _ = assign_add_matmul(w, lk.eye(2), lk.full((2, 2), 4.0), alpha=-0.5)
    >>> w.tolist()
    [[-1.0, -1.0], [-1.0, -1.0]]
    """
    a, b = transposed(xp, a, b, transpose_a, transpose_b)
    if scale:     # a number for BLAS on the host; on a GPU a 0-d array (reading it would sync)
        alpha = alpha * (float(scale[0]) if xp is np else scale[0].astype(target.dtype))
    with _lock(target):
        if xp is not np or target.size < _BLAS_MIN_SIZE or \
                not host_blas.gemm(target, a, b, alpha, 1.0):
            if scale or alpha not in (1.0, -1.0):     # scale the smaller operand, not the product
                if a.size <= b.size:
                    a = xp.multiply(a, alpha)
                else:
                    b = xp.multiply(b, alpha)
            update = xp.subtract if not scale and alpha == -1.0 else xp.add
            update(target, xp.matmul(a, b), out=target, casting="same_kind")
    return target
