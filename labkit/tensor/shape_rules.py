"""Shared pieces of shape/dtype rules, and the clear errors they raise.

A rule receives the op's inputs (anything with ``.shape`` and ``.dtype``: eager Tensors or the
symbolic tensors of graph capture; or plain Python scalars) and its attributes, and returns
``(shape, dtype)`` without running any kernel.
"""
import numpy as np

from ..errors import DTypeError, ShapeError, describe
from .dtypes import from_numpy_dtype


def shape_of(x):
    """Shape of a tensor-like input; () for a Python scalar."""
    s = getattr(x, "shape", None)
    return () if s is None else tuple(s)


def np_dtype_of(x):
    """NumPy dtype of a tensor-like input, or the Python type of a (weak) scalar."""
    d = getattr(x, "dtype", None)
    if d is None:
        return type(x) if isinstance(x, (bool, int, float)) else np.asarray(x).dtype
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
                if d != 1:
                    if size != 1 and size != d:
                        raise ShapeError(
                            f"{opname}: shapes {' and '.join(str(tuple(s)) for s in shapes)} "
                            f"cannot be broadcast together (dimension {ndim + i} of the result: "
                            f"{size} vs {d}). Inputs: {inputs_text(inputs)}. Broadcasting matches "
                            f"trailing dimensions, which must be equal or 1: reshape or unsqueeze one"
                            f" input.")
                    size = d
        out.append(size)
    return tuple(out)


def ufunc_dtype(opname, ufunc, *inputs):
    """The output dtype NumPy's ``ufunc`` gives for these inputs (Python scalars are weak)."""
    try:
        resolved = ufunc.resolve_dtypes(tuple(np_dtype_of(a) for a in inputs) + (None,))
    except Exception:
        raise DTypeError(f"{opname}: no kernel for dtypes ({inputs_text(inputs)})") from None
    return from_numpy_dtype(resolved[-1])


def elementwise(ufunc):
    """Rule for an elementwise op that behaves like the NumPy ufunc ``ufunc``."""
    def rule(*inputs):
        return broadcast_shapes(ufunc.__name__, *inputs), ufunc_dtype(ufunc.__name__, ufunc, *inputs)
    return rule


def same_as_first(x, *rest, **attrs):
    """Output has the shape and dtype of the first input."""
    return shape_of(x), x.dtype


def float_dtype(opname, x):
    d = x.dtype
    if not d.is_floating:
        raise DTypeError(f"{opname} needs a floating-point input; got {describe(x)}. "
                         f"Convert with x.float() first.")
    return d


def normalize_dim(opname, dim, ndim):
    """Wrap a possibly negative ``dim`` into range, or raise ShapeError naming the op."""
    if not -ndim <= dim < max(ndim, 1):
        raise ShapeError(f"{opname}: dim={dim} is out of range for a tensor with {ndim} "
                         f"dimension(s) (valid: {-ndim}..{max(ndim, 1) - 1})")
    return dim % ndim if ndim else 0


def normalize_dims(opname, dim, ndim):
    """``dim`` (None, int or tuple) as a sorted tuple of non-negative axes."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, int):
        dim = (dim,)
    axes = tuple(sorted(normalize_dim(opname, d, ndim) for d in dim))
    if len(set(axes)) != len(axes):
        raise ShapeError(f"{opname}: dim={dim} repeats an axis")
    return axes


def reduced_shape(shape, axes, keepdim):
    if keepdim:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)
