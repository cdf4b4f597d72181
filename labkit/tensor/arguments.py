"""Checking the arguments a person passes to a public function, once per kind of argument: a
tensor, an int, a dim or dims, a size, a number, the values of an index tensor.

Each check raises the error PyTorch's built-in class would be for the same mistake, as a
``LabkitError`` naming the function, the argument and the value: ``ArgumentError`` (a
TypeError) for a value of the wrong kind, ``IndexingError`` (an IndexError) for a dim or an
index out of range, ``ShapeError`` (a ValueError and RuntimeError) for a size that cannot be.

Public functions call the checks whose failure would otherwise be silent (a negative size, a
float truncated to an int); every other mistake is explained only when the call fails
(``explain``), so a correct call pays nothing for them.

>>> import labkit as lk
>>> try:
...     lk.zeros(2.5)
... except lk.ArgumentError as e:
...     print(e)
zeros: size must be ints or a tuple of ints, got 2.5 (a float)
"""
import functools
import inspect
import math
import re

import numpy as np

from ..errors import (ArgumentError, DTypeError, IndexingError, LabkitError, ShapeError,
                      describe, hide_internal_frames)
from .tensor import Tensor

_INTS = (int, np.integer)
_MOST_ELEMENTS = 2 ** 60
_BOOLS = (bool, np.bool_)


def what(value):
    """``value`` as an error shows it: a tensor by its shape and dtype, else its repr and type."""
    if isinstance(value, Tensor):
        return describe(value)
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} (a {type(value).__name__})" if value is not None else "None"


def is_int(value):
    return isinstance(value, _INTS) and not isinstance(value, _BOOLS)


def integer(op, name, value):
    """``value`` as an int; ArgumentError unless it is one (a bool, a float or a tensor is not)."""
    if not is_int(value):
        raise ArgumentError(f"{op}: {name} must be an int, got {what(value)}")
    return int(value)


def positive(op, name, value):
    """An int of at least 1 (``chunks``, a stride, a dilation)."""
    value = integer(op, name, value)
    if value < 1:
        raise ShapeError(f"{op}: {name} must be at least 1, got {value}")
    return value


def number(op, name, value):
    """A real number (bool, int or float; NaN and infinities included); ArgumentError for None,
    a string or a tensor."""
    if isinstance(value, (bool, int, float, np.integer, np.floating, np.bool_)):
        return value
    raise ArgumentError(f"{op}: {name} must be a number, got {what(value)}")


def tensor(op, name, value):
    """``value`` itself if it is a Tensor, else ArgumentError."""
    if not isinstance(value, Tensor):
        raise ArgumentError(f"{op}: {name} must be a Tensor, got {what(value)}")
    return value


def dim(op, value, ndim, x=None, name="dim"):
    """``value`` wrapped into ``0..ndim-1`` (a 0-d tensor takes 0 and -1, as in PyTorch)."""
    n = ndim or 1
    if type(value) is int and -n <= value < n:        # the common case, first
        return value % n if ndim else 0
    if not is_int(value):
        of = f" for {describe(x)}" if x is not None else ""
        raise ArgumentError(f"{op}: {name} must be one int, got {what(value)}{of}")
    if not -n <= value < n:
        of = describe(x) if x is not None else f"a tensor with {ndim} dimension(s)"
        raise IndexingError(f"{op}: {name}={value} is out of range for {of}: valid dims are "
                            f"{-n}..{n - 1} (negative dims count from the end)")
    return int(value) % n if ndim else 0


def dims(op, value, ndim, x=None, name="dim"):
    """An int or a sequence of ints as a sorted tuple of distinct dims (None: every dim)."""
    if value is None:
        return tuple(range(ndim))
    if is_int(value):
        return (dim(op, value, ndim, x, name),)
    if not isinstance(value, (tuple, list)):
        raise ArgumentError(f"{op}: {name} must be an int or a tuple of ints, got {what(value)}")
    axes = tuple(sorted(dim(op, d, ndim, x, name) for d in value))
    if len(set(axes)) != len(axes):
        of = f" of {describe(x)}" if x is not None else ""
        raise ShapeError(f"{op}: {name}={tuple(value)} names the same dimension{of} twice; "
                         f"list each dimension once")
    return axes


def ints(op, values, name="size"):
    """PyTorch's two forms of a list of ints, ``f(2, 3)`` and ``f((2, 3))`` (``values`` is the
    tuple of positional arguments), as a tuple of ints."""
    if len(values) == 1 and isinstance(values[0], (tuple, list)):
        values = values[0]
    for v in values:
        if type(v) is not int and not is_int(v):
            if len(values) == 1:
                raise ArgumentError(f"{op}: {name} must be ints or a tuple of ints, got "
                                    f"{what(v)}")
            raise ArgumentError(f"{op}: {name} must hold ints, got {what(v)}")
    return tuple(values) if type(values) is tuple else tuple(int(v) for v in values)


def size(op, values, infer=False, name="size"):
    """``ints`` that make a shape: each at least 0, or -1 once where ``infer`` (reshape's
    inferred dimension)."""
    out = ints(op, values, name)
    count, inferred = 1, 0
    for v in out:
        if v < 0:
            if not (infer and v == -1):
                allowed = "0 or more, or -1 once for a size to infer" if infer else "0 or more"
                raise ShapeError(f"{op}: {name} {out} holds {v}; each size must be {allowed}")
            inferred += 1
        else:
            count *= v
    if inferred > 1:
        raise ShapeError(f"{op}: {name} {out} has -1 more than once; only one size can be "
                         f"inferred")
    if count > _MOST_ELEMENTS:
        raise ShapeError(f"{op}: {name} {out} asks for more elements than any memory holds")
    return out


