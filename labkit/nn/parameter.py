"""``Parameter``: a tensor that a ``Module`` registers as one of its trainable weights.

>>> import labkit as lk
>>> w = lk.nn.Parameter(lk.zeros(2, 3))
>>> w.requires_grad, w.shape
(True, (2, 3))
"""
from ..tensor import pickled
from ..tensor.creation import tensor as _tensor
from ..tensor.creation import zeros
from ..tensor.tensor import Tensor
from ..tensor.versions import counter_of


class Parameter(Tensor):
    """A leaf tensor with ``requires_grad=True`` that modules collect in ``parameters()``.

    ``Parameter(t)`` shares ``t``'s memory (no copy) and drops its history, like PyTorch.
    Assigning a Parameter to a Module attribute registers it under that name.

    >>> import labkit as lk
    >>> class Scale(lk.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.s = lk.nn.Parameter(lk.ones(1))
    ...     def forward(self, x):
    ...         return x * self.s
    >>> [name for name, _ in Scale().named_parameters()]
    ['s']

    A Parameter registered in a module takes its qualified name there (``'0.weight'`` in a
    ``Sequential``, as ``named_parameters()`` says, relative to the outermost module it was
    attached through) as ``.name``: graph listings and pictures show it.
    """

    __slots__ = ("name",)

    def __init__(self, data, requires_grad=True):
        if not isinstance(data, Tensor):
            data = _tensor(data)
        array = data._data
        if not getattr(getattr(array, "flags", None), "writeable", True):
            array = array.copy()         # e.g. a read-only broadcast view: own a copy instead
        self._data = array
        self._device = data._device
        self._requires_grad = False
        self._grad = None
        self._node = None
        if array is data._data:     # the same memory: in-place writes through either count
            self._version = counter_of(data)
        if requires_grad:
            self.requires_grad = True    # checks the dtype, with a clear error for integers

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


pickled.allow_by_default(Parameter)     # a weights-only load builds Parameters, as torch.load


def add_weight_and_bias(module, weight_shape, bias=True, dtype=None, device=None,
                        bias_size=None):
    """Give a layer ``module`` a zero-filled ``weight`` Parameter of ``weight_shape`` and a
    ``bias`` of ``bias_size`` (default ``weight_shape[0]``) values (or ``bias = None``); the
    layer's ``reset_parameters`` then draws their values."""
    module.weight = Parameter(zeros(tuple(weight_shape), dtype=dtype, device=device))
    if bias:
        size = weight_shape[0] if bias_size is None else bias_size
        module.bias = Parameter(zeros((size,), dtype=dtype, device=device))
    else:
        module.register_parameter("bias", None)
