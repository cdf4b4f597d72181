"""Elementwise math in PyTorch's signatures: ``lk.sin(x)`` and ``x.sin()``, ``lk.clamp(x,
min=0)``, ``lk.div(a, b, rounding_mode="floor")``, ``lk.round(x, decimals=2)``, bitwise and
logical ops, closeness tests, and the aliases PyTorch users type (``arcsin``, ``absolute``,
``multiply``, ``subtract``, ``divide``...).

>>> import labkit as lk
>>> x = lk.tensor([-1.5, 0.25, 2.0])
>>> x.clamp(min=0).tolist(), lk.floor_divide(x, 1).tolist(), (x % 1).tolist()
([0.0, 0.25, 2.0], [-2.0, 0.0, 2.0], [0.5, 0.25, 0.0])
"""
from ..ops import bitwise as B
from ..ops import elementwise as E
from ..ops import elementwise_math as M
from ..ops import reduce as R
from ..tensor import Tensor
from .registry import public, tensor_method


# ---- functions of one tensor -----------------------------------------------------------------
def _unary(name, fn, summary, example, result, aliases=()):
    """Export ``lk.<name>(input)`` and ``Tensor.<name>()`` (and ``aliases``) calling ``fn``; the
    docstring runs ``example`` (the input's values, in float64), which gives ``result`` (floats
    rounded to 4 decimals)."""
    def function(input):
        return fn(input)
    function.__name__ = function.__qualname__ = name
    also = f" Also ``{'``, ``'.join(aliases)}``." if aliases else ""
    rounded = "" if "True" in str(result) else ".round(decimals=4)"
    function.__doc__ = (f"{summary}{also}\n\n>>> import labkit as lk\n>>> lk.{name}(lk.tensor("
                        f"{example}, dtype=lk.float64)){rounded}.tolist()\n{result}\n")
    globals()[name] = public(name, aliases=aliases)(function)


