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
from ..batching import ELEMENTWISE
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
    def rule(inputs, bdims, **attrs):
        target = _batched_target(op.name, inputs[0], bdims[0])
        rest = [x if d is None else aligned(x, d, target.ndim - 1)
                for x, d in zip(inputs[1:], bdims[1:])]
        return op(target, *rest, **attrs), 0
    return rule


# in-place updates of a batched target (an unbatched value or factor broadcasts as for one
# example)
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


# ---- optimiser updates: one op, one pass per term, for what would be several ops ----------------
# Each writes one target in place, computing into one scratch array, where the same update as
# separate ops would allocate a result per op (for a large parameter, fresh memory the system
# must map in) and dispatch each. The scalars are Python numbers eagerly and 0-d tensors in a
# captured step (hyperparameters read when the graph runs).
def _scalars_rule(name, target, scalars):
    if not target.dtype.is_floating:
        raise DTypeError(f"{name} updates a floating-point tensor; got {describe(target)}")
    for s in scalars:
        if not isinstance(s, (int, float)) and shape_of(s) != ():
            raise ShapeError(f"{name}: the factors are numbers or 0-d tensors; got {describe(s)} "
                             f"for target {describe(target)}")


def _one(x):
    return isinstance(x, (int, float)) and x == 1


def _number(x):
    """A Python number or a 0-d array (a factor BLAS takes as a C number)."""
    return isinstance(x, (int, float)) or getattr(x, "shape", None) == ()


def _axpby_rule(target, value, a, b):
    _scalars_rule("assign_axpby", target, (a, b))
    return _assign_rule("assign_axpby")(target, value)


@op("assign_axpby", shape=_axpby_rule, vjp=None, stateful=True, writes=0,
    batch=UPDATE)
def assign_axpby(xp, target, value, a, b):
    """``target = a * target + b * value`` in place, atomically (PyTorch's
    ``target.mul_(a).add_(value, alpha=b)``: SGD's momentum buffer and its step); returns
    ``target``.

    >>> import labkit as lk
    >>> from labkit.tensor.ops.state import assign_axpby
    >>> buf = lk.ones(2)
    >>> assign_axpby(buf, lk.tensor([1.0, 2.0]), 0.5, -0.25).tolist()
    [0.25, 0.0]
    """
    with _lock(target):
        if xp is np and _number(a) and _number(b) and host_blas.axpby(target, value, b, a):
            return target
        if not _one(a):
            xp.multiply(target, a, out=target, casting="same_kind")
        xp.add(target, value if _one(b) else xp.multiply(value, b), out=target,
               casting="same_kind")
    return target


def _lerp_rule(target, end, weight, square_end=False):
    _scalars_rule("assign_lerp", target, (weight,))
    return _assign_rule("assign_lerp")(target, end)


@op("assign_lerp", shape=_lerp_rule, vjp=None, stateful=True, writes=0,
    batch=UPDATE)
def assign_lerp(xp, target, end, weight, square_end=False):
    """``target += (end - target) * weight`` in place, atomically (PyTorch's ``lerp_``), with
    ``end * end`` for ``end`` if ``square_end``: Adam's running averages of the gradient and
    of its square; returns ``target``.

    >>> import labkit as lk
    >>> from labkit.tensor.ops.state import assign_lerp
    >>> v = lk.zeros(2)
    >>> assign_lerp(v, lk.tensor([1.0, 3.0]), 0.5, square_end=True).tolist()
    [0.5, 4.5]
    """
    with _lock(target):
        step = xp.empty(target.shape, dtype=xp.result_type(end, target))
        if square_end:
            end = xp.multiply(end, end, out=step)
        xp.subtract(end, target, out=step)
        xp.multiply(step, weight, out=step, casting="same_kind")
        xp.add(target, step, out=target, casting="same_kind")
    return target


def _adadelta_rule(g, square_avg, acc_delta, eps):
    _scalars_rule("adadelta_delta", square_avg, (eps,))
    if not dtype_of(g) == dtype_of(square_avg) == dtype_of(acc_delta):
        raise DTypeError(f"adadelta_delta: the gradient {describe(g)} and the running averages "
                         f"{describe(square_avg)}, {describe(acc_delta)} must have one dtype")
    return broadcast_shapes("adadelta_delta", g, square_avg, acc_delta), square_avg.dtype


@op("adadelta_delta", shape=_adadelta_rule, vjp=None, batch=ELEMENTWISE)
def adadelta_delta(xp, g, square_avg, acc_delta, eps):
    """Adadelta's step before the learning rate: ``sqrt(acc_delta + eps) / sqrt(square_avg +
    eps) * g``, in that order of operations (PyTorch's), with two temporaries instead of a
    new array per operation.

    >>> import labkit as lk
    >>> from labkit.tensor.ops.state import adadelta_delta
    >>> adadelta_delta(lk.tensor([2.0]), lk.tensor([4.0]), lk.tensor([1.0]), 0.0).tolist()
    [1.0]
    """
    shape = xp.broadcast_shapes(g.shape, square_avg.shape, acc_delta.shape)
    d = xp.empty(shape, dtype=square_avg.dtype)
    xp.add(acc_delta, eps, out=d, casting="same_kind")
    xp.sqrt(d, out=d)
    std = xp.sqrt(xp.add(square_avg, eps, casting="same_kind", dtype=square_avg.dtype))
    xp.divide(d, std, out=d)
    xp.multiply(d, g, out=d)
    return d


def _adam_rule(p, m, v, step_size, bias2_sqrt, eps):
    _scalars_rule("adam_update", p, (step_size, bias2_sqrt, eps))
    for x in (m, v):
        _assign_rule("adam_update")(p, x)
    return shape_of(p), p.dtype


@op("adam_update", shape=_adam_rule, vjp=None, stateful=True, writes=0,
    batch=UPDATE)
def adam_update(xp, p, m, v, step_size, bias2_sqrt, eps):
    """Adam's step of parameter ``p`` from its moments: ``p -= m / (sqrt(v) / bias2_sqrt +
    eps) * step_size`` in place, atomically, in that order of operations; returns ``p``.

    >>> import labkit as lk
    >>> from labkit.tensor.ops.state import adam_update
    >>> adam_update(lk.ones(1), lk.tensor([0.5]), lk.tensor([0.25]), 0.25, 1.0, 0.0).tolist()
    [0.75]
    """
    d = xp.sqrt(v, out=xp.empty(p.shape, dtype=xp.result_type(m.dtype, v.dtype)))
    xp.divide(d, bias2_sqrt, out=d, casting="same_kind")
    xp.add(d, eps, out=d, casting="same_kind")
    xp.divide(m, d, out=d)
    xp.multiply(d, step_size, out=d, casting="same_kind")
    with _lock(p):
        xp.subtract(p, d, out=p, casting="same_kind")
    return p
