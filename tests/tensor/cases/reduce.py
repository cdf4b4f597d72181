"""Cases for reductions and scans, PyTorch as the oracle: prod, cumsum, cumprod, cummax, cummin,
all, any (primitives); var/std in PyTorch's argument forms, var_mean, std_mean, logsumexp,
amax, amin, aminmax, median, nanmedian, count_nonzero, nansum, nanmean (composites).

Most cases are one spelling run twice (``both``): with ``m = labkit`` as the op, and with
``m = torch`` as the oracle, so what is tested is that the PyTorch code runs unchanged.
"""
import importlib
import math
import warnings

import numpy as np
from hypothesis import strategies as st

import labkit as lk

from ..case_kit import (REDUCE_EDGES, Case, Sample, _arr, distinct, normal, reduce_params, shapes,
                        small_ints, torch_ref)


def both(f):
    """``(fn, ref)`` from one spelling ``f(m, *args, **kwargs)``: ``m`` is labkit for the op and
    torch for the oracle (its warnings, e.g. of a variance over too few elements, silenced)."""
    def oracle(*a, **k):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return f(importlib.import_module("torch"), *a, **k)
    return (lambda *a, **k: f(lk, *a, **k)), torch_ref(oracle)


def case(name, f, gen, params, edges, **kw):
    """A case whose one input comes from ``gen`` and whose other params are keyword arguments."""
    fn, ref = both(f)
    return Case(name, fn, ref, lambda rng, shape, **p: Sample((gen(rng, shape),), p), params,
                edges, **kw)


# ---- value generators ------------------------------------------------------------------------
def with_nans(rng, shape):
    """Small integers (ties) with about a quarter of the elements NaN."""
    x = small_ints(rng, shape)
    x[rng.random(shape) < 0.25] = np.nan
    return x


def zeros_and_ones(rng, shape):
    return _arr(rng.integers(0, 2, shape))


def int32s(rng, shape):
    return _arr(rng.integers(-3, 4, shape), np.int32)


def bools(rng, shape):
    return _arr(rng.integers(0, 2, shape), bool)


# ---- parameter strategies -------------------------------------------------------------------
@st.composite
def one_dim(draw, keepdim=True, none=False, nonempty=False):
    """A shape and one int ``dim`` in range (or None, if ``none``), with ``keepdim`` (False when
    dim is None); ``nonempty``: the dimension reduced holds elements."""
    shape = list(draw(shapes()))
    nd = len(shape)
    dims = [st.integers(-max(nd, 1), max(nd, 1) - 1)] + ([st.none()] if none else [])
    dim = draw(st.one_of(*dims))
    if nonempty and nd:
        if dim is None:
            shape = [max(s, 1) for s in shape]
        else:
            shape[dim] = max(shape[dim], 1)
    p = {"shape": tuple(shape), "dim": dim}
    if keepdim:
        p["keepdim"] = draw(st.booleans()) if dim is not None else False
    return p


def _count(shape, dim):
    axes = range(len(shape)) if dim is None else ((dim,) if isinstance(dim, int) else dim)
    return math.prod(shape[a] for a in axes) if shape else 1


@st.composite
def variance_params(draw):
    """reduce_params with one of PyTorch's argument forms for var/std, and a correction below
    the count reduced (at or above it the result is NaN or Inf: ``test_std_of_one_element``)."""
    p = draw(reduce_params())
    count = _count(p["shape"], p["dim"])
    p["form"] = draw(st.sampled_from(["correction", "unbiased", "positional", "legacy_bool"]))
    p["c"] = draw(st.integers(0, max(min(count - 1, 2), 0)))
    if p["form"] != "correction":
        p["c"] = min(p["c"], 1)
    return p


def variance_forms(fn):
    """``fn`` (m.var, m.std, m.var_mean...) called in PyTorch's argument forms."""
    def call(m, x, dim, keepdim, form, c):
        f = getattr(m, fn)
        if form == "correction":
            return f(x, dim, keepdim=keepdim, correction=c)
        if form == "unbiased":
            return f(x, dim=dim, unbiased=bool(c), keepdim=keepdim)
        if form == "positional":
            return f(x, dim, bool(c), keepdim)
        return f(x, bool(c))                  # the legacy var(x, unbiased)
    return call


