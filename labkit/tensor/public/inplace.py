"""In-place methods, as PyTorch's: ``x.add_(y)``, ``x.mul_(2)``, ``x.clamp_(min=0)``,
``x.zero_()``, ``x.copy_(src)``, ``x.uniform_()``, and ``x += y``.

An in-place method computes its result with the same ops as the out-of-place form (so values,
dtypes, gradients and capture follow the same rules), then writes it into the tensor's memory
(views of the tensor see the change) and gives the tensor the result's history. (An
``add_``/``sub_`` that autodiff does not record adds into the memory with one op,
``assign_add``/``assign_sub``, to the same values.) As in PyTorch:

- a leaf that requires grad cannot be changed in place while grad mode is on (under
  ``lk.no_grad()``, as optimisers update parameters, or through ``x.data``, it can);
- the result must fit the tensor: same shape, and a dtype that casts to the tensor's within its
  kind (a float result cannot go into an integer tensor);
- a value that autodiff saved for the backward pass and that is then changed in place makes
  ``backward()`` raise, naming the op that saved it and the versions (``labkit.tensor.versions``);
- an operand that is the tensor itself, or a view of its memory (``c += c``, ``c.mul_(c[0])``),
  is read as it was before the write, in value and in gradient; ops recorded before the write
  keep the gradient of the value they read, and a write through a view is a write into the
  tensor viewed, for its gradient too (``labkit.tensor.tape``).

Under graph capture an in-place op on a value of the graph makes the tensor name the result's
node; on a tensor from outside it is an ``assign`` node, run in program order. Views behave as
eagerly: a write through a view updates its base, and a view read after a write into its base
shows it (``labkit.graph.views`` models the shared memory).

>>> import labkit as lk
>>> x = lk.tensor([1.0, -2.0, 3.0])
>>> _ = x.mul_(2).clamp_(min=0); x += 1; x.tolist()
[3.0, 1.0, 7.0]
"""
import functools

import numpy as np

from ...errors import DTypeError, GradError, ShapeError, describe
from .. import arguments, dispatch, versions
from ..creation import full, ones_like, tensor as _tensor, zeros_like
from ..ops.elementwise import cast, clone, mul, ne, where
from ..ops.index import index_put, split_index
from ..ops.shape import broadcast_to
from ..ops.state import assign, assign_add, assign_sub
from ..random import rand, randn
from ..tape import gave_grad, rebind, view_again, view_chain, view_entry
from ..tensor import Tensor
from .registry import METHODS

# In-place forms whose out-of-place computation never reads the tensor's old values in its
# gradient: their values are not copied before the write (see _before).
_NO_SNAPSHOT = frozenset({"add", "sub", "neg", "zero", "fill", "copy", "masked_fill",
                          "index_add", "index_fill", "index_copy", "scatter", "scatter_add",
                          "uniform", "normal"})


def _check_writable(target, name):
    if getattr(target, "_inference", False) and not dispatch._state.inference:
        raise GradError(
            f"{name}_: {describe(target)} is an inference tensor (made inside "
            f"lk.inference_mode()), and it cannot be changed in place outside inference mode "
            f"(PyTorch refuses it too). Make a normal tensor first, x = x.clone(), or do the "
            f"update inside lk.inference_mode().")
    if target._requires_grad and target._node is None and dispatch._state.grad_enabled:
        raise GradError(
            f"{name}_: {describe(target)} is a leaf that requires grad, and changing it in place "
            f"would lose the values its gradient is taken at (PyTorch refuses it too). Update "
            f"it under `with lk.no_grad():` (as an optimiser does), through `x.data.{name}_(...)`, "
            f"or out of place: `x = x.{name}(...)`.")
    if dispatch._state.grad_enabled and (target._node is not None or
                                         getattr(target, "_view_of", None) is not None):
        leaf = _leaf_viewed(target)
        if leaf is not None:
            raise GradError(
                f"{name}_: {describe(target)} is a view of {describe(leaf)}, a leaf that "
                f"requires grad, and a write through the view would change the leaf in place "
                f"(PyTorch refuses it too). Update it under `with lk.no_grad():`, through "
                f"`x.data`, or write into a copy: `x = x.clone()` first.")


def _leaf_viewed(view):
    """The leaf that requires grad which ``view`` is a view of (or a view of a view of), or
    None."""
    for _, base in view_chain(view):
        if base._node is None and base._requires_grad:
            return base
    return None


