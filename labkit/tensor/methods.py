"""Operators and methods of Tensor, each a thin call into an op (no logic of its own here).

Kept apart from tensor.py so that the Tensor class does not depend on the op modules, which
depend on it.
"""

from . import dispatch
from .ops import bitwise as B
from .ops import composite as C
from .ops import elementwise as E
from .ops import elementwise_math as M
from .ops import index as I
from .ops import linalg as L
from .ops import shape as S
from .ops import softmax as X
from .tensor import Tensor

_NOATTRS = {}


# The operators below write out ``dispatch.bind``'s one line (``_state.mode.apply(op, inputs,
# attrs)``) instead of calling it: ``x + y`` is the hottest path of eager code, and the extra
# Python frame costs 2-4% of an eager elementwise op on small tensors (0.03-0.07 us of 1.5 us,
# the W1 workload). Anything that changes how an op reaches the mode changes ``bind`` and these
# two together.
def _binary(op, reflected=False):
    if reflected:
        def method(self, other):
            return dispatch._state.mode.apply(op, (other, self), _NOATTRS)
    else:
        def method(self, other):
            return dispatch._state.mode.apply(op, (self, other), _NOATTRS)
    method.__name__ = op.name
    return method


def _unary(op):
    def method(self):
        return dispatch._state.mode.apply(op, (self,), _NOATTRS)
    method.__name__ = op.name
    return method


for _name, _op in (("add", E.add), ("sub", E.sub), ("mul", E.mul), ("truediv", E.div),
                   ("pow", E.pow), ("matmul", L.matmul), ("floordiv", M.floor_divide),
                   ("mod", M.remainder), ("and", B.bitwise_and), ("or", B.bitwise_or),
                   ("xor", B.bitwise_xor), ("lshift", B.bitwise_left_shift),
                   ("rshift", B.bitwise_right_shift)):
    setattr(Tensor, f"__{_name}__", _binary(_op))
    setattr(Tensor, f"__r{_name}__", _binary(_op, reflected=True))
for _name, _op in (("eq", E.eq), ("ne", E.ne), ("lt", E.lt), ("le", E.le), ("gt", E.gt),
                   ("ge", E.ge)):
    setattr(Tensor, f"__{_name}__", _binary(_op))
Tensor.__neg__ = _unary(E.neg)
Tensor.__abs__ = _unary(E.abs)
Tensor.__invert__ = _unary(B.bitwise_not)
Tensor.__pos__ = lambda self: self
Tensor.__hash__ = object.__hash__  # defining __eq__ above would otherwise unset it

for _name in ("exp", "log", "sqrt", "tanh", "sigmoid", "relu", "abs", "neg", "sign"):
    setattr(Tensor, _name, _unary(getattr(E, _name)))
Tensor.mul = _binary(E.mul)
Tensor.pow = _binary(E.pow)
Tensor.matmul = _binary(L.matmul)
Tensor.maximum = _binary(E.maximum)
Tensor.minimum = _binary(E.minimum)


def _reduction(op):
    def method(self, dim=None, keepdim=False):
        return op(self, dim=dim, keepdim=keepdim)
    method.__name__ = op.name
    method.__doc__ = op.doc
    return method


Tensor.softmax = lambda self, dim=-1: X.softmax(self, dim=dim)
Tensor.clone = lambda self: E.clone(self)
Tensor.log_softmax = lambda self, dim=-1: X.log_softmax(self, dim=dim)


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