VARIANCE_EDGES = [dict(shape=(2, 3), dim=1, keepdim=True, form="correction", c=0),
                  dict(shape=(4, 3), dim=(0, 1), keepdim=False, form="positional", c=1),
                  dict(shape=(3,), dim=None, keepdim=False, form="legacy_bool", c=1),
                  dict(shape=(2, 3), dim=-1, keepdim=False, form="unbiased", c=0),
                  dict(shape=(3, 2), dim=0, keepdim=False, form="correction", c=2)]


def _prod(m, x, dim, keepdim):
    return m.prod(x) if dim is None else m.prod(x, dim, keepdim)


PROD_EDGES = [dict(shape=(), dim=None, keepdim=False), dict(shape=(), dim=0, keepdim=True),
              dict(shape=(0,), dim=None, keepdim=False), dict(shape=(2, 0, 3), dim=1,
                                                               keepdim=False),
              dict(shape=(2, 3), dim=1, keepdim=True), dict(shape=(3,), dim=-1, keepdim=False),
              dict(shape=(1, 4), dim=0, keepdim=False)]
SCAN_EDGES = [dict(shape=(), dim=0), dict(shape=(), dim=-1), dict(shape=(0,), dim=0),
              dict(shape=(2, 3), dim=-1), dict(shape=(2, 0, 3), dim=1), dict(shape=(3, 4), dim=0)]
ONE_DIM_EDGES = [dict(shape=(), dim=0, keepdim=False), dict(shape=(4,), dim=0, keepdim=False),
                 dict(shape=(2, 3), dim=1, keepdim=True), dict(shape=(3, 2), dim=-2,
                                                                keepdim=False),
                 dict(shape=(2, 0, 3), dim=2, keepdim=False)]
NONEMPTY_EDGES = [dict(shape=(), dim=None, keepdim=False), dict(shape=(4,), dim=None,
                                                                 keepdim=False),
                  dict(shape=(2, 3), dim=(0, 1), keepdim=True), dict(shape=(3, 2), dim=-2,
                                                                     keepdim=False),
                  dict(shape=(0, 3), dim=1, keepdim=False)]


def _cummax(m, x, dim):
    return m.cummax(x, dim)


def _cummin(m, x, dim):
    return x.cummin(dim)


PRIMITIVE_CASES = [
    case("prod", _prod, normal, one_dim(none=True), PROD_EDGES, op="prod"),
    # zeros: one, two or more in a row (the gradient is still exact, and so is its gradient)
    case("prod_zeros", _prod, small_ints, one_dim(none=True), PROD_EDGES, op="prod"),
    case("prod_int32", _prod, int32s, one_dim(none=True), PROD_EDGES, op="prod",
         differentiable=False),
    case("cumsum", lambda m, x, dim: m.cumsum(x, dim), normal, one_dim(keepdim=False),
         SCAN_EDGES, op="cumsum"),
    case("cumsum_bool", lambda m, x, dim: x.cumsum(dim), bools, one_dim(keepdim=False),
         SCAN_EDGES, op="cumsum", differentiable=False),
    case("cumprod", lambda m, x, dim: m.cumprod(x, dim), normal, one_dim(keepdim=False),
         SCAN_EDGES, op="cumprod"),
    # the second derivative at an exact zero misses the terms through the positions after the
    # first zero (PyTorch computes them in O(n^2)); the first derivative is exact
    case("cumprod_zeros", lambda m, x, dim: x.cumprod(dim), small_ints, one_dim(keepdim=False),
         SCAN_EDGES, op="cumprod", second_order=False),
    case("cummax", _cummax, distinct, one_dim(keepdim=False), SCAN_EDGES,
         op="cumextremum_indices"),
    case("cummin", _cummin, distinct, one_dim(keepdim=False), SCAN_EDGES,
         op="cumextremum_indices"),
    case("cummax_ties", _cummax, small_ints, one_dim(keepdim=False), SCAN_EDGES,
         op="cumextremum_indices", differentiable=False),
    case("cummin_nan", _cummin, with_nans, one_dim(keepdim=False), SCAN_EDGES,
         op="cumextremum_indices", differentiable=False),
    case("all", lambda m, x, dim, keepdim: m.all(x, dim, keepdim), small_ints, reduce_params(),
         REDUCE_EDGES + [dict(shape=(0,), dim=None, keepdim=False)], op="all",
         differentiable=False),
    case("any", lambda m, x, dim, keepdim: x.any(dim, keepdim), zeros_and_ones, reduce_params(),
         REDUCE_EDGES + [dict(shape=(2, 0), dim=1, keepdim=True)], op="any",
         differentiable=False),
    case("all_bool", lambda m, x, dim, keepdim: x.all(dim=dim, keepdim=keepdim), bools,
         reduce_params(), REDUCE_EDGES[3:], op="all", differentiable=False),
]


