"""Cases for complex tensors: their parts and views (``real``, ``imag``, ``conj``, ``angle``,
``complex``, ``view_as_real``, ``view_as_complex``) and the arithmetic that carries PyTorch's
gradient convention for them (``z.grad = dL/dx + i dL/dy``); PyTorch is the oracle.

The harness checks real functions of real arrays (values in float64 and float32, finite
differences, PyTorch's autograd, vmap), so each case builds its complex inputs from pairs of
real ones (``lk.complex(re, im)``, in float64 a complex128) and returns real numbers
(``lk.view_as_real`` of a complex result): a gradient that misses a conjugate fails the finite
differences and the comparison with PyTorch alike.
"""
import numpy as np
import torch
from hypothesis import strategies as st

import labkit as lk

from ..case_kit import (BINARY_EDGES, UNARY_EDGES, Case, Sample, _arr, broadcast_shapes, normal,
                        positive, shapes, torch_ref)


def _away_from_zero(rng, shape):
    """Parts of complex numbers whose moduli are at least 0.5 (their angle, log, 1/z and
    |z| are smooth there): a sign times a value in [0.5, 1.5]."""
    return _arr(rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 1.5, shape))


def _pairs(gen=normal):
    """``build`` of a case taking (re, im) pairs for each of ``len(shapes)`` complex inputs."""
    def build(rng, shapes):
        return Sample(tuple(gen(rng, s) for s in shapes for _ in range(2)))
    return build


def _complex_case(name, fn_lk, fn_torch, n=1, gen=normal, op=None, **kw):
    """A case of ``fn`` on ``n`` complex inputs, each given as its real and imaginary parts
    (broadcast together), whose result is complex (compared through ``view_as_real``) or real."""
    def lk_fn(*parts):
        zs = [lk.complex(parts[2 * i], parts[2 * i + 1]) for i in range(n)]
        out = fn_lk(*zs)
        return lk.view_as_real(out) if out.dtype.is_complex else out

    def torch_fn(*parts):
        zs = [torch.complex(*torch.broadcast_tensors(parts[2 * i], parts[2 * i + 1]))
              for i in range(n)]
        out = fn_torch(*zs)
        return torch.view_as_real(out) if out.is_complex() else out

    if n == 1:
        params = st.fixed_dictionaries({"shapes": shapes().map(lambda s: (s,))})
        edges = [dict(shapes=(p["shape"],)) for p in UNARY_EDGES]
    else:
        params = st.fixed_dictionaries({"shapes": broadcast_shapes(n)})
        edges = [dict(shapes=p["shapes"]) for p in BINARY_EDGES if None not in p["shapes"]]
    return Case(name, lk_fn, torch_ref(torch_fn), _pairs(gen), params, edges, op=op, **kw)


def _view_as_complex_build(rng, shape):
    return Sample((normal(rng, shape + (2,)),))


def _angle_of_real_build(rng, shape):
    return Sample((_away_from_zero(rng, shape),))


PRIMITIVE_CASES = [
    _complex_case("complex", lambda z: z, lambda z: z, op="complex"),
    # complex() broadcasts its two parts: an imaginary part of another shape
    Case("complex_broadcast", lambda re, im: lk.view_as_real(lk.complex(re, im)),
         torch_ref(lambda re, im: torch.view_as_real(
             torch.complex(*torch.broadcast_tensors(re, im)))),
         lambda rng, shapes: Sample(tuple(normal(rng, s) for s in shapes)),
         st.fixed_dictionaries({"shapes": broadcast_shapes(2)}),
         [dict(shapes=((2, 1), (3,))), dict(shapes=((), (2,))), dict(shapes=((0, 1), (1, 2)))],
         op="complex"),
    _complex_case("view_as_real", lambda z: z * (1 - 2j), lambda z: z * (1 - 2j),
                  op="view_as_real"),
    Case("view_as_complex",
         lambda x: lk.view_as_real(lk.view_as_complex(x) * (0.5 + 1j)),
         torch_ref(lambda x: torch.view_as_real(torch.view_as_complex(x.contiguous()) * (0.5 + 1j))),
         _view_as_complex_build, st.fixed_dictionaries({"shape": shapes()}), UNARY_EDGES,
         op="view_as_complex"),
    _complex_case("real", lambda z: lk.real(z * z), lambda z: torch.real(z * z), op="real"),
    _complex_case("imag", lambda z: lk.imag(z * z), lambda z: torch.imag(z * z), op="imag"),
    _complex_case("conj", lambda z: lk.conj(z * z), lambda z: torch.conj_physical(z * z),
                  op="conj"),
    _complex_case("angle", lambda z: lk.angle(z), lambda z: torch.angle(z),
                  gen=_away_from_zero, op="angle"),
    Case("angle_of_real", lk.angle, torch_ref(torch.angle), _angle_of_real_build,
         st.fixed_dictionaries({"shape": shapes()}), UNARY_EDGES, op="angle"),
]


