"""Discrete Fourier transforms: three primitives on ``xp.fft``, from which ``lk.fft`` builds
PyTorch's fft, ifft, rfft, irfft, hfft, ihfft and their 2-d and n-d forms.

- ``fft_c2c``: complex to complex over ``dim`` (forward or inverse);
- ``fft_r2c``: real to the one-sided complex spectrum (the last of ``dim`` keeps ``n // 2 + 1``
  frequencies);
- ``fft_c2r``: a one-sided spectrum back to real values, ``last_dim_size`` long along the last
  of ``dim``.

Each transforms whole dimensions: padding or trimming to ``n`` / ``s`` is done beforehand by
``lk.fft`` with the ``pad`` and indexing ops, so each primitive is one linear map. ``norm`` is
PyTorch's: "backward" scales the inverse by ``1/n``, "forward" the forward transform,
"ortho" both by ``1/sqrt(n)``.

The vjps are the adjoint maps: the adjoint of a transform with a scale is the opposite
transform with the same scale, which is the other ``norm`` ("backward" and "forward" swap,
"ortho" stays). ``fft_r2c``'s adjoint pads the cotangent with zeros to the full spectrum and
keeps the real part of its inverse; ``fft_c2r``'s is ``fft_r2c`` of the cotangent with the
frequencies that stand for two (their conjugate mirrors are not stored) doubled, as PyTorch's.
"""
from ...errors import DTypeError, ShapeError, describe
from ..op import BatchFamily, op
from ..shape_rules import shape_of
from .elementwise import real
from .index import getitem_slices
from .layout import pad
from .shape import concat, moved

NORMS = ("backward", "forward", "ortho")
_ADJOINT_NORM = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _over_dims(op):
    def rule(inputs, bdims, dim, **attrs):
        return op(moved(inputs[0], bdims[0]), dim=tuple(d + 1 for d in dim), **attrs), 0
    return rule


# The transforms' batching rule: the batch dimension first, every transformed dim after it.
OVER_DIMS = BatchFamily(_over_dims)


def _check(name, x, dim, norm, want):
    """Common checks of the rules: ``dim`` names distinct dimensions of ``x``, ``norm`` is known,
    ``x`` is complex (``want="complex"``) or a real float (``want="real"``)."""
    shape = shape_of(x)
    if not dim or len(set(dim)) != len(dim) or any(not 0 <= d < len(shape) for d in dim):
        raise ShapeError(f"{name}: dim={dim} must name distinct dimensions of {describe(x)}")
    if any(shape[d] == 0 for d in dim):
        raise ShapeError(f"{name}: no values to transform along dim={dim} of {describe(x)} "
                         f"(a transform needs at least one)")
    if norm not in NORMS:
        raise ValueError(f"{name}: norm={norm!r} is not one of {NORMS}")
    if want == "complex" and not x.dtype.is_complex or \
            want == "real" and x.dtype.name not in ("float32", "float64"):
        raise DTypeError(f"{name} takes a {want} tensor (float32/float64 or complex64/128); "
                         f"got {describe(x)}")
    return shape


# ---- complex to complex -------------------------------------------------------------------------
def _c2c_rule(x, dim, norm, forward):
    return _check("fft_c2c", x, dim, norm, "complex"), x.dtype


def _c2c_vjp(g, out, x, dim, norm, forward):
    return (fft_c2c(g, dim=dim, norm=_ADJOINT_NORM[norm], forward=not forward),)


@op("fft_c2c", shape=_c2c_rule, vjp=_c2c_vjp, batch=OVER_DIMS)
def fft_c2c(xp, x, dim, norm, forward):
    """The discrete Fourier transform of complex ``x`` over the dimensions ``dim`` (the
    inverse one unless ``forward``), scaled as ``norm`` says."""
    if x.dtype.kind != "c":
        raise TypeError("real input")                    # the rule explains it
    return (xp.fft.fftn if forward else xp.fft.ifftn)(x, axes=dim, norm=norm)


# ---- real to one-sided complex ------------------------------------------------------------------
def _r2c_rule(x, dim, norm):
    shape = list(_check("fft_r2c", x, dim, norm, "real"))
    shape[dim[-1]] = shape[dim[-1]] // 2 + 1
    return tuple(shape), x.dtype.to_complex()


def _r2c_vjp(g, out, x, dim, norm):
    last = dim[-1]
    widths = [(0, 0)] * g.ndim
    widths[last] = (0, x.shape[last] - g.shape[last])
    full = pad(g, widths=tuple(widths))
    return (real(fft_c2c(full, dim=dim, norm=_ADJOINT_NORM[norm], forward=False)),)


@op("fft_r2c", shape=_r2c_rule, vjp=_r2c_vjp, batch=OVER_DIMS)
def fft_r2c(xp, x, dim, norm):
    """The forward transform of real ``x`` over ``dim``, keeping the ``n // 2 + 1``
    non-negative frequencies of the last of ``dim`` (the others are their conjugates)."""
    if x.dtype.kind != "f":
        raise TypeError("complex input")                 # the rule explains it
    return xp.fft.rfftn(x, axes=dim, norm=norm)


# ---- one-sided complex to real ------------------------------------------------------------------
def _c2r_rule(x, dim, norm, last_dim_size):
    shape = list(_check("fft_c2r", x, dim, norm, "complex"))
    if last_dim_size < 1 or shape[dim[-1]] != last_dim_size // 2 + 1:
        raise ShapeError(f"fft_c2r: {last_dim_size} output values along dim {dim[-1]} need "
                         f"{last_dim_size // 2 + 1} frequencies there; got {describe(x)}")
    shape[dim[-1]] = last_dim_size
    return tuple(shape), x.dtype.to_real()


def _c2r_vjp(g, out, x, dim, norm, last_dim_size):
    grad = fft_r2c(g, dim=dim, norm=_ADJOINT_NORM[norm])
    # frequencies 1 .. n - (n // 2 + 1) stand for themselves and their mirrors: doubled
    last, kept = dim[-1], grad.shape[dim[-1]]
    doubled = last_dim_size - kept
    if doubled > 0:
        grad = concat(getitem_slices(grad, last, 0, 1),
                      getitem_slices(grad, last, 1, 1 + doubled) * 2,
                      getitem_slices(grad, last, 1 + doubled, kept), dim=last)
    return (grad,)


@op("fft_c2r", shape=_c2r_rule, vjp=_c2r_vjp, batch=OVER_DIMS)
def fft_c2r(xp, x, dim, norm, last_dim_size):
    """The inverse transform over ``dim`` of a one-sided spectrum ``x`` to real values,
    ``last_dim_size`` of them along the last of ``dim`` (the imaginary parts that a real
    signal cannot have, at frequency 0 and ``n / 2``, are ignored)."""
    if x.dtype.kind != "c":
        raise TypeError("real input")                    # the rule explains it
    sizes = [x.shape[d] for d in dim[:-1]] + [last_dim_size]
    return xp.fft.irfftn(x, s=sizes, axes=dim, norm=norm)

