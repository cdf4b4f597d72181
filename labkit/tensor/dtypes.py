"""labkit dtypes: bfloat16, float16/32/64, int8/16/32/64, uint8/16/32/64, bool. Promotion follows
PyTorch's rules.

bfloat16 is ``ml_dtypes.bfloat16`` (the NumPy extension type JAX uses): NumPy stores and copies it,
and ops compute on it in float32 and round their results back (``labkit.tensor.low_precision``),
as PyTorch does on a CPU.

PyTorch's promotion differs from NumPy's in three ways, and labkit follows PyTorch:

- an integer (or bool) combined with a float gives that float type (``int64`` with ``float32`` is
  ``float32``; NumPy says ``float64``);
- operands rank by kind: tensors with dimensions, then 0-d tensors, then Python numbers; a
  lower-ranked operand changes the result only if it is of a higher category (bool < integer <
  float), so ``float32`` tensor ``*`` a ``float64`` 0-d tensor stays ``float32``;
- a Python float, and an integer op whose result is fractional (``int / int``, ``sin(int)``),
  gives the default float dtype (``lk.get_default_dtype()``, float32 unless set).

>>> import labkit as lk
>>> lk.float32
lk.float32
>>> lk.result_type(lk.int32, lk.float32), lk.promote_types(lk.int64, lk.float16)
(lk.float32, lk.float16)
>>> (lk.tensor([1, 2]) / 2).dtype, (lk.tensor([1, 2]) * 1.5).dtype
(lk.float32, lk.float32)
>>> lk.float, lk.long, lk.double, lk.qint8        # PyTorch's other names
(lk.float32, lk.int64, lk.float64, lk.int8)
>>> lk.promote_types(lk.bfloat16, lk.float16), lk.promote_types(lk.bfloat16, lk.int64)
(lk.float32, lk.bfloat16)
"""
import ml_dtypes
import numpy as np

from ..errors import DTypeError


class DType:
    """A labkit dtype; ``.np`` is the matching NumPy dtype, ``.name`` its short name."""

    __slots__ = ("name", "np", "is_floating", "itemsize")

    def __init__(self, name, np_dtype):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating = kind_of(self.np) == "f"
        self.itemsize = self.np.itemsize

    def __repr__(self):
        return f"lk.{self.name}"

    __str__ = __repr__

    def __reduce__(self):
        return (as_dtype, (self.name,))


_BF16 = np.dtype(ml_dtypes.bfloat16)


def kind_of(np_dtype):
    """NumPy's kind letter of ``np_dtype`` ('f', 'i', 'u', 'b'...), with bfloat16 (an extension
    type, kind 'V' to NumPy) counted as the float it is."""
    return "f" if np_dtype is _BF16 or np_dtype == _BF16 else np_dtype.kind


bfloat16 = DType("bfloat16", _BF16)
float16 = DType("float16", np.float16)
float32 = DType("float32", np.float32)
float64 = DType("float64", np.float64)
int8 = DType("int8", np.int8)
int16 = DType("int16", np.int16)
int32 = DType("int32", np.int32)
int64 = DType("int64", np.int64)
uint8 = DType("uint8", np.uint8)
uint16 = DType("uint16", np.uint16)
uint32 = DType("uint32", np.uint32)
uint64 = DType("uint64", np.uint64)
bool_ = DType("bool_", np.bool_)

ALL = (bfloat16, float16, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32,
       uint64, bool_)
# the float types ops compute in float32 and round back to (labkit.tensor.low_precision)
LOW_PRECISION = (float16, bfloat16)
_BY_NP = {d.np: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}
# PyTorch's other names of its dtypes (``torch.long``, ``torch.float``...), exported as
# ``lk.long``, ``lk.float``... by labkit/tensor/__init__.py (here they would hide the builtins)
ALIASES = {"bool": bool_, "float": float32, "double": float64, "half": float16, "long": int64,
           "int": int32, "short": int16,
           # dynamic quantization's weight dtype (lk.quantization): held as plain int8 values
           "qint8": int8}
_BY_NAME.update(ALIASES)

# NumPy types labkit does not hold map onto the nearest it does (longdouble -> float32...).
_WIDEN = {"i": int64, "u": int64, "f": float32, "b": bool_}
# PyTorch defines no promotion between these and the other integer types (they are its
# "limited support" unsigned types): an op mixing them is an error naming the cast to make
_UNSIGNED_WIDE = frozenset(np.dtype(t) for t in (np.uint16, np.uint32, np.uint64))


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
        return _default[0]
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


# ---- the default float dtype ------------------------------------------------------------------
_default = [float32]


def get_default_dtype():
    """The dtype Python floats become (``lk.tensor(1.5)``, ``lk.zeros(2)``, ``int / int``...)."""
    return _default[0]


def set_default_dtype(dtype):
    """Set the default float dtype (float32 unless set; float64 for exact numerics).

    >>> import labkit as lk
    >>> lk.set_default_dtype(lk.float64); lk.tensor([1.5]).dtype
    lk.float64
    >>> lk.set_default_dtype(lk.float32)
    """
    d = as_dtype(dtype)
    if not d.is_floating:
        raise DTypeError(f"set_default_dtype: the default dtype must be a float type (float16, "
                         f"float32 or float64), got {d}")
    _default[0] = d


