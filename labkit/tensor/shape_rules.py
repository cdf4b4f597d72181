"""Shared pieces of shape/dtype rules, and the clear errors they raise.

A rule receives the op's inputs (anything with ``.shape`` and ``.dtype``: eager Tensors or the
symbolic tensors of graph capture; or plain Python scalars) and its attributes, and returns
``(shape, dtype)`` without running any kernel.
"""
import numpy as np

from ..errors import DTypeError, ShapeError, describe
from .dtypes import bfloat16, common_np_dtype, float32, from_numpy_dtype, get_default_dtype


def shape_of(x):
    """Shape of a tensor-like input; () for a Python scalar."""
    s = getattr(x, "shape", None)
    return () if s is None else tuple(s)


def np_dtype_of(x):
    """NumPy dtype of a tensor-like input, or the Python type of a (weak) scalar."""
    d = getattr(x, "dtype", None)
    if d is None:
        if isinstance(x, bool):   # NumPy takes int/float as weak types, but bool as a dtype
            return np.dtype(np.bool_)
        return type(x) if isinstance(x, (int, float)) else np.asarray(x).dtype
    return getattr(d, "np", d)


def dtype_of(x):
    """labkit dtype of a tensor-like input (a Python scalar: NumPy's default for its type)."""
    d = getattr(x, "dtype", None)
    if hasattr(d, "np"):
        return d
    return from_numpy_dtype(np.asarray(x).dtype if d is None else np.dtype(d))


def inputs_text(inputs):
    return ", ".join(describe(a) for a in inputs)


def broadcast_shapes(opname, *inputs):
    """NumPy broadcasting of the inputs' shapes; ShapeError naming the op and shapes if they clash."""
    shapes = [shape_of(a) for a in inputs]
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-ndim, 0):
        size = 1
        for s in shapes:
            if len(s) >= -i:
                d = s[i]
                if d is None:            # known only at run time (e.g. after a boolean mask)
                    size = None if size == 1 else size
                elif d != 1:
                    if size is not None and size != 1 and size != d:
                        raise ShapeError(
                            f"{opname}: shapes {' and '.join(str(tuple(s)) for s in shapes)} "
                            f"cannot be broadcast together (dimension {ndim + i} of the result: "
                            f"{size} vs {d}). Inputs: {inputs_text(inputs)}. Broadcasting matches "
                            f"trailing dimensions, which must be equal or 1: reshape or unsqueeze one"
                            f" input.")
                    size = d
        out.append(size)
    return tuple(out)


_LOOPS = {}


def torch_loop(ufunc, common):
    """``(in_dtypes, out_dtype)``: the NumPy loop of ``ufunc`` that computes as PyTorch does on
    operands whose common dtype (``common_np_dtype``) is ``common``: the loop for ``common``,
    except that an integer or bool computation with a fractional result (``int / int``,
    ``sin(int)``) runs in the default float dtype. Raises TypeError where NumPy has no loop.
    bfloat16 computes in float32's loop, its float32 result read as bfloat16 (ml_dtypes' own
    loops are partial: its matmul answers in float32)."""
    default = get_default_dtype().np
    key = (ufunc, common, default)
    hit = _LOOPS.get(key)
    if hit is None:
        n = ufunc.nin
        resolved = _resolve(ufunc, common)
        if resolved[-1].kind == "f" and common.kind not in "fc" and common != _BF16:
            resolved = _resolve(ufunc, default)
        hit = _LOOPS[key] = (tuple(resolved[:n]), resolved[-1])
    return hit


_BF16, _F32 = bfloat16.np, float32.np


def _resolve(ufunc, dtype):
    """NumPy's loop of ``ufunc`` for operands of ``dtype`` (bfloat16: float32's, giving
    bfloat16 where it gives float32)."""
    if dtype != _BF16:
        return ufunc.resolve_dtypes((dtype,) * ufunc.nin + (None,) * ufunc.nout)
    loop = ufunc.resolve_dtypes((_F32,) * ufunc.nin + (None,) * ufunc.nout)
    return loop[:ufunc.nin] + tuple(_BF16 if d == _F32 else d for d in loop[ufunc.nin:])


