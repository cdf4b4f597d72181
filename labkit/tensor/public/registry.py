"""The registry of public functions: ``lk.f(x, ...)`` and the method ``x.f(...)`` from one
definition, in PyTorch's signature.

Primitive ops (``labkit/tensor/ops``) take tensors as inputs and everything else as keyword
attributes; the names a person types take PyTorch's argument forms instead (``lk.sum(x, 1)``,
``x.reshape(2, 3)``, ``lk.cat([a, b], 0)``). A public function parses those forms and calls ops;
``@public`` exports it as ``lk.<name>`` and, unless ``method=False``, attaches it to ``Tensor``
with the tensor as its first argument. NumPy's ``axis=`` / ``keepdims=`` are accepted wherever
the function takes ``dim`` / ``keepdim``.

>>> import labkit as lk
>>> lk.sum(lk.ones(2, 3), axis=1, keepdims=True).shape
(2, 1)
"""
import functools
import inspect

from ...errors import hide_internal_frames
from ..arguments import NUMBER_FIRST, explained, rename

PUBLIC = {}     # name -> function exported as lk.<name>
METHODS = {}    # name -> function attached as Tensor.<name>

# NumPy's spelling -> PyTorch's, accepted where the function takes PyTorch's
_NUMPY_NAMES = {"axis": "dim", "keepdims": "keepdim"}


def numpy_names(fn):
    """NumPy's names (``axis``, ``keepdims``) ``fn`` takes for its ``dim`` / ``keepdim``."""
    params = inspect.signature(fn).parameters
    return {a: t for a, t in _NUMPY_NAMES.items() if t in params and a not in params}


def accept_numpy_names(fn):
    """``fn`` also taking NumPy's ``axis=`` / ``keepdims=`` for its ``dim`` / ``keepdim``."""
    renames = numpy_names(fn)
    if not renames:
        return fn

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if kwargs:
            rename(fn.__name__, kwargs, renames)
        try:
            return fn(*args, **kwargs)
        except Exception as e:      # the wrapper is there anyway: an API boundary for free
            hide_internal_frames(e)
            raise
    return wrapper


# the first parameter's names that say it takes a tensor
_TENSOR_FIRST = {"x", "input", "self", "a", "tensor"}


def public(name=None, *, method=True, aliases=()):
    """Decorator: export ``fn`` as ``lk.<name>`` (default: the function's own name) and, unless
    ``method=False``, as the method ``Tensor.<name>``; ``method="other"`` attaches it under
    another name. ``aliases`` are further names for both (``cat`` / ``concat``)."""
    def register(fn):
        n = name or fn.__name__.rstrip("_")
        params = inspect.signature(fn).parameters
        first = next(iter(params), None)
        # (binary elementwise forms, f(input, other), take a number on either side, as NumPy)
        f = explained(n, fn, first in _TENSOR_FIRST and "other" not in params and
                      n not in NUMBER_FIRST, numpy_names(fn), home="labkit")
        names = (name or fn.__name__.rstrip("_"),) + tuple(aliases)
        for n in names:
            PUBLIC[n] = f
        if method:
            for n in ((method,) if isinstance(method, str) else names):
                METHODS[n] = f
        return fn       # the module keeps its own function (and its doctest)
    return register


def tensor_method(name=None):
    """Decorator: attach ``fn(self, ...)`` as the method ``Tensor.<name>`` only (forms that differ
    from the function's, like ``x.reshape(2, 3)`` or ``x.size(0)``)."""
    def register(fn):
        n = name or fn.__name__.rstrip("_")
        METHODS[n] = explained(n, fn, True, numpy_names(fn))
        return fn
    return register
