"""Elementwise math beyond arithmetic: trigonometric and hyperbolic functions, logarithms and
exponentials in other bases, rounding, special functions (erf, lgamma, digamma...), functions of
two arguments (atan2, hypot, copysign, logaddexp, xlogy), division that rounds (fmod,
remainder, floor and trunc division), clamping, logit and nan_to_num.

Each op is one declaration: kernel (against ``xp``), shape/dtype rule, vjp in labkit ops. The
vjps are PyTorch's derivative formulas, edges included: atan2(0, 0) has gradient 0, clamp gives
the gradient to its input at a tie with a bound, rounding ops give zeros.
"""
import functools
import math

import numpy as np

from ...errors import DTypeError, NumericsError, describe
from ..batching import ELEMENTWISE
from ..op import needs_grad, op
from ..shape_rules import (broadcast_shapes, elementwise, refuse_complex, same_as_first,
                           to_common, ufunc_dtype)
from ..tensor import Tensor
from .elementwise import abs as absolute
from .elementwise import (NO_ORDER, add, cast, div, eq, exp, float_input, ge, gt, holomorphic,
                          le, logical_and, logical_or, lt, mul, neg, sqrt, sub, ufunc_op, where,
                          zero_vjp)
from .index import zeros_like

LN2, LN10 = math.log(2.0), math.log(10.0)


def _grad(fn):
    """vjp of a unary op from its derivative: ``fn(g, out, x) -> cotangent``; the functions
    given so are analytic, so on complex inputs the rule is ``holomorphic``."""
    return holomorphic(lambda g, out, x: (fn(g, out, x),))


# ---- trigonometric and hyperbolic ------------------------------------------------------------
sin = ufunc_op("sin", np.sin, vjp=_grad(lambda g, out, x: mul(g, cos(x))))
cos = ufunc_op("cos", np.cos, vjp=_grad(lambda g, out, x: mul(g, neg(sin(x)))))
tan = ufunc_op("tan", np.tan, vjp=_grad(lambda g, out, x: mul(g, add(mul(out, out), 1))),
               amp="float32_gpu")
asin = ufunc_op("asin", np.arcsin, vjp=_grad(lambda g, out, x: mul(g, rsqrt(sub(1, mul(x, x))))),
                amp="float32_gpu")
acos = ufunc_op("acos", np.arccos,
                vjp=_grad(lambda g, out, x: mul(g, neg(rsqrt(sub(1, mul(x, x)))))),
                amp="float32_gpu")
atan = ufunc_op("atan", np.arctan, vjp=_grad(lambda g, out, x: div(g, add(mul(x, x), 1))))
sinh = ufunc_op("sinh", np.sinh, vjp=_grad(lambda g, out, x: mul(g, cosh(x))), amp="float32_gpu")
cosh = ufunc_op("cosh", np.cosh, vjp=_grad(lambda g, out, x: mul(g, sinh(x))), amp="float32_gpu")
asinh = ufunc_op("asinh", np.arcsinh,
                 vjp=_grad(lambda g, out, x: mul(g, rsqrt(add(mul(x, x), 1)))))
acosh = ufunc_op("acosh", np.arccosh,
                 vjp=_grad(lambda g, out, x: mul(g, rsqrt(sub(mul(x, x), 1)))))
atanh = ufunc_op("atanh", np.arctanh, vjp=_grad(lambda g, out, x: div(g, sub(1, mul(x, x)))))


def _atan2_vjp(g, out, a, b):
    # 1 / (a² + b²), with 0 where it overflows (at the origin the gradient is 0, as PyTorch's)
    recip = reciprocal(add(mul(a, a), mul(b, b)))
    recip = where(isinf(recip), 0, recip)
    return (mul(mul(g, b), recip) if needs_grad(a) else None,
            mul(mul(g, neg(a)), recip) if needs_grad(b) else None)


atan2 = ufunc_op("atan2", np.arctan2, vjp=_atan2_vjp)


# ---- exponentials and logarithms -----------------------------------------------------------
log1p = ufunc_op("log1p", np.log1p, vjp=_grad(lambda g, out, x: div(g, add(x, 1))),
                 amp="float32_gpu")
log2 = ufunc_op("log2", np.log2, vjp=_grad(lambda g, out, x: div(g, mul(x, LN2))),
                amp="float32_gpu")
