"""Cases for the Fourier transforms: the three primitives (``fft_c2c``, ``fft_r2c``,
``fft_c2r``) and every function of ``lk.fft`` with PyTorch's arguments (``n`` / ``s`` trimming
or padding, ``dim`` in any order, each ``norm``); ``torch.fft`` is the oracle of all of them.

As in ``cases/complex.py``, complex inputs are built from pairs of real arrays and complex
results compared as real pairs (``view_as_real``), so the harness's finite differences check
PyTorch's gradient convention; the gradients of rfft and irfft (the subtle ones: a one-sided
spectrum, imaginary parts the real signal ignores) are compared with PyTorch's autograd too.
"""
import numpy as np
import torch
from hypothesis import strategies as st

import labkit as lk
from labkit.tensor.ops import fft as F

from ..case_kit import Case, Sample, normal, shapes, torch_ref

NORMS = ("backward", "forward", "ortho")


# ---- parameters: a shape, the transformed dims (in any order), sizes, a norm --------------------
@st.composite
def _transform_params(draw, max_dims=3, sized=False, one_dim=False):
    shape = draw(shapes(min_dims=1, max_dims=max_dims, min_side=1))
    nd = len(shape)
    if one_dim:
        dim = (draw(st.integers(-nd, nd - 1)),)
    else:
        dim = tuple(draw(st.permutations(range(nd)))[:draw(st.integers(1, nd))])
    params = {"shape": shape, "dim": dim, "norm": draw(st.sampled_from(NORMS))}
    if sized:
        params["sizes"] = draw(st.one_of(st.none(), st.lists(st.integers(1, 5), min_size=len(dim),
                                                             max_size=len(dim)).map(tuple)))
    return params


def _as_complex(re, im):
    return lk.complex(re, im)


def _torch_complex(re, im):
    return torch.complex(re, im)


def _pairs(out, torch_out=False):
    if torch_out:
        return torch.view_as_real(out.resolve_conj()) if out.is_complex() else out
    return lk.view_as_real(out) if out.dtype.is_complex else out


def _positive(dim, ndim):
    return tuple(d % ndim for d in dim)


# ---- the primitives -----------------------------------------------------------------------------
def _c2c_build(rng, shape, dim, norm, forward=True):
    return Sample((normal(rng, shape), normal(rng, shape)),
                  {"dim": _positive(dim, len(shape)), "norm": norm, "forward": forward})


def _c2c_fn(re, im, dim, norm, forward):
    return _pairs(F.fft_c2c(_as_complex(re, im), dim=dim, norm=norm, forward=forward))


def _c2c_torch(re, im, dim, norm, forward):
    fn = torch.fft.fftn if forward else torch.fft.ifftn
    return _pairs(fn(_torch_complex(re, im), dim=dim, norm=norm), True)


def _r2c_build(rng, shape, dim, norm):
    return Sample((normal(rng, shape),), {"dim": _positive(dim, len(shape)), "norm": norm})


def _r2c_fn(x, dim, norm):
    return _pairs(F.fft_r2c(x, dim=dim, norm=norm))


def _r2c_torch(x, dim, norm):
    return _pairs(torch.fft.rfftn(x, dim=dim, norm=norm), True)


def _c2r_build(rng, shape, dim, norm):
    """A one-sided spectrum: the last of ``dim`` holds ``n // 2 + 1`` frequencies of ``n`` =
    that dimension's size in ``shape`` (so odd and even ``n`` both come up)."""
    dim = _positive(dim, len(shape))
    n = shape[dim[-1]]
    half = list(shape)
    half[dim[-1]] = n // 2 + 1
    return Sample((normal(rng, half), normal(rng, half)),
                  {"dim": dim, "norm": norm, "last_dim_size": n})


def _c2r_fn(re, im, dim, norm, last_dim_size):
    return F.fft_c2r(_as_complex(re, im), dim=dim, norm=norm, last_dim_size=last_dim_size)


def _c2r_torch(re, im, dim, norm, last_dim_size):
    s = [re.shape[d] for d in dim[:-1]] + [last_dim_size]
    return torch.fft.irfftn(_torch_complex(re, im), s=s, dim=dim, norm=norm)


_EDGES = [dict(shape=(4,), dim=(0,), norm="backward"), dict(shape=(1,), dim=(0,), norm="ortho"),
          dict(shape=(3, 5), dim=(1, 0), norm="forward"),
          dict(shape=(2, 3, 4), dim=(2,), norm="ortho"),
          dict(shape=(2, 1, 3), dim=(0, 2), norm="backward")]
