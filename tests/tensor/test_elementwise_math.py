"""Edges of the elementwise math ops, each against PyTorch's value and gradient: pow at 0 and
with a negative base, zero gradients of rounding ops, ties of maximum/minimum and clamp,
xlogy(0, 0), fmod/remainder signs, erfinv at ±1, lgamma/digamma at their poles, integer
division by zero; closeness tests returning Python bools; the errors these ops raise.

The random-input checks (values, gradients, second order, captured = eager) are the cases of
tests/tensor/cases/elementwise_math.py.
"""
import math

import numpy as np
import pytest
import torch

import labkit as lk

INF, NAN = math.inf, math.nan


def _lk(v, device, requires_grad=False, dtype="float64"):
    return v if isinstance(v, (int, float)) else lk.tensor(v, dtype=dtype, device=device,
                                                        requires_grad=requires_grad)


def _torch(v, requires_grad=False, dtype=torch.float64):
    if isinstance(v, (int, float)):
        return v
    return torch.tensor(v, dtype=dtype).requires_grad_(requires_grad)


def assert_like_torch(lk_fn, torch_fn, *args, device="cpu:0", grad=True):
    """``lk_fn(*args)`` and its gradients (of the sum) equal ``torch_fn``'s, NaN and infinities
    included. Python numbers stay Python numbers; every list is a float64 tensor."""
    want_grad = [grad and not isinstance(a, (int, float)) for a in args]
    xs = [_lk(a, device, g) for a, g in zip(args, want_grad)]
    ts = [_torch(a, g) for a, g in zip(args, want_grad)]
    with np.errstate(all="ignore"):
        out = lk_fn(*xs)
    expected = torch_fn(*ts)
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-13, atol=0,
                               equal_nan=True, err_msg="value")
    if not any(want_grad):
        return
    assert out.requires_grad == expected.requires_grad
    if not expected.requires_grad:
        return
    with np.errstate(all="ignore"):
        got = lk.autodiff.gradients(out.sum(), [x for x, g in zip(xs, want_grad) if g])
    wants = torch.autograd.grad(expected.sum(), [x for x, g in zip(ts, want_grad) if g],
                                allow_unused=True)
    for i, (g, w) in enumerate(zip(got, wants)):
        w = np.zeros(g.shape) if w is None or w._is_zerotensor() else w.numpy()
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-8, atol=0, equal_nan=True,
                                   err_msg=f"gradient of input {i}")


# ---- pow ---------------------------------------------------------------------------------------
def test_pow_at_zero_has_pytorch_gradients(device):
    x = [0.0, 1.0, -2.0, 2.5]
    assert_like_torch(lambda x: x ** 0, lambda x: x ** 0, x, device=device)
    assert_like_torch(lambda x: x ** 0.0, lambda x: x ** 0.0, x, device=device)
    assert_like_torch(lambda x, y: x ** y, lambda x, y: x ** y, x, [0.0] * 4, device=device)
    y = [0.0, 1.0, -1.0, 2.0]
    assert_like_torch(lambda x, y: x ** y, lambda x, y: x ** y, [0.0] * 4, y, device=device)
    assert_like_torch(lambda y: 0.0 ** y, lambda y: 0.0 ** y, y, device=device)
    assert_like_torch(lambda x: x ** 1, lambda x: x ** 1, x, device=device)


def test_negative_python_base_backward_matches_pytorch(device):
    # NaN where the power is real too: PyTorch's gradient is out * log(base), log(-2) is NaN
    y = [0.0, 1.0, 2.0, 2.5]
    assert_like_torch(lambda y: (-2.0) ** y, lambda y: (-2.0) ** y, y, device=device)
    assert_like_torch(lambda y: 2 ** y, lambda y: 2 ** y, y, device=device)


# ---- zero gradients ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["sign", "sgn", "round", "floor", "ceil", "trunc", "fix"])
def test_rounding_ops_have_zero_gradients(name, device):
    x = [-1.5, 0.0, 0.5, 2.5, -0.5]
    assert_like_torch(getattr(lk, name), getattr(torch, name), x, device=device)