log10 = ufunc_op("log10", np.log10, vjp=_grad(lambda g, out, x: div(g, mul(x, LN10))),
                 amp="float32_gpu")
exp2 = ufunc_op("exp2", np.exp2, vjp=_grad(lambda g, out, x: mul(g, mul(out, LN2))))
expm1 = ufunc_op("expm1", np.expm1, vjp=_grad(lambda g, out, x: mul(g, add(out, 1))),
                 amp="float32_gpu")


def _logaddexp_vjp(power):
    """logaddexp's vjp (``power=exp``) or logaddexp2's (``power=exp2``): each input's share of
    the sum, ``1 / (1 + power(other - self))``."""
    def vjp(g, out, a, b):
        return (div(g, add(power(sub(b, a)), 1)) if needs_grad(a) else None,
                div(g, add(power(sub(a, b)), 1)) if needs_grad(b) else None)
    return vjp


logaddexp = ufunc_op("logaddexp", np.logaddexp, vjp=_logaddexp_vjp(lambda d: exp(d)))
logaddexp2 = ufunc_op("logaddexp2", np.logaddexp2, vjp=_logaddexp_vjp(lambda d: exp2(d)))


def reciprocal(x):
    """``1 / x`` (a float result for integer inputs, as PyTorch's)."""
    return div(1, x)


def rsqrt(x):
    """``1 / sqrt(x)``."""
    return div(1, sqrt(x))


def square(x):
    """``x * x``."""
    return mul(x, x)


# ---- two-argument functions ------------------------------------------------------------------
def _hypot_vjp(g, out, a, b):
    return (div(mul(g, a), out) if needs_grad(a) else None,
            div(mul(g, b), out) if needs_grad(b) else None)


hypot = ufunc_op("hypot", np.hypot, vjp=_hypot_vjp)


def _copysign_vjp(g, out, a, b):
    # d/da is out / a (±1), 0 at a = 0; the sign source gets zeros, as in PyTorch
    return (mul(g, where(eq(a, 0), 0, div(out, a))) if needs_grad(a) else None,
            zeros_like(b) if needs_grad(b) else None)


copysign = ufunc_op("copysign", np.copysign, vjp=_copysign_vjp)


# ---- predicates (no gradient) ----------------------------------------------------------------
isnan = ufunc_op("isnan", np.isnan)
isinf = ufunc_op("isinf", np.isinf)
isfinite = ufunc_op("isfinite", np.isfinite)


def isposinf(x):
    """Where ``x`` is +inf."""
    return eq(x, math.inf)


def isneginf(x):
    """Where ``x`` is -inf."""
    return eq(x, -math.inf)


# ---- rounding (zero gradient) ------------------------------------------------------------------
floor = ufunc_op("floor", np.floor, vjp=zero_vjp)
ceil = ufunc_op("ceil", np.ceil, vjp=zero_vjp)
trunc = ufunc_op("trunc", np.trunc, vjp=zero_vjp)


def _round_rule(x, decimals=0):
    if x.dtype.name == "bool_" or (decimals and not x.dtype.is_floating):
        raise DTypeError(f"round{'(decimals=%d)' % decimals if decimals else ''} is not defined "
                         f"for {describe(x)}; convert it first, e.g. x.float()")
    return same_as_first(x)


@op("round", shape=_round_rule, vjp=zero_vjp, batch=ELEMENTWISE,
    into=lambda xp, decimals=0: functools.partial(xp.round, decimals=decimals))
def round(xp, x, decimals=0):
    """Round half to even, to ``decimals`` decimal places (negative: to tens, hundreds...)."""
    if x.dtype.kind == "b" or (decimals and x.dtype.kind != "f"):
        raise TypeError("round: not for this dtype")   # the rule explains it
    return xp.round(x, decimals)


def frac(x):
    """The fractional part ``x - trunc(x)`` (its sign is x's); gradient 1."""
    return sub(x, trunc(x))


# ---- division that rounds ----------------------------------------------------------------------
def _is_integral(v):
    kind = getattr(getattr(v, "dtype", None), "kind", None)
    return kind in ("i", "u", "b") if kind else isinstance(v, int)


