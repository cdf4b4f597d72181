"""Creating tensors: from data, filled, ranges, identity, random; NumPy and DLPack interop.

>>> import labkit as lk
>>> lk.tensor([1, 2, 3]).dtype
lk.int64
>>> lk.zeros((2, 3)).shape
(2, 3)
>>> lk.manual_seed(0); a = lk.randn(3); lk.manual_seed(0); bool((a == lk.randn(3)).all())
True
"""
import numpy as np

from ..devices import device_of_array, get_device, transfer
from ..errors import DTypeError
from .dtypes import as_dtype, get_default_dtype, storage_dtype
from .tensor import Tensor


def _place(array, device, requires_grad):
    """Move a host array to ``device`` and wrap it; the one place creation functions end."""
    dev = get_device(device)
    if dev.type != "cpu":
        array = transfer(array, get_device("cpu:0"), dev)
    t = Tensor._make(array, dev)
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
    t = Tensor._make(array, device)
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


def zeros_like(t, dtype=None, device=None, requires_grad=False):
    return zeros(t.shape, dtype=dtype or t.dtype, device=device or t.device,
                 requires_grad=requires_grad)


def ones_like(t, dtype=None, device=None, requires_grad=False):
    return ones(t.shape, dtype=dtype or t.dtype, device=device or t.device,
                requires_grad=requires_grad)


def full_like(t, fill_value, dtype=None, device=None):
    return full(t.shape, fill_value, dtype=dtype or t.dtype, device=device or t.device)


def arange(start, end=None, step=1, dtype=None, device=None):
    """Evenly spaced values in ``[start, end)`` (int64 for integer arguments, else float32)."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        ints = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
        dtype = "int64" if ints else get_default_dtype()
    return _place(np.arange(start, end, step, dtype=as_dtype(dtype).np), device, False)


def linspace(start, end, steps, dtype=None, device=None):
    """``steps`` values from ``start`` to ``end`` inclusive (float32 by default)."""
    return _place(np.linspace(start, end, steps, dtype=(as_dtype(dtype) or get_default_dtype()).np),
                  device, False)


def eye(n, m=None, dtype=None, device=None):
    """The ``n`` x ``m`` identity matrix (float32 by default)."""
    return _place(np.eye(n, m, dtype=(as_dtype(dtype) or get_default_dtype()).np), device, False)


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
                         f"holds float16/32/64, int8/16/32/64, uint8 and bool); use lk.tensor(array) to copy")
    return Tensor._make(array, get_device("cpu:0"))


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
        raise DTypeError(f"from_dlpack: labkit has no dtype for {array.dtype} (it holds float16/"
                         f"32/64, int8/16/32/64, uint8 and bool), so it cannot share this memory; convert "
                         f"the producer first (e.g. x.to(torch.float32)) or copy it with "
                         f"lk.tensor(np.asarray(x))")
    return Tensor._make(array, device_of_array(array))