def write(target, result, name):
    """Write ``result`` into ``target``'s memory and give ``target`` its history; returns
    ``target``. ``name``: the in-place op, for errors."""
    if tuple(result.shape) != tuple(target.shape):
        raise ShapeError(
            f"{name}_: the result has shape {tuple(result.shape)}, which does not fit in place "
            f"into {describe(target)}: an in-place op cannot change a tensor's shape (other "
            f"operands may broadcast to the tensor, not the tensor to them). Use the out-of-place "
            f"form, x = x.{name}(...).")
    rd, td = result.dtype.np, target.dtype.np
    if rd != td and not np.can_cast(rd, td, "same_kind"):
        raise DTypeError(
            f"{name}_: the result's dtype {result.dtype} cannot be cast to {describe(target)}'s "
            f"dtype in place (PyTorch refuses it too). Convert first (x = x.float()) or use the "
            f"out-of-place form.")
    mode = dispatch._state.mode
    if not mode.write_inplace(target, result):
        counter = getattr(result, "_version", None)
        if counter is not None and counter is getattr(target, "_version", None) and \
                result._requires_grad:
            result = clone(result)     # a view of the memory written: keep its values as read
        assign(target, result)
        if dispatch._state.grad_enabled and (result._requires_grad or target._requires_grad):
            bases = _bases_written(target, result)
            written, value = bases[-1] if bases else (target, result)
            given = value._requires_grad and not written._requires_grad
            if not bases:
                rebind(target, result._node, result._requires_grad)
            else:
                _rebind_views(target, bases)
            if given:
                gave_grad(written)
    return target


def _rebind_views(view, bases):
    """After a write through ``view``: the outermost base takes its written value's history,
    and ``view`` and every view between takes a new entry of the view op that made it, reading
    its base's new history. As in PyTorch a view's history is then always its view op over its
    base's: a later write into the base, or through another view of it, is seen when the view
    is read (the backward pass rebases a view's entry older than the last write to its memory,
    ``labkit.autodiff.engine._Edges``), not the history of the view's own write."""
    base, value = bases[-1]
    rebind(base, value._node, value._requires_grad)
    requires_grad = value._requires_grad
    views = [view] + [b for b, _ in bases[:-1]]
    for v in reversed(views):
        made = view_entry(v)
        rebind(v, view_again(made, made.out_version), requires_grad)


def _bases_written(view, value):
    """``[(base, its value after the write)]`` for a write of ``value`` into ``view``: the
    tensor the view was made from (by an op recorded for autodiff, in eager mode), and its own
    base in turn. Each value is the base with the view's part replaced, made of ops (the view
    op's vjp places ``value``), so the base's gradient sees the write, as PyTorch's does."""
    bases = []
    for node, base in view_chain(view):
        value = base_after_write(node.op, node.output_tensor(False), node.inputs, node.attrs,
                                 value, base)
        bases.append((base, value))
    return bases


def base_after_write(op, out, inputs, attrs, value, base):
    """``base`` (``inputs[0]``) with ``value`` written into the view ``out = op(*inputs,
    **attrs)`` of it: the view op's vjp places ``value`` in the base's shape, and where it
    places nothing the base keeps its value. Eager autodiff and capture (``labkit.graph.views``)
    both update a written view's base with it."""
    if value.dtype is not base.dtype:
        value = cast(value, dtype=base.dtype.name)
    placed = op.vjp(value, out, *inputs, **attrs)[0]
    with dispatch.grad_enabled(False):
        part = op.vjp(ones_like(value), out, *inputs, **attrs)[0]
    return where(ne(part, 0), placed, _before(base, copy=False))


def _before(target, copy):
    """``target`` as it is before the write, as a tensor of its own for the out-of-place
    computation to take (its tape entry must not point at ``target``, which is about to get that
    entry as its history): its values copied when the computation's gradient may read them,
    else its memory and its version counter shared (so a later read is still checked); under
    capture, a second symbolic tensor naming the same node."""
    old = dispatch._state.mode.value_before_write(target)
    if old is not None:
        return old
    if target._data is None:          # no memory of its own (a batched tensor under vmap)
        return target
    old = Tensor._make(target._data.copy() if copy else target._data, target._device,
                       target._requires_grad, target._node)
    if not copy:
        old._version = versions.counter_of(target)
    return old


def _recording(target, args):
    if not dispatch._state.grad_enabled:
        return False
    return target._requires_grad or any(isinstance(a, Tensor) and a._requires_grad
                                        for a in args)