def _integer_division(name, fn):
    """``fn(xp, a, b, out=None)`` raising NumericsError where integers are divided by zero
    (PyTorch's CPU kernels raise; NumPy would give 0 with a warning)."""
    def kernel(xp, a, b, out=None):
        if _is_integral(a) and _is_integral(b) and bool((xp.asarray(b) == 0).any()):
            raise NumericsError(
                f"{name}: integer division by zero (divisor {describe(b)}). Integers have no "
                f"inf or NaN to give: divide floats instead (e.g. a.float()), or replace the "
                f"zeros first, e.g. lk.where(b == 0, 1, b).")
        a, b = to_common((a, b))
        return fn(xp, a, b, out=out)
    kernel.__name__ = name
    return kernel


def _division_op(name, fn, ufunc, vjp):
    """An op dividing with rounding (``fn(xp, a, b, out=None)``), NumPy ``ufunc``'s dtype rule."""
    kernel = _integer_division(name, fn)
    return op(name, shape=elementwise(ufunc, name), vjp=vjp, batch=ELEMENTWISE,
              into=lambda xp: functools.partial(kernel, xp))(kernel)


def _trunc_divide(xp, a, b, out=None):
    """``a / b`` rounded toward zero: ``trunc(a / b)`` for floats (as PyTorch computes it); for
    integers exactly, from the floor quotient."""
    if _is_integral(a) and _is_integral(b):
        up = xp.not_equal(xp.remainder(a, b), 0) & ((xp.asarray(a) < 0) != (xp.asarray(b) < 0))
        return xp.add(xp.floor_divide(a, b, out=out), up, out=out)
    return xp.trunc(xp.true_divide(a, b, out=out), out=out)


floor_divide = _division_op("floor_divide", lambda xp, a, b, out=None:
                            xp.floor_divide(a, b, out=out), np.floor_divide, zero_vjp)
trunc_divide = _division_op("trunc_divide", _trunc_divide, np.floor_divide, zero_vjp)


def _fmod_vjp(quotient):
    """fmod's (``quotient = trunc_divide``) or remainder's (``floor_divide``) vjp:
    ``a - b * q`` with the rounded quotient ``q`` held constant."""
    def vjp(g, out, a, b):
        return (g if needs_grad(a) else None,
                neg(mul(g, quotient(a, b))) if needs_grad(b) else None)
    return vjp


fmod = _division_op("fmod", lambda xp, a, b, out=None: xp.fmod(a, b, out=out), np.fmod,
                    _fmod_vjp(lambda a, b: trunc_divide(a, b)))
remainder = _division_op("remainder", lambda xp, a, b, out=None: xp.remainder(a, b, out=out),
                         np.remainder, _fmod_vjp(lambda a, b: floor_divide(a, b)))


# ---- clamping ------------------------------------------------------------------------------------
def _clamp_one_vjp(keeps, passes):
    """clamp_min's vjp (``keeps = ge``, ``passes = lt``) or clamp_max's (``le``, ``gt``): the
    input gets the gradient where it is kept, ties included; the bound where it is taken."""
    def vjp(g, out, x, bound):
        return (where(keeps(x, bound), g, 0) if needs_grad(x) else None,
                where(passes(x, bound), g, 0) if needs_grad(bound) else None)
    return vjp


clamp_min = ufunc_op("clamp_min", np.maximum,
                     vjp=_clamp_one_vjp(lambda x, b: ge(x, b), lambda x, b: lt(x, b)),
                     no_complex=NO_ORDER)
clamp_max = ufunc_op("clamp_max", np.minimum,
                     vjp=_clamp_one_vjp(lambda x, b: le(x, b), lambda x, b: gt(x, b)),
                     no_complex=NO_ORDER)


class _Typed:
    """Stands for an intermediate result of a given dtype in a dtype rule."""
    shape = ()

    def __init__(self, dtype):
        self.dtype = dtype


def _ternary_rule(name, ufunc):
    """The rule of an elementwise op of three inputs whose result type is ``ufunc``'s, applied
    to the first two and then to that and the third."""
    def rule(x, y, z):
        return (broadcast_shapes(name, x, y, z),
                ufunc_dtype(name, ufunc, _Typed(ufunc_dtype(name, ufunc, x, y)), z))
    return rule