def test_round_with_decimals_and_rounding_divisions_have_zero_gradients(device):
    assert_like_torch(lambda x: x.round(decimals=1), lambda x: x.round(decimals=1),
                      [-1.25, 0.15, 0.35, 2.5], device=device)
    for mode in ("trunc", "floor"):
        assert_like_torch(lambda a, b: lk.div(a, b, rounding_mode=mode),
                          lambda a, b: torch.div(a, b, rounding_mode=mode),
                          [3.5, -3.5, 0.0], [2.0, 2.0, -1.0], device=device)


def test_python_round_of_a_tensor():
    x = lk.tensor([1.25, 2.5], dtype="float64")
    assert round(x).tolist() == [1.0, 2.0] and round(x, 1).tolist() == [1.2, 2.5]


# ---- ties ---------------------------------------------------------------------------------------
def test_maximum_minimum_ties_split_the_gradient_as_pytorch(device):
    a, b = [1.0, 2.0, NAN, 1.0, 3.0], [1.0, 1.0, 1.0, NAN, 3.0]
    for name in ("maximum", "minimum", "max", "min"):
        assert_like_torch(getattr(lk, name), getattr(torch, name), a, b, device=device)
    assert_like_torch(lambda a: lk.maximum(a, 1.0), lambda a: torch.clamp(a, min=1.0) * 0 +
                      torch.maximum(a, torch.tensor(1.0, dtype=torch.float64)), a,
                      device=device)


def test_clamp_ties_and_crossed_bounds_match_pytorch(device):
    x, lo, hi = [1.0, 2.0, 3.0, 0.0, NAN], [1.0, 1.0, 1.0, 2.0, 0.0], [2.0, 2.0, 2.0, 1.0, 1.0]
    assert_like_torch(lambda x, lo, hi: lk.clamp(x, lo, hi), torch.clamp, x, lo, hi,
                      device=device)
    assert_like_torch(lambda x, lo: lk.clamp(x, min=lo), lambda x, lo: torch.clamp(x, min=lo),
                      x, lo, device=device)
    assert_like_torch(lambda x, hi: x.clamp(max=hi), lambda x, hi: x.clamp(max=hi), x, hi,
                      device=device)
    assert_like_torch(lambda x: x.clip(1.0, 2.0), lambda x: x.clip(1.0, 2.0), x, device=device)
    assert_like_torch(lambda x: x.clamp(3.0, 1.0), lambda x: x.clamp(3.0, 1.0), x,
                      device=device)
    assert_like_torch(lambda x: lk.clamp_min(x, 1.0), lambda x: torch.clamp_min(x, 1.0), x,
                      device=device)


# ---- special values -------------------------------------------------------------------------------
def test_xlogy_at_zero(device):
    x, y = [0.0, 0.0, 0.0, 1.0, 0.0, 2.0], [0.0, -1.0, NAN, 0.0, 2.0, 3.0]
    assert_like_torch(lk.xlogy, torch.xlogy, x, y, device=device)
    assert_like_torch(lambda x: lk.xlogy(x, 0.0), lambda x: torch.xlogy(x, 0.0), x,
                      device=device)
    assert_like_torch(lambda y: lk.xlogy(0.0, y), lambda y: torch.xlogy(0.0, y), y,
                      device=device)
    assert lk.xlogy(lk.tensor(0.0), lk.tensor(0.0)).item() == 0.0


