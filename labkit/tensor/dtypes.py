"""labkit dtypes: float16/32/64, int32/64, bool. Promotion follows NumPy's rules.

>>> import labkit as lk
>>> lk.float32
lk.float32
>>> lk.result_type(lk.int32, lk.float32)
lk.float64
"""
import numpy as np

from ..errors import DTypeError


class DType:
    """A labkit dtype; ``.np`` is the matching NumPy dtype, ``.name`` its short name."""

    __slots__ = ("name", "np", "is_floating", "itemsize")

    def __init__(self, name, np_dtype):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating = self.np.kind == "f"
        self.itemsize = self.np.itemsize

    def __repr__(self):
        return f"lk.{self.name}"

    __str__ = __repr__

    def __reduce__(self):
        return (as_dtype, (self.name,))


float16 = DType("float16", np.float16)
float32 = DType("float32", np.float32)
float64 = DType("float64", np.float64)
int32 = DType("int32", np.int32)
int64 = DType("int64", np.int64)
bool_ = DType("bool_", np.bool_)

ALL = (float16, float32, float64, int32, int64, bool_)
_BY_NP = {d.np: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME["bool"] = bool_

# Narrower NumPy types map onto the nearest labkit dtype (e.g. uint8 images, int16 labels).
_WIDEN = {"i": int64, "u": int64, "f": float32, "b": bool_}


def from_numpy_dtype(np_dtype):
    """The labkit dtype of a NumPy/CuPy dtype; DTypeError for types labkit does not hold."""
    d = _BY_NP.get(np_dtype)
    if d is not None:
        return d
    raise DTypeError(f"labkit has no dtype for NumPy's {np.dtype(np_dtype)}; use one of "
                     f"{', '.join(x.name for x in ALL)}")


def as_dtype(spec):
    """Parse a dtype given as a labkit dtype, a name ('float32'), a NumPy dtype or a Python type."""
    if spec is None or type(spec) is DType:
        return spec
    if isinstance(spec, str) and spec in _BY_NAME:
        return _BY_NAME[spec]
    if spec is float:
        return float32
    if spec is int:
        return int64
    if spec is bool:
        return bool_
    try:
        npd = np.dtype(spec)
    except TypeError:
        raise DTypeError(f"not a dtype: {spec!r}") from None
    if npd in _BY_NP:
        return _BY_NP[npd]
    raise DTypeError(f"labkit has no dtype for {npd}; use one of {', '.join(x.name for x in ALL)}")


def storage_dtype(np_dtype):
    """The NumPy dtype that labkit stores an array of ``np_dtype`` as (uint8 -> int64 ...)."""
    np_dtype = np.dtype(np_dtype)
    if np_dtype in _BY_NP:
        return np_dtype
    wide = _WIDEN.get(np_dtype.kind)
    if wide is None:
        raise DTypeError(f"labkit cannot hold arrays of dtype {np_dtype}")
    return wide.np


def result_type(*args):
    """NumPy's promotion over labkit dtypes and Python scalars (which are 'weak', as in NumPy 2)."""
    return _BY_NP[np.result_type(*[a.np if type(a) is DType else a for a in args])]
