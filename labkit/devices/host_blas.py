"""Host BLAS: a matrix product that accumulates into its output, ``c = alpha * a @ b + beta * c``,
and its one-pass vector sibling ``y = alpha * x + beta * y`` (``axpby``).

NumPy's ``matmul`` always writes a fresh result, so an update such as SGD's
``w -= lr * (x.T @ g)`` costs a GEMM and then a second pass over ``w``. BLAS ``gemm`` does both
in one (``beta=1``), the way PyTorch's ``addmm_`` does. labkit calls the CBLAS ``gemm`` of the
BLAS library NumPy itself has loaded, so both share one set of kernels and one thread pool
(``threadpoolctl`` limits apply to both).

The library is looked up on first use: in the folder a NumPy wheel ships its BLAS in, then
among the shared libraries this process has loaded (Linux). It is used only after a small
product computed through it matches NumPy's. Where none is found (another platform, a NumPy
without a CBLAS of this kind) ``gemm`` returns False and the caller computes the same thing
with NumPy; ``available()`` says which case holds.

>>> import numpy as np
>>> from labkit.devices import host_blas
>>> c = np.ones((2, 2), np.float32)
>>> a = np.arange(6, dtype=np.float32).reshape(2, 3)
>>> if not host_blas.gemm(c, a, a.T, alpha=0.5, beta=1.0):   # no BLAS found: NumPy does it
...     c += 0.5 * (a @ a.T)
>>> c.tolist()
[[3.5, 8.0], [8.0, 26.0]]
"""
import ctypes
import glob
import os
import sys

import numpy as np

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112

# (symbol pattern, integer type): CBLAS names as NumPy's wheels (64-bit integers, prefixed and
# suffixed names) and as plain builds of OpenBLAS and reference CBLAS export them
_SYMBOLS = [("scipy_cblas_{}gemm64_", ctypes.c_int64), ("cblas_{}gemm64_", ctypes.c_int64),
            ("scipy_cblas_{}gemm", ctypes.c_int), ("cblas_{}gemm", ctypes.c_int)]

# gemm, axpby: {dtype: function} once looked up; {} if none
_state = {"gemm": None, "axpby": None, "where": None}


def _candidate_libraries():
    """Paths of shared libraries that may hold NumPy's BLAS, most likely first."""
    found = []
    here = os.path.dirname(np.__file__)
    for folder in (os.path.join(os.path.dirname(here), "numpy.libs"), os.path.join(here, ".dylibs")):
        found += sorted(glob.glob(os.path.join(folder, "*blas*")))
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/self/maps") as maps:
                for line in maps:
                    path = line.rsplit(" ", 1)[-1].strip()
                    name = os.path.basename(path).lower()
                    if ("blas" in name or "mkl_rt" in name) and path not in found:
                        found.append(path)
        except OSError:
            pass
    return found


def _bind(lib, letter, real):
    for pattern, int_t in _SYMBOLS:
        fn = getattr(lib, pattern.format(letter), None)
        if fn is None:
            continue
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, int_t, int_t, int_t, real,
                       ctypes.c_void_p, int_t, ctypes.c_void_p, int_t, real, ctypes.c_void_p,
                       int_t]
        fn.restype = None
        return fn
    return None


def _agrees(functions):
    """Whether a small product through each bound function matches NumPy's (guards against a
    library whose integer width or conventions differ from what the symbol name says)."""
    rng = np.random.default_rng(0)
    for dtype in functions:
        a = rng.standard_normal((5, 3)).astype(dtype)
        b = rng.standard_normal((4, 5)).astype(dtype)
        c = rng.standard_normal((7, 4)).astype(dtype)[2:5, :]   # a strided view: ldc != n
        want = c + 0.5 * (a.T @ b.T)
        if not _call(functions[dtype], c, a.T, b.T, 0.5, 1.0) or \
                not np.allclose(c, want, rtol=1e-4, atol=1e-5):
            return False
    return True


def _bind_axpby(lib, letter, real):
    # (an OpenBLAS extension of CBLAS: reference CBLAS has no axpby)
    for pattern, int_t in _SYMBOLS:
        fn = getattr(lib, pattern.format(letter).replace("gemm", "axpby"), None)
        if fn is None:
            continue
        fn.argtypes = [int_t, real, ctypes.c_void_p, int_t, real, ctypes.c_void_p, int_t]
        fn.restype = None
        return fn
    return None


def _axpby_agrees(functions):
    for dtype, fn in functions.items():
        x, y = np.arange(5, dtype=dtype), np.ones(5, dtype=dtype)
        fn(5, 0.5, x.ctypes.data, 1, 2.0, y.ctypes.data, 1)
        if not np.array_equal(y, 0.5 * np.arange(5, dtype=dtype) + 2.0):
            return False
    return True


def _lookup():
    for path in _candidate_libraries():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        functions = {np.dtype(np.float32): _bind(lib, "s", ctypes.c_float),
                     np.dtype(np.float64): _bind(lib, "d", ctypes.c_double)}
        if None in functions.values():
            continue
        if _agrees(functions):
            _state["where"] = os.path.basename(path)
            vector = {np.dtype(np.float32): _bind_axpby(lib, "s", ctypes.c_float),
                      np.dtype(np.float64): _bind_axpby(lib, "d", ctypes.c_double)}
            _state["axpby"] = vector if None not in vector.values() and \
                _axpby_agrees(vector) else {}
            return functions
    _state["axpby"] = {}
    return {}