# (an empty batch of transforms is checked in test_fft.py: PyTorch's MKL refuses it)

PRIMITIVE_CASES = [
    Case("fft_c2c", _c2c_fn, torch_ref(_c2c_torch), _c2c_build, _transform_params(), _EDGES,
         op="fft_c2c"),
    Case("fft_c2c_inverse", _c2c_fn, torch_ref(_c2c_torch),
         lambda rng, **p: _c2c_build(rng, forward=False, **p), _transform_params(), _EDGES,
         op="fft_c2c"),
    Case("fft_r2c", _r2c_fn, torch_ref(_r2c_torch), _r2c_build, _transform_params(), _EDGES,
         op="fft_r2c"),
    Case("fft_c2r", _c2r_fn, torch_ref(_c2r_torch), _c2r_build, _transform_params(), _EDGES,
         op="fft_c2r"),
]


# ---- lk.fft's functions, with n / s ---------------------------------------------------------------
def _sizes_kw(name, sizes, dim):
    if name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
        return {"n": None if sizes is None else sizes[0], "dim": dim[0]}
    return {"s": sizes, "dim": dim}


_TO_REAL = ("irfft", "irfft2", "irfftn", "hfft", "hfft2", "hfftn")


def _public_case(name, complex_input, one_dim=False, max_dims=3, label=""):
    """A case of ``lk.fft.<name>`` against ``torch.fft.<name>``, its input complex (a pair of
    real arrays) or real."""
    def build(rng, shape, dim, norm, sizes=None):
        kwargs = dict(_sizes_kw(name, sizes, dim), norm=norm)
        if sizes is None and name in _TO_REAL:   # 2 (m - 1) values out of m: m of at least 2
            shape = tuple(max(n, 2) if d % len(shape) == dim[-1] % len(shape) else n
                          for d, n in enumerate(shape))
        arrays = (normal(rng, shape), normal(rng, shape)) if complex_input else \
            (normal(rng, shape),)
        return Sample(arrays, kwargs)

    def fn(*arrays, **kwargs):
        x = _as_complex(*arrays) if complex_input else arrays[0]
        return _pairs(getattr(lk.fft, name)(x, **kwargs))

    def ref(*arrays, **kwargs):
        x = _torch_complex(*arrays) if complex_input else arrays[0]
        return _pairs(getattr(torch.fft, name)(x, **kwargs), True)
    fn.__name__ = ref.__name__ = name
    edges = [dict(shape=(5,), dim=(0,), norm="backward", sizes=None),
             dict(shape=(4, 3), dim=(-1,), norm="ortho", sizes=(2,)),
             dict(shape=(3, 4), dim=(0,), norm="forward", sizes=(6,))]
    if not one_dim:
        edges += [dict(shape=(3, 4), dim=(1, 0), norm="ortho", sizes=(5, 2)),
                  dict(shape=(2, 3, 2), dim=(0, 2), norm="backward", sizes=None)]
    return Case(f"lk.fft.{name}{label}", fn, torch_ref(ref), build,
                _transform_params(max_dims=max_dims, sized=True, one_dim=one_dim), edges)


def _shift_case(name):
    def build(rng, shape, dim, norm):
        return Sample((normal(rng, shape),), {"dim": dim if len(dim) > 1 else dim[0]})

    def fn(x, dim):
        return getattr(lk.fft, name)(x, dim=dim)

    def ref(x, dim):
        return getattr(torch.fft, name)(x, dim=dim)
    return Case(f"lk.fft.{name}", fn, torch_ref(ref), build, _transform_params(),
                [dict(shape=(5,), dim=(0,), norm="backward"),
                 dict(shape=(4, 3), dim=(1, 0), norm="backward")])


COMPOSITE_CASES = [
    _public_case("fft", True, one_dim=True), _public_case("ifft", True, one_dim=True),
    _public_case("fft", False, one_dim=True, label="_of_real"),
    _public_case("ifftn", False, label="_of_real"),
    _public_case("rfft", False, one_dim=True), _public_case("irfft", True, one_dim=True),
    _public_case("hfft", True, one_dim=True), _public_case("ihfft", False, one_dim=True),
    _public_case("fft2", True, max_dims=2), _public_case("ifft2", True, max_dims=2),
    _public_case("fftn", True), _public_case("ifftn", True),
    _public_case("rfft2", False, max_dims=2), _public_case("irfft2", True, max_dims=2),
    _public_case("rfftn", False), _public_case("irfftn", True),
    _public_case("hfftn", True), _public_case("ihfftn", False),
    _shift_case("fftshift"), _shift_case("ifftshift"),
]
