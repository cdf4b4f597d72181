"""The Tensor: an array on a device, plus what autodiff needs (``requires_grad``, ``grad``).

Operators (``+ - * / ** @``, comparisons, indexing) and methods (``x.sum()``, ``x.reshape``...)
are attached in ``labkit.tensor.methods`` once the ops exist; they all go through ``bind``.

>>> import labkit as lk
>>> x = lk.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
>>> y = (x * x).sum()
>>> y.backward()
>>> x.grad
tensor([[2., 4.],
        [6., 8.]])
"""
import sys

import numpy as np

from .. import display
from ..devices import device_of_array, get_device
from ..errors import DeviceError, DTypeError, GradError, ShapeError, hide_internal_frames
from . import dispatch
from .dtypes import DType, from_numpy_dtype
from .format import format_tensor
from .versions import counter_of, given_grad


FLAG_CHANGES = [0]     # bumped whenever a tensor's requires_grad is set (graph guards read it)


_engine_backward = [None]    # labkit.autodiff.engine.backward


class Tensor:
    """An n-dimensional array on a device. Create one with ``lk.tensor(...)`` or ``lk.zeros(...)``.

    Attributes: ``shape``, ``ndim``, ``dtype``, ``device``, ``requires_grad``, ``grad``; the methods
    ``size()`` / ``size(d)`` and ``numel()`` as in PyTorch.
    """

    __slots__ = ("_data", "_device", "_requires_grad", "_grad", "_node", "_version",
                 "_inference", "_past", "_view_of", "__weakref__")
    __array_priority__ = 1000   # so ndarray * Tensor defers to Tensor.__rmul__

    # ---- construction (internal; users call lk.tensor) -------------------------------------
    @classmethod
    def _make(cls, data, device, requires_grad=False, node=None):
        t = object.__new__(cls)
        t._data = data
        t._device = device
        t._requires_grad = requires_grad
        t._grad = None
        t._node = node
        # _version (the in-place write counter, tensor/versions.py) stays unset until needed,
        # _inference (set on tensors made in inference mode, tensor/inference.py) unless set,
        # _past (the histories an in-place write replaced, tensor/tape.py) until written,
        # and _view_of (how a view nothing recorded was made, tape.view_entry) unless a view
        return t

    def __init__(self, data, dtype=None, device=None, requires_grad=False):
        from .creation import tensor as _tensor
        src = _tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)
        self._data = src._data
        self._device = src._device
        self._requires_grad = src._requires_grad
        self._grad = None
        self._node = None

    # ---- metadata ---------------------------------------------------------------------------
    @property
    def shape(self):
        return self._data.shape

    @property
    def ndim(self):
        return self._data.ndim

    @property
    def dtype(self):
        return from_numpy_dtype(self._data.dtype)

    @property
    def device(self):
        return self._device

    def numel(self):
        """The number of elements (``x.size()`` is the shape, as in PyTorch)."""
        return self._data.size

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    @property
    def requires_grad(self):
        if not self._requires_grad and given_grad:   # a view whose base a write gave a history
            from .tape import regrow
            regrow(self)
        return self._requires_grad

    @property
    def grad(self):
        """The gradient that ``backward()`` accumulated into this tensor (None until then)."""
        return self._grad

    @grad.setter
    def grad(self, value):
        # through the mode, so that graph capture sees .grad being cleared or set in a trace
        dispatch._state.mode.set_grad(self, value)

    @requires_grad.setter
    def requires_grad(self, flag):
        flag = bool(flag)
        if flag and not self.dtype.is_differentiable:
            raise DTypeError(
                f"requires_grad=True needs a floating-point or complex tensor, but this one is "
                f"{self.dtype} (shape {self.shape}, on {self._device.name}). Only float16/32/64 and "
                f"complex64/128 tensors have gradients: convert first, e.g. "
                f"x.float().requires_grad_()")
        if flag and getattr(self, "_inference", False) and not dispatch._state.inference:
            raise GradError(
                f"requires_grad=True on an inference tensor (made inside lk.inference_mode(); "
                f"shape {self.shape}, {self.dtype}, on {self._device.name}) is not allowed outside "
                f"inference mode: it could never be saved for backward. Make a normal tensor "
                f"first, x = x.clone().requires_grad_(), or create it under lk.no_grad() "
                f"instead of lk.inference_mode().")
        if not flag and self._node is not None and self._requires_grad:
            raise GradError("cannot clear requires_grad of a tensor computed from others "
                            "(it is not a leaf); use t.detach() for a tensor without history")
        if flag and not self._requires_grad:
            # computed from nothing that needs a gradient: it becomes a leaf, as eagerly (a
            # captured op keeps a tape entry for lk.gradients even then)
            self._node = None
        self._requires_grad = flag
        FLAG_CHANGES[0] += 1        # captured calls that guard the flag look again

    def requires_grad_(self, flag=True):
        """Set ``requires_grad`` in place and return the tensor (PyTorch's spelling)."""
        self.requires_grad = flag
        return self

    @property
    def is_leaf(self):
        return self._node is None

    def is_inference(self):
        """Whether this tensor was made inside ``lk.inference_mode()`` (PyTorch's inference
        tensors: outside that mode they cannot take part in autodiff or be changed in place;
        ``x.clone()`` gives a normal tensor)."""
        return getattr(self, "_inference", False)

    # ---- conversion -------------------------------------------------------------------------
    def numpy(self, *, force=False):
        """The values as a NumPy array (shares memory on CPU; copies from a GPU). As in
        PyTorch, a tensor that requires grad refuses (its array would leave autodiff
        silently): ``t.detach().numpy()``, or ``t.numpy(force=True)``, which detaches.

        >>> import labkit as lk
        >>> lk.ones(2, requires_grad=True).detach().numpy()
        array([1., 1.], dtype=float32)
        """
        if self._requires_grad and not force:
            try:                  # raised and caught here, so the traceback shows the caller
                raise GradError("Can't call numpy() on Tensor that requires grad. Use "
                                "tensor.detach().numpy() instead.")
            except GradError as e:
                hide_internal_frames(e)
                raise
        if dispatch._state.watch is not None:
            dispatch.read_to_host(self, "numpy()", sys._getframe(1))
        if self._device.type == "cpu":
            return self._data
        return self._data.get()

    def __array__(self, dtype=None, copy=None):
        if self._device.type != "cpu":
            raise DeviceError(
                f"np.asarray() of a tensor on {self._device.name}: NumPy reads host memory only. "
                f"Call t.numpy() (copies to the host) or t.to('cpu') first.")
        if self._requires_grad:
            self.numpy()        # refuses, as PyTorch's __array__ does: the array leaves autodiff
        if dispatch._state.watch is not None:
            dispatch.read_to_host(self, "np.asarray()", sys._getframe(1))
        if dtype is not None and np.dtype(dtype) != self._data.dtype:
            if copy is False:
                raise ValueError(f"np.asarray(t, dtype={np.dtype(dtype)}, copy=False): converting "
                                 f"this {self.dtype} tensor needs a copy; drop copy=False")
            return self._data.astype(dtype)
        return self._data.copy() if copy else self._data

    def item(self):
        """The single value of a one-element tensor as a Python number."""
        if self._data.size != 1:
            raise ShapeError(f"item() needs a tensor with one element; this one has shape "
                             f"{self.shape} ({self._data.size} elements). Index one element "
                             f"first (t[0].item()), or use t.tolist() for all of them.")
        if dispatch._state.watch is not None:
            dispatch.read_to_host(self, "item()", sys._getframe(1))
        return self._data.reshape(()).item()

    def tolist(self):
        return self.numpy(force=True).tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype.is_floating or self._data.size != 1:
            raise TypeError(f"only integer tensors with one element can be used as an index; "
                            f"got {self.dtype} of shape {self.shape}")
        return int(self.item())

    def __format__(self, spec):
        """As PyTorch: a 0-d tensor formats as its value (``f"{lk.tensor(83.)}"`` is ``83.0``,
        ``f"{loss:.4f}"``); another tensor as its text (a one-element one takes a number's
        format spec too)."""
        if self._data is not None and (self._data.ndim == 0 or spec and self._data.size == 1):
            return format(self.item(), spec)
        return format(repr(self), spec)

    def __bool__(self):
        if self._data.size != 1:
            raise ShapeError(
                f"the truth value of a tensor with {self._data.size} elements (shape {self.shape})"
                f" is ambiguous: use (t).any() or (t).all(), or compare a single element")
        return bool(self.item())

    def to(self, *args, device=None, dtype=None, non_blocking=False, copy=False):
        """This tensor on ``device`` and/or as ``dtype``; differentiable; no copy if unchanged
        (unless ``copy=True``). PyTorch's forms: ``x.to("cpu")``, ``x.to(lk.float64)``,
        ``x.to("cpu", lk.float64)``, ``x.to(other)`` (other's device and dtype)."""
        from .ops.elementwise import clone, converted, to_device
        for a in args:
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, DType):
                dtype = a
            else:
                device = a
        out = self
        if dtype is not None:
            out = converted(out, dtype)
        if device is not None:
            out = to_device(out, device=get_device(device).name)
        # (a cast or move that changes nothing returns a tensor sharing self's memory)
        return clone(out) if copy and (out is self or out._data is self._data) else out

    def cpu(self):
        return self.to("cpu")

    def pin_memory(self, device=None):
        """A copy of this CPU tensor for a transfer to a GPU, as PyTorch's
        ``x.pin_memory().to('cuda', non_blocking=True)`` writes it. labkit's host memory is
        NumPy's: the copy is not page-locked (a transfer from it is as fast as from ``x``).

        >>> import labkit as lk
        >>> x = lk.ones(2)
        >>> y = x.pin_memory()
        >>> y.tolist(), y is x
        ([1.0, 1.0], False)
        """
        if self._device.type != "cpu":
            raise DeviceError(f"pin_memory: only a CPU tensor can be pinned, this one is on "
                              f"{self._device.name}; call it before moving the tensor")
        from .ops.elementwise import clone
        return clone(self)

    def detach(self):
        """The same values (shared memory) with no history and ``requires_grad=False``."""
        t = Tensor._make(self._data, self._device)
        t._version = counter_of(self)     # a write through either is a write to both
        if getattr(self, "_inference", False):
            t._inference = True
        return t

    def backward(self, gradient=None, retain_graph=None, create_graph=False):
        """Accumulate d(self)/d(leaf) into ``leaf.grad`` for every leaf that requires grad."""
        backward = _engine_backward[0]
        if backward is None:         # the layer above, found on first use (once, not per call)
            from ..autodiff.engine import backward
            _engine_backward[0] = backward
        try:
            backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph)
        except Exception as e:      # show the user's frames, not the engine's
            hide_internal_frames(e)
            raise

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(self)`` after each eager ``backward()`` has accumulated into ``self.grad``
        (a leaf that requires grad); returns a handle whose ``remove()`` unregisters it. See
        ``labkit.autodiff.hooks``."""
        from ..autodiff.hooks import register_post_accumulate_grad_hook
        return register_post_accumulate_grad_hook(self, hook)

    # ---- hashing: tensors compare elementwise, so hash by identity -----------------------------
    __hash__ = object.__hash__

    def __repr__(self):
        return format_tensor(self)

    def _repr_html_(self):        # notebook display: lk.viz.tensor_html(self)
        return display.drawing("tensor", self)

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        for i in range(self._data.shape[0]):
            yield self[i]

    # ---- DLPack (zero-copy exchange with PyTorch, CuPy, JAX) ---------------------------------
    def __dlpack__(self, *args, **kwargs):
        return self._data.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()


def concrete(t):
    """The backend array behind ``t`` when it holds values now (eager), else None (a tensor
    under capture, or not a tensor)."""
    device, data = getattr(t, "device", None), getattr(t, "_data", None)
    return data if device is not None and isinstance(data, device.array_type) else None


def wrap(array, device=None):
    """A Tensor around an existing backend array (no copy); internal helper for kernels' users."""
    if device is None:
        device = device_of_array(array)
    return Tensor._make(array, device)
