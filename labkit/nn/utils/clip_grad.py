"""Gradient clipping: ``clip_grad_norm_`` (by the norm of all gradients together) and
``clip_grad_value_`` (each entry), as PyTorch's.

Both work eagerly and inside a captured training step: the gradients are read as the step has
them (made by ``backward()`` in the trace, or read from ``.grad`` when the graph runs) and the
clipped ones become ``.grad``, so ``opt.step()`` after them updates with the clipped values.
Each parameter's ``.grad`` is replaced by a new tensor (PyTorch scales it in place): labkit's
gradients may share memory (``a + b`` hands one gradient to both), so writing into one could
clip another twice.
"""
import math

from ...autodiff import no_grad
from ...errors import GradError
from ...graph.capture import current_graph
from ...tensor import dispatch
from ...tensor.op import op
from ...tensor.ops.elementwise import add, div, minimum, mul, to_device
from ...tensor.ops.elementwise_math import clamp
from ...tensor.ops.norm import vector_norm
from ...tensor.ops.shape import concat, reshape
from ...tensor.shape_rules import same_as_first
from ...tensor.tensor import Tensor


def _tensors(parameters):
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def _grads(params):
    """``(parameter, gradient)`` for each parameter that has one; inside a trace, a gradient
    from outside it is the one ``.grad`` holds when the graph runs."""
    mode = dispatch.current_mode()
    out = []
    for p in params:
        g = mode.get_grad(p)
        if g is not None:
            out.append((p, g))
    return out


def _nonfinite_message(norm_type):
    return (f"The total norm of order {norm_type} for gradients from `parameters` is "
            f"non-finite, so it cannot be clipped. To disable this error and scale the "
            f"gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")


@op("check_finite_norm", shape=same_as_first, vjp=None, register=False, stateful=True)
def _check_finite(xp, norm, norm_type):
    """``norm`` itself; raises GradError when it is NaN or infinite (when the graph runs)."""
    if not bool(xp.isfinite(norm)):
        raise GradError(_nonfinite_message(norm_type))
    return norm


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The ``norm_type``-norm of ``tensors`` taken together as one vector (the norm of their
    norms); ``inf`` for the largest absolute entry. ``foreach`` is accepted and ignored.

    >>> import labkit as lk
    >>> lk.nn.utils.get_total_norm([lk.tensor([3.0]), lk.tensor([4.0])]).item()
    5.0
    """
    tensors = _tensors(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return Tensor(0.0)
    with no_grad():
        first = tensors[0].device
        norms = [vector_norm(t, ord=norm_type) for t in tensors]
        norms = [n if n.device is first else to_device(n, device=first) for n in norms]
        total = vector_norm(concat(*[reshape(n, shape=(1,)) for n in norms], dim=0),
                            ord=norm_type)
        if error_if_nonfinite:
            if current_graph() is not None:
                total = _check_finite(total, norm_type=norm_type)
            elif not math.isfinite(total.item()):
                raise GradError(_nonfinite_message(norm_type))
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the parameters' gradients by ``min(max_norm / (total_norm + 1e-6), 1)``."""
    grads = _grads(_tensors(parameters))
    if not grads:
        return
    with no_grad():
        coef = minimum(div(float(max_norm), add(total_norm, 1e-6)), 1.0)
        for p, g in grads:
            c = coef if coef.device is g.device else to_device(coef, device=g.device)
            p.grad = mul(g, c)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Scale all gradients together so that their total ``norm_type``-norm is at most
    ``max_norm``; return the total norm before clipping (a 0-d tensor).

    ``error_if_nonfinite``: raise (GradError, a RuntimeError) when the norm is NaN or infinite
    (inside a captured step: when the step runs). ``foreach`` is accepted and ignored.

    >>> import labkit as lk
    >>> w = lk.nn.Parameter(lk.tensor([3.0, 4.0]))
    >>> (w * w).sum().backward()
    >>> lk.nn.utils.clip_grad_norm_(w, 5.0, norm_type="inf").item()
    8.0
    >>> [round(v, 4) for v in w.grad.tolist()]
    [3.75, 5.0]
    """
    params = _tensors(parameters)
    grads = [g for _, g in _grads(params)]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(params, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                   foreach=None):
    """PyTorch's deprecated spelling of ``clip_grad_norm_``."""
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient entry to ``[-clip_value, clip_value]``.

    >>> import labkit as lk
    >>> w = lk.nn.Parameter(lk.tensor([3.0, -4.0]))
    >>> (w * w).sum().backward()
    >>> lk.nn.utils.clip_grad_value_([w], 1.0); w.grad.tolist()
    [1.0, -1.0]
    """
    clip_value = float(clip_value)
    with no_grad():
        for p, g in _grads(_tensors(parameters)):
            p.grad = clamp(g, -clip_value, clip_value)
