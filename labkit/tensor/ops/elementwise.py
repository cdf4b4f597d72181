"""Elementwise primitives: arithmetic, unary math, comparisons, where, casts and device moves.

Each op is one declaration: kernel (against ``xp``), shape/dtype rule, vjp in labkit ops.

Complex tensors follow PyTorch's convention: the gradient of a real loss ``L`` with respect to
``z = x + iy`` is ``dL/dx + i dL/dy``. For an op that is holomorphic on complex inputs (mul,
exp, matmul...) that is ``g * conj(f'(z))``: its vjp is the real rule marked ``holomorphic``,
and the engine conjugates a complex cotangent on the way in and the results on the way out.
Where a real input meets a complex cotangent, the engine keeps its real part.
"""
import cmath
import functools
import math
import warnings

import numpy as np

from ...devices import device_of_array, get_device, transfer
from ...errors import DTypeError, describe
from ..batching import ELEMENTWISE
from ..dtypes import as_dtype, common_np_dtype, from_numpy_dtype
from ..op import needs_grad, op
from ..shape_rules import (broadcast_shapes, call_ufunc, elementwise, same_as_first, shape_of,
                           torch_loop, ufunc_dtype)
from ..tensor import Tensor
from .index import zeros_like


def _if(x, g):
    """``g`` if input ``x`` wants a cotangent, else None (see ``needs_grad``)."""
    return g if needs_grad(x) else None


def _is_tensor(x):
    return isinstance(x, Tensor)


def zero_vjp(g, out, *inputs, **attrs):
    """The vjp of an op whose derivative is zero wherever it exists (sign, floor, round...): as
    in PyTorch, the result requires grad and backward gives zeros."""
    return tuple(zeros_like(g) if needs_grad(x) else None for x in inputs)


def ufunc_op(name, ufunc, vjp=None, no_bool=None, no_complex=None, amp=None):
    """An op that is one array-module ufunc (``ufunc``: NumPy's): its kernel is
    ``xp.<ufunc>(*inputs)`` with PyTorch's result dtype, its shape rule the ufunc's broadcasting
    and dtype resolution, and graph plans call ``xp.<ufunc>(*inputs, out=buffer)`` directly.
    ``no_bool`` / ``no_complex``: the remedy to print when PyTorch refuses bool / complex
    operands (where NumPy has a loop: it orders complex numbers, PyTorch does not).
    ``amp``: the op's precision class under autocast (``labkit.tensor.op``)."""
    fname = ufunc.__name__

    refuse = "b" * bool(no_bool) + "c" * bool(no_complex)

    # The usual cases go straight to the ufunc, in as few steps as possible (a tiny op's whole
    # budget is a couple of microseconds): one array of a dtype the loop keeps, two arrays of
    # one dtype, or a float array with a Python number. Everything else: ``call_ufunc``.
    keeps_ints = _keeps_ints(ufunc)
    if ufunc.nin == 1:
        def kernel(xp, x):
            d = getattr(x, "dtype", None)
            if d is not None and (d.kind == "f" or keeps_ints and d.kind not in "bc"):
                return getattr(xp, fname)(x)
            return call_ufunc(getattr(xp, fname), ufunc, (x,), refuse)
    else:
        def kernel(xp, a, b):
            try:
                d = a.dtype
                t = type(b)
                if t is float or t is int:
                    if d.kind == "f":
                        return getattr(xp, fname)(a, b)
                elif b.dtype is d and (d.kind == "f" or keeps_ints and d.kind != "c" and
                                       "b" not in refuse):
                    return getattr(xp, fname)(a, b)
            except AttributeError:            # a Python number on the left (2.0 * x)
                t = type(a)
                if (t is float or t is int) and getattr(b, "dtype", None) is not None and \
                        b.dtype.kind == "f":
                    return getattr(xp, fname)(a, b)
            return call_ufunc(getattr(xp, fname), ufunc, (a, b), refuse)
    kernel.__name__ = name
    rule = elementwise(ufunc, name)
    if no_bool:
        rule = _refusing_bool(rule, name, no_bool)
    if no_complex:
        rule = _refusing_complex(rule, name, no_complex)
    return op(name, shape=rule, vjp=vjp, into=lambda xp: getattr(xp, fname),
              batch=ELEMENTWISE, amp=amp)(kernel)


