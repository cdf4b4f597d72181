"""Cases for elementwise math, rounding division, clamping, special functions, bitwise and
logical ops, and closeness tests; PyTorch is the oracle of every one.

Input generators keep finite differences exact: inside each function's domain (asin in
(-1, 1), acosh above 1, logit in (0, 1)), and away from kinks and jumps (rounding ops see
values a quarter away from integers, fmod and remainder quotients that are never integers,
clamp inputs never tied with a bound).
"""
import numpy as np
import torch
from hypothesis import strategies as st

import labkit as lk

from ..case_kit import (BINARY_EDGES, UNARY_EDGES, Case, Sample, _arr, binary,
                        broadcast_shapes, grid_minus, grid_plus, nonzero, normal, positive,
                        shapes, small_ints, torch_ref, unary)


# ---- value generators ---------------------------------------------------------------------------
def _uniform(lo, hi):
    def gen(rng, shape):
        return _arr(rng.uniform(lo, hi, shape))
    gen.__name__ = f"uniform_{lo}_{hi}"
    return gen


inside_unit = _uniform(-0.9, 0.9)      # asin, acos, atanh, erfinv
above_one = _uniform(1.1, 3.0)         # acosh
probability = _uniform(0.05, 0.95)     # logit
below_half_pi = _uniform(-1.2, 1.2)    # tan


def divisors(rng, shape):
    """±0.5, ±1, ±2: with ``grid_plus`` dividends (k + 0.25) no quotient is an integer."""
    return _arr(rng.choice([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], shape))


def rounding_values(rng, shape):
    """Integers plus a fraction that keeps ``x * 10 ** d`` away from halves for d in -1..2."""
    return _arr(rng.integers(-30, 31, shape) + rng.choice([0.113, 0.337, 0.671, 0.889], shape))


def specials(rng, shape):
    """Normal values with NaN, +inf and -inf mixed in."""
    x = normal(rng, shape)
    return _arr(np.where(rng.random(shape) < 0.3,
                         rng.choice([np.nan, np.inf, -np.inf], shape), x))


def ints(rng, shape):
    return _arr(rng.integers(-9, 10, shape), np.int64)


def nonzero_ints(rng, shape):
    return _arr(rng.choice([-4, -3, -2, -1, 1, 2, 3, 4], shape), np.int64)


def shifts(rng, shape):
    """Shift counts, some as wide as the type or wider (the result is then 0 or -1)."""
    return _arr(rng.integers(0, 70, shape), np.int64)


def bools(rng, shape):
    return _arr(rng.integers(0, 2, shape), bool)


# ---- PyTorch oracles ------------------------------------------------------------------------
def torch_fn(name, **fixed):
    """The oracle ``torch.<name>(*args, **fixed, **kwargs)`` where PyTorch takes tensors only:
    a Python-number argument becomes a 0-d tensor of the tensor argument's dtype."""
    fn = getattr(torch, name)

    def call(*args, **kwargs):
        like = next(a for a in args if isinstance(a, torch.Tensor))
        args = [a if isinstance(a, torch.Tensor) else torch.tensor(a, dtype=like.dtype)
                for a in args]
        return fn(*args, **fixed, **kwargs)
    call.__name__ = name
    return torch_ref(call)


def values_only(ref):
    """``ref`` as an oracle of values alone, where PyTorch has no derivative (``x // y``,
    ``2.0 % x``): labkit's gradients are then checked by finite differences only."""
    def values(*args, **kwargs):
        return ref(*args, **kwargs)
    return values


def _clamp_ref(fn):
    """A clamp oracle with its operands broadcast first (PyTorch's clamp backward fails to
    reduce a gradient broadcast against a size-0 bound)."""
    return torch_ref(lambda x, lo, hi: fn(*torch.broadcast_tensors(x, lo, hi)))


def _composite(case):
    """``case`` as a composite's (no primitive of its own to check it ran)."""
    case.op = None
    return case


def _ints_binary(name, fn, ref, gen_a=ints, gen_b=nonzero_ints, op=None):
    """A binary case on integer tensors (no Python numbers: their promotion is NumPy's today)."""
    def build(rng, shapes):
        return Sample((gen_a(rng, shapes[0]), gen_b(rng, shapes[1])))
    edges = [e for e in BINARY_EDGES if None not in e["shapes"]]
    return Case(name, fn, ref, build, st.fixed_dictionaries({"shapes": broadcast_shapes(2)}),
                edges, op=op or name, differentiable=False)


