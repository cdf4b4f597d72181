"""float16 and bfloat16 compute in float32, each op rounding its result back, as PyTorch does on a
CPU.

NumPy has no bfloat16 kernels of its own (``ml_dtypes`` gives it slow elementwise loops, a
matmul that answers in float32, no einsum), and its float16 reductions and matmul accumulate in
float16. PyTorch's CPU kernels instead load each half-precision value as a float32, compute, and
round the result once. labkit does the same in one place rather than in every kernel: when an
op's inputs include float16 or bfloat16 arrays, its kernel gets float32 copies of them, and its
result is rounded to the dtype the op's rule gives (``bfloat16 + bfloat16`` is bfloat16,
``bfloat16 + float32`` float32). Ops that only move values (views, concatenation, casts, in-place
writes: declared ``moves=True``, or writing into an input) take them as they are.

>>> import labkit as lk
>>> x = lk.tensor([1.0, 2.0, 3.0], dtype=lk.bfloat16)
>>> (x @ x).dtype, (x @ x).item(), (x * 1.5).dtype
(lk.bfloat16, 14.0, lk.bfloat16)
"""
import numpy as np

from .dtypes import LOW_PRECISION, float32

LOW = frozenset(d.np for d in LOW_PRECISION)
_F32 = float32.np


def upcast(arrays, keep=None):
    """``arrays`` with each float16/bfloat16 array as a float32 copy (the one at index ``keep``,
    which a kernel writes into, as it is)."""
    return [a.astype(_F32) if i != keep and getattr(a, "dtype", None) in LOW else a
            for i, a in enumerate(arrays)]


def run(op, xp, arrays, attrs, out_dtype):
    """``op``'s kernel on ``arrays`` computed in float32, its result rounded to ``out_dtype``
    (a NumPy dtype)."""
    out = op.kernel(xp, *upcast(arrays, op.writes), **attrs)
    if getattr(out, "dtype", out_dtype) != out_dtype:
        with np.errstate(over="ignore"):    # beyond float16's range is inf, as in PyTorch
            out = out.astype(out_dtype)
    return out


def call(op, xp, arrays, attrs, out_dtype):
    """``op``'s kernel on ``arrays``, computed in float32 (``run``) if some are float16/bfloat16
    and the op does not only move values."""
    if not op.moves and any(getattr(a, "dtype", None) in LOW for a in arrays):
        return run(op, xp, arrays, attrs, np.dtype(out_dtype))
    return op.kernel(xp, *arrays, **attrs)


def kernel_for(op, xp, attrs, in_dtypes, out_dtype):
    """The executor's form: a function of the input arrays computing ``op`` as ``run`` does if
    some of ``in_dtypes`` (NumPy dtypes, None for literals) are float16/bfloat16; else None."""
    if op.moves or not any(d in LOW for d in in_dtypes if d is not None):
        return None
    out_dtype = np.dtype(out_dtype)

    def kernel(*arrays):
        return run(op, xp, arrays, attrs, out_dtype)
    kernel.__name__ = f"{op.name}_in_float32"
    return kernel
