"""Scans in PyTorch's signatures: cumsum and cumprod (``dtype=``), cummax and cummin (named
tuples of values and indices).

>>> import labkit as lk
>>> x = lk.tensor([1.0, 3.0, 2.0])
>>> x.cumsum(0).tolist(), lk.cumprod(x, 0).tolist(), x.cummax(0).indices.tolist()
([1.0, 4.0, 6.0], [1.0, 3.0, 6.0], [0, 1, 1])
"""
from ..ops import scan as SC
from ..shape_rules import normalize_dim
from . import return_types
from .reduce import _cast_to
from .registry import public
from .statistics import picked


@public()
def cumsum(x, dim, *, dtype=None):
    """Running sums along ``dim``; ``dtype`` casts first (bool and int32 sum in int64)."""
    return SC.cumsum(_cast_to(x, dtype), dim=dim)


@public()
def cumprod(x, dim, *, dtype=None):
    """Running products along ``dim``; ``dtype`` casts first. The gradient is exact where ``x``
    holds zeros, as PyTorch's is."""
    return SC.cumprod(_cast_to(x, dtype), dim=dim)


def _cumulative_extremum(name, largest, result):
    def fn(x, dim):
        d = normalize_dim(name, dim, x.ndim, x)
        indices = SC.cumextremum_indices(x, dim=d, largest=largest)
        return picked(result, x, d, indices, keepdim=True)
    fn.__name__ = name
    fn.__doc__ = (f"``(values, indices)``: the running {name[3:]}imum along ``dim`` and where it "
                  f"was last attained (a NaN takes over); the gradient goes to those indices.")
    return fn


cummax = public("cummax")(_cumulative_extremum("cummax", True, return_types.cummax))
cummin = public("cummin")(_cumulative_extremum("cummin", False, return_types.cummin))