for _row in [
    ("sin", M.sin, "Sine, elementwise.", [0.0, 0.5], [0.0, 0.4794]),
    ("cos", M.cos, "Cosine, elementwise.", [0.0, 0.5], [1.0, 0.8776]),
    ("tan", M.tan, "Tangent, elementwise.", [0.0, 0.5], [0.0, 0.5463]),
    ("asin", M.asin, "Arcsine, elementwise (NaN outside [-1, 1]).", [0.0, 1.0],
     [0.0, 1.5708], ("arcsin",)),
    ("acos", M.acos, "Arccosine, elementwise (NaN outside [-1, 1]).", [1.0, 0.0],
     [0.0, 1.5708], ("arccos",)),
    ("atan", M.atan, "Arctangent, elementwise.", [0.0, 1.0], [0.0, 0.7854],
     ("arctan",)),
    ("sinh", M.sinh, "Hyperbolic sine, elementwise.", [0.0, 1.0], [0.0, 1.1752]),
    ("cosh", M.cosh, "Hyperbolic cosine, elementwise.", [0.0, 1.0], [1.0, 1.5431]),
    ("asinh", M.asinh, "Inverse hyperbolic sine, elementwise.", [0.0, 1.0],
     [0.0, 0.8814], ("arcsinh",)),
    ("acosh", M.acosh, "Inverse hyperbolic cosine, elementwise (NaN below 1).", [1.0, 2.0],
     [0.0, 1.317], ("arccosh",)),
    ("atanh", M.atanh, "Inverse hyperbolic tangent, elementwise (NaN outside [-1, 1]).",
     [0.0, 0.5], [0.0, 0.5493], ("arctanh",)),
    ("floor", M.floor, "Round down, elementwise; its gradient is zero.", [-1.5, 1.5],
     [-2.0, 1.0]),
    ("ceil", M.ceil, "Round up, elementwise; its gradient is zero.", [-1.5, 1.5], [-1.0, 2.0]),
    ("trunc", M.trunc, "Round toward zero, elementwise; its gradient is zero.", [-1.5, 1.5],
     [-1.0, 1.0], ("fix",)),
    ("frac", M.frac, "Fractional part ``x - trunc(x)``, elementwise.", [-1.5, 2.25],
     [-0.5, 0.25]),
    ("reciprocal", M.reciprocal, "``1 / x``, elementwise (floats for integer inputs).",
     [0.0, 4.0], "[inf, 0.25]"),
    ("rsqrt", M.rsqrt, "``1 / sqrt(x)``, elementwise.", [0.0, 4.0], "[inf, 0.5]"),
    ("square", M.square, "``x * x``, elementwise.", [-3.0, 0.5], [9.0, 0.25]),
    ("log1p", M.log1p, "``log(1 + x)``, exact for small ``x``.", [0.0, 1.0],
     [0.0, 0.6931]),
    ("log2", M.log2, "Base-2 logarithm, elementwise.", [0.5, 8.0], [-1.0, 3.0]),
    ("log10", M.log10, "Base-10 logarithm, elementwise.", [0.001, 100.0], [-3.0, 2.0]),
    ("exp2", M.exp2, "``2 ** x``, elementwise.", [-1.0, 10.0], [0.5, 1024.0]),
    ("expm1", M.expm1, "``exp(x) - 1``, exact for small ``x``.", [0.0, 1.0],
     [0.0, 1.7183]),
    ("erf", M.erf, "The error function, elementwise.", [0.0, 1.0], [0.0, 0.8427]),
    ("erfc", M.erfc, "The complementary error function ``1 - erf(x)``.", [0.0, 1.0],
     [1.0, 0.1573]),
    ("erfinv", M.erfinv, "The inverse error function (±inf at ±1, NaN beyond).", [0.0, 1.0],
     "[0.0, inf]"),
    ("lgamma", M.lgamma, "``log |Gamma(x)|``, elementwise (inf at 0 and the negative integers).",
     [0.5, 5.0], [0.5724, 3.1781]),
    ("digamma", M.digamma, "The derivative of lgamma (-inf at 0, NaN at negative integers).",
     [1.0, 0.0], "[-0.5772, -inf]"),
    ("isnan", M.isnan, "Where ``x`` is NaN.", "[float('nan'), 1.0]", [True, False]),
    ("isinf", M.isinf, "Where ``x`` is +inf or -inf.", "[float('inf'), float('nan')]",
     [True, False]),
    ("isposinf", M.isposinf, "Where ``x`` is +inf.", "[float('inf'), -float('inf')]",
     [True, False]),
    ("isneginf", M.isneginf, "Where ``x`` is -inf.", "[float('inf'), -float('inf')]",
     [False, True]),
    ("isfinite", M.isfinite, "Where ``x`` is neither infinite nor NaN.", "[float('inf'), 1.0]",
     [False, True]),
    ("logical_not", E.logical_not, "Where ``x`` is zero (False), as bools.", [0.0, 2.0],
     [True, False]),
    ("sgn", E.sgn, "The sign of real values (-1, 0 or 1), ``x / |x|`` of complex ones.",
     [-2.0, 0.0], [-1.0, 0.0]),
    ("absolute", E.abs, "Absolute value, as ``abs``.", [-2.0, 0.0], [2.0, 0.0]),
    ("negative", E.neg, "``-x``, as ``neg``.", [-2.0, 0.0], [2.0, -0.0]),
]:
    _unary(*_row)


@public()
def bitwise_not(input):
    """Bitwise NOT of an integer tensor (logical NOT of a bool one); also ``~x``.

    >>> import labkit as lk
    >>> lk.bitwise_not(lk.tensor([0, 5])).tolist(), (~lk.tensor([True, False])).tolist()
    ([-1, -6], [False, True])
    """
    return B.bitwise_not(input)


@public()
def round(input, *, decimals=0):
    """Round half to even, to ``decimals`` decimal places (negative: tens, hundreds...); its
    gradient is zero.

    >>> import labkit as lk
    >>> x = lk.tensor([0.5, 1.5, 2.345, 1234.5], dtype=lk.float64)
    >>> lk.round(x).tolist(), x.round(decimals=2).tolist(), x.round(decimals=-2).tolist()
    ([0.0, 2.0, 2.0, 1234.0], [0.5, 1.5, 2.35, 1234.5], [0.0, 0.0, 0.0, 1200.0])
    """
    return M.round(input, decimals=int(decimals))


@public()
def logit(input, eps=None):
    """``log(p / (1 - p))``; with ``eps``, ``p`` is first clamped to ``[eps, 1 - eps]`` (and the
    gradient is zero outside that range).

    >>> import labkit as lk
    >>> p = lk.tensor([0.0, 0.5, 0.75], dtype=lk.float64)
    >>> lk.logit(p).tolist(), p.logit(eps=0.25).tolist()
    ([-inf, 0.0, 1.0986122886681098], [-1.0986122886681098, 0.0, 1.0986122886681098])
    """
    return M.logit(input, eps=None if eps is None else float(eps))


