"""``lk.fft``: PyTorch's ``torch.fft`` namespace, over the three transform primitives of
``labkit/tensor/ops/fft.py`` (complex to complex, real to one-sided complex, and back).

Each function takes PyTorch's arguments: ``n`` (1-d) or ``s`` (2-d and n-d) to trim or
zero-pad the input along the transformed dimensions first, ``dim``, and ``norm`` ("backward",
the default, scales the inverse by ``1/n``; "forward" the forward transform; "ortho" both by
``1/sqrt(n)``). Real inputs of complex transforms become complex (integers the default float
dtype first); gradients are PyTorch's, eagerly and under ``lk.function``.

>>> import labkit as lk
>>> x = lk.tensor([1.0, 2.0, 3.0, 4.0])
>>> lk.fft.fft(x)
tensor([10.+0.j, -2.+2.j, -2.+0.j, -2.-2.j])
>>> lk.fft.irfft(lk.fft.rfft(x), n=4).tolist()
[1.0, 2.0, 3.0, 4.0]
>>> lk.fft.fftfreq(4).tolist(), lk.fft.fftshift(lk.arange(5)).tolist()
([0.0, 0.25, -0.5, -0.25], [3, 4, 0, 1, 2])
"""
import numpy as np

from .errors import DTypeError, ShapeError, describe
from .tensor.creation import tensor as _tensor
from .tensor.dtypes import as_dtype, get_default_dtype
from .tensor.ops import fft as F
from .tensor.ops.elementwise import cast, conj
from .tensor.ops.index import getitem_slices
from .tensor.ops.layout import pad
from .tensor.public.layout import roll
from .tensor.shape_rules import normalize_dim

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2",
           "rfftn", "irfftn", "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift"]

_SWAPPED = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


# ---- arguments ----------------------------------------------------------------------------------
def _norm(name, norm):
    if norm is None:
        return "backward"
    if norm not in F.NORMS:
        raise ValueError(f"lk.fft.{name}: norm={norm!r} is not a normalization mode; use "
                         f"'backward' (the default: 1/n on the inverse), 'forward' (1/n on the "
                         f"forward transform) or 'ortho' (1/sqrt(n) on both)")
    return norm


def _real(name, x):
    """``x`` as a float tensor: integers and bools in the default float dtype."""
    d = x.dtype
    if d.is_complex:
        raise DTypeError(f"lk.fft.{name} expects a real input tensor, got {describe(x)} (as in "
                         f"PyTorch); use lk.fft.fft for complex values, or pass x.real")
    if d.name == "float16":
        raise DTypeError(f"lk.fft.{name}: float16 has no transform on the CPU (nor in "
                         f"PyTorch's); convert first, x.float()")
    return x if d.is_floating else cast(x, dtype=get_default_dtype().name)


def _complex(name, x):
    """``x`` as a complex tensor (a real one gets a zero imaginary part)."""
    if x.dtype.is_complex:
        return x
    x = _real(name, x)
    return cast(x, dtype=x.dtype.to_complex().name)


def _dims_and_sizes(name, x, s, dim, default):
    """The transformed dimensions (non-negative, in the order given) and their sizes, from
    PyTorch's ``s`` / ``dim`` (``default``: the dims when neither is given; None for all)."""
    if x.ndim == 0:
        raise ShapeError(f"lk.fft.{name} needs a tensor with at least one dimension; got "
                         f"{describe(x)}")
    if isinstance(dim, int):
        dim = (dim,)
    if dim is None:
        if s is not None:
            dim = tuple(range(-len(s), 0))
        else:
            dim = default if default is not None else tuple(range(x.ndim))
    dims = tuple(normalize_dim(f"lk.fft.{name}", d, x.ndim, x) for d in dim)
    if len(set(dims)) != len(dims):
        raise ShapeError(f"lk.fft.{name}: dim={tuple(dim)} names a dimension of {describe(x)} "
                         f"twice; each dim must be unique")
    if s is None:
        return dims, [x.shape[d] for d in dims]
    s = (s,) if isinstance(s, int) else tuple(s)
    if len(s) != len(dims):
        raise ShapeError(f"lk.fft.{name}: s={s} and dim={tuple(dim)} must have one length")
    sizes = [x.shape[d] if n == -1 else int(n) for n, d in zip(s, dims)]
    if any(n < 1 for n in sizes):
        raise ShapeError(f"lk.fft.{name}: invalid number of data points {tuple(sizes)}: each "
                         f"transformed size must be at least 1")
    return dims, sizes


