"""Eager mode: run the kernel now; record a tape entry when a gradient will be needed.

This is the hot path of labkit. Per call it does only: unwrap the inputs and check they share a
device, run the kernel, wrap the result, and (if some input requires grad and grad mode is on)
record a TapeNode. Shape rules are not run on success; when a kernel fails, the op's shape rule is
asked to explain why, so the error names the op, shapes, dtypes and devices.

``LABKIT_DEBUG=1`` (or ``lk.config.set_debug(True)``) switches on a checking mode: each op's
shape rule is compared with the kernel's real output, and NaN/Inf in an output raises an error
naming the op that made it.
"""
import math
import numbers

import numpy as np

from .. import config
from ..errors import (ArgumentError, DeviceError, GradError, IndexingError, LabkitError,
                      NumericsError, ShapeError, describe)
from ..devices import default_device
from ..devices.transfer import transfer
from . import arguments, dispatch, low_precision
from .dispatch import Mode
from .low_precision import LOW as _LOW
from . import versions
from .tape import TapeNode, given_grad as _given_grad, regrow as _regrow
from .tensor import Tensor


def _device_mismatch(op, inputs):
    parts = ", ".join(describe(a) for a in inputs)
    first = next(a._device for a in inputs if isinstance(a, Tensor))
    return DeviceError(
        f"{op.name}: inputs are on different devices ({parts}). All tensor inputs of one op must "
        f"be on one device: move them first, e.g. t.to('{first.name}').")


def device_beside_cpu_scalars(op, inputs):
    """The device of an op whose tensor inputs are on two devices, where those on the CPU are
    0-d: PyTorch lets a GPU op read them as numbers (``x.cuda() * torch.tensor(2.0)``), so both
    modes copy them over. Any other mix, or a 0-d CPU tensor the op writes into, is a
    DeviceError."""
    others = {a._device for a in inputs
              if isinstance(a, Tensor) and not (a._device.type == "cpu" and a.ndim == 0)}
    if len(others) != 1 or op.writes is not None and inputs[op.writes]._device not in others:
        raise _device_mismatch(op, inputs)
    return others.pop()


def _with_cpu_scalars_moved(op, inputs):
    """``(device, arrays)``: the inputs' arrays with 0-d CPU tensors copied to the device of
    the others (``device_beside_cpu_scalars``)."""
    device = device_beside_cpu_scalars(op, inputs)
    arrays = [a if not isinstance(a, Tensor) else
              a._data if a._device is device else transfer(a._data, a._device, device)
              for a in inputs]
    return device, arrays


def explain_failure(op, inputs, attrs, exc):
    """Turn a kernel's exception into a labkit error: the shape rule's, or a wrapped one."""
    if isinstance(exc, LabkitError):
        return exc
    for a in inputs:
        if isinstance(a, Tensor) and a._data is None and hasattr(a, "_bdim"):
            return LabkitError(
                f"{op.name}: input {describe(a)} is a batched tensor of an lk.vmap call that has "
                f"returned; it exists only inside that call. Return it from the vmapped "
                f"function instead of keeping it.")
        if isinstance(a, Tensor) and a._data is None:   # a graph's symbolic tensor
            graph = getattr(getattr(a, "graph", None), "name", "?")
            return ShapeError(
                f"{op.name}: input {a!r} is a symbolic tensor of graph {graph!r}, used outside "
                f"that graph. Build on it inside 'with g:' (or the lk.function that made it), "
                f"and get values with g.run(...).")
    try:
        op.shape(*inputs, **attrs)
    except LabkitError as rule_error:
        return rule_error
    except Exception:
        pass
    parts = ", ".join(describe(a) for a in inputs)
    extra = f" with {attrs}" if attrs else ""
    if isinstance(exc, IndexError) and "out of bounds" in str(exc):
        # a data-dependent index value, which no shape rule can see
        return IndexingError(f"{op.name}: an index is out of range for ({parts}){extra}: "
                             f"{exc}. Index values along a dimension of size n must lie in "
                             f"-n..n-1: check the index tensor's values (e.g. idx.max()) "
                             f"against the shape.")
    return ShapeError(f"{op.name} failed on ({parts}){extra}: {type(exc).__name__}: {exc}. "
                      f"Check these shapes and dtypes against what {op.name} expects.")