@public()
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (the infinities by
    the dtype's largest finite values unless given).

    >>> import labkit as lk
    >>> x = lk.tensor([float("nan"), float("inf"), -float("inf"), 1.0])
    >>> x.nan_to_num(posinf=9.0).tolist()
    [0.0, 9.0, -3.4028234663852886e+38, 1.0]
    """
    return M.nan_to_num(input, nan=float(nan), posinf=None if posinf is None else float(posinf),
                        neginf=None if neginf is None else float(neginf))


@public(method=False)
def polygamma(n, input):
    """The ``n``-th derivative of digamma (``polygamma(0, x)`` is ``digamma(x)``); the method
    is ``x.polygamma(n)``.

    >>> import labkit as lk
    >>> lk.polygamma(1, lk.tensor([1.0], dtype=lk.float64)).round(decimals=6).tolist()  # pi²/6
    [1.644934]
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise TypeError(f"polygamma(n, input): n must be a non-negative int, got {n!r}")
    return M.digamma(input) if n == 0 else M.polygamma(input, n=n)


@tensor_method("polygamma")
def _polygamma_method(self, n):
    return polygamma(n, self)


# ---- arithmetic in PyTorch's forms ------------------------------------------------------------
def _scaled(other, alpha):
    """``alpha * other``; a Python number stays one (a weak type in promotion)."""
    if alpha == 1:
        return other
    return E.mul(other, alpha) if isinstance(other, Tensor) else other * alpha


@public()
def add(input, other, *, alpha=1):
    """``input + alpha * other``.

    >>> import labkit as lk
    >>> lk.add(lk.tensor([1.0, 2.0]), lk.tensor([1.0, 1.0]), alpha=10).tolist()
    [11.0, 12.0]
    """
    return E.add(input, _scaled(other, alpha))


@public(aliases=("subtract",))
def sub(input, other, *, alpha=1):
    """``input - alpha * other``; also ``subtract``.

    >>> import labkit as lk
    >>> lk.subtract(lk.tensor([1.0, 2.0]), lk.tensor([1.0, 1.0]), alpha=0.5).tolist()
    [0.5, 1.5]
    """
    return E.sub(input, _scaled(other, alpha))


@public()
def multiply(input, other):
    """``input * other`` (PyTorch's alias of ``mul``).

    >>> import labkit as lk
    >>> lk.multiply(lk.tensor([1.5, 2.0]), 2).tolist()
    [3.0, 4.0]
    """
    return E.mul(input, other)


_ROUNDING = {None: E.div, "trunc": M.trunc_divide, "floor": M.floor_divide}


@public(aliases=("divide",))
def div(input, other, *, rounding_mode=None):
    """``input / other``: true division (``rounding_mode=None``, a float result for integer
    inputs), or rounded toward zero (``"trunc"``) or down (``"floor"``, as ``//``); also
    ``divide``. Rounded quotients have zero gradient; integers divided by zero raise.

    >>> import labkit as lk
    >>> a = lk.tensor([7, -7])
    >>> lk.div(a, 2).tolist(), lk.div(a, 2, rounding_mode="trunc").tolist()
    ([3.5, -3.5], [3, -3])
    >>> a.div(2, rounding_mode="floor").tolist()
    [3, -4]
    """
    try:
        fn = _ROUNDING[rounding_mode]
    except (KeyError, TypeError):
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got "
                         f"{rounding_mode!r}") from None
    return fn(input, other)


@public()
def true_divide(dividend, divisor):
    """``dividend / divisor``, as ``div`` with ``rounding_mode=None``.

    >>> import labkit as lk
    >>> lk.true_divide(lk.tensor([1, 3]), 2).tolist()
    [0.5, 1.5]
    """
    return E.div(dividend, divisor)


@public()
def floor_divide(input, other):
    """``input / other`` rounded down, as ``//`` (PyTorch's floor division; zero gradient).

    >>> import labkit as lk
    >>> lk.floor_divide(lk.tensor([7, -7]), 2).tolist(), (7.5 // lk.tensor([2.0])).tolist()
    ([3, -4], [3.0])
    """
    return M.floor_divide(input, other)


@public()
def fmod(input, other):
    """The remainder of ``input / other`` rounded toward zero: it has ``input``'s sign (C's
    fmod).

    >>> import labkit as lk
    >>> lk.fmod(lk.tensor([-3.0, 3.0]), 2).tolist()
    [-1.0, 1.0]
    """
    return M.fmod(input, other)