# ---- one-tensor math ---------------------------------------------------------------------------
def _math(name, gen=normal, op=None, **kw):
    return unary(name, getattr(lk, name), torch_fn(name), gen=gen, op=op or name, **kw)


UNARY_MATH = [
    _math("sin"), _math("cos"), _math("tan", below_half_pi),
    _math("asin", inside_unit), _math("acos", inside_unit), _math("atan"),
    _math("sinh"), _math("cosh"), _math("asinh"), _math("acosh", above_one),
    _math("atanh", inside_unit),
    _math("log1p", _uniform(-0.5, 2.0)), _math("log2", positive), _math("log10", positive),
    _math("exp2"), _math("expm1"),
    _math("erf"), _math("erfc"), _math("erfinv", inside_unit),
    _math("lgamma", grid_plus), _math("digamma", grid_plus),
    # zero gradients: the result requires grad and backward gives zeros, as PyTorch's
    _math("floor", grid_plus), _math("ceil", grid_plus), _math("trunc", grid_plus),
    unary("sign_zero_gradient", lk.sign, torch_fn("sign"), gen=grid_plus, op="sign"),
]
for _name in ("isnan", "isinf", "isfinite"):
    UNARY_MATH.append(_math(_name, specials, differentiable=False))

# the Tensor methods and the aliases PyTorch users type
ALIASES = [
    unary("method_sin", lambda x: x.sin(), torch_ref(lambda x: x.sin()), op="sin"),
    unary("arcsin", lk.arcsin, torch_ref(torch.arcsin), gen=inside_unit, op="asin"),
    unary("method_arccosh", lambda x: x.arccosh(), torch_ref(lambda x: x.arccosh()),
          gen=above_one, op="acosh"),
    unary("fix", lk.fix, torch_ref(torch.fix), gen=grid_plus, op="trunc"),
    unary("method_floor", lambda x: x.floor(), torch_ref(lambda x: x.floor()), gen=grid_plus,
          op="floor"),
]


# ---- round -----------------------------------------------------------------------------------------
def _round_build(rng, shape, decimals):
    return Sample((rounding_values(rng, shape),), {"decimals": decimals})


ROUND = Case("round", lambda x, decimals: lk.round(x, decimals=decimals),
             torch_ref(lambda x, decimals: torch.round(x, decimals=decimals)), _round_build,
             st.fixed_dictionaries({"shape": shapes(), "decimals": st.sampled_from([0, 1, 2,
                                                                                    -1])}),
             [dict(shape=(), decimals=0), dict(shape=(0,), decimals=1),
              dict(shape=(2, 3), decimals=2), dict(shape=(3,), decimals=-1)], op="round")
ROUND_METHOD = Case("round_method", lambda x, decimals: x.round(decimals=decimals),
                    ROUND.ref, _round_build,
                    st.fixed_dictionaries({"shape": shapes(), "decimals": st.just(0)}),
                    [dict(shape=(2, 2), decimals=0)], op="round")


# ---- two-tensor math ------------------------------------------------------------------------------
def _binary_math(name, gen_a=normal, gen_b=normal, op=None, fn=None, **kw):
    return binary(name, fn or getattr(lk, name), torch_fn(name), gen_a=gen_a, gen_b=gen_b,
                  op=op or name, **kw)