_NUMBERS = {int, float, bool}
_NUMBER_TYPES = (numbers.Number, np.generic)


def _not_an_input(op, i, value):
    return ArgumentError(
        f"{op.name}: input {i} is {arguments.what(value)}; the inputs of an op are tensors or "
        f"numbers. Pass the tensors one by one, or make one tensor with lk.tensor(...) / "
        f"lk.stack(...) first.")


# True once lk.inference_mode() has been entered in this process (labkit/tensor/inference.py):
# from then on an op that records for autodiff checks that none of its inputs is an inference
# tensor. Before, none can exist, and eager dispatch pays one test of this flag per such op.
_inference_used = False


def refuse_inference_inputs(op, inputs):
    """Raise if ``op``, about to record a tape entry outside inference mode, has an inference
    tensor among ``inputs`` (PyTorch: inference tensors cannot be saved for backward)."""
    st = dispatch._state
    if op.vjp is None or not st.grad_enabled or st.inference:
        return
    for i, a in enumerate(inputs):
        if isinstance(a, Tensor) and getattr(a, "_inference", False):
            raise GradError(
                f"{op.name}: input {i} ({describe(a)}) is an inference tensor (made inside "
                f"lk.inference_mode()), and inference tensors cannot be saved for backward; "
                f"{op.name} records for autodiff here because another input requires grad. Make "
                f"a normal tensor from it outside inference mode with x.clone(), or compute it "
                f"under lk.no_grad() instead of lk.inference_mode().")


def _in_float32(op, device, arrays, inputs, attrs):
    """``op`` on float16/bfloat16 ``arrays``, computed in float32 and rounded to the dtype its
    rule gives (``labkit.tensor.low_precision``)."""
    out_dtype = op.shape(*inputs, **attrs)[1].np
    if device.type == "gpu":
        with device.activate():
            return low_precision.run(op, device.xp, arrays, attrs, out_dtype)
    return low_precision.run(op, device.xp, arrays, attrs, out_dtype)


class EagerMode(Mode):
    """Run each op immediately on its inputs' device."""

    def apply(self, op, inputs, attrs):
        device = None
        needs_grad = low = False
        arrays = []
        if _given_grad and dispatch._state.grad_enabled:   # usually empty (tape.regrow)
            for a in inputs:
                if isinstance(a, Tensor) and not a._requires_grad:
                    _regrow(a)
        for a in inputs:
            if isinstance(a, Tensor):
                d = a._device
                if device is None:
                    device = d
                elif d is not device:
                    device, arrays = _with_cpu_scalars_moved(op, inputs)
                    needs_grad = any(isinstance(t, Tensor) and t._requires_grad
                                     for t in inputs)
                    low = any(getattr(x, "dtype", None) in _LOW for x in arrays)
                    break
                if a._requires_grad:
                    needs_grad = True
                data = a._data
                if data is not None and data.dtype in _LOW:   # None: a symbolic tensor
                    low = True
                arrays.append(data)
            else:
                if type(a) not in _NUMBERS and not isinstance(a, _NUMBER_TYPES):
                    raise _not_an_input(op, len(arrays), a)
                arrays.append(a)
        if device is None:
            device = default_device()
        if needs_grad and _inference_used:
            refuse_inference_inputs(op, inputs)
        try:
            if low and not op.moves:     # float16/bfloat16 computed in float32, rounded back
                out = _in_float32(op, device, arrays, inputs, attrs)
            elif device.type == "gpu":   # launch on the inputs' own GPU, not the current one
                with device.activate():
                    out = op.kernel(device.xp, *arrays, **attrs)
            else:
                out = op.kernel(device.xp, *arrays, **attrs)
        except Exception as exc:
            raise explain_failure(op, inputs, attrs, exc) from None
        if op.out_device is not None:
            device = op.out_device(attrs)
        if type(out) is not device.array_type:   # NumPy's 0-d results come back as scalars
            out = device.xp.asarray(out)
        if op.writes is not None:
            versions.bump(inputs[op.writes])
        if needs_grad and op.vjp is not None and dispatch._state.grad_enabled:
            node = TapeNode(op, inputs, attrs, out, device)
            result = Tensor._make(out, device, True, node)
        else:
            node = None
            result = Tensor._make(out, device)
        if out.base is not None or (arrays and out is arrays[0]):   # a view of an input?
            versions.share_if_view(result, inputs)
            if node is not None:
                node.out_version = getattr(result, "_version", None)
            elif getattr(result, "_version", None) is not None:
                result._view_of = (op, inputs, attrs, versions.epoch[0])   # tape.view_entry
        return result