def test_fmod_and_remainder_sign_conventions(device):
    a, b = [-3.0, 3.0, -3.0, 3.0, 5.5, -5.5], [2.0, -2.0, -2.0, 2.0, 2.0, 2.0]
    for name in ("fmod", "remainder"):
        assert_like_torch(getattr(lk, name), getattr(torch, name), a, b, device=device)
    ia, ib = lk.tensor([-7, 7, -7, 7], device=device), lk.tensor([2, -2, -2, 2], device=device)
    ta, tb = torch.tensor([-7, 7, -7, 7]), torch.tensor([2, -2, -2, 2])
    assert (ia % ib).tolist() == (ta % tb).tolist() == [1, -1, -1, 1]
    assert lk.fmod(ia, ib).tolist() == torch.fmod(ta, tb).tolist() == [-1, 1, -1, 1]
    assert (ia // ib).tolist() == (ta // tb).tolist()
    assert lk.div(ia, ib, rounding_mode="trunc").tolist() == \
        torch.div(ta, tb, rounding_mode="trunc").tolist()
    assert (7 % ib).tolist() == (7 % tb).tolist() and (-7 // ib).tolist() == (-7 // tb).tolist()


def test_float_division_by_zero_matches_pytorch(device):
    a, b = [3.0, -3.0, 0.0], [0.0, 0.0, 0.0]
    for fn, tfn in ((lk.floor_divide, torch.floor_divide), (lk.remainder, torch.remainder),
                    (lk.fmod, torch.fmod),
                    (lambda a, b: lk.div(a, b, rounding_mode="trunc"),
                     lambda a, b: torch.div(a, b, rounding_mode="trunc"))):
        assert_like_torch(fn, tfn, a, b, device=device, grad=False)


def test_integer_division_by_zero_raises(device):
    # PyTorch's CPU kernels raise too (NumPy would give 0 with a warning)
    a, b = lk.tensor([3, -3], device=device), lk.tensor([1, 0], device=device)
    for name, call in (("floor_divide", lambda: a // b), ("remainder", lambda: a % b),
                       ("fmod", lambda: lk.fmod(a, 0)),
                       ("trunc_divide", lambda: lk.div(a, b, rounding_mode="trunc"))):
        with pytest.raises(lk.NumericsError, match=f"{name}: integer division by zero") as e:
            call()
        assert "a.float()" in str(e.value) and "lk.where" in str(e.value)
        assert isinstance(e.value, ArithmeticError)
    with np.errstate(divide="ignore"):
        assert (a // lk.tensor([2.0, 0.0], device=device)).tolist() == [1.0, -INF]


def test_erfinv_at_and_beyond_one(device):
    assert_like_torch(lk.erfinv, torch.erfinv, [-1.0, 1.0, 0.0, 1.5, -1.5], device=device)


def test_lgamma_and_digamma_at_poles(device):
    assert_like_torch(lk.lgamma, torch.lgamma, [0.0, -0.0, -1.0, -2.0, INF, -INF, 1.0, -2.5],
                      device=device)
    # digamma: -inf at +0, +inf at -0, NaN at the negative integers (its gradient there is
    # a pole too, which PyTorch's series approximates by a huge finite number: not compared)
    assert_like_torch(lk.digamma, torch.digamma, [0.0, -0.0, 1.0, -2.5, INF], device=device)
    assert_like_torch(lk.digamma, torch.digamma, [-1.0, -2.0], device=device, grad=False)
    assert_like_torch(lambda x: lk.polygamma(2, x), lambda x: torch.polygamma(2, x),
                      [0.0, 1.0, -2.5, 3.0], device=device)


def test_other_edges_match_pytorch(device):
    assert_like_torch(lk.atan2, torch.atan2, [0.0, 1.0, -0.0], [0.0, 0.0, -1.0], device=device)
    assert_like_torch(lk.hypot, torch.hypot, [0.0, 3.0], [0.0, 4.0], device=device)
    assert_like_torch(lk.copysign, torch.copysign, [0.0, -1.0, 2.0, -0.0],
                      [-1.0, -1.0, 1.0, 1.0], device=device)
    assert_like_torch(lk.logaddexp, torch.logaddexp, [-INF, INF, 1.0], [-INF, INF, -INF],
                      device=device)
    assert_like_torch(lk.logit, torch.logit, [0.0, 0.5, 1.0, 1.5, -0.5], device=device)
    assert_like_torch(lambda x: lk.logit(x, 0.1), lambda x: torch.logit(x, 0.1),
                      [0.05, 0.1, 0.5, 0.9, 0.95], device=device)
    assert_like_torch(lk.nan_to_num, torch.nan_to_num, [NAN, INF, -INF, 1.0], device=device)
    assert_like_torch(lk.rsqrt, torch.rsqrt, [0.0, 4.0, -1.0], device=device)
    assert_like_torch(lk.reciprocal, torch.reciprocal, [0.0, -0.0, 4.0], device=device)
    assert_like_torch(lk.frac, torch.frac, [INF, -2.5, 2.5], device=device)
    assert_like_torch(lk.isposinf, torch.isposinf, [INF, -INF, NAN], device=device)
    for w in (0.25, 0.75, 1.0):
        assert_like_torch(lambda a, b: lk.lerp(a, b, w), lambda a, b: torch.lerp(a, b, w),
                          [0.0, INF, 1.0], [1.0, 2.0, INF], device=device)
    assert_like_torch(lk.lerp, torch.lerp, [0.0, INF, 1.0], [1.0, 2.0, INF], [0.25, 0.75, 1.0],
                      device=device)


def test_integer_and_bool_results(device):
    i = lk.tensor([1, -8, 5], device=device)
    t = torch.tensor([1, -8, 5])
    assert (i << 64).tolist() == (t << 64).tolist() and (i >> 64).tolist() == (t >> 64).tolist()
    assert (i >> lk.tensor([1, 70, 0], device=device)).tolist() == \
        (t >> torch.tensor([1, 70, 0])).tolist()
    assert (~i).tolist() == (~t).tolist() and (3 ^ i).tolist() == (3 ^ t).tolist()
    assert (i | 2).tolist() == (t | 2).tolist()
    b = lk.tensor([True, False], device=device)
    assert (~b).tolist() == [False, True] and (b & True).dtype is lk.bool_
    assert lk.isnan(i).tolist() == [False] * 3 and lk.isfinite(i).tolist() == [True] * 3
    assert lk.logical_xor(i, 0).tolist() == [True] * 3


# ---- closeness -------------------------------------------------------------------------------------
def test_isclose_allclose_equal(device):
    a = [1.0, INF, -INF, NAN, 0.0, 1e-9, 2.0]
    b = [1.0 + 1e-6, INF, INF, NAN, 1e-9, 0.0, 2.1]
    for kw in ({}, {"equal_nan": True}, {"rtol": 0.0, "atol": 0.0}, {"rtol": 0.1}):
        assert_like_torch(lambda x, y: lk.isclose(x, y, **kw),
                          lambda x, y: torch.isclose(x, y, **kw), a, b, device=device)
    ia = lk.tensor([1, 2, 3], device=device)
    assert lk.isclose(ia, lk.tensor([1, 2, 4], device=device)).tolist() == [True, True, False]
    assert lk.isclose(lk.tensor([True, False]), lk.tensor([True, True])).tolist() == \
        torch.isclose(torch.tensor([True, False]), torch.tensor([True, True])).tolist()
    x = lk.tensor([1.0, 2.0], device=device)
    assert lk.allclose(x, x + 1e-7) is True and lk.allclose(x, x + 1e-3) is False
    assert (x * NAN).allclose(x * NAN, equal_nan=True) is True
    assert lk.allclose(x * NAN, x * NAN) is False
    assert lk.equal(x, x.clone()) is True and lk.equal(x, x[:1]) is False
    assert lk.equal(ia, lk.tensor([1.0, 2.0, 3.0], device=device)) is True
    assert x.equal(x * NAN) is False


# ---- errors ------------------------------------------------------------------------------------
def test_errors_name_the_op_and_a_remedy(device):
    f = lk.ones(2, device=device)
    with pytest.raises(lk.DTypeError, match=r"bitwise_and.*float32.*Cast"):
        f & f
    with pytest.raises(lk.DTypeError, match=r"bitwise_left_shift.*float32"):
        f << 1
    with pytest.raises(lk.DTypeError, match=r"bitwise_not.*float32"):
        ~f
    with pytest.raises(lk.DTypeError, match=r"round\(decimals=2\).*int64.*x\.float\(\)"):
        lk.tensor([1, 2], device=device).round(decimals=2)
    with pytest.raises(ValueError, match="clamp: at least one of min= and max="):
        f.clamp()
    with pytest.raises(ValueError, match="rounding_mode must be None, 'trunc' or 'floor'"):
        lk.div(f, f, rounding_mode="round")
    with pytest.raises(TypeError, match="polygamma.*non-negative int"):
        lk.polygamma(-1, f)
    with pytest.raises(lk.ShapeError, match=r"clamp: shapes .*\(2,\).*\(3,\)"):
        lk.clamp(f, lk.zeros(3, device=device), 1.0)


# ---- dtypes: every op's rule agrees with its kernel, for every labkit dtype ------------------------
DTYPES = ["float16", "float32", "float64", "int32", "int64", "bool_"]
UNARY_OPS = ["sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
             "atanh", "log1p", "log2", "log10", "exp2", "expm1", "isnan", "isinf", "isfinite",
             "floor", "ceil", "trunc", "round", "logit", "nan_to_num", "erf", "erfc", "erfinv",
             "lgamma", "digamma", "bitwise_not", "reciprocal", "rsqrt", "square", "frac"]
BINARY_OPS = ["atan2", "hypot", "copysign", "logaddexp", "logaddexp2", "floor_divide", "fmod",
              "remainder", "xlogy", "clamp_min", "clamp_max", "bitwise_and", "bitwise_or",
              "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "logical_and",
              "logical_or", "logical_xor"]


def _dtype_checked(fn, *args):
    """``fn(*args)`` with every op's shape rule compared with its kernel's output; a refusal
    must be a DTypeError."""
    from labkit.tensor import dispatch
    from .test_ops import RuleCheckingMode
    try:
        with np.errstate(all="ignore"), dispatch.push_mode(RuleCheckingMode()):
            fn(*args)
    except lk.DTypeError:
        pass
    except lk.NumericsError:      # integer division by zero: the values, not the dtypes
        pass


@pytest.mark.parametrize("name", UNARY_OPS)
def test_unary_rules_agree_with_kernels(name):
    for d in DTYPES:
        _dtype_checked(getattr(lk, name), lk.ones(2, dtype=d))


@pytest.mark.parametrize("name", BINARY_OPS)
def test_binary_rules_agree_with_kernels(name):
    for da in DTYPES:
        for db in DTYPES:
            _dtype_checked(getattr(lk, name), lk.ones(2, dtype=da), lk.ones((3, 1), dtype=db))
        for scalar in (2, 2.0, True):
            _dtype_checked(getattr(lk, name), lk.ones(2, dtype=da), scalar)
            _dtype_checked(getattr(lk, name), scalar, lk.ones(2, dtype=da))
    for d in DTYPES:
        x = lk.ones(2, dtype=d)
        _dtype_checked(lambda: lk.clamp(x, lk.zeros(2, dtype="int32"), 0.5))
        _dtype_checked(lambda: lk.lerp(x, lk.ones(2, dtype="float32"), 0.5))
        _dtype_checked(lambda: lk.div(x, x, rounding_mode="trunc"))


def test_inf_and_nan_come_without_numpys_warnings_as_in_pytorch():
    # as a user's script runs (pytest's own warning capture would hide what a user sees)
    import subprocess
    import sys
    script = (
        "import numpy as np, labkit as lk\n"
        "x = lk.tensor([0.0, 1.0, -1.0], requires_grad=True)\n"
        "out = lk.log(x) + lk.sqrt(x) + x / 0 + lk.exp(x * 1e4)\n"
        "out.sum().backward()\n"
        "print(lk.log(x).detach().numpy()[0], lk.sqrt(x).detach().numpy()[2])\n"
        "np.log(np.zeros(1))\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["-inf", "nan"]
    # labkit's kernels are quiet; the same NumPy call in the user's own code still warns
    warned = [line for line in run.stderr.splitlines() if "RuntimeWarning" in line]
    assert len(warned) == 1 and warned[0].startswith("<string>:6: RuntimeWarning: divide by "
                                                     "zero"), run.stderr
