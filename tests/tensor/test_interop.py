"""Interop without copies: NumPy (__array__, from_numpy), DLPack (NumPy, PyTorch, CuPy)."""
import numpy as np
import pytest

import labkit as lk

DTYPES = ["float16", "float32", "float64", "int32", "int64", "uint16", "uint32", "uint64",
          "bool_"]


def _values(dtype, n=4):
    return np.arange(n).astype(lk.as_dtype(dtype).np)


def _poke(array, value=1):
    """Write into element 0 of ``array`` (a NumPy or PyTorch array), whatever its dtype."""
    array[0] = True if array.dtype in (np.bool_,) or str(array.dtype) == "torch.bool" else value


# ---- NumPy ---------------------------------------------------------------------------------
def test_asarray_shares_memory_with_cpu_tensor():
    t = lk.tensor([1.0, 2.0, 3.0])
    a = np.asarray(t)
    assert a.dtype == np.float32 and a.shape == (3,)
    assert np.shares_memory(a, t.numpy())
    a[0] = 10
    assert t.tolist() == [10.0, 2.0, 3.0]
    assert np.shares_memory(np.asarray(t, copy=False), t.numpy())


def test_asarray_copies_when_asked_or_converting():
    t = lk.tensor([1.0, 2.0])
    for a in (np.asarray(t, dtype=np.float64), np.array(t, copy=True)):
        assert not np.shares_memory(a, t.numpy())
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    assert np.shares_memory(np.asarray(t, dtype=np.float32), t.numpy())
    with pytest.raises(ValueError, match="copy=False"):
        np.asarray(t, dtype=np.float64, copy=False)


def test_numpy_functions_take_tensors():
    t = lk.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(np.sum(np.asarray(t), axis=0), [3, 5, 7])
    assert np.asarray(lk.tensor(2.5)).shape == ()


def test_asarray_of_a_tensor_that_requires_grad_is_refused_as_in_pytorch():
    # the array would leave autodiff silently: what is computed from it gets no gradient
    w = lk.nn.Parameter(lk.tensor([1.0, 2.0]))
    for convert in (np.asarray, np.array, lambda t: np.exp(t)):
        with pytest.raises(lk.GradError, match=r"requires grad.*detach\(\)\.numpy\(\)"):
            convert(w)
    np.testing.assert_array_equal(np.asarray(w.detach()), [1.0, 2.0])     # the remedy works
    with lk.no_grad():
        assert np.asarray(w * 2).tolist() == [2.0, 4.0]    # a result made without history


@pytest.mark.gpu
def test_asarray_of_gpu_tensor_is_a_clear_device_error():
    t = lk.ones(3, device="gpu:0")
    with pytest.raises(lk.DeviceError) as info:
        np.asarray(t)
    msg = str(info.value)
    assert "gpu:0" in msg and "numpy()" in msg and "to('cpu')" in msg
    np.testing.assert_array_equal(t.numpy(), np.ones(3))     # the remedy works


@pytest.mark.parametrize("dtype", DTYPES)
def test_from_numpy_shares_memory_both_ways(dtype):
    a = _values(dtype)
    t = lk.from_numpy(a)
    assert t.dtype is lk.as_dtype(dtype) and t.device.name == "cpu:0"
    a[0] = a[1]                          # array -> tensor
    assert t[0].item() == a[1].item()
    np.asarray(t)[2] = a[3]              # tensor -> array
    assert a[2] == a[3]
    assert np.shares_memory(t.numpy(), a)


def test_from_numpy_errors():
    with pytest.raises(TypeError, match="numpy.ndarray"):
        lk.from_numpy([1, 2])
    with pytest.raises(lk.DTypeError, match=r"longdouble|float128.*lk.tensor\(array\)"):
        lk.from_numpy(np.zeros(2, np.longdouble))


def test_from_numpy_views_and_results_of_ops():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]     # a strided view
    t = lk.from_numpy(a)
    np.testing.assert_array_equal((t * 2).numpy(), a * 2)
    a[0, 0] = 100
    assert t[0, 0].item() == 100


# ---- DLPack with NumPy ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_from_dlpack_of_tensor_shares_memory(dtype):
    t = lk.tensor(_values(dtype))
    a = np.from_dlpack(t)
    assert a.dtype == lk.as_dtype(dtype).np and np.shares_memory(a, t.numpy())
    _poke(a, 3)
    assert t[0].item() == a[0].item()


