"""labkit dtypes: bfloat16, float16/32/64, complex64/128, int8/16/32/64, uint8/16/32/64, bool.
Promotion follows PyTorch's rules.

bfloat16 is ``ml_dtypes.bfloat16`` (the NumPy extension type JAX uses): NumPy stores and copies it,
and ops compute on it in float32 and round their results back (``labkit.tensor.low_precision``),
as PyTorch does on a CPU.

PyTorch's promotion differs from NumPy's in three ways, and labkit follows PyTorch:

- an integer (or bool) combined with a float gives that float type (``int64`` with ``float32`` is
  ``float32``; NumPy says ``float64``), and with a complex type that complex type;
- operands rank by kind: tensors with dimensions, then 0-d tensors, then Python numbers; a
  lower-ranked operand changes the result only if it is of a higher category (bool < integer <
  float < complex), so ``float32`` tensor ``*`` a ``float64`` 0-d tensor stays ``float32``, and
  ``float32`` tensor ``*`` a ``complex128`` 0-d tensor is ``complex64`` (the float's precision);
- a Python float, and an integer op whose result is fractional (``int / int``, ``sin(int)``),
  gives the default float dtype (``lk.get_default_dtype()``, float32 unless set); a Python
  complex gives the default complex dtype (complex64, or complex128 when the default float
  dtype is float64).

>>> import labkit as lk
>>> lk.float32
lk.float32
>>> lk.result_type(lk.int32, lk.float32), lk.promote_types(lk.int64, lk.float16)
(lk.float32, lk.float16)
>>> (lk.tensor([1, 2]) / 2).dtype, (lk.tensor([1, 2]) * 1.5).dtype
(lk.float32, lk.float32)
>>> lk.float, lk.long, lk.double, lk.qint8        # PyTorch's other names
(lk.float32, lk.int64, lk.float64, lk.int8)
>>> lk.promote_types(lk.float64, lk.complex64), (lk.ones(2) * 1j).dtype, lk.cfloat
(lk.complex128, lk.complex64, lk.complex64)
>>> lk.promote_types(lk.bfloat16, lk.float16), lk.promote_types(lk.bfloat16, lk.int64)
(lk.float32, lk.bfloat16)
"""
import ml_dtypes
import numpy as np

from ..errors import DTypeError


class DType:
    """A labkit dtype; ``.np`` is the matching NumPy dtype, ``.name`` its short name."""

    __slots__ = ("name", "np", "is_floating", "is_complex", "itemsize")

    def __init__(self, name, np_dtype):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating = kind_of(self.np) == "f"
        # complex dtypes are not floating point (PyTorch's is_floating_point), but have
        # gradients: ``is_differentiable``
        self.is_complex = self.np.kind == "c"
        self.itemsize = self.np.itemsize

    @property
    def is_floating_point(self):
        return self.is_floating

    @property
    def is_differentiable(self):
        """Whether tensors of this dtype can require grad (floating point and complex)."""
        return self.is_floating or self.is_complex

    def to_real(self):
        """The real dtype of a complex one's parts (itself for a real dtype), as PyTorch's."""
        return _BY_NP[self.np.type(0).real.dtype] if self.is_complex else self

    def to_complex(self):
        """The complex dtype with parts of this float dtype (itself for a complex one)."""
        if self.is_complex:
            return self
        if not self.is_floating or self.np not in _TO_COMPLEX:
            raise DTypeError(f"{self} has no complex counterpart in labkit (complex64 has "
                             f"float32 parts, complex128 float64)")
        return _BY_NP[_TO_COMPLEX[self.np]]

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
complex64 = DType("complex64", np.complex64)
complex128 = DType("complex128", np.complex128)

ALL = (bfloat16, float16, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32,
       uint64, bool_, complex64, complex128)
# the float types ops compute in float32 and round back to (labkit.tensor.low_precision)
LOW_PRECISION = (float16, bfloat16)
_BY_NP = {d.np: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}
# PyTorch's other names of its dtypes (``torch.long``, ``torch.float``...), exported as
# ``lk.long``, ``lk.float``... by labkit/tensor/__init__.py (here they would hide the builtins)
ALIASES = {"bool": bool_, "float": float32, "double": float64, "half": float16, "long": int64,
           "int": int32, "short": int16, "cfloat": complex64, "cdouble": complex128,
           # dynamic quantization's weight dtype (lk.quantization): held as plain int8 values
           "qint8": int8}
_BY_NAME.update(ALIASES)

# NumPy types labkit does not hold map onto the nearest it does (longdouble -> float32...).
_WIDEN = {"i": int64, "u": int64, "f": float32, "b": bool_, "c": complex128}
# the complex dtype of a float one (PyTorch's float16 -> complex32 has no NumPy type: labkit
# computes it, and bfloat16's, in complex64)
_TO_COMPLEX = {np.dtype(np.float16): np.dtype(np.complex64), _BF16: np.dtype(np.complex64),
               np.dtype(np.float32): np.dtype(np.complex64),
               np.dtype(np.float64): np.dtype(np.complex128)}
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
    if spec is complex:
        return default_complex_dtype()
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


def default_complex_dtype():
    """The dtype Python complex numbers become: complex64, or complex128 when the default float
    dtype is float64 (PyTorch's rule)."""
    return complex128 if _default[0] is float64 else complex64


# ---- PyTorch's promotion, on NumPy dtypes (kernels use it too) ----------------------------------
_PROMOTED = {}


# PyTorch's categories of dtypes, by NumPy kind: bool < integers < floats < complex
_CATEGORY = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}


def promote_np(a, b):
    """PyTorch's ``promote_types`` on NumPy dtypes: bool < integers < floats < complex; an
    operand of a lower category takes the other's type (int64 with float32 is float32, with
    complex64 complex64), except that a float with a complex keeps the wider precision (float64
    with complex64 is complex128); within a kind, NumPy's lattice (uint8 with int8 is int16),
    except that bfloat16 with float16 is float32, and uint16/32/64 mix with no other integer
    type."""
    if a is b:
        return a
    r = _PROMOTED.get((a, b))
    if r is None:
        ka, kb = kind_of(a), kind_of(b)
        ca, cb = _CATEGORY[ka], _CATEGORY[kb]
        if ca != cb and {ca, cb} != {2, 3}:
            r = a if ca > cb else b
        elif a == b:
            r = a
        elif _BF16 in (a, b):          # with float16: float32; with a complex: its precision
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
    where there is no operand of that rank): the lower one counts only from a higher category,
    and a complex one over a float keeps the float's precision (float32 with complex128 is
    complex64)."""
    if higher is None:
        return lower
    if lower is None or higher.kind == "c":
        return higher
    if lower.kind == "c":
        return _TO_COMPLEX[higher] if kind_of(higher) == "f" else lower
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
            elif isinstance(v, complex):
                d = default_complex_dtype().np
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
