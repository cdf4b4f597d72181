"""Functional transforms in JAX's spelling: grad, value_and_grad, vjp, jvp; and no_grad.

>>> import labkit as lk
>>> f = lambda x: (x ** 3).sum()
>>> lk.grad(f)(lk.tensor([2.0])).tolist()
[12.0]
>>> lk.grad(lk.grad(lambda x: x ** 3))(lk.tensor(2.0)).item()    # second derivative 6x
12.0
"""
import contextlib
import functools
import threading

from ..errors import DTypeError, GradError, describe
from ..tensor import dispatch
from ..tensor.creation import tensor as _tensor, zeros_like
from ..tensor.tensor import Tensor
from .engine import gradients


class _Depth(threading.local):
    value = 0


_depth = _Depth()   # > 0 while a transform's function runs: inner transforms keep their graph


class _GradMode(contextlib.ContextDecorator):
    """Sets grad mode to ``_flag`` inside the block and restores what was there before.

    Re-entrant: the previous states form a stack, and each call of a decorated function gets a
    fresh context (so recursion and threads never restore another call's state).
    """
    _flag = None

    def __init__(self):
        self._previous = []

    def _recreate_cm(self):
        return type(self)()

    def __enter__(self):
        self._previous.append(dispatch.is_grad_enabled())
        dispatch.set_grad_enabled(self._flag)

    def __exit__(self, *exc):
        dispatch.set_grad_enabled(self._previous.pop())
        return False


class no_grad(_GradMode):
    """Context manager / decorator: ops inside record no tape (no gradients, less memory).

    >>> import labkit as lk
    >>> x = lk.ones(2, requires_grad=True)
    >>> with lk.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
    """
    _flag = False


class enable_grad(_GradMode):
    """Context manager / decorator: turn recording back on inside a ``no_grad`` block."""
    _flag = True


def is_grad_enabled():
    """Whether ops currently record tape for autodiff."""
    return dispatch.is_grad_enabled()


def _as_input(x, where):
    """A differentiable version of argument ``x``; nested transforms keep outer tensors as-is."""
    if isinstance(x, Tensor):
        if x._requires_grad:
            return x
        if not x.dtype.is_floating:
            raise DTypeError(f"{where}: cannot differentiate with respect to {describe(x)}: only "
                             f"floating-point tensors have gradients; pass x.float()")
        return x.detach().requires_grad_(True)
    t = _tensor(x)
    if not t.dtype.is_floating:
        raise DTypeError(f"{where}: cannot differentiate with respect to the integer value {x!r}; "
                         f"pass a float")
    return t.requires_grad_(True)


def _argnums(argnums, nargs, where):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    for i in nums:
        if not -nargs <= i < nargs:
            raise GradError(f"{where}: argnums={argnums} but the function was called with {nargs} "
                            f"positional argument(s)")
    return single, tuple(i % nargs for i in nums)


def _call_differentiable(fun, args, kwargs, nums, where):
    args = list(args)
    nested = _depth.value > 0 or any(isinstance(args[i], Tensor) and args[i]._requires_grad
                                     for i in nums)
    for i in nums:
        args[i] = _as_input(args[i], where)
    _depth.value += 1
    try:
        with dispatch.grad_enabled(True):
            out = fun(*args, **kwargs)
    finally:
        _depth.value -= 1
    return out, [args[i] for i in nums], nested


def _scalar_output(out, where):
    if not isinstance(out, Tensor):
        raise GradError(f"{where}: the function must return a labkit Tensor with one element; "
                        f"it returned {type(out).__name__}")
    if out.numel() != 1:
        raise GradError(f"{where}: the function must return a single value to differentiate, "
                        f"but returned shape {out.shape}. Reduce it (e.g. .sum()), or use lk.vjp "
                        f"for non-scalar outputs.")
    return out


def _detached(tree):
    """``tree`` (tensors in nested tuples, lists and dicts) with every tensor detached."""
    if isinstance(tree, Tensor):
        return tree.detach()
    if isinstance(tree, (tuple, list)):
        items = [_detached(t) for t in tree]
        return type(tree)(*items) if hasattr(tree, "_fields") else type(tree)(items)
    if isinstance(tree, dict):
        return {k: _detached(v) for k, v in tree.items()}
    return tree