@pytest.mark.parametrize("dtype", DTYPES)
def test_lk_from_dlpack_of_numpy_shares_memory(dtype):
    a = _values(dtype)
    t = lk.from_dlpack(a)
    assert t.dtype is lk.as_dtype(dtype) and t.device.name == "cpu:0"
    a[0] = a[1]
    assert t[0].item() == a[1].item()
    assert np.shares_memory(t.numpy(), a)


def test_dlpack_round_trip_keeps_strides_and_shape():
    t = lk.arange(12).reshape(3, 4).T
    a = np.from_dlpack(t)
    assert a.shape == (4, 3)
    np.testing.assert_array_equal(a, np.arange(12).reshape(3, 4).T)
    back = lk.from_dlpack(a)
    assert back.shape == (4, 3) and np.shares_memory(back.numpy(), t.numpy())
    assert lk.from_dlpack(lk.tensor(3.0)).item() == 3.0      # 0-d, and labkit -> labkit


def test_from_dlpack_errors():
    with pytest.raises(lk.DTypeError, match="from_dlpack: labkit has no dtype for complex64"):
        lk.from_dlpack(np.zeros(3, np.complex64))
    with pytest.raises(TypeError, match="DLPack"):
        lk.from_dlpack([1.0, 2.0])


# ---- DLPack with PyTorch (skipped where PyTorch is not installed) -------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_from_dlpack_shares_memory(dtype):
    torch = pytest.importorskip("torch")
    t = lk.tensor(_values(dtype))
    x = torch.from_dlpack(t)
    assert tuple(x.shape) == t.shape and str(x.dtype) == f"torch.{lk.as_dtype(dtype).np.name}"
    _poke(x, 3)
    assert t[0].item() == x[0].item()
    np.asarray(t)[1] = np.asarray(t)[2]
    assert x[1].item() == x[2].item()


@pytest.mark.parametrize("dtype", DTYPES)
def test_lk_from_dlpack_of_torch_shares_memory(dtype):
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(_values(dtype))
    t = lk.from_dlpack(x)
    assert t.dtype is lk.as_dtype(dtype) and t.shape == tuple(x.shape)
    _poke(x, 3)
    assert t[0].item() == x[0].item()
    np.asarray(t)[1] = np.asarray(t)[2]
    assert x[1].item() == x[2].item()


def test_torch_interop_gradients_and_errors():
    torch = pytest.importorskip("torch")
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3).t()     # non-contiguous
    t = lk.from_dlpack(x)
    np.testing.assert_array_equal(t.numpy(), x.numpy())
    w = lk.from_dlpack(torch.ones(3)).requires_grad_()   # shared memory can still be a leaf
    (w * w).sum().backward()
    assert w.grad.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(lk.DTypeError, match="complex64"):
        lk.from_dlpack(torch.zeros(2, dtype=torch.complex64))


# ---- CuPy (GPU only) -----------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.cupy
@pytest.mark.parametrize("dtype", DTYPES)
def test_cupy_dlpack_shares_gpu_memory_both_ways(dtype):
    import cupy
    t = lk.tensor(_values(dtype), device="gpu:0")
    c = cupy.from_dlpack(t)
    assert c.data.ptr == t._data.data.ptr and c.device.id == 0
    c[0] = c[1]
    assert t[0].item() == t[1].item()
    c2 = cupy.asarray(_values(dtype))
    t2 = lk.from_dlpack(c2)
    assert t2.device.name == "gpu:0" and t2.dtype is lk.as_dtype(dtype)
    c2[0] = c2[2]
    assert t2[0].item() == t2[2].item()


@pytest.mark.gpu
@pytest.mark.cupy
def test_torch_cuda_dlpack_shares_gpu_memory():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this PyTorch build has no CUDA")
    t = lk.ones(3, device="gpu:0")
    x = torch.from_dlpack(t)
    assert x.is_cuda and x.data_ptr() == t._data.data.ptr
    y = torch.zeros(3, device="cuda:0")
    u = lk.from_dlpack(y)
    y[0] = 5
    assert u.device.name == "gpu:0" and u[0].item() == 5