def index_values(op, index, length, negative=False, name="index"):
    """Check the integer tensor ``index`` for a dimension of ``length``: an integer dtype, and
    unless ``negative``, no negative value (which NumPy's kernels would wrap around; values past
    the end they refuse themselves). Values are read only in eager mode on the CPU (a graph's
    are not known yet; reading a GPU tensor's would wait for the device)."""
    data = index._data
    kind = data.dtype.kind if data is not None else index.dtype.np.kind
    if kind not in "iu":
        raise IndexingError(f"{op}: {name} must be an integer tensor, got {describe(index)}")
    if negative or data is None or not data.size or index._device.type != "cpu":
        return
    low = data.min()
    if low < 0:
        raise IndexingError(f"{op}: {name} holds {int(low)}, out of range for a dimension of "
                            f"size {length} (valid: 0..{length - 1}; negative values do not "
                            f"count from the end here, as in PyTorch)")


# ---- explaining a failed call ------------------------------------------------------------------
# Functions whose first argument may be a number where PyTorch's may (``torch.pow(2, x)``).
NUMBER_FIRST = {"add", "sub", "subtract", "multiply", "div", "divide", "true_divide",
                "clamp_min", "clamp_max",
                "floor_divide", "remainder", "pow", "float_power", "xlogy", "polygamma",
                "bucketize", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
                "bitwise_right_shift"}


def rename(name, kwargs, renames):
    """Give keyword arguments passed by another name (``renames``: alias -> name) their name,
    in ``kwargs`` itself."""
    for alias, real in renames.items():
        if alias in kwargs:
            if real in kwargs:
                raise ArgumentError(f"{name}() got both {real}= and {alias}= (NumPy's name for "
                                    f"it); pass only {real}=")
            kwargs[real] = kwargs.pop(alias)


def explained(name, fn, tensor_first=False, renames=None, home=None):
    """``fn`` raising a LabkitError that names ``name`` and the argument at fault when it fails
    with an error of Python or NumPy (``arguments.explain``); a correct call costs one frame.
    ``tensor_first``: the first argument must be a tensor (the ``self`` of the method).
    ``renames``: other names of keyword arguments (NumPy's ``axis=`` for ``dim=``).
    ``home``: the module that exports the result as ``name``, which it then names as its own,
    so that pickle finds it there (``pickle.dumps(lk.tanh)``, a model holding ``F.relu``)."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        if tensor_first and (not args or not isinstance(args[0], Tensor)):
            first = args[0] if args else next(iter(kwargs.values()), None)
            raise ArgumentError(f"{name}: the first argument must be a Tensor, got "
                                f"{what(first)}")
        if kwargs and renames:
            rename(name, kwargs, renames)
        try:
            try:
                return fn(*args, **kwargs)
            except LabkitError as exc:          # raised by an op the function called: name both
                if exc.args and isinstance(exc.args[0], str) and not re.search(
                        rf"\b{re.escape(name)}\b", exc.args[0]):
                    exc.args = (f"{name}: {exc.args[0]}",) + exc.args[1:]
                raise
            except (TypeError, ValueError, AttributeError, IndexError, KeyError,
                    ZeroDivisionError, OverflowError) as exc:
                raise explain(name, fn, args, kwargs, exc) from None
        except Exception as exc:                # a user's call enters labkit here
            hide_internal_frames(exc)
            raise
    call.explained = True
    if home:
        call.__module__, call.__qualname__ = home, name
    return call


# parameter name -> how to check it when a call fails
_TENSORS = {"x", "input", "self", "a", "b", "other", "tensor", "mat1", "mat2", "mask", "index",
            "src", "source", "condition", "weight", "target"}
_DIMS = {"dim", "dim0", "dim1", "start_dim", "end_dim"}


def explain(op, fn, args, kwargs, error):
    """The LabkitError for a call of the public function ``fn`` (named ``op``) that failed with
    the non-labkit ``error``: the first argument a check refuses, else ``error`` itself, named."""
    try:
        bound = inspect.signature(fn).bind_partial(*args, **kwargs)
    except TypeError as exc:                      # the call does not fit the signature
        return ArgumentError(f"{op}: {exc}")
    x = next((v for k, v in bound.arguments.items() if k in _TENSORS), None)
    for name, value in bound.arguments.items():
        try:
            if name in _TENSORS and name in ("x", "input", "self", "a", "mat1"):
                tensor(op, name, value)
            elif name in _DIMS and value is not None and getattr(x, "ndim", None) is not None:
                if isinstance(value, (tuple, list)):
                    dims(op, value, x.ndim, x, name)
                else:
                    dim(op, value, x.ndim, x, name)
        except LabkitError as found:
            return found
    parts = ", ".join(what(a) for a in args)
    text = f"{op}({parts}): {type(error).__name__}: {error}"
    if isinstance(error, (TypeError, AttributeError, KeyError)):
        return ArgumentError(text)
    if isinstance(error, IndexError):
        return IndexingError(text)
    return ShapeError(text)


def check_finite_for(op, value, dtype, name="value"):
    """A NaN or infinity cannot go into an integer or bool tensor (NumPy would write garbage)."""
    if isinstance(value, float) and not math.isfinite(value) and not dtype.is_floating:
        raise DTypeError(f"{op}: {name} {value} cannot be stored in a tensor of dtype {dtype}: "
                         f"NaN and infinities exist only in floating-point dtypes")