def _keeps_ints(ufunc):
    """Whether NumPy's loops of ``ufunc`` map integers to integers (or bool), as PyTorch does,
    so that one integer dtype in needs no casting."""
    try:
        return all(ufunc.resolve_dtypes((d,) * ufunc.nin + (None,))[-1].kind in "iub"
                   for d in map(np.dtype, ("int8", "int64", "uint8")))
    except TypeError:
        return False


def _refusing_bool(rule, name, remedy):
    def checked(*inputs):
        if any(isinstance(x, bool) or getattr(getattr(x, "dtype", None), "name", "") == "bool_"
               for x in inputs):
            raise DTypeError(f"{name} does not take bool operands, as in PyTorch; got "
                             f"({', '.join(describe(x) for x in inputs)}). {remedy}")
        return rule(*inputs)
    return checked


def _refusing_complex(rule, name, remedy):
    def checked(*inputs):
        if any(isinstance(x, complex) or getattr(getattr(x, "dtype", None), "is_complex", False)
               for x in inputs):
            raise DTypeError(f"{name} is not defined for complex operands, as in PyTorch; got "
                             f"({', '.join(describe(x) for x in inputs)}). {remedy}")
        return rule(*inputs)
    return checked


NO_ORDER = "Complex numbers have no order: compare x.abs() or x.real instead."


def holomorphic(rule):
    """Mark ``rule``, the real vjp of an op that is holomorphic on complex inputs: PyTorch's
    gradient there is ``g * conj(f'(z))``, the conjugate of what the real rule gives for the
    conjugated cotangent, which the autodiff engine computes so for a complex cotangent (the
    op's ``holomorphic`` flag). Real cotangents go to ``rule`` as they are, at no cost."""
    rule.holomorphic = True
    return rule


def conjugate(x):
    """``x`` conjugated if complex (a tensor or a Python complex), else ``x`` itself."""
    if isinstance(x, complex):
        return x.conjugate()
    return conj(x) if isinstance(x, Tensor) and x.dtype.is_complex else x


# ---- binary arithmetic ---------------------------------------------------------------------
add = ufunc_op("add", np.add, vjp=lambda g, out, a, b: (_if(a, g), _if(b, g)))
sub = ufunc_op("sub", np.subtract,
               vjp=lambda g, out, a, b: (_if(a, g), neg(g) if needs_grad(b) else None),
               no_bool="To invert a mask use ~mask or lk.logical_not; otherwise convert with "
                       "x.long() or x.float() first.")
mul = ufunc_op("mul", np.multiply,
               vjp=holomorphic(lambda g, out, a, b: (mul(g, b) if needs_grad(a) else None,
                                                     mul(g, a) if needs_grad(b) else None)))


def _div_vjp(g, out, a, b):
    ga = div(g, b)
    return (ga if needs_grad(a) else None), (neg(mul(ga, out)) if needs_grad(b) else None)


div = ufunc_op("div", np.true_divide, vjp=holomorphic(_div_vjp))


def _pow_vjp(g, out, a, b):
    # PyTorch's rules: no gradient to the base where the exponent is 0 (x ** 0 at x = 0), none
    # to the exponent where the base is 0 and the exponent >= 0 (0 ** y), NaN to the exponent of
    # a negative base (its log). A Python-number exponent or base stays a Python number (b - 1,
    # math.log(a)): an op on numbers alone would make a tensor on the default device, and of a
    # non-weak dtype.
    ga = gb = None
    if needs_grad(a):
        if not _is_tensor(b):
            ga = zeros_like(g) if b == 0 else mul(g, mul(b, pow(a, b - 1)))
        else:
            ga = where(eq(b, 0), 0, mul(g, mul(b, pow(a, sub(b, 1)))))
    if needs_grad(b):
        if _is_tensor(a):
            gb = mul(g, where(logical_and(eq(a, 0), ge(real(b), 0)), 0, mul(out, log(a))))
        elif a == 0:
            gb = mul(g, where(ge(real(b), 0), 0, mul(out, -math.inf)))
        elif isinstance(a, complex):
            gb = mul(g, mul(out, cmath.log(a)))
        else:
            gb = mul(g, mul(out, math.log(a) if a > 0 else math.nan))
    return ga, gb