BINARY_MATH = [
    _binary_math("atan2", nonzero, normal),
    _binary_math("arctan2", nonzero, normal, op="atan2"),
    _binary_math("hypot", nonzero, nonzero),
    _binary_math("copysign", nonzero, nonzero),
    _binary_math("logaddexp"), _binary_math("logaddexp2"),
    _binary_math("xlogy", normal, positive),
    _binary_math("fmod", grid_plus, divisors),
    _binary_math("remainder", grid_plus, divisors),
    binary("floor_divide", lk.floor_divide,
           torch_ref(lambda a, b: torch.div(a, b, rounding_mode="floor")),
           gen_a=grid_plus, gen_b=divisors),
    binary("div_trunc", lambda a, b: lk.div(a, b, rounding_mode="trunc"),
           torch_ref(lambda a, b: torch.div(a, b, rounding_mode="trunc")),
           gen_a=grid_plus, gen_b=divisors, op="trunc_divide"),
    binary("divide", lk.divide, torch_ref(torch.divide), gen_b=nonzero, op="div"),
    binary("true_divide", lk.true_divide, torch_ref(torch.true_divide), gen_b=nonzero,
           op="div"),
    binary("subtract_alpha", lambda a, b: lk.subtract(a, b, alpha=2.5),
           torch_ref(lambda a, b: torch.subtract(a, b, alpha=2.5)), op="sub"),
    binary("add_alpha", lambda a, b: lk.add(a, b, alpha=-2),
           torch_ref(lambda a, b: torch.add(a, b, alpha=-2)), op="add"),
    binary("multiply", lk.multiply, torch_ref(torch.multiply), op="mul"),
    binary("clamp_min", lk.clamp_min, torch_fn("clamp_min"), gen_a=grid_plus,
           gen_b=grid_minus),
    binary("clamp_max", lk.clamp_max, torch_fn("clamp_max"), gen_a=grid_plus,
           gen_b=grid_minus),
    # operators, plain and reflected
    unary("mod_operator", lambda x: x % 1.5, torch_ref(lambda x: x % 1.5), gen=grid_plus,
          op="remainder"),
    unary("rmod_operator", lambda x: 2.25 % x, values_only(torch_ref(lambda x: 2.25 % x)), gen=divisors,
          op="remainder"),
    unary("floordiv_operator", lambda x: x // 0.5, values_only(torch_ref(lambda x: x // 0.5)), gen=grid_plus,
          op="floor_divide"),
    unary("rfloordiv_operator", lambda x: 7.25 // x, values_only(torch_ref(lambda x: 7.25 // x)),
          gen=divisors, op="floor_divide"),
    unary("method_fmod", lambda x: x.fmod(-2.0), torch_ref(lambda x: x.fmod(-2.0)),
          gen=grid_plus, op="fmod"),
]

INTEGER_DIVISION = [
    _ints_binary("floor_divide_ints", lambda a, b: a // b, torch_ref(lambda a, b: a // b),
                 op="floor_divide"),
    _ints_binary("remainder_ints", lambda a, b: a % b, torch_ref(lambda a, b: a % b),
                 op="remainder"),
    _ints_binary("fmod_ints", lk.fmod, torch_ref(torch.fmod), op="fmod"),
    _ints_binary("div_trunc_ints", lambda a, b: lk.div(a, b, rounding_mode="trunc"),
                 torch_ref(lambda a, b: torch.div(a, b, rounding_mode="trunc")),
                 op="trunc_divide"),
]


# ---- clamp with tensor bounds ------------------------------------------------------------------
def _clamp_build(rng, shapes):
    # x, lo and hi on three grids (k + .25, k + .75, k + .5): never tied; lo > hi happens
    x, lo, hi = shapes
    return Sample((grid_plus(rng, x), _arr(grid_minus(rng, lo) - 1),
                   _arr(rng.integers(-2, 3, hi) + 0.5)))


CLAMP = [
    Case("clamp", lambda x, lo, hi: lk.clamp(x, lo, hi),
         _clamp_ref(lambda x, lo, hi: torch.clamp(x, lo, hi)), _clamp_build,
         st.fixed_dictionaries({"shapes": broadcast_shapes(3)}),
         [dict(shapes=((2, 3), (3,), ())), dict(shapes=((), (), ())),
          dict(shapes=((0, 2), (2,), (1, 1))), dict(shapes=((4,), (4,), (4,)))], op="clamp"),
    Case("clamp_keywords", lambda x, lo, hi: x.clamp(min=lo, max=hi),
         _clamp_ref(lambda x, lo, hi: x.clamp(min=lo, max=hi)), _clamp_build,
         st.fixed_dictionaries({"shapes": broadcast_shapes(3)}),
         [dict(shapes=((2, 3), (3,), ()))], op="clamp"),
    unary("clamp_scalar_min", lambda x: lk.clamp(x, min=-0.5),
          torch_ref(lambda x: torch.clamp(x, min=-0.5)), gen=grid_plus, op="clamp_min"),
    unary("clip_scalar_max", lambda x: x.clip(max=1.0),
          torch_ref(lambda x: x.clip(max=1.0)), gen=grid_plus, op="clamp_max"),
    unary("clamp_scalar_both", lambda x: x.clamp(-1, 1),
          torch_ref(lambda x: x.clamp(-1, 1)), gen=grid_plus, op="clamp"),
]


