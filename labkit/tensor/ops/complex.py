"""Complex tensors apart from arithmetic: their angle, one built from its parts (``complex``),
and the views between a complex tensor and its pairs of reals (``view_as_real`` /
``view_as_complex``). ``real``, ``imag`` and ``conj`` are in ``elementwise.py``, beside the ops
whose gradients use them.

Gradients follow PyTorch's convention: for a real loss ``L`` and ``z = x + iy`` the gradient is
``dL/dx + i dL/dy``, so ``view_as_real``'s vjp is ``view_as_complex`` of its cotangent and
``complex(re, im)``'s gives ``re`` the real part of its cotangent and ``im`` the imaginary part.

>>> import labkit as lk
>>> z = lk.complex(lk.tensor([3.0]), lk.tensor([4.0]))
>>> z.abs().item(), lk.view_as_real(z).tolist()
(5.0, [[3.0, 4.0]])
"""
import math

import numpy as np

from ...errors import DTypeError, ShapeError, describe
from ..batching import ELEMENTWISE
from ..dtypes import from_numpy_dtype
from ..op import needs_grad, op
from ..shape_rules import broadcast_shapes, elementwise, shape_of
from .elementwise import abs, conj, div, eq, float_input, imag, mul, real, where, zero_vjp
from .shape import moved


def _angle_rule(x):
    if x.dtype.is_complex:
        return shape_of(x), x.dtype.to_real()
    return elementwise(np.exp, "angle")(x)


def _angle_vjp(g, out, x):
    if not x.dtype.is_complex:
        return zero_vjp(g, out, x)
    # d angle / dx = -y / |z|^2, d angle / dy = x / |z|^2: together g * i z / |z|^2 (0 at 0)
    zero = eq(x, 0)
    size = where(zero, 1, abs(x))
    return (where(zero, 0, mul(div(mul(g, x), mul(size, size)), 1j)),)


@op("angle", shape=_angle_rule, vjp=_angle_vjp, batch=ELEMENTWISE)
def angle(xp, x):
    """The argument of each element in radians, in (-pi, pi]; of a real tensor pi where it is
    negative, 0 elsewhere (NaN kept), as PyTorch's."""
    if x.dtype.kind == "c":
        return xp.angle(x)
    x = float_input(xp, x)
    return xp.where(xp.isnan(x), x, xp.where(x < 0, x.dtype.type(math.pi), x.dtype.type(0)))


def _complex_rule(real_part, imag_part):
    for x in (real_part, imag_part):
        if not hasattr(x, "shape"):
            raise DTypeError(f"complex takes two tensors, as in PyTorch; got "
                             f"({describe(real_part)}, {describe(imag_part)}). Make one with "
                             f"lk.tensor(...) or lk.full_like(...) first.")
    a, b = real_part.dtype, imag_part.dtype
    if a is not b or a.name not in ("float32", "float64"):
        raise DTypeError(f"complex needs two float32 or two float64 tensors, as in PyTorch; "
                         f"got ({describe(real_part)}, {describe(imag_part)}). Convert both to "
                         f"one dtype first, e.g. x.float().")
    return broadcast_shapes("complex", real_part, imag_part), a.to_complex()


def _complex_vjp(g, out, real_part, imag_part):
    return (real(g) if needs_grad(real_part) else None,
            imag(g) if needs_grad(imag_part) else None)


@op("complex", shape=_complex_rule, vjp=_complex_vjp, batch=ELEMENTWISE)
def complex(xp, real_part, imag_part):
    """The complex tensor ``real_part + i imag_part`` (broadcast), complex64 from float32 and
    complex128 from float64 (an infinite part stays infinite: no multiplication by i)."""
    if real_part.dtype != imag_part.dtype or real_part.dtype.kind != "f":
        raise TypeError("complex of mixed or non-float parts")   # the rule explains it
    shape = np.broadcast_shapes(real_part.shape, imag_part.shape)
    out = xp.empty(shape, dtype=from_numpy_dtype(real_part.dtype).to_complex().np)
    out.real[...] = real_part
    out.imag[...] = imag_part
    return out


def _view_as_real_rule(x):
    if not x.dtype.is_complex:
        raise DTypeError(f"view_as_real takes a complex tensor; got {describe(x)}. A real "
                         f"tensor is its own real part.")
    return shape_of(x) + (2,), x.dtype.to_real()


@op("view_as_real", shape=_view_as_real_rule, vjp=lambda g, out, x: (view_as_complex(g),),
    batch=ELEMENTWISE)
def view_as_real(xp, x):
    """The complex tensor ``x`` as real pairs ``(..., 2)``: (real, imaginary) in the last
    dimension, a view of ``x``'s memory."""
    if x.dtype.kind != "c":
        raise TypeError("real input")            # the rule explains it
    try:
        return x[..., None].view(x.real.dtype)
    except (ValueError, TypeError):              # an array module that cannot view it: a copy
        return xp.stack([x.real, x.imag], axis=-1)


def _view_as_complex_rule(x):
    shape = shape_of(x)
    if not shape or shape[-1] != 2:
        raise ShapeError(f"view_as_complex needs a last dimension of size 2 (real and "
                         f"imaginary parts); got {describe(x)}")
    if x.dtype.name not in ("float32", "float64"):
        raise DTypeError(f"view_as_complex takes a float32 or float64 tensor; got "
                         f"{describe(x)}. Convert first, e.g. x.float().")
    return shape[:-1], x.dtype.to_complex()


def _view_as_complex_batch(inputs, bdims):
    (x,), (d,) = inputs, bdims
    return view_as_complex(moved(x, d)), 0      # the pairs stay last


@op("view_as_complex", shape=_view_as_complex_rule, vjp=lambda g, out, x: (view_as_real(g),),
    batch=_view_as_complex_batch)
def view_as_complex(xp, x):
    """The real pairs ``x`` ``(..., 2)`` as complex numbers ``(...)``: a view of ``x``'s memory
    where its pairs are adjacent, else a copy."""
    if x.ndim == 0 or x.shape[-1] != 2 or x.dtype.kind != "f" or x.dtype.itemsize < 4:
        raise TypeError("not real pairs")        # the rule explains it
    kind = from_numpy_dtype(x.dtype).to_complex().np
    try:
        return x.view(kind)[..., 0]
    except ValueError:                           # the pairs' elements are not adjacent
        out = xp.empty(x.shape[:-1], dtype=kind)
        out.real[...] = x[..., 0]
        out.imag[...] = x[..., 1]
        return out