@public()
def remainder(input, other):
    """The remainder of ``input / other`` rounded down: it has ``other``'s sign (Python's
    ``%``, which calls it).

    >>> import labkit as lk
    >>> lk.remainder(lk.tensor([-3.0, 3.0]), 2).tolist(), (lk.tensor([3, -3]) % -2).tolist()
    ([1.0, 1.0], [-1, -1])
    """
    return M.remainder(input, other)


# ---- functions of two tensors -------------------------------------------------------------------
@public(aliases=("arctan2",))
def atan2(input, other):
    """The angle of the point ``(other, input)``, in ``[-pi, pi]``; also ``arctan2``.

    >>> import labkit as lk
    >>> y, x = lk.tensor([1.0, 0.0], dtype=lk.float64), lk.tensor([0.0, -1.0], dtype=lk.float64)
    >>> lk.atan2(y, x).tolist()
    [1.5707963267948966, 3.141592653589793]
    """
    return M.atan2(input, other)


@public()
def hypot(input, other):
    """``sqrt(input ** 2 + other ** 2)`` without overflow.

    >>> import labkit as lk
    >>> a, b = lk.tensor([3.0, 3e300], dtype=lk.float64), lk.tensor([4.0, 4e300], dtype=lk.float64)
    >>> lk.hypot(a, b).tolist()
    [5.0, 5e+300]
    """
    return M.hypot(input, other)


@public()
def copysign(input, other):
    """``|input|`` with the sign of ``other`` (-0.0 counts as negative).

    >>> import labkit as lk
    >>> lk.copysign(lk.tensor([1.0, 2.0]), lk.tensor([-0.0, 3.0])).tolist()
    [-1.0, 2.0]
    """
    return M.copysign(input, other)


@public()
def logaddexp(input, other):
    """``log(exp(input) + exp(other))``, computed without overflow.

    >>> import labkit as lk
    >>> lk.logaddexp(lk.tensor([1000.0, 0.0]), lk.tensor([1000.0, 0.0])).tolist()
    [1000.6931762695312, 0.6931471824645996]
    """
    return M.logaddexp(input, other)


@public()
def logaddexp2(input, other):
    """``log2(2 ** input + 2 ** other)``, computed without overflow.

    >>> import labkit as lk
    >>> lk.logaddexp2(lk.tensor([3.0]), lk.tensor([3.0])).tolist()
    [4.0]
    """
    return M.logaddexp2(input, other)


@public()
def xlogy(input, other):
    """``input * log(other)``, 0 where ``input`` is 0 (unless ``other`` is NaN).

    >>> import labkit as lk
    >>> lk.xlogy(lk.tensor([0.0, 2.0]), lk.tensor([0.0, 1.0])).tolist()
    [0.0, 0.0]
    """
    return M.xlogy(input, other)


@public()
def lerp(input, end, weight):
    """``input + weight * (end - input)``; ``weight`` is a number or a tensor.

    >>> import labkit as lk
    >>> lk.lerp(lk.tensor([0.0, 1.0]), lk.tensor([10.0, 3.0]), 0.5).tolist()
    [5.0, 2.0]
    """
    return M.lerp(input, end, weight)


# ---- clamping ----------------------------------------------------------------------------------
@public(aliases=("clip",))
def clamp(input, min=None, max=None):
    """``input`` limited to ``[min, max]``; either bound may be None (not both), a number or a
    tensor. Where ``min > max`` the result is ``max``. The gradient goes to ``input`` inside
    the range, bounds included, and to a bound where it is taken. Also ``clip``.

    >>> import labkit as lk
    >>> x = lk.tensor([-2.0, 0.5, 3.0])
    >>> x.clamp(min=0).tolist(), lk.clamp(x, -1, 1).tolist(), x.clip(max=lk.tensor(0.0)).tolist()
    ([0.0, 0.5, 3.0], [-1.0, 0.5, 1.0], [-2.0, 0.0, 0.0])
    """
    if min is None and max is None:
        raise ValueError("clamp: at least one of min= and max= must be given (not None)")
    return M.clamp_max(input, max) if min is None else (
        M.clamp_min(input, min) if max is None else M.clamp(input, min, max))


@public()
def clamp_min(input, min):
    """``input`` limited to at least ``min`` (a number or a tensor).

    >>> import labkit as lk
    >>> lk.clamp_min(lk.tensor([-2.0, 0.5]), 0).tolist()
    [0.0, 0.5]
    """
    return M.clamp_min(input, min)


