"""Comparisons as methods and as PyTorch's named functions: ``x.eq(y)``, ``x.gt(0)``,
``lk.greater_equal(a, b)``...

>>> import labkit as lk
>>> lk.tensor([1, 2, 3]).gt(1).tolist(), lk.tensor([1.0]).ne(1.0).item()
([False, True, True], False)
"""
from ..ops import elementwise as E
from ..tensor import Tensor

_NAMES = {"eq": E.eq, "ne": E.ne, "lt": E.lt, "le": E.le, "gt": E.gt, "ge": E.ge}
_ALIASES = {"greater": E.gt, "greater_equal": E.ge, "less": E.lt, "less_equal": E.le,
            "not_equal": E.ne}

PUBLIC_COMPARISONS = {**_NAMES, **_ALIASES}


def _method(op):
    def method(self, other):
        return op(self, other)
    method.__name__ = op.name
    method.__doc__ = f"``{op.name}(self, other)``, elementwise (a bool tensor)."
    return method


for _name, _op in PUBLIC_COMPARISONS.items():
    setattr(Tensor, _name, _method(_op))