def value_and_grad(fun, argnums=0, has_aux=False, _name="value_and_grad"):
    """``fun`` -> a function returning ``(fun(*args), gradient)``; see ``grad``."""
    where = f"{_name}({getattr(fun, '__name__', 'fun')})"

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        single, nums = _argnums(argnums, len(args), where)
        out, inputs, nested = _call_differentiable(fun, args, kwargs, nums, where)
        aux = None
        if has_aux:
            out, aux = out
        out = _scalar_output(out, where)
        if out._requires_grad:
            grads = gradients(out, inputs, create_graph=nested)
        else:
            grads = [zeros_like(x) for x in inputs]
        value = out if nested else out.detach()
        if has_aux and not nested:
            aux = _detached(aux)   # aux is not differentiated: do not keep its tape alive
        g = grads[0] if single else tuple(grads)
        return ((value, aux), g) if has_aux else (value, g)
    return wrapped


def grad(fun, argnums=0, has_aux=False):
    """The gradient of a scalar function: ``lk.grad(f)(x)`` is df/dx, with x's shape.

    ``argnums`` (int or tuple) picks which positional arguments to differentiate; a tuple gives a
    tuple of gradients. Transforms compose: ``lk.grad(lk.grad(f))`` is the second derivative.
    """
    vg = value_and_grad(fun, argnums, has_aux, _name="grad")

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        if has_aux:
            (_, aux), g = vg(*args, **kwargs)
            return g, aux
        return vg(*args, **kwargs)[1]
    return wrapped


def vjp(fun, *primals):
    """``(fun(*primals), vjp_fn)``: ``vjp_fn(cotangent)`` gives one cotangent per primal.

    ``vjp_fn`` may be called several times (the graph is kept until it is dropped).
    """
    where = f"vjp({getattr(fun, '__name__', 'fun')})"
    nums = tuple(range(len(primals)))
    out, inputs, nested = _call_differentiable(fun, primals, {}, nums, where)
    if not isinstance(out, Tensor):
        raise GradError(f"{where}: the function must return a labkit Tensor, got "
                        f"{type(out).__name__}")

    def vjp_fn(cotangent):
        if not isinstance(cotangent, Tensor):
            cotangent = _tensor(cotangent, dtype=out.dtype, device=out.device)
        if cotangent.shape != out.shape:
            raise GradError(f"{where}: cotangent {describe(cotangent)} must match the output "
                            f"{describe(out)}")
        if not out._requires_grad:
            return tuple(zeros_like(x) for x in inputs)
        return tuple(gradients(out, inputs, grad_outputs=cotangent, retain_graph=True,
                               create_graph=nested or _depth.value > 0))
    return (out if nested else out.detach()), vjp_fn


def jvp(fun, primals, tangents):
    """Forward-mode product: ``(fun(*primals), J @ tangents)``.

    Computed as the transpose of the vjp (the vjp is linear in its cotangent, so differentiating
    it with respect to the cotangent in the direction ``tangents`` gives J @ tangents): it needs
    no extra rule per op, at about twice the cost of one vjp.
    """
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise GradError(f"jvp: {len(primals)} primal(s) but {len(tangents)} tangent(s)")
    where = f"jvp({getattr(fun, '__name__', 'fun')})"
    nums = tuple(range(len(primals)))
    out, inputs, nested = _call_differentiable(fun, primals, {}, nums, where)
    tangents = [t if isinstance(t, Tensor) else _tensor(t, dtype=x.dtype, device=x.device)
                for t, x in zip(tangents, inputs)]
    for t, x in zip(tangents, inputs):
        if t.shape != x.shape:
            raise GradError(f"{where}: tangent {describe(t)} must match its primal {describe(x)}")
    if not out._requires_grad:
        return (out if nested else out.detach()), zeros_like(out)
    with dispatch.grad_enabled(True):
        u = zeros_like(out).requires_grad_(True)
        cots = gradients(out, inputs, grad_outputs=u, create_graph=True)
        live = [(c, t) for c, t in zip(cots, tangents) if c._requires_grad]
        if not live:
            return (out if nested else out.detach()), zeros_like(out)
        tangent_out = gradients([c for c, _ in live], [u], grad_outputs=[t for _, t in live],
                                create_graph=nested)[0]
    return (out if nested else out.detach()), tangent_out