# ---- PyTorch's promotion, on NumPy dtypes (kernels use it too) ----------------------------------
_PROMOTED = {}


def promote_np(a, b):
    """PyTorch's ``promote_types`` on NumPy dtypes: bool < integers < floats; an integer with a
    float gives the float; within a kind, NumPy's lattice (uint8 with int8 is int16), except
    that bfloat16 with float16 is float32, and uint16/32/64 mix with no other integer type."""
    if a is b:
        return a
    r = _PROMOTED.get((a, b))
    if r is None:
        ka, kb = kind_of(a), kind_of(b)
        if ka == "b" or (kb == "f" and ka != "f"):
            r = b
        elif kb == "b" or (ka == "f" and kb != "f"):
            r = a
        elif a == b:
            r = a
        elif ka == "f" and (a == _BF16 or b == _BF16):
            r = np.promote_types(float32.np, b if a == _BF16 else a)
        elif a in _UNSIGNED_WIDE or b in _UNSIGNED_WIDE:
            raise DTypeError(
                f"PyTorch defines no promotion between {a} and {b} (uint16, uint32 and uint64 "
                f"mix only with floats and bool); cast one first, e.g. x.to(lk.int64)")
        else:
            r = np.promote_types(a, b)
        _PROMOTED[(a, b)] = r
    return r


_INT64, _BOOL = np.dtype(np.int64), np.dtype(np.bool_)


def _combine(higher, lower):
    """PyTorch's combination of a higher-ranked operands' dtype with a lower-ranked one's (None
    where there is no operand of that rank): the lower one counts only from a higher category."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    kh = kind_of(higher)
    if kh == "f":
        return higher
    if kh == "b" or kind_of(lower) == "f":
        return promote_np(higher, lower)
    return higher


def common_np_dtype(values):
    """The NumPy dtype PyTorch computes in for these operands: arrays or tensor-likes (anything
    with ``.dtype`` and ``.shape``) and Python numbers."""
    dims = zeros = scalars = None
    for v in values:
        d = getattr(v, "dtype", None)
        if d is None:
            if isinstance(v, bool):
                d = _BOOL
            elif isinstance(v, int):
                d = _INT64
            elif isinstance(v, float):
                d = _default[0].np
            else:
                d = np.asarray(v).dtype
            scalars = d if scalars is None else promote_np(scalars, d)
            continue
        d = getattr(d, "np", d)
        if len(v.shape):
            dims = d if dims is None else promote_np(dims, d)
        else:
            zeros = d if zeros is None else promote_np(zeros, d)
    return _combine(dims, _combine(zeros, scalars))


def promote_types(a, b):
    """PyTorch's promotion of two dtypes (labkit dtypes, names or NumPy dtypes)."""
    return from_numpy_dtype(promote_np(as_dtype(a).np, as_dtype(b).np))


def result_type(*args):
    """The dtype PyTorch gives an elementwise op of ``args``: tensors, dtypes (taken as tensors
    with dimensions) and Python numbers."""
    values = [_AsTensor(a) if type(a) is DType or isinstance(a, (str, np.dtype)) else a
              for a in args]
    return from_numpy_dtype(common_np_dtype(values))


class _AsTensor:
    __slots__ = ("dtype",)
    shape = (1,)

    def __init__(self, spec):
        self.dtype = as_dtype(spec).np


class finfo:
    """PyTorch's ``torch.finfo``: the limits of a float dtype (``bits``, ``eps``, ``max``,
    ``min``, ``tiny`` / ``smallest_normal``, ``resolution``), as Python floats.

    >>> import labkit as lk
    >>> lk.finfo(lk.bfloat16).eps, lk.finfo(lk.float16).max, lk.finfo().bits
    (0.0078125, 65504.0, 32)
    """

    def __init__(self, dtype=None):
        d = as_dtype(dtype) if dtype is not None else _default[0]
        if not d.is_floating:
            raise DTypeError(f"lk.finfo takes a float dtype, not {d}; use lk.iinfo for "
                             f"integer types")
        info = ml_dtypes.finfo(d.np) if d is bfloat16 else np.finfo(d.np)
        self.dtype = d.name
        self.bits = info.bits
        self.eps, self.max, self.min = float(info.eps), float(info.max), float(info.min)
        self.tiny = self.smallest_normal = float(info.tiny)
        self.resolution = 10.0 ** -int(info.precision)

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min}, max={self.max}, "
                f"eps={self.eps}, smallest_normal={self.tiny}, bits={self.bits}, "
                f"dtype={self.dtype})")


class iinfo:
    """PyTorch's ``torch.iinfo``: the limits of an integer dtype (``bits``, ``max``, ``min``).

    >>> import labkit as lk
    >>> lk.iinfo(lk.int8).min, lk.iinfo(lk.uint16).max
    (-128, 65535)
    """

    def __init__(self, dtype):
        d = as_dtype(dtype)
        if d.is_floating or d is bool_:
            raise DTypeError(f"lk.iinfo takes an integer dtype, not {d}; use lk.finfo for "
                             f"float types")
        info = np.iinfo(d.np)
        self.dtype, self.bits, self.max, self.min = d.name, info.bits, int(info.max), \
            int(info.min)

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, bits={self.bits}, dtype={self.dtype})"
