"""Eager mode: run the kernel now; record a tape entry when a gradient will be needed.

This is the hot path of labkit. Per call it does only: unwrap the inputs and check they share a
device, run the kernel, wrap the result, and (if some input requires grad and grad mode is on)
record a TapeNode. Shape rules are not run on success; when a kernel fails, the op's shape rule is
asked to explain why, so the error names the op, shapes, dtypes and devices.

``LABKIT_DEBUG=1`` switches on a checking mode: each op's shape rule is compared with the
kernel's real output, and NaN/Inf in an output raises an error naming the op that made it.
"""
import os

from ..errors import DeviceError, LabkitError, ShapeError, describe
from ..devices import default_device
from . import dispatch
from .dispatch import Mode
from .tape import TapeNode
from .tensor import Tensor


def _device_mismatch(op, inputs):
    parts = ", ".join(describe(a) for a in inputs)
    return DeviceError(
        f"{op.name}: inputs are on different devices ({parts}). All tensor inputs of one op must "
        f"be on one device: move them with t.to('cpu') / t.to('gpu:0') first.")


def explain_failure(op, inputs, attrs, exc):
    """Turn a kernel's exception into a labkit error: the shape rule's, or a wrapped one."""
    if isinstance(exc, LabkitError):
        return exc
    try:
        op.shape(*inputs, **attrs)
    except LabkitError as rule_error:
        return rule_error
    except Exception:
        pass
    parts = ", ".join(describe(a) for a in inputs)
    extra = f" with {attrs}" if attrs else ""
    return ShapeError(f"{op.name} failed on ({parts}){extra}: {type(exc).__name__}: {exc}")


class EagerMode(Mode):
    """Run each op immediately on its inputs' device."""

    def apply(self, op, inputs, attrs):
        device = None
        needs_grad = False
        arrays = []
        for a in inputs:
            if isinstance(a, Tensor):
                d = a._device
                if device is None:
                    device = d
                elif d is not device:
                    raise _device_mismatch(op, inputs)
                if a._requires_grad:
                    needs_grad = True
                arrays.append(a._data)
            else:
                arrays.append(a)
        if device is None:
            device = default_device()
        try:
            out = op.kernel(device.xp, *arrays, **attrs)
        except Exception as exc:
            raise explain_failure(op, inputs, attrs, exc) from None
        if op.out_device is not None:
            device = op.out_device(attrs)
        if type(out) is not device.array_type:   # NumPy's 0-d results come back as scalars
            out = device.xp.asarray(out)
        if needs_grad and op.vjp is not None and dispatch._state.grad_enabled:
            return Tensor._make(out, device, True, TapeNode(op, inputs, attrs, out, device))
        return Tensor._make(out, device)


class DebugEagerMode(EagerMode):
    """Eager mode that checks every op's shape rule against its kernel, and outputs for NaN/Inf."""

    def apply(self, op, inputs, attrs):
        result = super().apply(op, inputs, attrs)
        shape, dtype = op.shape(*inputs, **attrs)
        if tuple(shape) != result.shape or dtype is not result.dtype:
            raise LabkitError(
                f"LABKIT_DEBUG: op {op.name}'s shape rule says {tuple(shape)} {dtype} but its "
                f"kernel returned {result.shape} {result.dtype} for inputs "
                f"({', '.join(describe(a) for a in inputs)}); fix the rule or the kernel.")
        if result.dtype.is_floating:
            xp = result._device.xp
            if not bool(xp.isfinite(result._data).all()):
                raise FloatingPointError(
                    f"LABKIT_DEBUG: op {op.name} produced NaN or Inf from inputs "
                    f"({', '.join(describe(a) for a in inputs)})")
        return result


dispatch._install_eager(DebugEagerMode() if os.environ.get("LABKIT_DEBUG") == "1"
                        else EagerMode())
