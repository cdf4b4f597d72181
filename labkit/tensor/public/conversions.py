"""Methods of ``Tensor`` that convert it or make tensors like it, in PyTorch's spellings:
``x.data``, ``x.type(dtype)``, ``x.new_zeros(...)``, ``x.is_floating_point()``, ``x.cuda()``...

>>> import labkit as lk
>>> x = lk.tensor([1, 2])
>>> x.type(lk.float64).dtype, x.new_zeros(2, 3).dtype, x.new_tensor([0.5]).dtype
(lk.float64, lk.int64, lk.int64)
"""
from ..creation import full, tensor as _tensor
from ..dtypes import as_dtype
from ..ops.elementwise import cast
from ..tensor import Tensor
from .registry import tensor_method
from .shape import _sizes


def _get_data(self):
    """The same values with no history, sharing memory, and invisible to autograd's in-place
    checks (``p.data.add_(...)``, as in PyTorch); assigning ``x.data = y`` swaps the buffer."""
    return Tensor._make(self._data, self._device)


def _set_data(self, value):
    if not isinstance(value, Tensor):
        raise TypeError(f"x.data = ... needs a Tensor, got {type(value).__name__}")
    self._data = value._data
    self._device = value._device


Tensor.data = property(_get_data, _set_data)


@tensor_method("type")
def _type(self, dtype=None):
    """``x.type(lk.float64)``: a converted copy (no copy if unchanged); ``x.type()``: the
    dtype's name, as ``'lk.float32'``."""
    if dtype is None:
        return str(self.dtype)
    return cast(self, dtype=as_dtype(dtype).name)


def _like(self, dtype, device):
    return as_dtype(dtype) or self.dtype, device or self.device


@tensor_method()
def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
    """Zeros of ``size``, of this tensor's dtype and device unless given."""
    return self.new_full(_sizes(size, "new_zeros"), 0, dtype=dtype, device=device,
                         requires_grad=requires_grad)


@tensor_method()
def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
    """Ones of ``size``, of this tensor's dtype and device unless given."""
    return self.new_full(_sizes(size, "new_ones"), 1, dtype=dtype, device=device,
                         requires_grad=requires_grad)


@tensor_method()
def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
    """A tensor of ``size`` (zero-filled: labkit never hands out uninitialised memory)."""
    return self.new_full(_sizes(size, "new_empty"), 0, dtype=dtype, device=device,
                         requires_grad=requires_grad)


@tensor_method()
def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    """``size`` filled with ``fill_value``, of this tensor's dtype and device unless given."""
    dtype, device = _like(self, dtype, device)
    return full(_sizes((size,), "new_full"), fill_value, dtype=dtype, device=device,
                requires_grad=requires_grad)


@tensor_method()
def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    """A new tensor of ``data`` with this tensor's dtype and device unless given."""
    dtype, device = _like(self, dtype, device)
    return _tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)


@tensor_method()
def is_floating_point(self):
    """Whether the dtype is float16, float32 or float64."""
    return self.dtype.is_floating


@tensor_method()
def element_size(self):
    """Bytes per element."""
    return self.dtype.itemsize


@tensor_method()
def cuda(self, device=None):
    """This tensor on a GPU (``gpu:0`` unless given)."""
    return self.to(device if device is not None else "gpu:0")


Tensor.is_cuda = property(lambda self: self.device.type == "gpu",
                          doc="Whether the tensor is on a GPU.")
Tensor.grad_fn = property(lambda self: self._node,
                          doc="The tape entry that made this tensor (None for a leaf).")