@public()
def clamp_max(input, max):
    """``input`` limited to at most ``max`` (a number or a tensor).

    >>> import labkit as lk
    >>> lk.clamp_max(lk.tensor([-2.0, 0.5]), 0).tolist()
    [-2.0, 0.0]
    """
    return M.clamp_max(input, max)


# ---- bitwise and logical -----------------------------------------------------------------------
def _binary(name, fn, summary, example, result):
    """Export ``lk.<name>(input, other)`` and ``Tensor.<name>(other)`` calling ``fn``."""
    def function(input, other):
        return fn(input, other)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"{summary}\n\n>>> import labkit as lk\n>>> {example}\n{result}\n"
    globals()[name] = public(name)(function)


for _row in [
    ("bitwise_and", B.bitwise_and, "Bitwise AND of integer or bool tensors; also ``a & b``.",
     "lk.bitwise_and(lk.tensor([12, 10]), 6).tolist(), (lk.tensor([True]) & False).tolist()",
     ([4, 2], [False])),
    ("bitwise_or", B.bitwise_or, "Bitwise OR of integer or bool tensors; also ``a | b``.",
     "lk.bitwise_or(lk.tensor([12, 10]), 6).tolist()", [14, 14]),
    ("bitwise_xor", B.bitwise_xor, "Bitwise XOR of integer or bool tensors; also ``a ^ b``.",
     "lk.bitwise_xor(lk.tensor([12, 10]), 6).tolist()", [10, 12]),
    ("bitwise_left_shift", B.bitwise_left_shift,
     "``input`` shifted left by ``other`` bits; also ``a << b``.",
     "lk.bitwise_left_shift(lk.tensor([1, -3]), 2).tolist(), (1 << lk.tensor([3])).tolist()",
     ([4, -12], [8])),
    ("bitwise_right_shift", B.bitwise_right_shift,
     "``input`` shifted right by ``other`` bits (arithmetic: the sign is kept); also ``a >> b``.",
     "lk.bitwise_right_shift(lk.tensor([16, -16]), 2).tolist()", [4, -4]),
    ("logical_and", E.logical_and, "Where both are nonzero, as bools.",
     "lk.logical_and(lk.tensor([0.0, 1.0, 2.0]), lk.tensor([1, 1, 0])).tolist()",
     [False, True, False]),
    ("logical_or", E.logical_or, "Where either is nonzero, as bools.",
     "lk.logical_or(lk.tensor([0.0, 1.0, 0.0]), lk.tensor([1, 1, 0])).tolist()",
     [True, True, False]),
    ("logical_xor", E.logical_xor, "Where exactly one is nonzero, as bools.",
     "lk.logical_xor(lk.tensor([0.0, 1.0, 0.0]), lk.tensor([1, 1, 0])).tolist()",
     [True, False, False]),
]:
    _binary(*_row)


# ---- closeness ---------------------------------------------------------------------------------
@public()
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Where ``|input - other| <= atol + rtol * |other|`` (or equal: infinities), as bools;
    NaNs are close to each other only with ``equal_nan=True``.

    >>> import labkit as lk
    >>> a = lk.tensor([1.0, float("inf"), float("nan")])
    >>> lk.isclose(a, lk.tensor([1.000001, float("inf"), float("nan")])).tolist()
    [True, True, False]
    """
    return M.isclose(input, other, rtol=rtol, atol=atol, equal_nan=equal_nan)


@public()
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element is ``isclose``, as a Python bool.

    >>> import labkit as lk
    >>> lk.allclose(lk.tensor([1.0, 2.0]), lk.tensor([1.0, 2.00001]))
    True
    """
    close = M.isclose(input, other, rtol=rtol, atol=atol, equal_nan=equal_nan)
    return not bool(R.sum(E.logical_not(close)).item())


@public()
def equal(input, other):
    """Whether both have the same shape and elements, as a Python bool (NaN equals nothing).

    >>> import labkit as lk
    >>> lk.equal(lk.tensor([1, 2]), lk.tensor([1.0, 2.0])), lk.equal(lk.ones(2), lk.ones(3))
    (True, False)
    """
    if tuple(input.shape) != tuple(other.shape):
        return False
    return not bool(R.sum(E.ne(input, other)).item())



@tensor_method("__round__")
def _round_builtin(self, ndigits=None):
    """Python's ``round(x)`` / ``round(x, 2)`` of a tensor: ``x.round(decimals=...)``."""
    return M.round(self, decimals=ndigits or 0)