# ---- logit, nan_to_num, polygamma -------------------------------------------------------------
def _with(gen):
    """build(rng, shape, **attrs): one input from ``gen`` and the attributes."""
    def build(rng, shape, **kw):
        return Sample((gen(rng, shape),), kw)
    return build


LOGIT = Case("logit", lambda x, eps: lk.logit(x, eps=eps),
             torch_ref(lambda x, eps: torch.logit(x, eps=eps)), _with(probability),
             st.fixed_dictionaries({"shape": shapes(), "eps": st.sampled_from([None, 0.2])}),
             [dict(shape=(), eps=None), dict(shape=(0,), eps=0.2), dict(shape=(2, 3), eps=0.2),
              dict(shape=(3,), eps=None)], op="logit")

NAN_TO_NUM = [
    Case("nan_to_num", lambda x, **kw: lk.nan_to_num(x, **kw),
         torch_ref(lambda x, **kw: torch.nan_to_num(x, **kw)), _with(specials),
         st.fixed_dictionaries({"shape": shapes(), "nan": st.sampled_from([0.0, -1.5]),
                                "posinf": st.sampled_from([3.0, 7.0]),
                                "neginf": st.sampled_from([-3.0, -7.0])}),
         [dict(shape=(), nan=0.0, posinf=3.0, neginf=-3.0),
          dict(shape=(2, 3), nan=-1.5, posinf=7.0, neginf=-7.0),
          dict(shape=(0, 2), nan=0.0, posinf=3.0, neginf=-7.0)], op="nan_to_num"),
    # the infinities become the dtype's largest values: values only (no finite differences)
    Case("nan_to_num_defaults", lambda x, **kw: x.nan_to_num(**kw),
         torch_ref(lambda x, **kw: x.nan_to_num(**kw)), _with(specials),
         st.fixed_dictionaries({"shape": shapes(), "nan": st.sampled_from([0.0, 2.0])}),
         [dict(shape=(2, 3), nan=0.0), dict(shape=(), nan=2.0)], op="nan_to_num",
         differentiable=False),
]

POLYGAMMA = Case("polygamma", lambda x, n: lk.polygamma(n, x),
                 torch_ref(lambda x, n: torch.polygamma(n, x)), _with(positive),
                 st.fixed_dictionaries({"shape": shapes(), "n": st.integers(1, 3)}),
                 [dict(shape=(), n=1), dict(shape=(2, 3), n=2), dict(shape=(0,), n=3),
                  dict(shape=(3,), n=1)], op="polygamma")
POLYGAMMA_METHOD = Case("polygamma_method", lambda x, n: x.polygamma(n),
                        torch_ref(lambda x, n: x.polygamma(n)), _with(grid_plus),
                        st.fixed_dictionaries({"shape": shapes(), "n": st.integers(1, 2)}),
                        [dict(shape=(2, 2), n=1)], op="polygamma")


