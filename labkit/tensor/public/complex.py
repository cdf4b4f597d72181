"""Complex tensors in PyTorch's spellings: ``x.real`` / ``x.imag`` (views), ``lk.complex``,
``lk.polar``, ``lk.view_as_real`` / ``lk.view_as_complex``, ``x.angle()``, ``x.conj()``,
``x.is_complex()``.

Gradients follow PyTorch's convention: for a real loss ``L`` of ``z = x + iy``, ``z.grad`` is
``dL/dx + i dL/dy`` (so ``|z|**2`` has gradient ``2 z``).

>>> import labkit as lk
>>> z = lk.tensor([3 + 4j], requires_grad=True)
>>> (z.abs() ** 2).sum().backward(); z.grad
tensor([6.+8.j])
>>> z.real.item(), z.imag.item(), z.conj().tolist()
(3.0, 4.0, [(3-4j)])
"""
from ..ops import complex as C
from ..ops import elementwise as E
from ..ops import elementwise_math as M
from ..tensor import Tensor
from .registry import public, tensor_method


@public(method=False)
def real(input):
    """The real part: a view of a complex tensor's memory (writing to it changes ``input``); a
    real tensor is returned as it is."""
    return E.real(input) if input.dtype.is_complex else input


@public(method=False)
def imag(input):
    """The imaginary part of a complex tensor, a view of its memory (an error for a real
    tensor, as in PyTorch)."""
    return E.imag(input)


def _set_part(part):
    def setter(self, value):
        getattr(self, part).copy_(value)
    return setter


Tensor.real = property(real, _set_part("real"), doc=real.__doc__)
Tensor.imag = property(imag, _set_part("imag"), doc=imag.__doc__)


@public(aliases=("conj_physical",))
def conj(input):
    """The complex conjugate (a real tensor is returned as it is). PyTorch's lazy conjugate bit
    is not kept: the result is computed, so ``is_conj()`` is always False."""
    return E.conj(input) if input.dtype.is_complex else input


@tensor_method()
def resolve_conj(self):
    """This tensor (labkit's conjugates are always computed, never a flag)."""
    return self


@tensor_method()
def resolve_neg(self):
    """This tensor (labkit never keeps a lazy negation)."""
    return self


@tensor_method()
def is_conj(self):
    """False: labkit's conjugates are computed, never a lazy flag."""
    return False


@tensor_method()
def is_neg(self):
    """False: labkit never keeps a lazy negation."""
    return False


@public()
def angle(input):
    """The argument of each element in radians, in (-pi, pi]; of a real tensor pi where it is
    negative and 0 elsewhere.

    >>> import labkit as lk
    >>> lk.angle(lk.tensor([1j, -1.0 + 0j], dtype=lk.complex128)).round(decimals=4).tolist()
    [1.5708, 3.1416]
    """
    return C.angle(input)


@public()
def is_complex(input):
    """Whether the dtype is complex64 or complex128."""
    return input.dtype.is_complex


@public(method=False)
def complex(real, imag):
    """The complex tensor ``real + i imag`` from two float32 (complex64) or two float64
    (complex128) tensors, broadcast.

    >>> import labkit as lk
    >>> lk.complex(lk.tensor([1.0, 2.0]), lk.tensor([0.5, -1.0]))
    tensor([1.+0.5j, 2.-1.j ])
    """
    return C.complex(real, imag)


@public(method=False)
def polar(abs, angle):
    """The complex tensor with modulus ``abs`` and argument ``angle``: ``abs * (cos(angle) +
    i sin(angle))``, from two float32 or two float64 tensors."""
    return C.complex(E.mul(abs, M.cos(angle)), E.mul(abs, M.sin(angle)))


@public(method=False)
def view_as_real(input):
    """A complex tensor's values as real pairs: shape ``(..., 2)`` holding (real, imaginary),
    a view of its memory.

    >>> import labkit as lk
    >>> lk.view_as_real(lk.tensor([1 + 2j])).tolist()
    [[1.0, 2.0]]
    """
    return C.view_as_real(input)


@public(method=False)
def view_as_complex(input):
    """Real pairs ``(..., 2)`` (float32 or float64) as complex numbers ``(...)``: a view of the
    memory where each pair is adjacent, as PyTorch's (a copy otherwise)."""
    return C.view_as_complex(input)


@tensor_method()
def cfloat(self):
    """This tensor as complex64."""
    return self.to(dtype="complex64")


@tensor_method()
def cdouble(self):
    """This tensor as complex128."""
    return self.to(dtype="complex128")

