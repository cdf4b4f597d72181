"""Reductions in PyTorch's signatures: ``lk.sum(x, 1)``, ``x.max(dim)`` returning
``(values, indices)``, ``lk.max(a, b)`` elementwise.

>>> import labkit as lk
>>> x = lk.tensor([[1.0, 5.0], [7.0, 2.0]])
>>> values, indices = x.max(1)
>>> values.tolist(), indices.tolist(), x.sum(0).tolist(), lk.max(x, x * 2).shape
([5.0, 7.0], [1, 0], [8.0, 7.0], (2, 2))
"""
from ..dtypes import as_dtype
from ..ops import composite as C
from ..ops import elementwise as E
from ..ops import index as I
from ..ops import reduce as R
from ..ops.elementwise import cast
from ..shape_rules import normalize_dim
from ..tensor import Tensor
from . import return_types
from .registry import public


def _cast_to(x, dtype):
    """``x`` as ``dtype`` before a reduction (PyTorch's ``dtype=`` of sum and mean)."""
    if dtype is None:
        return x
    return cast(x, dtype=as_dtype(dtype).name)


@public()
def sum(x, dim=None, keepdim=False, *, dtype=None):
    """Sum over ``dim`` (an int, a tuple, or None for every element); ``dtype`` casts first."""
    return R.sum(_cast_to(x, dtype), dim=dim, keepdim=keepdim)


@public()
def mean(x, dim=None, keepdim=False, *, dtype=None):
    """Average over ``dim`` (None: every element); ``dtype`` casts first."""
    return C.mean(_cast_to(x, dtype), dim=dim, keepdim=keepdim)


def _extremum(name, reduce_op, arg_op, maximum_op, result):
    def fn(x, dim=None, keepdim=False):
        if isinstance(dim, Tensor):                     # lk.max(a, b): elementwise
            if keepdim is not False:
                raise TypeError(f"{name}(a, b) is elementwise and takes no keepdim")
            return maximum_op(x, dim)
        if dim is None:
            if keepdim:
                raise TypeError(f"{name}(x, keepdim=True) needs a dim: {name}(x, dim, keepdim=True)")
            return reduce_op(x)                         # ties share the gradient, as in PyTorch
        if not isinstance(dim, int):
            raise TypeError(f"{name}: dim must be one int (or a tensor, for the elementwise "
                            f"{name}(a, b)), got {dim!r}; for several dims use lk.a{name}(x, dims)")
        d = normalize_dim(name, dim, x.ndim, x)
        indices = arg_op(x, dim=d, keepdim=True)
        values = I.gather(x, d, indices) if x.ndim else x    # the gradient goes to the index
        if not keepdim and x.ndim:
            values, indices = C.squeeze(values, d), C.squeeze(indices, d)
        elif not x.ndim:
            indices = C.squeeze(indices, None)
        return result(values, indices)
    fn.__name__ = name
    fn.__doc__ = (f"``{name}(x)``: the {name}imum of every element; ``{name}(x, dim, keepdim)``: "
                  f"``(values, indices)`` along ``dim``; ``{name}(a, b)``: elementwise.")
    return fn


max = public("max")(_extremum("max", R.max, R.argmax, E.maximum, return_types.max))
min = public("min")(_extremum("min", R.min, R.argmin, E.minimum, return_types.min))


@public()
def argmax(x, dim=None, keepdim=False):
    """Index of the largest value along ``dim`` (None: of the flattened tensor)."""
    return R.argmax(x, dim=dim, keepdim=keepdim)


@public()
def argmin(x, dim=None, keepdim=False):
    """Index of the smallest value along ``dim`` (None: of the flattened tensor)."""
    return R.argmin(x, dim=dim, keepdim=keepdim)
