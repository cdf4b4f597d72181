"""Elementwise ops: one ONNX op each, or a short formula where ONNX has none."""
import math

import numpy as np
from onnx import numpy_helper

from ...tensor.dtypes import bool_
from ..builder import compute_dtype, onnx_type
from ..registry import converter

_UNARY = {"abs": "Abs", "acos": "Acos", "acosh": "Acosh", "asin": "Asin", "asinh": "Asinh",
          "atan": "Atan", "atanh": "Atanh", "ceil": "Ceil", "cos": "Cos", "cosh": "Cosh",
          "erf": "Erf", "exp": "Exp", "floor": "Floor", "log": "Log", "neg": "Neg",
          "relu": "Relu", "sigmoid": "Sigmoid", "sign": "Sign", "sin": "Sin", "sinh": "Sinh",
          "sqrt": "Sqrt", "tan": "Tan", "tanh": "Tanh", "clone": "Identity",
          "stop_gradient": "Identity", "to_device": "Identity"}
_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow",
           "maximum": "Max", "minimum": "Min", "clamp_min": "Max", "clamp_max": "Min"}
_COMPARE = {"eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater",
            "ge": "GreaterOrEqual"}
_LOGICAL = {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}
_BITWISE = {"bitwise_and": "BitwiseAnd", "bitwise_or": "BitwiseOr", "bitwise_xor": "BitwiseXor"}


def _unary(onnx_op):
    def convert(b, node, ins):
        (x,) = b.operands(node, node.dtype, node.inputs[:1])
        return b.emit(onnx_op, [x], name=node.name)
    return convert


def _binary(onnx_op, dtype_of):
    def convert(b, node, ins):
        a, c = b.operands(node, dtype_of(node))
        return b.emit(onnx_op, [a, c], name=node.name)
    return convert


for _name, _op in _UNARY.items():
    converter(_name)(_unary(_op))
for _name, _op in _BINARY.items():
    converter(_name)(_binary(_op, lambda node: node.dtype))
for _name, _op in _COMPARE.items():
    converter(_name)(_binary(_op, lambda node: compute_dtype(node.inputs)))
for _name, _op in _LOGICAL.items():
    converter(_name)(_binary(_op, lambda node: bool_))
for _name, _op in _BITWISE.items():
    converter(_name)(_binary(_op, lambda node: node.dtype))


@converter("ne")
def _ne(b, node, ins):
    a, c = b.operands(node)
    return b.emit("Not", [b.emit("Equal", [a, c])], name=node.name)


@converter("logical_not")
def _not(b, node, ins):
    (x,) = b.operands(node, bool_)
    return b.emit("Not", [x], name=node.name)


@converter("bitwise_not")
def _bitwise_not(b, node, ins):
    (x,) = b.operands(node, node.dtype)
    return b.emit("Not" if node.dtype is bool_ else "BitwiseNot", [x], name=node.name)


@converter("isnan", "isinf")
def _isnan(b, node, ins):
    (x,) = b.operands(node, node.inputs[0].dtype)
    return b.emit("IsNaN" if node.op.name == "isnan" else "IsInf", [x], name=node.name)


@converter("isfinite")
def _isfinite(b, node, ins):
    (x,) = b.operands(node, node.inputs[0].dtype)
    bad = b.emit("Or", [b.emit("IsNaN", [x]), b.emit("IsInf", [x])])
    return b.emit("Not", [bad], name=node.name)


def _one(b, node):
    return b.const(np.asarray(1, node.dtype.np))


@converter("expm1")
def _expm1(b, node, ins):
    (x,) = b.operands(node, node.dtype, node.inputs[:1])
    return b.emit("Sub", [b.emit("Exp", [x]), _one(b, node)], name=node.name)


@converter("log1p")
def _log1p(b, node, ins):
    (x,) = b.operands(node, node.dtype, node.inputs[:1])
    return b.emit("Log", [b.emit("Add", [x, _one(b, node)])], name=node.name)


@converter("erfc")
def _erfc(b, node, ins):
    (x,) = b.operands(node, node.dtype, node.inputs[:1])
    return b.emit("Sub", [_one(b, node), b.emit("Erf", [x])], name=node.name)


@converter("log2", "log10")
def _log_base(b, node, ins):
    (x,) = b.operands(node, node.dtype)
    base = 2.0 if node.op.name == "log2" else 10.0
    return b.emit("Div", [b.emit("Log", [x]), b.const(np.asarray(math.log(base), node.dtype.np))],
                  name=node.name)


@converter("exp2")
def _exp2(b, node, ins):
    (x,) = b.operands(node, node.dtype)
    return b.emit("Pow", [b.const(np.asarray(2, node.dtype.np)), x], name=node.name)