def _pow_rule(a, b):
    if common_np_dtype((a, b)).kind == "b":
        raise DTypeError(f"pow is not defined for two bool operands, as in PyTorch; got "
                         f"({describe(a)}, {describe(b)}). Convert one first, e.g. x.long().")
    return elementwise(np.power, "pow")(a, b)


# into: xp.power itself (a captured graph's shape rule has already refused bool ** bool)
@op("pow", shape=_pow_rule, vjp=holomorphic(_pow_vjp), into=lambda xp: xp.power,
    batch=ELEMENTWISE, amp="float32_gpu")
def pow(xp, a, b):
    if common_np_dtype((a, b)).kind == "b":
        raise TypeError("bool ** bool")      # the rule explains it
    return call_ufunc(xp.power, np.power, (a, b))


def _extremum_vjp(loses):
    """maximum's (``loses = lt``) or minimum's (``gt``) vjp, as PyTorch's: a tie splits the
    gradient evenly, an operand that loses gets none, and both get it where a NaN won."""
    def vjp(g, out, a, b):
        share = where(eq(a, b), mul(g, 0.5), g)
        return (where(loses(a, b), 0, share) if needs_grad(a) else None,
                where(loses(b, a), 0, share) if needs_grad(b) else None)
    return vjp


maximum = ufunc_op("maximum", np.maximum, vjp=_extremum_vjp(lambda a, b: lt(a, b)),
                   no_complex=NO_ORDER)
minimum = ufunc_op("minimum", np.minimum, vjp=_extremum_vjp(lambda a, b: gt(a, b)),
                   no_complex=NO_ORDER)


# ---- unary math ------------------------------------------------------------------------------
neg = ufunc_op("neg", np.negative, vjp=lambda g, out, x: (neg(g),))
# exp and log: float32 under a GPU autocast, as PyTorch's CUDA list has them
exp = ufunc_op("exp", np.exp, vjp=holomorphic(lambda g, out, x: (mul(g, out),)),
               amp="float32_gpu")
log = ufunc_op("log", np.log, vjp=holomorphic(lambda g, out, x: (div(g, x),)), amp="float32_gpu")
sqrt = ufunc_op("sqrt", np.sqrt, vjp=holomorphic(lambda g, out, x: (div(mul(g, 0.5), out),)))
# (of a complex z: |z|, real; its gradient g * z / |z|, PyTorch's g * sgn(z))
abs = ufunc_op("abs", np.absolute, vjp=lambda g, out, x: (mul(g, sgn(x)),),
               no_bool="A bool is its own absolute value: use it as it is, or x.long().")


conj = ufunc_op("conj", np.conjugate, vjp=lambda g, out, x: (conj(g),))


def _real_rule(x):
    return shape_of(x), x.dtype.to_real()


# (the engine gives a complex input the real cotangent as a complex one: g + 0i)
@op("real", shape=_real_rule, vjp=lambda g, out, x: (g,), batch=ELEMENTWISE)
def real(xp, x):
    """The real part of each element: a view of a complex tensor's memory, a real tensor
    itself."""
    return x.real


def _imag_rule(x):
    if not x.dtype.is_complex:
        raise DTypeError(f"imag is only defined for complex tensors, as in PyTorch; got "
                         f"{describe(x)}. A real tensor's imaginary part is lk.zeros_like(x).")
    return shape_of(x), x.dtype.to_real()


# (the imaginary part y of z = x + iy: PyTorch's gradient dL/dy as a complex one, i g)
@op("imag", shape=_imag_rule, vjp=lambda g, out, x: (mul(g, 1j),), batch=ELEMENTWISE)
def imag(xp, x):
    """The imaginary part of each element of a complex tensor (a view of its memory)."""
    if x.dtype.kind != "c":
        raise TypeError("real input")       # the rule explains it
    return x.imag


def sgn(x):
    """``x / |x|`` (0 where ``x`` is 0) for complex ``x``; ``sign(x)`` for real ``x``."""
    if not x.dtype.is_complex:
        return sign(x)
    zero = eq(x, 0)          # (0 / 1 there, not 0 / 0: no NaN, even in a gradient)
    return where(zero, 0, div(x, where(zero, 1, abs(x))))