def _clamp_vjp(g, out, x, lo, hi):
    # PyTorch's: a bound above the other gives the result (and its gradient) to ``hi``
    return (where(logical_and(ge(x, lo), le(x, hi)), g, 0) if needs_grad(x) else None,
            where(logical_and(lt(x, lo), lt(lo, hi)), g, 0) if needs_grad(lo) else None,
            where(logical_or(gt(x, hi), lt(hi, lo)), g, 0) if needs_grad(hi) else None)


def _clamp_into(xp):
    def clamp_into(x, lo, hi, out=None):
        return xp.minimum(xp.maximum(x, lo, out=out), hi, out=out)
    return clamp_into


_PLAIN = (int, float)


def _clamp_rule(x, lo, hi):
    for v in (x, lo, hi):
        refuse_complex("clamp", v)
    return _ternary_rule("clamp", np.maximum)(x, lo, hi)


@op("clamp", shape=_clamp_rule, vjp=_clamp_vjp, into=_clamp_into, batch=ELEMENTWISE)
def clamp(xp, x, lo, hi):
    """``x`` limited to ``[lo, hi]`` (``hi`` wherever ``lo > hi``); NaN stays NaN."""
    if not (x.dtype.kind == "f" and type(lo) in _PLAIN and type(hi) in _PLAIN):
        x, lo, hi = to_common((x, lo, hi))     # (a float array and two numbers: x's dtype)
    if x.dtype.kind == "c":
        raise TypeError("complex input")         # the rule explains it
    return xp.minimum(xp.maximum(x, lo), hi)


# ---- logit, nan_to_num ---------------------------------------------------------------------------
def _logit_vjp(g, out, x, eps=None):
    d = div(g, mul(x, sub(1, x)))
    if eps is None or eps < 0:          # outside [0, 1] logit is NaN, and so is its gradient
        return (where(logical_or(lt(x, 0), gt(x, 1)), math.nan, d),)
    return (where(logical_or(lt(x, eps), gt(x, 1 - eps)), 0, d),)


@op("logit", shape=lambda x, eps=None: (tuple(x.shape), ufunc_dtype("logit", np.log, x)),
    vjp=_logit_vjp, batch=ELEMENTWISE)
def logit(xp, x, eps=None):
    """``log(z / (1 - z))`` where ``z`` is ``x`` clamped to ``[eps, 1 - eps]`` (no clamping when
    ``eps`` is None)."""
    z = float_input(xp, x)
    if eps is not None and eps >= 0:
        z = xp.clip(z, eps, 1 - eps)
    return xp.log(z / (1 - z))


@op("nan_to_num", shape=same_as_first, batch=ELEMENTWISE,
    vjp=lambda g, out, x, nan=0.0, posinf=None, neginf=None: (mul(g, isfinite(x)),))
def nan_to_num(xp, x, nan=0.0, posinf=None, neginf=None):
    """``x`` with NaN, +inf and -inf replaced (the infinities by the dtype's largest finite
    values unless given)."""
    return xp.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


# ---- special functions ---------------------------------------------------------------------------
def special(xp):
    """The special-function module for ``xp``'s arrays: ``scipy.special`` (NumPy) or
    ``cupyx.scipy.special`` (CuPy), imported on first use."""
    if xp is np:
        import scipy.special as module
    else:                                   # pragma: no cover (GPU)
        import cupyx.scipy.special as module
    return module


def _float_like(nin):
    """The ufunc whose dtype rule a float function of ``nin`` inputs follows (sin, atan2)."""
    return np.sin if nin == 1 else np.arctan2


def special_op(name, fname, vjp, nin=1, fix=None):
    """An op computing ``special(xp).<fname>``, with the dtype rule of NumPy's float math
    (sin, atan2: float16 stays float16, integers become floats) rather than the special
    function's own loops. ``fix(xp, out, *inputs)``: PyTorch's value where SciPy's differs."""
    like = _float_like(nin)

    def kernel(xp, *inputs):
        out = getattr(special(xp), fname)(*inputs)
        want = ufunc_dtype(name, like, *inputs).np
        if out.dtype != want:
            out = out.astype(want)
        return out if fix is None else fix(xp, out, *inputs)
    kernel.__name__ = name
    return op(name, shape=elementwise(like, name), vjp=vjp, batch=ELEMENTWISE)(kernel)


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
erf = special_op("erf", "erf", _grad(lambda g, out, x: mul(g, mul(_TWO_OVER_SQRT_PI,
                                                                  exp(neg(mul(x, x)))))))
