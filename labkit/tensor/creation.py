"""Creating tensors: from data, filled, ranges, identity, random; NumPy and DLPack interop.

>>> import labkit as lk
>>> lk.tensor([1, 2, 3]).dtype
lk.int64
>>> lk.zeros((2, 3)).shape
(2, 3)
>>> _ = lk.manual_seed(0); a = lk.randn(3); _ = lk.manual_seed(0); bool((a == lk.randn(3)).all())
True
"""
import math

import numpy as np

from ..devices import device_of_array, get_device, transfer
from ..errors import DTypeError, ShapeError
from .dtypes import (as_dtype, default_complex_dtype, float16, float32, get_default_dtype,
                     storage_dtype)
from .dispatch import made_from_host
from .inference import mark as _mark_inference
from .tensor import Tensor


def _place(array, device, requires_grad):
    """Move a host array to ``device`` and wrap it; the one place creation functions end."""
    dev = get_device(device)
    if dev.type != "cpu":
        array = transfer(array, get_device("cpu:0"), dev)
    t = made_from_host(_mark_inference(Tensor._make(array, dev)))
    if requires_grad:
        t.requires_grad = True   # checks the dtype, with a clear error for integers
    return t


def _host_array(data, dtype):
    """``data`` as a host NumPy array with labkit's default dtypes (Python floats -> the default
    float dtype)."""
    if isinstance(data, Tensor):
        data = data.numpy()
    if dtype is not None:
        return np.array(data, dtype=as_dtype(dtype).np)
    if isinstance(data, np.ndarray) or np.isscalar(data) and isinstance(data, np.generic):
        arr = np.array(data)
        return arr.astype(storage_dtype(arr.dtype), copy=False)
    arr = np.array(data)
    if arr.dtype == np.float64:
        arr = arr.astype(get_default_dtype().np)   # like PyTorch: Python floats -> float32
    elif arr.dtype == np.complex128:               # and Python complex numbers -> complex64
        arr = arr.astype(default_complex_dtype().np)
    elif arr.dtype.kind not in "fb" and arr.dtype != np.int64:
        try:
            arr = arr.astype(storage_dtype(arr.dtype), copy=False)
        except DTypeError:
            raise DTypeError(f"lk.tensor cannot hold {type(data).__name__} data of NumPy dtype "
                             f"{arr.dtype}; pass numbers, nested lists or arrays") from None
    return arr


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of ``data`` (numbers, nested lists, NumPy arrays, tensors).

    Python floats become float32 (``lk.get_default_dtype()``) and ints int64, as in PyTorch;
    NumPy arrays keep their dtype.

    >>> import labkit as lk
    >>> lk.tensor([[1.0, 2.0]], requires_grad=True).shape
    (1, 2)
    """
    if isinstance(data, Tensor) and device is None:
        device = data.device
        if device.type != "cpu":
            arr = data._data.astype(as_dtype(dtype).np) if dtype else data._data.copy()
            return _place_on(arr, device, requires_grad)
    return _place(_host_array(data, dtype), device, requires_grad)


def _place_on(array, device, requires_grad):
    t = made_from_host(_mark_inference(Tensor._make(array, device)))
    if requires_grad:
        t.requires_grad = True
    return t


def _shape(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return tuple(int(s) for s in shape)


def _filled(fill, shape, dtype, device, requires_grad):
    dtype = as_dtype(dtype) or get_default_dtype()
    dev = get_device(device)
    with dev.activate():
        arr = dev.xp.full(_shape(shape), fill, dtype=dtype.np)
    return _place_on(arr, dev, requires_grad)


def zeros(*shape, dtype=None, device=None, requires_grad=False):
    """A tensor of zeros: ``lk.zeros(2, 3)`` or ``lk.zeros((2, 3))``; float32 by default."""
    return _filled(0, shape, dtype, device, requires_grad)


def ones(*shape, dtype=None, device=None, requires_grad=False):
    """A tensor of ones: ``lk.ones(2, 3)`` or ``lk.ones((2, 3))``; float32 by default."""
    return _filled(1, shape, dtype, device, requires_grad)


def full(shape, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor of ``shape`` filled with ``fill_value`` (float32 unless ``dtype`` says)."""
    if dtype is None and isinstance(fill_value, bool):
        dtype = "bool_"
    elif dtype is None and isinstance(fill_value, int):
        dtype = "int64"
    return _filled(fill_value, (shape,) if isinstance(shape, int) else (tuple(shape),),
                   dtype, device, requires_grad)


def zeros_like(input, *, dtype=None, device=None, requires_grad=False):
    """Zeros with ``input``'s shape (and dtype and device, unless given)."""
    return zeros(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                 requires_grad=requires_grad)