def _sign_rule(x):
    if x.dtype.is_complex:
        raise DTypeError(f"sign is not defined for complex tensors, as in PyTorch; got "
                         f"{describe(x)}. lk.sgn(x) gives x / |x|.")
    return (shape_of(x), x.dtype) if x.dtype.name == "bool_" else elementwise(np.sign, "sign")(x)


@op("sign", shape=_sign_rule, vjp=zero_vjp, into=lambda xp: xp.sign,
    batch=ELEMENTWISE)
def sign(xp, x):
    """-1, 0 or 1 by the sign of each element (a bool is its own sign); gradient zero."""
    if x.dtype.kind == "c":
        raise TypeError("complex input")     # the rule explains it
    return x.copy() if x.dtype == bool else call_ufunc(xp.sign, np.sign, (x,))


tanh = ufunc_op("tanh", np.tanh, vjp=holomorphic(lambda g, out, x: (tanh_backward(g, out),)))


def _tanh_backward_vjp(c, out, g, y):
    return (mul(c, sub(1, mul(y, y))) if needs_grad(g) else None,
            mul(mul(c, g), mul(y, -2.0)) if needs_grad(y) else None)


# tanh's gradient as one op (one dispatch and one tape entry in an RNN step instead of three)
@op("tanh_backward", shape=elementwise(np.multiply, "tanh_backward"),
    vjp=holomorphic(_tanh_backward_vjp),
    batch=ELEMENTWISE)
def tanh_backward(xp, g, y):
    """``g * (1 - y * y)``: the gradient through ``y = tanh(x)`` of an upstream gradient ``g``."""
    return g * (1 - y * y)


def float_input(xp, x):
    """``x`` itself if floating or complex; a bool or int array in the float type PyTorch
    computes its exp in (the default float dtype)."""
    if getattr(x, "dtype", None) is not None and x.dtype.kind not in "fc":
        return x.astype(torch_loop(np.exp, x.dtype)[1])
    return x


def _sigmoid_kernel(xp, x):
    # 1 / (1 + exp(-x)): exp overflowing to inf for very negative x gives the exact 0, so four
    # passes over the data do (a form that never overflows takes eight)
    x = float_input(xp, x)
    if x.dtype.kind == "c":
        return 1 / (1 + xp.exp(-x))
    if xp is np:
        with np.errstate(over="ignore"):
            e = np.exp(-x)
    else:
        e = xp.exp(-x)
    if not e.ndim:
        return 1 / (1 + e)
    e += 1
    return xp.reciprocal(e, out=e)


sigmoid = op("sigmoid", shape=elementwise(np.exp, "sigmoid"),
             vjp=holomorphic(lambda g, out, x: (mul(g, mul(out, sub(1, out))),)),
             batch=ELEMENTWISE)(_sigmoid_kernel)


def _relu_rule(x):
    if x.dtype.name == "bool_" or x.dtype.is_complex:
        raise DTypeError(f"relu does not take {x.dtype} tensors, as in PyTorch; got "
                         f"{describe(x)}. Convert first, e.g. x.float() (x.real for complex).")
    return shape_of(x), ufunc_dtype("relu", np.maximum, x, 0)   # the kernel's maximum(x, 0)


def relu_into(xp, x, out=None):
    """``maximum(x, 0)``, NaN kept, optionally written into ``out`` (the executor's form)."""
    if xp is np and x.dtype.kind == "f":
        # against an array of zeros: NumPy's SIMD loop for maximum skips a broadcast scalar
        # (3x slower)
        return xp.maximum(x, xp.zeros(x.shape, x.dtype), out=out)
    return xp.maximum(x, 0, out=out)


# the vjp reads the output (out > 0 exactly where x > 0), so x's buffer may be reused in place
@op("relu", shape=_relu_rule, vjp=lambda g, out, x: (mul(g, gt(out, 0)),),
    into=lambda xp: functools.partial(relu_into, xp), batch=ELEMENTWISE)
def relu(xp, x):
    if x.dtype == bool or x.dtype.kind == "c":
        raise TypeError("bool or complex input")        # the rule explains it
    return relu_into(xp, x)