def _nonfinite(value):
    """'NaN', 'Inf' or None: what non-finite values a tensor, number or attribute holds."""
    if isinstance(value, Tensor):
        if not value.dtype.is_floating:
            return None
        xp = value._device.xp
        if bool(xp.isnan(value._data).any()):
            return "NaN"
        return "Inf" if bool(xp.isinf(value._data).any()) else None
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else "Inf"
    if isinstance(value, (tuple, list)):
        return next((k for k in map(_nonfinite, value) if k), None)
    return None


class DebugEagerMode(EagerMode):
    """Eager mode that checks every op's shape rule against its kernel, and outputs for NaN/Inf.

    An op "produces" NaN or Inf when its output holds them and none of its inputs or attributes
    did (so max_pool2d's -inf padding, or an Inf passed on from an earlier op, is not flagged).
    """

    def apply(self, op, inputs, attrs):
        result = super().apply(op, inputs, attrs)
        shape, dtype = op.shape(*inputs, **attrs)
        # A rule may leave data-dependent sizes unknown: None for the shape or for a dimension.
        same = shape is None or (len(shape) == result.ndim and all(
            s is None or s == r for s, r in zip(shape, result.shape)))
        if not same or dtype is not result.dtype:
            raise LabkitError(
                f"LABKIT_DEBUG: op {op.name}'s shape rule says {shape} {dtype} but its "
                f"kernel returned {result.shape} {result.dtype} for inputs "
                f"({', '.join(describe(a) for a in inputs)}); fix the rule or the kernel.")
        if result.dtype.is_floating:
            xp = result._device.xp
            if not bool(xp.isfinite(result._data).all()):
                made = _nonfinite(result)
                given = [k for k in map(_nonfinite, (*inputs, *attrs.values())) if k]
                if made == "NaN" and "NaN" not in given or made == "Inf" and not given:
                    count = int(xp.count_nonzero(xp.isnan(result._data) if made == "NaN"
                                                 else xp.isinf(result._data)))
                    source = "inputs holding only Inf" if given else "finite inputs"
                    parts = ", ".join(describe(a) for a in inputs)
                    raise NumericsError(
                        f"LABKIT_DEBUG: op {op.name} produced {made} ({count} of "
                        f"{result.numel()} values of its output {describe(result)}) from {source} "
                        f"({parts}){f' with {attrs}' if attrs else ''}. Look for its usual "
                        f"causes (log or sqrt of a negative number, log(0), division by zero, "
                        f"overflow) in the values fed to {op.name}; lk.config.set_debug(False) "
                        f"(or unsetting LABKIT_DEBUG) runs without this check.")
        return result


def _set_debug(flag):
    # Every thread's mode stack starts from the one eager mode object: switching its class
    # switches checking on or off everywhere at once, at no cost per op.
    dispatch._eager_mode.__class__ = DebugEagerMode if flag else EagerMode


dispatch._install_eager(DebugEagerMode() if config.debug() else EagerMode())
config._watch("debug", _set_debug)