@converter("trunc")
def _trunc(b, node, ins):
    (x,) = b.operands(node, node.dtype)
    if not node.dtype.is_floating:
        return b.emit("Identity", [x], name=node.name)
    return b.emit("Mul", [b.emit("Sign", [x]), b.emit("Floor", [b.emit("Abs", [x])])],
                  name=node.name)


@converter("round")
def _round(b, node, ins):
    (x,) = b.operands(node, node.dtype)
    decimals = b.attrs(node).get("decimals", 0)
    if not decimals:
        return b.emit("Round", [x], name=node.name)
    scale = b.const(np.asarray(10.0 ** decimals, node.dtype.np))
    return b.emit("Div", [b.emit("Round", [b.emit("Mul", [x, scale])]), scale], name=node.name)


@converter("cast")
def _cast(b, node, ins):
    (x,) = b.operands(node, node.inputs[0].dtype)
    return b.emit("Cast", [x], to=onnx_type(node.dtype), name=node.name)


@converter("where")
def _where(b, node, ins):
    cond, a, c = node.inputs
    (cond,) = b.operands(node, bool_, [cond])
    a, c = b.operands(node, node.dtype, [a, c])
    return b.emit("Where", [cond, a, c], name=node.name)


@converter("clamp")
def _clamp(b, node, ins):
    x, lo, hi = node.inputs
    (x,) = b.operands(node, node.dtype, [x])
    if lo is not None:
        (lo,) = b.operands(node, node.dtype, [lo])
        x = b.emit("Max", [x, lo])
    if hi is not None:
        (hi,) = b.operands(node, node.dtype, [hi])
        x = b.emit("Min", [x, hi])
    return b.emit("Identity", [x], name=node.name)


@converter("lerp")
def _lerp(b, node, ins):
    start, end, weight = b.operands(node, node.dtype)
    step = b.emit("Mul", [weight, b.emit("Sub", [end, start])])
    return b.emit("Add", [start, step], name=node.name)


@converter("hypot")
def _hypot(b, node, ins):
    a, c = b.operands(node, node.dtype)
    total = b.emit("Add", [b.emit("Mul", [a, a]), b.emit("Mul", [c, c])])
    return b.emit("Sqrt", [total], name=node.name)


@converter("fmod")
def _fmod(b, node, ins):
    a, c = b.operands(node, node.dtype, node.inputs[:2])
    return b.emit("Mod", [a, c], fmod=1, name=node.name)


@converter("remainder")
def _remainder(b, node, ins):
    a, c = b.operands(node, node.dtype, node.inputs[:2])
    if not node.dtype.is_floating:
        return b.emit("Mod", [a, c], fmod=0, name=node.name)
    floor = b.emit("Floor", [b.emit("Div", [a, c])])
    return b.emit("Sub", [a, b.emit("Mul", [floor, c])], name=node.name)


@converter("floor_divide")
def _floor_divide(b, node, ins):
    a, c = b.operands(node, node.dtype, node.inputs[:2])
    if node.dtype.is_floating:
        return b.emit("Floor", [b.emit("Div", [a, c])], name=node.name)
    as_float = [b.cast(v, "float64") for v in (a, c)]
    return b.cast(b.emit("Floor", [b.emit("Div", as_float)]), node.dtype)


@converter("zeros_like")
def _zeros_like(b, node, ins):
    zero = numpy_helper.from_array(np.zeros(1, node.dtype.np))
    return b.emit("ConstantOfShape", [b.emit("Shape", [ins[0]])], value=zero, name=node.name)


@converter("gelu")
def _gelu(b, node, ins):
    (x,) = b.operands(node, node.dtype, node.inputs[:1])
    approximate = node.attrs.get("approximate", "none")
    if b.opset >= 20:
        return b.emit("Gelu", [x], approximate=approximate, name=node.name)
    c = lambda v: b.const(np.asarray(v, node.dtype.np))   # noqa: E731
    if approximate == "tanh":      # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = b.emit("Mul", [b.emit("Mul", [x, x]), x])
        inner = b.emit("Add", [x, b.emit("Mul", [cube, c(0.044715)])])
        t = b.emit("Tanh", [b.emit("Mul", [inner, c(math.sqrt(2 / math.pi))])])
    else:                          # 0.5 x (1 + erf(x / sqrt 2))
        t = b.emit("Erf", [b.emit("Mul", [x, c(1 / math.sqrt(2))])])
    half = b.emit("Mul", [x, c(0.5)])
    return b.emit("Mul", [half, b.emit("Add", [t, c(1.0)])], name=node.name)