def ones_like(input, *, dtype=None, device=None, requires_grad=False):
    """Ones with ``input``'s shape (and dtype and device, unless given)."""
    return ones(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                requires_grad=requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False):
    """``fill_value`` in ``input``'s shape (and dtype and device, unless given).

    >>> import labkit as lk
    >>> lk.full_like(lk.zeros(2, dtype=lk.int64), 7).tolist()
    [7, 7]
    """
    return full(input.shape, fill_value, dtype=dtype or input.dtype,
                device=device or input.device, requires_grad=requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    """A tensor of ``size`` whose values are not set (float32 by default).

    >>> import labkit as lk
    >>> lk.empty(2, 3).shape, lk.empty((2,), dtype=lk.int64).dtype
    ((2, 3), lk.int64)
    """
    dtype = as_dtype(dtype) or get_default_dtype()
    dev = get_device(device)
    with dev.activate():
        arr = dev.xp.empty(_shape(size), dtype=dtype.np)
    return _place_on(arr, dev, requires_grad)


def empty_like(input, *, dtype=None, device=None, requires_grad=False):
    """A tensor of ``input``'s shape (and dtype and device, unless given), values not set."""
    return empty(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                 requires_grad=requires_grad)


# ---- ranges: PyTorch's lengths, dtypes and values ---------------------------------------------
def _number(v):
    """A Python number from a number or a 0-d tensor (PyTorch takes both for range bounds)."""
    return v.item() if isinstance(v, Tensor) else v


def _is_float(v):
    return isinstance(v, (float, np.floating)) or (isinstance(v, Tensor) and v.dtype.is_floating)


def _placed(values, dtype, device, requires_grad):
    return _place(values.astype(dtype.np, copy=False), device, requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    """``[start, start + step, ...)`` up to ``end`` (excluded), as PyTorch: float32 if any
    bound is a float, else int64; ``ceil((end - start) / step)`` values; with an integer
    ``dtype`` the bounds are truncated to integers first.

    >>> import labkit as lk
    >>> lk.arange(5).tolist(), lk.arange(1, 2.5, 0.5).tolist(), lk.arange(0, 1, 0.25).dtype
    ([0, 1, 2, 3, 4], [1.0, 1.5, 2.0], lk.float32)
    """
    if end is None:
        start, end = 0, start
    floats = any(_is_float(v) for v in (start, end, step))
    dtype = as_dtype(dtype) or (get_default_dtype() if floats else as_dtype("int64"))
    start, end, step = (_number(v) for v in (start, end, step))
    if not dtype.is_floating:
        start, end, step = int(start), int(end), int(step)
    if step == 0:
        raise ShapeError("arange: step must be nonzero")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise ShapeError(f"arange: the bounds start={start}, end={end} are inconsistent with "
                         f"the sign of step={step}; swap them or negate the step")
    if dtype.is_floating:
        n = math.ceil((end - start) / step)
        values = start + step * np.arange(n, dtype=np.float64)
    else:
        values = np.arange(start, end, step, dtype=np.int64)
    return _placed(values, dtype, device, requires_grad)


def _exact_affine(base, step, k):
    """``base + step * k`` rounded once (as a fused multiply-add), elementwise, in float64:
    the product's rounding error (Dekker's split) and the sum's (Knuth's two-sum) are added
    back before the one final rounding."""
    split = 134217729.0                                  # 2 ** 27 + 1
    p = step * k

    def halves(x):
        t = split * x
        hi = t - (t - x)
        return hi, x - hi
    sh, sl = halves(np.float64(step))
    kh, kl = halves(k)
    p_err = ((sh * kh - p) + sh * kl + sl * kh) + sl * kl
    s = base + p
    b = s - base
    s_err = (base - (s - b)) + (p - b)
    return s + (s_err + p_err)


def _steps(start, end, steps, dtype, fused):
    """PyTorch's linspace values: ``start + step * i`` for the first half, ``end - step *
    (steps - 1 - i)`` for the rest, computed in float32 for float32/16 (float64 otherwise),
    with ``fused`` multiply-adds as PyTorch's float64 kernel."""
    if steps == 1:
        return np.array([start], np.float64)
    i = np.arange(steps, dtype=np.float64)
    rest = steps - 1 - i
    if dtype in (float32, float16):
        s, e = np.float32(start), np.float32(end)
        step = np.float64((e - s) / np.float32(steps - 1))
        low, high = np.float64(s) + step * i, np.float64(e) - step * rest
        return np.where(i < steps // 2, low.astype(np.float32), high.astype(np.float32))
    step = (end - start) / (steps - 1)
    if fused:
        low, high = _exact_affine(float(start), step, i), _exact_affine(float(end), -step, rest)
    else:
        low, high = start + step * i, end - step * rest
    return np.where(i < steps // 2, low, high)


def _check_steps(name, steps):
    if not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ShapeError(f"{name}: steps must be a non-negative int, got {steps!r}")


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    """``steps`` values from ``start`` to ``end`` inclusive, evenly spaced (float32 by
    default); with an integer ``dtype``, PyTorch's values: the bounds truncated to integers,
    the points computed in float64 and truncated toward zero.

    >>> import labkit as lk
    >>> lk.linspace(0, 1, 5).tolist(), lk.linspace(0, 10, 4, dtype=lk.int64).tolist()
    ([0.0, 0.25, 0.5, 0.75, 1.0], [0, 3, 6, 10])
    """
    _check_steps("linspace", steps)
    dtype = as_dtype(dtype) or get_default_dtype()
    start, end = _number(start), _number(end)
    if not dtype.is_floating:
        start, end = int(start), int(end)
    values = _steps(start, end, steps, dtype, fused=True)
    return _placed(values if dtype.is_floating else np.trunc(values), dtype, device,
                   requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    """``base ** linspace(start, end, steps)`` (float32 by default); with an integer ``dtype``
    the exponents' bounds are truncated first and the powers truncated toward zero, as in
    PyTorch.

    >>> import labkit as lk
    >>> lk.logspace(0, 3, 4).tolist(), lk.logspace(0, 2, 3, base=2).tolist()
    ([1.0, 10.0, 100.0, 1000.0], [1.0, 2.0, 4.0])
    """
    _check_steps("logspace", steps)
    dtype = as_dtype(dtype) or get_default_dtype()
    start, end, base = _number(start), _number(end), float(_number(base))
    if not dtype.is_floating and steps != 1:
        start, end = int(start), int(end)
    values = np.power(base, _steps(start, end, steps, dtype, fused=False).astype(np.float64))
    return _placed(values if dtype.is_floating else np.trunc(values), dtype, device,
                   requires_grad)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    """The ``n`` x ``m`` identity matrix (float32 by default).

    >>> import labkit as lk
    >>> lk.eye(2, 3).tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    return _place(np.eye(n, m, dtype=(as_dtype(dtype) or get_default_dtype()).np), device, requires_grad)


def _indices(name, fn, row, col, offset, dtype, device):
    for v in (row, col):
        if not isinstance(v, (int, np.integer)) or v < 0:
            raise ShapeError(f"{name}: row and col must be non-negative ints, got {row!r}, "
                             f"{col!r}")
    dtype = as_dtype(dtype) or as_dtype("int64")
    return _place(np.stack(fn(row, offset, col)).astype(dtype.np), device, False)


def tril_indices(row, col, offset=0, *, dtype=None, device=None):
    """The (row, column) indices of the lower triangle of a ``row`` x ``col`` matrix (on and
    below diagonal ``offset``), as a (2, N) int64 tensor in row-major order.

    >>> import labkit as lk
    >>> lk.tril_indices(3, 3).tolist()
    [[0, 1, 1, 2, 2, 2], [0, 0, 1, 0, 1, 2]]
    """
    return _indices("tril_indices", np.tril_indices, row, col, offset, dtype, device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None):
    """The (row, column) indices of the upper triangle (on and above diagonal ``offset``).

    >>> import labkit as lk
    >>> lk.triu_indices(2, 3, 1).tolist()
    [[0, 0, 1], [1, 2, 2]]
    """
    return _indices("triu_indices", np.triu_indices, row, col, offset, dtype, device)


_HELD = "bfloat16, float16/32/64, int8/16/32/64, uint8/16/32/64 and bool"


def from_numpy(array):
    """A CPU tensor that shares memory with the NumPy ``array`` (no copy).

    >>> import numpy as np, labkit as lk
    >>> a = np.zeros(3, dtype=np.float32); t = lk.from_numpy(a); a[0] = 5; t[0].item()
    5.0
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(array).__name__}")
    if array.dtype != storage_dtype(array.dtype):
        raise DTypeError(f"from_numpy cannot share memory with a {array.dtype} array (labkit "
                         f"holds {_HELD}); use lk.tensor(array) to copy")
    return made_from_host(Tensor._make(array, get_device("cpu:0")))


def from_dlpack(obj):
    """A tensor sharing memory with ``obj`` through DLPack (PyTorch, CuPy, JAX, NumPy arrays).

    CPU producers give a CPU tensor; CUDA producers give a GPU tensor (needs CuPy).

    >>> import numpy as np, labkit as lk
    >>> a = np.zeros(3, dtype=np.float32); t = lk.from_dlpack(a); a[1] = 2; t.tolist()
    [0.0, 2.0, 0.0]
    """
    if not hasattr(obj, "__dlpack_device__") or not hasattr(obj, "__dlpack__"):
        raise TypeError(f"from_dlpack expects an array that supports DLPack (a NumPy array, a "
                        f"PyTorch, CuPy or JAX tensor), got {type(obj).__name__}; use "
                        f"lk.tensor(data) to copy other data")
    kind, _ = obj.__dlpack_device__()
    if int(kind) == 1:  # kDLCPU
        array = np.from_dlpack(obj)
    elif int(kind) == 2:  # kDLCUDA
        cupy = get_device("gpu:0").xp
        array = cupy.from_dlpack(obj)
    else:
        raise DTypeError(f"from_dlpack: producer is on DLPack device type {kind}, which labkit "
                         f"does not support (CPU and CUDA only); move it to the CPU or a CUDA "
                         f"GPU first")
    if array.dtype.kind not in "fiub" or array.dtype != storage_dtype(array.dtype):
        raise DTypeError(f"from_dlpack: labkit has no dtype for {array.dtype} (it holds "
                         f"{_HELD}), so it cannot share this memory; convert "
                         f"the producer first (e.g. x.to(torch.float32)) or copy it with "
                         f"lk.tensor(np.asarray(x))")
    return made_from_host(Tensor._make(array, device_of_array(array)))