erfc = special_op("erfc", "erfc", _grad(lambda g, out, x: mul(g, mul(-_TWO_OVER_SQRT_PI,
                                                                     exp(neg(mul(x, x)))))))
erfinv = special_op("erfinv", "erfinv", _grad(lambda g, out, x: mul(g, mul(
    0.5 * math.sqrt(math.pi), exp(mul(out, out))))))
# lgamma(-inf) is +inf (SciPy's gammaln gives -inf)
lgamma = special_op("lgamma", "gammaln", _grad(lambda g, out, x: mul(g, digamma(x))),
                    fix=lambda xp, out, x: xp.where(x == -math.inf, math.inf, out))
digamma = special_op("digamma", "psi", _grad(lambda g, out, x: mul(g, polygamma(x, n=1))))


def _polygamma_kernel(xp, x, n):
    """The ``n``-th derivative of digamma: ``(-1)^(n+1) n! zeta(n + 1, x)`` for ``n >= 1``."""
    s = special(xp)
    out = s.psi(x) if n == 0 else (-1) ** (n + 1) * math.factorial(n) * s.zeta(n + 1, x)
    want = ufunc_dtype("polygamma", np.sin, x).np
    return out if out.dtype == want else out.astype(want)


def _polygamma_rule(x, n):
    if not isinstance(n, int) or n < 0:
        raise DTypeError(f"polygamma: n must be a non-negative int, got n={n!r} for "
                         f"{describe(x)}")
    return elementwise(np.sin, "polygamma")(x)


polygamma = op("polygamma", shape=_polygamma_rule, batch=ELEMENTWISE,
               vjp=lambda g, out, x, n: (mul(g, polygamma(x, n=n + 1)),))(_polygamma_kernel)


def _xlogy_vjp(g, out, x, y):
    gx = None
    if needs_grad(x):
        # PyTorch's: no gradient where x = 0 and y <= 0 (log y is -inf or NaN there)
        gx = xlogy(g, y)
        if isinstance(y, Tensor):
            gx = where(logical_and(eq(x, 0), le(y, 0)), 0, gx)
        elif y <= 0:
            gx = where(eq(x, 0), 0, gx)
    return gx, (div(mul(g, x), y) if needs_grad(y) else None)


xlogy = special_op("xlogy", "xlogy", _xlogy_vjp, nin=2)


def _lerp_vjp(g, out, start, end, weight):
    return (mul(g, sub(1, weight) if isinstance(weight, Tensor) else 1 - weight)
            if needs_grad(start) else None,
            mul(g, weight) if needs_grad(end) else None,
            mul(g, sub(end, start)) if needs_grad(weight) else None)


@op("lerp", shape=_ternary_rule("lerp", np.add), vjp=holomorphic(_lerp_vjp),
    batch=ELEMENTWISE)
def lerp(xp, start, end, weight):
    """``start + weight * (end - start)``, computed from ``end`` where ``weight >= 0.5`` (as
    PyTorch does: exact at ``weight = 1``, and infinite where an infinite end point is)."""
    start, end, weight = to_common((start, end, weight))
    d = xp.subtract(end, start)
    return xp.where(xp.less(weight, 0.5), start + weight * d, end - d * (1 - weight))


# ---- closeness ----------------------------------------------------------------------------------
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``|a - b| <= atol + |rtol * b|`` elementwise, or equal (infinities), or both NaN if
    ``equal_nan`` (PyTorch's definition)."""
    close = eq(a, b)
    if equal_nan:
        close = logical_or(close, logical_and(isnan(a), isnan(b)))
    if rtol == 0 and atol == 0:
        return close
    a, b = _bool_as_float(a), _bool_as_float(b)
    allowed = add(atol, absolute(mul(rtol, b)))
    actual = absolute(sub(a, b))
    return logical_or(close, logical_and(isfinite(actual), le(actual, allowed)))


def _bool_as_float(x):
    """A bool tensor as float32 (PyTorch's isclose measures the error of bools as floats)."""
    return cast(x, dtype="float32") if isinstance(x, Tensor) and x.dtype.name == "bool_" else x