def _as_read(operand, target, source, copy):
    """An operand of an in-place op on ``target`` as the computation reads it: ``target``
    itself is ``source`` (its value before the write); a view of ``target``'s memory is copied
    when the computation's gradient may read its values (the write is about to change them),
    and under capture is always a second name of its value (the view itself, read later, is
    re-derived from the written base: ``b.add_(b[1])`` would differentiate the wrong value)."""
    if operand is target:
        return source
    if isinstance(operand, Tensor):
        counter = getattr(operand, "_version", None)
        if counter is not None and counter is getattr(target, "_version", None):
            if operand._data is None:       # under capture: a second name of its value
                old = dispatch._state.mode.value_before_write(operand)
                return operand if old is None else old
            if copy:
                return Tensor._make(operand._data.copy(), operand._device,
                                    operand._requires_grad, operand._node)
    return operand


def in_place(target, name, compute, *args, **kwargs):
    """``compute(target, *args, **kwargs)`` written into ``target``, which is returned: what
    every in-place method does (``name`` is the op, for errors). An operand that is ``target``
    or a view of its memory is read as it was before the write."""
    _check_writable(target, name)
    source = target
    if _recording(target, args + tuple(kwargs.values())):
        copy = name not in _NO_SNAPSHOT
        source = _before(target, copy)
        args = tuple(_as_read(a, target, source, copy) for a in args)
        kwargs = {k: _as_read(a, target, source, copy) for k, a in kwargs.items()}
    elif name in _ACCUMULATE and _accumulates(target, args, kwargs):
        other, alpha = args[0], kwargs.get("alpha", 1)
        _ACCUMULATE[name](target, other if alpha == 1 else mul(other, alpha))
        return target
    return write(target, compute(source, *args, **kwargs), name)


# ``add_`` / ``sub_`` (and ``+=`` / ``-=``) that autodiff does not record, of a float32/64
# tensor by a tensor of its dtype or by a number, eagerly: one op adds into the tensor's memory
# (the same values as the out-of-place sum written back, with one op and one array fewer:
# ``p.data.add_(-lr * p.grad)``). Other cases (casts, broadcasting the tensor, float16,
# capture, distributed tensors) take the general path, and its errors.
_ACCUMULATE = {"add": assign_add, "sub": assign_sub}
_ACCUMULATED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _accumulates(target, args, kwargs):
    if len(args) != 1 or (kwargs and tuple(kwargs) != ("alpha",)) or \
            dispatch._state.mode is not dispatch._eager_mode or type(target) is not Tensor \
            and type(target) in dispatch._type_handlers:
        return False
    data, other = target._data, args[0]
    if data is None or data.dtype not in _ACCUMULATED_DTYPES:
        return False
    if type(other) in (int, float):
        return kwargs.get("alpha", 1) == 1
    return isinstance(other, Tensor) and type(other) not in dispatch._type_handlers and \
        other._device is target._device and other._data is not None and \
        other._data.dtype == data.dtype and (other._data.shape == data.shape or not other.ndim)


def inplace(name, compute):
    """The in-place method ``<name>_`` of ``compute(self, *args, **kwargs)``."""
    def method(self, *args, **kwargs):
        return in_place(self, name, compute, *args, **kwargs)
    method.__name__ = f"{name}_"
    method.__doc__ = f"``x.{name}(...)`` written into ``x`` in place; returns ``x``."
    return method


def inplace_flag(fn):
    """``fn(input, ..., inplace=False)`` with PyTorch's trailing ``inplace`` flag honoured
    (``F.relu(x, inplace=True)``, ``nn.ReLU(inplace=True)``, dropout): the result is written
    into ``input``, which is returned, with the checks of every in-place op (a leaf that requires
    grad is refused; a value autodiff saved and then overwritten makes backward raise)."""
    n = fn.__code__.co_argcount            # ``inplace`` is the last positional parameter

    @functools.wraps(fn)
    def run(*args, **kwargs):
        if len(args) == n:
            flag, args = args[-1], args[:-1]
        else:
            flag = kwargs.pop("inplace", False)
        if not flag:
            return fn(*args, **kwargs)
        return in_place(args[0], fn.__name__, lambda x: fn(x, *args[1:], **kwargs))
    return run


# ---- the methods ---------------------------------------------------------------------------
def _add(x, other, *, alpha=1):
    return x + (other if alpha == 1 else mul(other, alpha))


def _sub(x, other, *, alpha=1):
    return x - (other if alpha == 1 else mul(other, alpha))


def _zero(x):
    return zeros_like(x)


def _fill(x, value):
    if isinstance(value, Tensor):
        if value.ndim:
            raise ShapeError(f"fill_: the value must be a number or a 0-d tensor, got "
                             f"{describe(value)}")
        return broadcast_to(value, shape=x.shape)
    return full(x.shape, value, dtype=x.dtype, device=x.device)