def call_ufunc(fn, ufunc, inputs, refuse=""):
    """``fn(*inputs)`` (``fn``: the array module's version of the NumPy ufunc ``ufunc``) with the
    result dtype PyTorch gives (see ``labkit.tensor.dtypes``): array operands of another dtype
    than the loop's are cast to it first; Python numbers stay as they are. Same-dtype float
    operands (the usual case) go straight to ``fn``. ``refuse``: NumPy kinds ("b" bool, "c"
    complex) to raise TypeError for (the op's shape rule then explains why)."""
    d = None
    for x in inputs:
        xd = getattr(x, "dtype", None)
        if xd is None:
            if type(x) is float or type(x) is int:
                continue
            break
        if d is None:
            if xd.kind != "f":
                break
            d = xd
        elif xd is not d:
            break
    else:
        if d is not None:
            return fn(*inputs)
    if refuse and any(getattr(x, "dtype", None) is not None and x.dtype.kind in refuse or
                      "b" in refuse and isinstance(x, bool) or
                      "c" in refuse and isinstance(x, complex) for x in inputs):
        raise TypeError(f"{ufunc.__name__}: refused operand kind")
    loop, want = torch_loop(ufunc, common_np_dtype(inputs))
    out = fn(*[x.astype(t) if getattr(x, "dtype", t) != t else x for x, t in zip(inputs, loop)])
    return out if out.dtype == want else out.astype(want)      # Python numbers alone


def to_common(inputs):
    """The array operands cast to the dtype PyTorch computes in for them (Python numbers as they
    are), for kernels made of several array-module calls."""
    d = common_np_dtype(inputs)
    return [x.astype(d) if getattr(x, "dtype", d) != d else x for x in inputs]


def ufunc_dtype(opname, ufunc, *inputs):
    """The output dtype of the NumPy ufunc ``ufunc`` on these inputs under PyTorch's promotion
    (``call_ufunc`` computes it so)."""
    try:
        _, out = torch_loop(ufunc, common_np_dtype(inputs))
    except Exception:
        raise DTypeError(
            f"{opname} is not defined for dtypes ({inputs_text(inputs)}) (NumPy's "
            f"{ufunc.__name__} has no loop for them). Cast an input first, e.g. x.float() or "
            f"x.to(dtype=lk.int64).") from None
    try:
        return from_numpy_dtype(out)
    except DTypeError:
        raise DTypeError(
            f"{opname} of ({inputs_text(inputs)}) would give NumPy's {out}, which labkit does not "
            f"hold. Cast an input first, e.g. x.to(dtype=lk.int64).") from None


def elementwise(ufunc, name=None):
    """Rule for an elementwise op that behaves like the NumPy ufunc ``ufunc``; ``name`` is the
    op's name for error messages (default: the ufunc's)."""
    name = name or ufunc.__name__

    def rule(*inputs):
        return broadcast_shapes(name, *inputs), ufunc_dtype(name, ufunc, *inputs)
    return rule


def refuse_complex(opname, x):
    """DTypeError for a complex ``x`` where ``opname`` orders values: complex numbers have no
    order, and PyTorch refuses them there too (its kernel checks the dtype kind itself)."""
    if getattr(getattr(x, "dtype", None), "is_complex", False):
        raise DTypeError(f"{opname} is not defined for complex tensors, as in PyTorch (complex "
                         f"numbers have no order); got {describe(x)}. Order by x.abs() or "
                         f"x.real instead.")


def same_as_first(x, *rest, **attrs):
    """Output has the shape and dtype of the first input."""
    return shape_of(x), x.dtype


def float_dtype(opname, x):
    d = x.dtype
    if not d.is_floating:
        raise DTypeError(f"{opname} needs a floating-point input; got {describe(x)}. "
                         f"Convert with x.float() first.")
    return d


def normalize_dim(opname, dim, ndim, x=None):
    """Wrap a possibly negative ``dim`` into range, or raise ShapeError naming the op.

    A 0-d tensor accepts dim 0 and -1, as in PyTorch. ``x`` (the tensor, if at hand) is
    described in the error.
    """
    n = max(ndim, 1)
    if not -n <= dim < n:
        what = describe(x) if x is not None else f"a tensor with {ndim} dimension(s)"
        raise ShapeError(f"{opname}: dim={dim} is out of range for {what}: valid dims are "
                         f"{-n}..{n - 1} (negative dims count from the end)")
    return dim % ndim if ndim else 0


def normalize_dims(opname, dim, ndim, x=None):
    """``dim`` (None, int or tuple) as a sorted tuple of non-negative axes."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, int):
        dim = (dim,)
    axes = tuple(sorted(normalize_dim(opname, d, ndim, x) for d in dim))
    if len(set(axes)) != len(axes):
        what = f" of {describe(x)}" if x is not None else ""
        raise ShapeError(f"{opname}: dim={dim} names the same axis{what} twice; list each "
                         f"dimension once")
    return axes


def reduced_shape(shape, axes, keepdim):
    if keepdim:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)