# ---- bitwise and logical ---------------------------------------------------------------------------
def _bitwise_cases():
    cases = []
    for name, operator in (("bitwise_and", lambda a, b: a & b), ("bitwise_or", lambda a, b: a | b),
                           ("bitwise_xor", lambda a, b: a ^ b)):
        cases += [_ints_binary(name, getattr(lk, name), torch_fn(name), ints, ints),
                  _ints_binary(f"{name}_operator_bools", operator, torch_ref(operator), bools,
                               bools, op=name)]
    for name, operator in (("bitwise_left_shift", lambda a, b: a << b),
                           ("bitwise_right_shift", lambda a, b: a >> b)):
        cases += [_ints_binary(name, getattr(lk, name), torch_fn(name), ints, shifts),
                  _ints_binary(f"{name}_operator", operator, torch_ref(operator), ints, shifts,
                               op=name)]
    for name in ("logical_and", "logical_or", "logical_xor"):
        cases.append(binary(name, getattr(lk, name), torch_fn(name), gen_a=small_ints,
                            gen_b=small_ints, differentiable=False))
    cases += [
        unary("bitwise_not", lk.bitwise_not, torch_ref(torch.bitwise_not), gen=ints,
              differentiable=False),
        unary("invert_operator_bools", lambda x: ~x, torch_ref(lambda x: ~x), gen=bools,
              differentiable=False, op="bitwise_not"),
        unary("rand_operator", lambda x: 6 & x, torch_ref(lambda x: 6 & x), gen=ints,
              differentiable=False, op="bitwise_and"),
        unary("rlshift_operator", lambda x: 3 << x, torch_ref(lambda x: 3 << x), gen=shifts,
              differentiable=False, op="bitwise_left_shift"),
    ]
    return cases


def _lerp_build(rng, shapes, scalar_weight):
    a, b, w = shapes
    return Sample((normal(rng, a), normal(rng, b), 0.7 if scalar_weight else normal(rng, w)))


LERP = Case("lerp", lk.lerp, torch_ref(torch.lerp), _lerp_build,
            st.fixed_dictionaries({"shapes": broadcast_shapes(3),
                                   "scalar_weight": st.booleans()}),
            [dict(shapes=((2, 3), (3,), ()), scalar_weight=False),
             dict(shapes=((), (), ()), scalar_weight=True),
             dict(shapes=((0, 2), (2,), (1, 1)), scalar_weight=False),
             dict(shapes=((3,), (3,), None), scalar_weight=True)], op="lerp")


PRIMITIVE_CASES = (UNARY_MATH + ALIASES + [ROUND, ROUND_METHOD] + BINARY_MATH + INTEGER_DIVISION
                   + CLAMP + [LOGIT] + NAN_TO_NUM + [POLYGAMMA, POLYGAMMA_METHOD, LERP]
                   + _bitwise_cases())


# ---- composites -----------------------------------------------------------------------------------
def _isclose_build(rng, shape, rtol, atol, equal_nan):
    a = specials(rng, shape)
    near = a + rng.choice([0.0, 1e-9, 1e-6, 1e-3, 1.0], shape) * np.where(np.isfinite(a), a, 1.0)
    b = _arr(np.where(rng.random(shape) < 0.2, specials(rng, shape), near))
    return Sample((a, b), dict(rtol=rtol, atol=atol, equal_nan=equal_nan))


_ISCLOSE_PARAMS = st.fixed_dictionaries({"shape": shapes(), "rtol": st.sampled_from([1e-5, 0.0,
                                                                                      1e-2]),
                                         "atol": st.sampled_from([1e-8, 0.0]),
                                         "equal_nan": st.booleans()})
_ISCLOSE_EDGES = [dict(shape=(), rtol=1e-5, atol=1e-8, equal_nan=False),
                  dict(shape=(3, 4), rtol=0.0, atol=0.0, equal_nan=True),
                  dict(shape=(0,), rtol=1e-5, atol=1e-8, equal_nan=True),
                  dict(shape=(5,), rtol=1e-2, atol=0.0, equal_nan=False)]

COMPOSITE_CASES = [
    _composite(unary("frac", lk.frac, torch_fn("frac"), gen=grid_plus)),
    _composite(unary("reciprocal", lk.reciprocal, torch_fn("reciprocal"), gen=nonzero)),
    _composite(unary("rsqrt", lk.rsqrt, torch_fn("rsqrt"), gen=positive)),
    _composite(unary("square", lk.square, torch_fn("square"))),
    _composite(unary("isposinf", lk.isposinf, torch_fn("isposinf"), gen=specials, differentiable=False)),
    _composite(unary("isneginf", lk.isneginf, torch_fn("isneginf"), gen=specials, differentiable=False)),
    Case("isclose", lambda a, b, **kw: lk.isclose(a, b, **kw),
         torch_ref(lambda a, b, **kw: torch.isclose(a, b, **kw)), _isclose_build,
         _ISCLOSE_PARAMS, _ISCLOSE_EDGES, differentiable=False),
]