def _copy(x, src, non_blocking=False):
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_ needs a tensor to copy from, got {type(src).__name__}")
    if src.device is not x.device:
        src = src.to(x.device)
    if src.dtype is not x.dtype:
        src = src.to(dtype=x.dtype)
    if src.shape != x.shape:
        return broadcast_to(src, shape=x.shape)
    return clone(src) if src._requires_grad else src    # a node of its own: x's history


def _uniform(x, a=0.0, b=1.0, *, generator=None):
    return rand(x.shape, dtype=x.dtype, device=x.device) * (b - a) + a


def _normal(x, mean=0.0, std=1.0, *, generator=None):
    return randn(x.shape, dtype=x.dtype, device=x.device) * std + mean


_OWN = {"add": _add, "sub": _sub, "zero": _zero, "fill": _fill, "copy": _copy,
        "uniform": _uniform, "normal": _normal}
for _name, _fn in _OWN.items():
    setattr(Tensor, f"{_name}_", inplace(_name, _fn))

# PyTorch's in-place methods whose out-of-place method labkit has (found when this module is
# imported, after every public module has registered its methods).
_FROM_METHODS = (
    "mul", "div", "divide", "true_divide", "multiply", "subtract", "pow", "float_power", "clamp",
    "clip", "clamp_min", "clamp_max", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
    "neg", "negative", "abs", "absolute", "sqrt", "rsqrt", "square", "reciprocal", "sign", "sgn",
    "sigmoid", "tanh", "relu", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "arcsin",
    "arccos", "arctan", "sinh", "cosh", "asinh", "acosh", "atanh", "floor", "ceil", "round",
    "trunc", "frac", "erf", "erfc", "erfinv", "lgamma", "digamma", "logit", "xlogy", "hypot",
    "lerp", "fmod", "remainder", "floor_divide", "copysign", "nan_to_num", "masked_fill",
    "masked_scatter", "index_add", "index_fill", "index_copy", "index_put", "scatter",
    "scatter_add", "scatter_reduce", "logical_not", "logical_and", "logical_or", "logical_xor",
    "bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
    "bitwise_right_shift", "addcmul", "addcdiv", "addmm", "baddbmm", "tril", "triu", "eq", "ne",
    "lt", "le", "gt", "ge", "maximum", "minimum", "fmax", "fmin", "cumsum", "cumprod",
    "renorm", "t", "transpose",
)


def _out_of_place(name):
    fn = METHODS.get(name) or getattr(Tensor, name, None)
    if fn is None or isinstance(fn, property):
        return None

    def compute(x, *args, **kwargs):
        return fn(x, *args, **kwargs)
    return compute


for _name in _FROM_METHODS:
    _compute = _out_of_place(_name)
    if _compute is not None and not hasattr(Tensor, f"{_name}_"):
        setattr(Tensor, f"{_name}_", inplace(_name, _compute))

# ---- x[index] = value ----------------------------------------------------------------------
def _setitem(x, index, value):
    """``x`` with ``value`` (broadcast, cast to x's dtype as PyTorch does) at ``x[index]``."""
    spec, tensors = split_index(x, index)
    if not isinstance(value, Tensor):
        arguments.check_finite_for("setitem", value, x.dtype)     # NaN into an int tensor
        value = _tensor(value, device=x.device)
    if value.dtype is not x.dtype:
        value = cast(value, dtype=x.dtype.name)
    return index_put(x, value, *tensors, spec=spec)


_assign_at = inplace("index_put", _setitem)


def _set_item(self, index, value):
    """``x[index] = value``: ints, slices, None, ..., integer and boolean index tensors; the
    value broadcast to ``x[index]``'s shape and cast to x's dtype; differentiable in ``x``
    (zero gradient where written) and in ``value``."""
    _assign_at(self, index, value)


Tensor.__setitem__ = _set_item

# ``x += y`` updates x in place, as in PyTorch
for _op, _name in (("iadd", "add_"), ("isub", "sub_"), ("imul", "mul_"), ("itruediv", "div_"),
                   ("ipow", "pow_"), ("imod", "remainder_"), ("ifloordiv", "floor_divide_"),
                   ("iand", "bitwise_and_"), ("ior", "bitwise_or_"), ("ixor", "bitwise_xor_"),
                   ("ilshift", "bitwise_left_shift_"), ("irshift", "bitwise_right_shift_")):
    if hasattr(Tensor, _name):
        setattr(Tensor, f"__{_op}__", getattr(Tensor, _name))