# ---- comparisons (no gradient) -----------------------------------------------------------
eq = ufunc_op("eq", np.equal)
ne = ufunc_op("ne", np.not_equal)
lt = ufunc_op("lt", np.less, no_complex=NO_ORDER)
le = ufunc_op("le", np.less_equal, no_complex=NO_ORDER)
gt = ufunc_op("gt", np.greater, no_complex=NO_ORDER)
ge = ufunc_op("ge", np.greater_equal, no_complex=NO_ORDER)
logical_not = ufunc_op("logical_not", np.logical_not)
logical_and = ufunc_op("logical_and", np.logical_and)
logical_or = ufunc_op("logical_or", np.logical_or)
logical_xor = ufunc_op("logical_xor", np.logical_xor)


# ---- selection ----------------------------------------------------------------------------
def _where_rule(cond, a, b):
    return broadcast_shapes("where", cond, a, b), from_numpy_dtype(common_np_dtype((a, b)))


@op("where", shape=_where_rule,
    vjp=lambda g, out, cond, a, b: (None, where(cond, g, 0), where(cond, 0, g)),
    batch=ELEMENTWISE)
def where(xp, cond, a, b):
    """Elementwise ``a`` where ``cond`` is true, else ``b`` (broadcasting; the result's dtype
    promoted as PyTorch does)."""
    if not hasattr(cond, "dtype"):          # a Python bool: CuPy's where takes arrays only
        cond = xp.asarray(cond, dtype=bool)
    out = xp.where(cond, a, b)
    d = getattr(a, "dtype", None)
    if d is None or getattr(b, "dtype", None) is not d:
        common = common_np_dtype((a, b))
        if out.dtype != common:
            out = out.astype(common)
    return out


# ---- casts and device moves ----------------------------------------------------------------
def _cast_rule(x, dtype):
    return shape_of(x), as_dtype(dtype)


def _cast_vjp(g, out, x, dtype):
    return (cast(g, dtype=x.dtype.name),) if x.dtype.is_differentiable else (None,)


@op("cast", shape=_cast_rule, vjp=_cast_vjp, batch=ELEMENTWISE, moves=True)
def cast(xp, x, dtype):
    """``x`` converted to ``dtype`` (a copy unless the dtype already matches); complex to real
    keeps the real part (its gradient: a real cotangent as a complex one)."""
    d = as_dtype(dtype).np
    if x.dtype.kind == "c" and d.kind != "c":
        x = x.real
    if d == _F16:
        with np.errstate(over="ignore"):   # beyond float16's range is inf, as in PyTorch
            return x.astype(d, copy=False)
    return x.astype(d, copy=False)


_F16 = np.dtype(np.float16)


def converted(x, dtype):
    """``x`` cast to ``dtype`` for a conversion the user asked for (``x.float()``, ``x.to``):
    as PyTorch, complex to real keeps the real part and warns that it does."""
    dtype = as_dtype(dtype)
    if x.dtype.is_complex and not dtype.is_complex:
        warnings.warn(f"converting a {x.dtype} tensor to {dtype} discards the imaginary part, "
                      f"as in PyTorch; take x.real, x.abs() or x.angle() to say which part you "
                      f"mean", UserWarning, stacklevel=3)
    return cast(x, dtype=dtype.name)


def _to_device_vjp(g, out, x, device):
    return (to_device(g, device=x.device.name),)


def _to_device_kernel(xp, x, device):
    """``x`` moved to ``device`` (no copy when it is already there)."""
    return transfer(x, device_of_array(x), device)


to_device = op("to_device", shape=same_as_first, vjp=_to_device_vjp,
               batch=ELEMENTWISE, moves=True)(_to_device_kernel)
to_device.out_device = lambda attrs: get_device(attrs["device"])


def check_float(opname, x):
    if not x.dtype.is_floating:
        raise DTypeError(f"{opname} needs a floating-point tensor; got {describe(x)}")


@op("clone", shape=same_as_first, vjp=lambda g, out, x: (g,), batch=ELEMENTWISE,
    moves=True)
def clone(xp, x):
    """A copy of ``x`` in new memory; gradients flow through it (PyTorch's ``clone``)."""
    return x.copy()


@op("stop_gradient", shape=same_as_first, vjp=None, batch=ELEMENTWISE, moves=True)
def stop_gradient(xp, x):
    """``x`` itself, through which no gradient flows (``t.detach()`` under graph capture)."""
    return x