def _functions():
    if _state["gemm"] is None:
        _state["gemm"] = _lookup()
    return _state["gemm"]


# below this many elements two NumPy ufunc calls cost less than one call through ctypes
_AXPBY_MIN = 1 << 14


def axpby(y, x, alpha, beta):
    """``y = alpha * x + beta * y``, in place in ``y``, in one pass through BLAS (NumPy takes
    two: ``y *= beta; y += alpha * x``, the second with a temporary); returns whether it did.

    ``x`` and ``y`` are C-contiguous NumPy arrays of one shape and dtype (float32 or float64),
    ``y`` writeable and not overlapping ``x``, with at least ``_AXPBY_MIN`` elements (fewer
    cost less in NumPy); ``alpha`` and ``beta`` nonzero numbers (BLAS skips reading an operand
    whose factor is 0, so a NaN or inf in it would not propagate as in NumPy). Returns False,
    leaving ``y`` alone, for anything else, or where the BLAS library has no ``axpby``.

    >>> import numpy as np
    >>> from labkit.devices import host_blas
    >>> y, x = np.ones(1 << 14, np.float32), np.full(1 << 14, 2.0, np.float32)
    >>> if not host_blas.axpby(y, x, 0.5, 3.0):    # no BLAS axpby here: NumPy does it
    ...     y *= 3.0; y += 0.5 * x
    >>> float(y[0])
    4.0
    """
    if type(y) is not np.ndarray or type(x) is not np.ndarray or y.size < _AXPBY_MIN or \
            x.dtype != y.dtype or x.shape != y.shape or not y.flags.writeable or \
            not (x.flags.c_contiguous and y.flags.c_contiguous):
        return False
    alpha, beta = float(alpha), float(beta)
    if alpha == 0 or beta == 0:
        return False
    _functions()
    fn = _state["axpby"].get(y.dtype)
    if fn is None or np.may_share_memory(x, y):
        return False
    fn(y.size, alpha, x.ctypes.data, 1, beta, y.ctypes.data, 1)
    return True


def available():
    """The file name of the BLAS library ``gemm`` calls, or None where NumPy does the work.

    >>> from labkit.devices import host_blas
    >>> host_blas.available() is None or "blas" in host_blas.available().lower()
    True
    """
    _functions()
    return _state["where"]


def _layout(x, itemsize):
    """(transpose flag, leading dimension) describing 2-D ``x`` to row-major CBLAS, or None
    when ``x`` is neither row- nor column-major with unit steps along one axis."""
    rows, cols = x.shape
    s0, s1 = x.strides
    if (cols <= 1 or s1 == itemsize) and s0 % itemsize == 0:
        ld = s0 // itemsize if rows > 1 else max(cols, 1)
        if ld >= max(cols, 1):
            return _NO_TRANS, ld
    if (rows <= 1 or s0 == itemsize) and s1 % itemsize == 0:
        ld = s1 // itemsize if cols > 1 else max(rows, 1)
        if ld >= max(rows, 1):
            return _TRANS, ld
    return None


def _call(fn, c, a, b, alpha, beta):
    item = c.itemsize
    lc = _layout(c, item)
    if lc is None:
        return False
    if lc[0] == _TRANS:            # a column-major c: compute c.T = alpha * b.T @ a.T + beta * c.T
        c, a, b = c.T, b.T, a.T
        lc = (_NO_TRANS, lc[1])
    la, lb = _layout(a, item), _layout(b, item)
    if la is None or lb is None:
        return False
    m, n = c.shape
    fn(_ROW_MAJOR, la[0], lb[0], m, n, a.shape[1], alpha, a.ctypes.data, la[1], b.ctypes.data,
       lb[1], beta, c.ctypes.data, lc[1])
    return True


def gemm(c, a, b, alpha=1.0, beta=1.0):
    """``c = alpha * (a @ b) + beta * c``, in place in ``c``, through BLAS; returns whether it did.

    ``a``, ``b`` and ``c`` are 2-D NumPy arrays of one dtype (float32 or float64), each
    row- or column-major (transposed views and row slices qualify), ``c`` writeable, of shape
    (a's rows, b's columns), and sharing no memory with ``a`` or ``b``. Returns False, and
    leaves ``c`` alone, for anything else, empty arrays included, or when no BLAS library was
    found: the caller then computes the product with NumPy.
    """
    dtype = c.dtype
    if a.dtype != dtype or b.dtype != dtype or c.ndim != 2 or a.ndim != 2 or b.ndim != 2 or \
            type(c) is not np.ndarray or type(a) is not np.ndarray or type(b) is not np.ndarray:
        return False
    fn = _functions().get(dtype)
    if fn is None or not c.flags.writeable or 0 in a.shape or 0 in b.shape or \
            a.shape[0] != c.shape[0] or b.shape[1] != c.shape[1] or a.shape[1] != b.shape[0] or \
            np.may_share_memory(c, a) or np.may_share_memory(c, b):
        return False
    return _call(fn, c, a, b, alpha, beta)