def _amax(m, x, dim, keepdim):
    return m.amax(x, () if dim is None else dim, keepdim)


def _amin(m, x, dim, keepdim):
    return x.amin(dim=() if dim is None else dim, keepdim=keepdim)


def _aminmax(m, x, dim, keepdim):
    return m.aminmax(x, dim=dim, keepdim=keepdim)


def _median(m, x, dim, keepdim):
    return m.median(x) if dim is None else m.median(x, dim, keepdim)


def _nanmedian(m, x, dim, keepdim):
    return x.nanmedian() if dim is None else x.nanmedian(dim, keepdim=keepdim)


COMPOSITE_CASES = [
    case("var_forms", variance_forms("var"), normal, variance_params(), VARIANCE_EDGES,
         rtol=1e-6),
    case("std_forms", variance_forms("std"), normal, variance_params(), VARIANCE_EDGES[:4],
         rtol=1e-6),
    case("var_mean", variance_forms("var_mean"), normal, variance_params(), VARIANCE_EDGES,
         rtol=1e-6),
    case("std_mean", variance_forms("std_mean"), normal, variance_params(), VARIANCE_EDGES[:4],
         rtol=1e-6),
    case("logsumexp_dims", lambda m, x, dim, keepdim: m.logsumexp(x, dim, keepdim), normal,
         reduce_params(min_dims=1).filter(lambda p: p["dim"] is not None),
         [dict(shape=(2, 3), dim=(0, 1), keepdim=True), dict(shape=(3, 0), dim=1,
                                                             keepdim=False),
          dict(shape=(2, 3), dim=-1, keepdim=False)]),
    case("logsumexp_infinities", lambda m, x, dim: x.logsumexp(dim),
         lambda rng, shape: _arr(rng.choice([-np.inf, np.inf, -1.0, 2.0], shape)),
         one_dim(keepdim=False),
         [dict(shape=(3, 2), dim=0), dict(shape=(2, 0), dim=1), dict(shape=(), dim=0)],
         differentiable=False),
    case("amax", _amax, distinct, reduce_params(nonempty=True), NONEMPTY_EDGES),
    case("amin", _amin, distinct, reduce_params(nonempty=True), NONEMPTY_EDGES),
    # ties: values here; gradients (shared evenly) in test_statistics.py
    case("amax_ties", _amax, small_ints, reduce_params(nonempty=True), NONEMPTY_EDGES,
         differentiable=False),
    case("aminmax", _aminmax, distinct, one_dim(none=True, nonempty=True),
         [dict(shape=(2, 3), dim=None, keepdim=False), dict(shape=(2, 3), dim=0, keepdim=True),
          dict(shape=(), dim=None, keepdim=False)]),
    case("count_nonzero", lambda m, x, dim: m.count_nonzero(x, dim), small_ints,
         reduce_params().map(lambda p: {"shape": p["shape"], "dim": p["dim"]}),
         [dict(shape=(2, 3), dim=(0, 1)), dict(shape=(0, 2), dim=1), dict(shape=(), dim=None)],
         differentiable=False),
    case("nansum", lambda m, x, dim, keepdim: m.nansum(x, dim, keepdim), with_nans,
         reduce_params(), REDUCE_EDGES),
    case("nanmean", lambda m, x, dim, keepdim: x.nanmean(dim, keepdim), with_nans,
         reduce_params(), REDUCE_EDGES),
    # median(): the lower median; ties share the gradient (test_statistics.py checks ties)
    case("median_all", _median, distinct, one_dim(none=True, nonempty=True),
         [dict(shape=(4,), dim=None, keepdim=False), dict(shape=(2, 3), dim=None,
                                                          keepdim=False),
          dict(shape=(), dim=None, keepdim=False), dict(shape=(0,), dim=None, keepdim=False)]),
    case("median_all_ties", _median, with_nans, one_dim(none=True, nonempty=True),
         [dict(shape=(4,), dim=None, keepdim=False), dict(shape=(3, 3), dim=None,
                                                          keepdim=False)],
         differentiable=False),
    case("nanmedian_all", _nanmedian, with_nans, one_dim(none=True, nonempty=True),
         [dict(shape=(4,), dim=None, keepdim=False), dict(shape=(3, 3), dim=None,
                                                          keepdim=False)],
         differentiable=False),
]