def _matmul_build(rng, batch, n):
    shapes_ = [batch + (2, n), (n, 3)]
    return Sample(tuple(normal(rng, s) for s in shapes_ for _ in range(2)))


def _matmul_fn(a_re, a_im, b_re, b_im):
    return lk.view_as_real(lk.complex(a_re, a_im) @ lk.complex(b_re, b_im))


def _matmul_torch(a_re, a_im, b_re, b_im):
    return torch.view_as_real(torch.complex(a_re, a_im) @ torch.complex(b_re, b_im))


# Arithmetic on complex tensors: values and PyTorch's gradients (a conjugate missed in any of
# these vjps fails both the finite differences and PyTorch's autograd).
COMPOSITE_CASES = [
    _complex_case("complex_add", lambda a, b: a + b, lambda a, b: a + b, n=2),
    _complex_case("complex_sub", lambda a, b: a - b, lambda a, b: a - b, n=2),
    _complex_case("complex_mul", lambda a, b: a * b, lambda a, b: a * b, n=2),
    _complex_case("complex_div", lambda a, b: a / b, lambda a, b: a / b, n=2,
                  gen=_away_from_zero),
    _complex_case("complex_pow", lambda a, b: a ** b, lambda a, b: a ** b, n=2,
                  gen=_away_from_zero),
    _complex_case("complex_exp", lk.exp, torch.exp),
    _complex_case("complex_log", lk.log, torch.log, gen=_away_from_zero),
    _complex_case("complex_sqrt", lk.sqrt, torch.sqrt, gen=_away_from_zero),
    _complex_case("complex_tanh", lk.tanh, torch.tanh),
    _complex_case("complex_sigmoid", lk.sigmoid, torch.sigmoid),
    _complex_case("complex_sin", lk.sin, torch.sin),
    _complex_case("complex_reciprocal", lk.reciprocal, torch.reciprocal, gen=_away_from_zero),
    _complex_case("complex_abs", lk.abs, torch.abs, gen=_away_from_zero),
    _complex_case("complex_sgn", lk.sgn, torch.sgn, gen=_away_from_zero),
    _complex_case("complex_square_modulus", lambda z: z * lk.conj(z),
                  lambda z: z * torch.conj_physical(z)),
    _complex_case("complex_sum", lambda z: z.sum(), lambda z: z.sum()),
    _complex_case("complex_mean", lambda z: z.mean(), lambda z: z.mean()),
    _complex_case("complex_prod", lambda z: z.prod(), lambda z: z.prod(), gen=_away_from_zero),
    _complex_case("complex_cumsum", lambda z: lk.cumsum(z.reshape(-1), 0),
                  lambda z: torch.cumsum(z.reshape(-1), 0)),
    _complex_case("complex_times_real", lambda z: z * lk.real(z), lambda z: z * z.real),
    _complex_case("polar", lambda z: lk.polar(lk.real(z), lk.imag(z)),
                  lambda z: torch.polar(z.real, z.imag), gen=positive),
    Case("complex_matmul", _matmul_fn, torch_ref(_matmul_torch), _matmul_build,
         st.fixed_dictionaries({"batch": shapes(max_dims=1), "n": st.integers(1, 3)}),
         [dict(batch=(), n=2), dict(batch=(2,), n=1), dict(batch=(0,), n=3)]),
]