def _resized(x, dims, sizes):
    """``x`` trimmed, or zero-padded at the end, to ``sizes`` along ``dims``."""
    widths = [(0, 0)] * x.ndim
    for d, n in zip(dims, sizes):
        if n < x.shape[d]:
            x = getitem_slices(x, d, 0, n)
        elif n > x.shape[d]:
            widths[d] = (0, n - x.shape[d])
    return pad(x, widths=tuple(widths)) if any(w != (0, 0) for w in widths) else x


def _one(n, dim):
    return None if n is None else (n,), dim


# ---- the transforms -----------------------------------------------------------------------------
def _c2c(name, input, s, dim, norm, forward, default=None):
    x = _complex(name, input)
    dims, sizes = _dims_and_sizes(name, x, s, dim, default)
    return F.fft_c2c(_resized(x, dims, sizes), dim=dims, norm=_norm(name, norm),
                     forward=forward)


def _r2c(name, input, s, dim, norm, default=None):
    x = _real(name, input)
    dims, sizes = _dims_and_sizes(name, x, s, dim, default)
    return F.fft_r2c(_resized(x, dims, sizes), dim=dims, norm=_norm(name, norm))


def _c2r(name, input, s, dim, norm, default=None):
    x = _complex(name, input)
    dims, sizes = _dims_and_sizes(name, x, s, dim, default)
    if s is None or tuple(s if not isinstance(s, int) else (s,))[-1] == -1:
        sizes[-1] = 2 * (x.shape[dims[-1]] - 1)      # the default output length
    last = sizes[-1]
    if last < 1:
        raise ShapeError(f"lk.fft.{name}: invalid number of data points ({last}) along dim "
                         f"{dims[-1]} of {describe(input)}: pass n (or s) of at least 1")
    x = _resized(x, dims, sizes[:-1] + [last // 2 + 1])
    return F.fft_c2r(x, dim=dims, norm=_norm(name, norm), last_dim_size=last)


def fft(input, n=None, dim=-1, norm=None):
    """The 1-d discrete Fourier transform along ``dim`` (``input`` trimmed or zero-padded to
    ``n`` first)."""
    return _c2c("fft", input, *_one(n, dim), norm, True)


def ifft(input, n=None, dim=-1, norm=None):
    """The 1-d inverse transform along ``dim`` (scaled by ``1/n`` unless ``norm`` says)."""
    return _c2c("ifft", input, *_one(n, dim), norm, False)


def fft2(input, s=None, dim=(-2, -1), norm=None):
    """The 2-d transform over ``dim`` (the last two by default)."""
    return _c2c("fft2", input, s, dim, norm, True, (-2, -1))


def ifft2(input, s=None, dim=(-2, -1), norm=None):
    """The 2-d inverse transform over ``dim`` (the last two by default)."""
    return _c2c("ifft2", input, s, dim, norm, False, (-2, -1))


def fftn(input, s=None, dim=None, norm=None):
    """The n-d transform over ``dim`` (every dimension by default, or the last ``len(s)``)."""
    return _c2c("fftn", input, s, dim, norm, True)


def ifftn(input, s=None, dim=None, norm=None):
    """The n-d inverse transform over ``dim`` (every dimension by default)."""
    return _c2c("ifftn", input, s, dim, norm, False)


def rfft(input, n=None, dim=-1, norm=None):
    """The transform of a real signal along ``dim``: its ``n // 2 + 1`` non-negative
    frequencies (the others are their complex conjugates)."""
    return _r2c("rfft", input, *_one(n, dim), norm)


def irfft(input, n=None, dim=-1, norm=None):
    """The real signal of ``n`` values (default ``2 * (m - 1)`` from ``m`` frequencies) whose
    one-sided spectrum along ``dim`` is ``input``: the inverse of ``rfft``."""
    return _c2r("irfft", input, *_one(n, dim), norm)


def rfft2(input, s=None, dim=(-2, -1), norm=None):
    """``rfftn`` over the last two dimensions (or ``dim``)."""
    return _r2c("rfft2", input, s, dim, norm, (-2, -1))


def irfft2(input, s=None, dim=(-2, -1), norm=None):
    """``irfftn`` over the last two dimensions (or ``dim``)."""
    return _c2r("irfft2", input, s, dim, norm, (-2, -1))


def rfftn(input, s=None, dim=None, norm=None):
    """The n-d transform of a real signal, one-sided along the last of ``dim``."""
    return _r2c("rfftn", input, s, dim, norm)


def irfftn(input, s=None, dim=None, norm=None):
    """The inverse of ``rfftn``: real values, ``s[-1]`` (default ``2 * (m - 1)``) along the
    last of ``dim``."""
    return _c2r("irfftn", input, s, dim, norm)


def hfft(input, n=None, dim=-1, norm=None):
    """The transform of a signal with Hermitian symmetry given by its first half (``n`` real
    values out; default ``2 * (m - 1)``): ``irfft`` of the conjugate, scaled as a forward
    transform."""
    return _c2r("hfft", conj(_complex("hfft", input)), *_one(n, dim), _SWAPPED[_norm("hfft",
                                                                                    norm)])


def ihfft(input, n=None, dim=-1, norm=None):
    """The inverse of ``hfft``: the first half of the (Hermitian) inverse transform of a real
    signal."""
    return conj(_r2c("ihfft", input, *_one(n, dim), _SWAPPED[_norm("ihfft", norm)]))


def hfft2(input, s=None, dim=(-2, -1), norm=None):
    """``hfftn`` over the last two dimensions (or ``dim``)."""
    return _c2r("hfft2", conj(_complex("hfft2", input)), s, dim,
                _SWAPPED[_norm("hfft2", norm)], (-2, -1))


def ihfft2(input, s=None, dim=(-2, -1), norm=None):
    """``ihfftn`` over the last two dimensions (or ``dim``)."""
    return conj(_r2c("ihfft2", input, s, dim, _SWAPPED[_norm("ihfft2", norm)], (-2, -1)))


def hfftn(input, s=None, dim=None, norm=None):
    """The n-d ``hfft``: real values from the half (along the last of ``dim``) of a Hermitian
    symmetric spectrum."""
    return _c2r("hfftn", conj(_complex("hfftn", input)), s, dim, _SWAPPED[_norm("hfftn", norm)])


def ihfftn(input, s=None, dim=None, norm=None):
    """The inverse of ``hfftn``."""
    return conj(_r2c("ihfftn", input, s, dim, _SWAPPED[_norm("ihfftn", norm)]))


# ---- frequencies and shifts ---------------------------------------------------------------------
def _frequencies(name, k, n, d, dtype, device, requires_grad):
    dtype = as_dtype(dtype) or get_default_dtype()
    if not (dtype.is_floating or dtype.is_complex):
        raise DTypeError(f"lk.fft.{name}: dtype must be a float or complex type, got {dtype}")
    values = np.asarray(k, dtype=dtype.np) * dtype.np.type(1.0 / (n * d))
    return _tensor(values, dtype=dtype, device=device, requires_grad=requires_grad)


def fftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The frequencies of ``fft``'s ``n`` outputs for samples ``d`` apart: ``[0, 1, ...,
    -2, -1] / (d * n)``."""
    k = np.concatenate([np.arange((n - 1) // 2 + 1), -np.arange(n // 2, 0, -1)])
    return _frequencies("fftfreq", k, n, d, dtype, device, requires_grad)


def rfftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The frequencies of ``rfft``'s ``n // 2 + 1`` outputs: ``[0, 1, ..., n // 2] / (d * n)``."""
    return _frequencies("rfftfreq", np.arange(n // 2 + 1), n, d, dtype, device, requires_grad)


def _shifted(name, input, dim, shift):
    if dim is None:
        dim = tuple(range(input.ndim))
    elif isinstance(dim, int):
        dim = (dim,)
    dims = tuple(normalize_dim(f"lk.fft.{name}", d, input.ndim, input) for d in dim)
    if not dims:
        return input
    return roll(input, tuple(shift(input.shape[d]) for d in dims), dims)


def fftshift(input, dim=None):
    """The zero frequency moved to the middle of ``dim`` (every dimension by default)."""
    return _shifted("fftshift", input, dim, lambda n: n // 2)


def ifftshift(input, dim=None):
    """The inverse of ``fftshift``."""
    return _shifted("ifftshift", input, dim, lambda n: (n + 1) // 2)
