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

PUBLIC = {}     # name -> function exported as lk.<name>
METHODS = {}    # name -> function attached as Tensor.<name>

# NumPy's spelling -> PyTorch's, accepted where the function takes PyTorch's
_NUMPY_NAMES = {"axis": "dim", "keepdims": "keepdim"}


def accept_numpy_names(fn):
    """``fn`` also taking NumPy's ``axis=`` / ``keepdims=`` for its ``dim`` / ``keepdim``."""
    params = inspect.signature(fn).parameters
    renames = {a: t for a, t in _NUMPY_NAMES.items() if t in params and a not in params}
    if not renames:
        return fn

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if kwargs:
            for alias, name in renames.items():
                if alias in kwargs:
                    if name in kwargs:
                        raise TypeError(f"{fn.__name__}() got both {name}= and {alias}= (NumPy's "
                                        f"name for it); pass only {name}=")
                    kwargs[name] = kwargs.pop(alias)
        try:
            return fn(*args, **kwargs)
        except Exception as e:      # the wrapper is there anyway: an API boundary for free
            hide_internal_frames(e)
            raise
    return wrapper


def public(name=None, *, method=True, aliases=()):
    """Decorator: export ``fn`` as ``lk.<name>`` (default: the function's own name) and, unless
    ``method=False``, as the method ``Tensor.<name>``; ``method="other"`` attaches it under
    another name. ``aliases`` are further names for both (``cat`` / ``concat``)."""
    def register(fn):
        f = accept_numpy_names(fn)
        names = (name or fn.__name__.rstrip("_"),) + tuple(aliases)
        for n in names:
            PUBLIC[n] = f
        if method:
            for n in ((method,) if isinstance(method, str) else names):
                METHODS[n] = f
        return f
    return register


def tensor_method(name=None):
    """Decorator: attach ``fn(self, ...)`` as the method ``Tensor.<name>`` only (forms that differ
    from the function's, like ``x.reshape(2, 3)`` or ``x.size(0)``)."""
    def register(fn):
        METHODS[name or fn.__name__.rstrip("_")] = accept_numpy_names(fn)
        return fn
    return register
