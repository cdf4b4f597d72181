"""Operators and methods of Tensor, each a thin call into an op (no logic of its own here).

Kept apart from tensor.py so that the Tensor class does not depend on the op modules, which
depend on it.
"""
from ..errors import hide_internal_frames
from . import dispatch
from .ops import bitwise as B
from .ops import composite as C
from .ops import elementwise as E
from .ops import elementwise_math as M
from .ops import index as I
from .ops import linalg as L
from .ops import shape as S
from .tensor import Tensor

_NOATTRS = {}


# The operators below write out ``dispatch.bind``'s one line (``_state.mode.apply(op, inputs,
# attrs)``) instead of calling it: ``x + y`` is the hottest path of eager code, and the extra
# Python frame costs 2-4% of an eager elementwise op on small tensors (0.03-0.07 us of 1.5 us,
# the W1 workload). Anything that changes how an op reaches the mode changes ``bind`` and these
# two together; a Tensor subclass that handles its own ops (``dispatch.register_tensor_type``)
# installs them through ``bind`` instead (``install_operators(cls, dispatch.bind)``).
# Each operator is where a user's call enters labkit: an error leaving it has a traceback
# without labkit's frames (errors.hide_internal_frames; a try costs nothing until it fails).
def _binary(op, reflected=False, apply=None):
    if apply is None:
        if reflected:
            def method(self, other):
                try:
                    return dispatch._state.mode.apply(op, (other, self), _NOATTRS)
                except Exception as e:
                    hide_internal_frames(e)
                    raise
        else:
            def method(self, other):
                try:
                    return dispatch._state.mode.apply(op, (self, other), _NOATTRS)
                except Exception as e:
                    hide_internal_frames(e)
                    raise
    elif reflected:
        def method(self, other):
            return apply(op, (other, self), {})
    else:
        def method(self, other):
            return apply(op, (self, other), {})
    method.__name__ = op.name
    return method


def _unary(op, apply=None):
    if apply is None:
        def method(self):
            try:
                return dispatch._state.mode.apply(op, (self,), _NOATTRS)
            except Exception as e:
                hide_internal_frames(e)
                raise
    else:
        def method(self):
            return apply(op, (self,), {})
    method.__name__ = op.name
    return method


_ARITHMETIC = (("add", E.add), ("sub", E.sub), ("mul", E.mul), ("truediv", E.div),
               ("pow", E.pow), ("matmul", L.matmul), ("floordiv", M.floor_divide),
               ("mod", M.remainder), ("and", B.bitwise_and), ("or", B.bitwise_or),
               ("xor", B.bitwise_xor), ("lshift", B.bitwise_left_shift),
               ("rshift", B.bitwise_right_shift))
_COMPARISONS = (("eq", E.eq), ("ne", E.ne), ("lt", E.lt), ("le", E.le), ("gt", E.gt),
                ("ge", E.ge))
_UNARY_METHODS = ("exp", "log", "sqrt", "tanh", "sigmoid", "relu", "abs", "neg", "sign")
_BINARY_METHODS = (("mul", E.mul), ("pow", E.pow), ("matmul", L.matmul),
                   ("maximum", E.maximum), ("minimum", E.minimum))


def install_operators(cls, apply=None):
    """Give ``cls`` the operators (``+``, ``@``, ``<``...) and the one-op methods (``exp``,
    ``maximum``...). Tensor's skip ``bind`` (one call less per op); a Tensor subclass whose
    ops are handled by its type (``dispatch.register_tensor_type``) gets them through
    ``apply=dispatch.bind``."""
    for name, op in _ARITHMETIC:
        setattr(cls, f"__{name}__", _binary(op, apply=apply))
        setattr(cls, f"__r{name}__", _binary(op, reflected=True, apply=apply))
    for name, op in _COMPARISONS:
        setattr(cls, f"__{name}__", _binary(op, apply=apply))
    cls.__neg__ = _unary(E.neg, apply)
    cls.__abs__ = _unary(E.abs, apply)
    cls.__invert__ = _unary(B.bitwise_not, apply)
    cls.__hash__ = object.__hash__  # defining __eq__ would otherwise unset it
    for name in _UNARY_METHODS:
        setattr(cls, name, _unary(getattr(E, name), apply))
    for name, op in _BINARY_METHODS:
        setattr(cls, name, _binary(op, apply=apply))


install_operators(Tensor)
Tensor.__pos__ = lambda self: self


def _reduction(op):
    def method(self, dim=None, keepdim=False):
        return op(self, dim=dim, keepdim=keepdim)
    method.__name__ = op.name
    method.__doc__ = op.doc
    return method


Tensor.clone = lambda self: E.clone(self)


Tensor.astype = lambda self, dtype: E.converted(self, dtype)
Tensor.float = lambda self: E.converted(self, "float32")
Tensor.double = lambda self: E.converted(self, "float64")
Tensor.half = lambda self: E.converted(self, "float16")
Tensor.bfloat16 = lambda self: E.converted(self, "bfloat16")
Tensor.long = lambda self: E.converted(self, "int64")
Tensor.int = lambda self: E.converted(self, "int32")
Tensor.bool = lambda self: E.converted(self, "bool_")
Tensor.__getitem__ = lambda self, index: I.getitem(self, index)
Tensor.gather = lambda self, dim, index: I.gather(self, dim, index)
Tensor.take = lambda self, indices, dim=None: I.take(self, indices, dim)
Tensor.scatter_add = lambda self, dim, index, src: I.scatter_add(self, dim, index, src)

from .ops import state as _state  # noqa: E402

Tensor.assign = lambda self, value: _state.assign(self, value)
Tensor.assign_add = lambda self, value: _state.assign_add(self, value)
Tensor.assign_sub = lambda self, value: _state.assign_sub(self, value)

from . import random as _random  # noqa: E402

Tensor.bernoulli = lambda self, p=None: _random.bernoulli(self, p)
Tensor.multinomial = lambda self, num_samples, replacement=False: _random.multinomial(
    self, num_samples, replacement)

from . import public as _public  # noqa: E402  (PyTorch-signature functions; registers them)

for _name, _fn in _public.METHODS.items():
    setattr(Tensor, _name, _fn)
