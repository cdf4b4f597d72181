"""Functional transforms in JAX's spelling: grad, value_and_grad, vjp, jvp, stop_gradient; and
no_grad.

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
from ..tensor.ops.elementwise import stop_gradient as _stop_gradient
from ..tensor.tensor import Tensor
from . import trees
from .batched import BatchedTensor
from .engine import gradients


class _Depth(threading.local):
    value = 0


_depth = _Depth()   # > 0 while a transform's function runs: inner transforms keep their graph


class _GradMode(contextlib.ContextDecorator):
    """Sets grad mode to ``_flag`` inside the block and restores what was there before.

    Re-entrant: the previous states form a stack, and each call of a decorated function gets a
    fresh context (so recursion and threads never restore another call's state). A subclass
    that switches more (inference mode) extends ``_switch`` / ``_restore``.
    """
    _flag = None

    def __init__(self):
        self._previous = []

    def _recreate_cm(self):
        return type(self)()

    def _switch(self):
        """Switch to this context's modes; returns what ``_restore`` puts back."""
        previous = dispatch.is_grad_enabled()
        dispatch.set_grad_enabled(self._flag)
        return previous

    def _restore(self, previous):
        dispatch.set_grad_enabled(previous)

    def __enter__(self):
        self._previous.append(self._switch())

    def __exit__(self, *exc):
        self._restore(self._previous.pop())
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
        if not x.dtype.is_differentiable:
            raise DTypeError(f"{where}: cannot differentiate with respect to {describe(x)}: only "
                             f"floating-point and complex tensors have gradients; pass "
                             f"x.float()")
        if type(x) is BatchedTensor:
            # a new leaf for this example's gradient; the batch keeps its own history, which
            # a gradient taken outside the vmap (grad of vmap of grad) differentiates through
            return BatchedTensor._wrap(x._value, x._bdim, x._level).requires_grad_(True)
        return x.detach().requires_grad_(True)
    t = _tensor(x)
    if not t.dtype.is_differentiable:
        raise DTypeError(f"{where}: cannot differentiate with respect to the integer value {x!r}; "
                         f"pass a float")
    return t.requires_grad_(True)


def _tracked(x):
    """Whether ``x`` is differentiated by something outside (it requires grad, or the batch a
    BatchedTensor holds does): the gradient taken now must then be differentiable itself."""
    while type(x) is BatchedTensor:
        if x._requires_grad:
            return True
        x = x._value
    return isinstance(x, Tensor) and x._requires_grad


def _argnums(argnums, nargs, where):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    for i in nums:
        if not -nargs <= i < nargs:
            raise GradError(f"{where}: argnums={argnums} but the function was called with {nargs} "
                            f"positional argument(s)")
    return single, tuple(i % nargs for i in nums)


def _call_differentiable(fun, args, kwargs, nums, where):
    """``fun`` called with its arguments ``nums`` made differentiable: ``(out, inputs, nested,
    rebuild)``. An argument may be a tensor or a tuple/list/dict of them (parameters by name):
    ``inputs`` lists their tensors, and ``rebuild(values)`` puts one value per tensor back in
    the arguments' structures (one per argument of ``nums``)."""
    args = list(args)
    specs, inputs = [], []
    for i in nums:
        leaves, spec, _ = trees.flatten(args[i])
        specs.append((spec, len(leaves)))
        inputs.extend(leaves)
    nested = _depth.value > 0 or any(_tracked(x) for x in inputs)
    inputs = [_as_input(x, where) for x in inputs]
    start = 0
    for i, (spec, n) in zip(nums, specs):
        args[i] = trees.unflatten(spec, inputs[start:start + n])
        start += n
    _depth.value += 1
    try:
        with dispatch.grad_enabled(True):
            out = fun(*args, **kwargs)
    finally:
        _depth.value -= 1

    def rebuild(values):
        values = iter(values)
        return [trees.unflatten(spec, [next(values) for _ in range(n)]) for spec, n in specs]
    return out, inputs, nested, rebuild


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
    return trees.map_leaves(lambda t: t.detach() if isinstance(t, Tensor) else t, tree)


def value_and_grad(fun, argnums=0, has_aux=False, _name="value_and_grad"):
    """``fun`` -> a function returning ``(fun(*args), gradient)``; see ``grad``."""
    where = f"{_name}({getattr(fun, '__name__', 'fun')})"

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        single, nums = _argnums(argnums, len(args), where)
        out, inputs, nested, rebuild = _call_differentiable(fun, args, kwargs, nums, where)
        aux = None
        if has_aux:
            out, aux = _split_aux(out, where)
        out = _scalar_output(out, where)
        if out._requires_grad:
            grads = gradients(out, inputs, create_graph=nested)
        else:
            grads = [zeros_like(x) for x in inputs]
        value = out if nested else out.detach()
        if has_aux and not nested:
            aux = _detached(aux)   # aux is not differentiated: do not keep its tape alive
        grads = rebuild(grads)
        g = grads[0] if single else tuple(grads)
        return ((value, aux), g) if has_aux else (value, g)
    return wrapped


def grad(fun, argnums=0, has_aux=False):
    """The gradient of a scalar function: ``lk.grad(f)(x)`` is df/dx, with x's shape.

    ``argnums`` (int or tuple) picks which positional arguments to differentiate; a tuple gives a
    tuple of gradients. An argument may be a tuple, list or dict of tensors (a model's
    parameters); its gradient then has the same structure. Transforms compose:
    ``lk.grad(lk.grad(f))`` is the second derivative.

    >>> import labkit as lk
    >>> params = {"w": lk.tensor([2.0]), "b": lk.tensor([1.0])}
    >>> g = lk.grad(lambda p, x: ((p["w"] * x + p["b"]) ** 2).sum())(params, lk.tensor([3.0]))
    >>> g["w"].tolist(), g["b"].tolist()
    ([42.0], [14.0])
    """
    vg = value_and_grad(fun, argnums, has_aux, _name="grad")

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        if has_aux:
            (_, aux), g = vg(*args, **kwargs)
            return g, aux
        return vg(*args, **kwargs)[1]
    return wrapped


def _split_aux(out, where):
    if not (isinstance(out, tuple) and len(out) == 2):
        raise GradError(f"{where}: has_aux=True needs the function to return a pair "
                        f"(output, aux), got {type(out).__name__}")
    return out


def _outputs(out, where):
    """The tensors of ``out`` (a tensor, or a tuple/list/dict of them) and its structure."""
    leaves, spec, paths = trees.flatten(out, "output")
    for leaf, path in zip(leaves, paths):
        if not isinstance(leaf, Tensor):
            raise GradError(f"{where}: the function must return labkit Tensors (or a tuple, list "
                            f"or dict of them); {path} is a {type(leaf).__name__}")
    return leaves, spec


def pullback(outs, inputs, keep):
    """``pull(cotangents) -> cotangents of inputs``: one cotangent per tensor of ``outs``; zeros
    for inputs they do not reach. ``keep``: the backward pass is recorded (nested transforms).
    May be called any number of times (under lk.vmap too)."""
    live = [i for i, o in enumerate(outs) if o._requires_grad]

    def pull(cotangents):
        if not live:
            return tuple(zeros_like(x) for x in inputs)
        return tuple(gradients([outs[i] for i in live], inputs,
                               grad_outputs=[cotangents[i] for i in live], retain_graph=True,
                               create_graph=keep))
    return pull


def pushforward(outs, inputs, keep):
    """``push(tangents) -> tangents of outs``: one tangent per input; zeros for outputs they do
    not reach.

    The transpose of the vjp: the vjp is linear in its cotangent ``u``, so differentiating it
    with respect to ``u`` in the direction of the tangents gives J @ tangents. It needs no extra
    rule per op, at about twice the cost of one vjp."""
    live = [i for i, o in enumerate(outs) if o._requires_grad]
    with dispatch.grad_enabled(True):
        us = [zeros_like(outs[i]).requires_grad_(True) for i in live]
        cots = gradients([outs[i] for i in live], inputs, grad_outputs=us,
                         create_graph=True) if live else []
    linked = [j for j, c in enumerate(cots) if c._requires_grad]

    def push(tangents):
        if linked:
            got = dict(zip(live, gradients([cots[j] for j in linked], us,
                                           grad_outputs=[tangents[j] for j in linked],
                                           retain_graph=True, create_graph=keep)))
        else:
            got = {}
        return tuple(got[i] if i in got else zeros_like(o) for i, o in enumerate(outs))
    return push


def _as_like(values, tensors, where, what):
    """``values`` (tensors or numbers, one per tensor of ``tensors``) as tensors of their shapes."""
    if len(values) != len(tensors):
        raise GradError(f"{where}: {len(values)} {what}(s) for {len(tensors)} tensor(s); give "
                        f"one per tensor, in the same structure")
    out = []
    for v, t in zip(values, tensors):
        if not isinstance(v, Tensor):
            v = _tensor(v, dtype=t.dtype, device=t.device)
        if v.shape != t.shape:
            raise GradError(f"{where}: {what} {describe(v)} must match {describe(t)}")
        out.append(v)
    return out


def vjp(fun, *primals, has_aux=False):
    """``(fun(*primals), vjp_fn)``: ``vjp_fn(cotangent)`` gives one cotangent per primal.

    ``fun`` returns a tensor or a tuple/list/dict of them; the cotangent has the same structure.
    With ``has_aux``, ``fun`` returns ``(output, aux)`` and vjp returns ``(output, vjp_fn,
    aux)``. ``vjp_fn`` may be called several times (the graph is kept until it is dropped).
    """
    where = f"vjp({getattr(fun, '__name__', 'fun')})"
    nums = tuple(range(len(primals)))
    out, inputs, nested, rebuild = _call_differentiable(fun, primals, {}, nums, where)
    aux = None
    if has_aux:
        out, aux = _split_aux(out, where)
    outs, spec = _outputs(out, where)

    def vjp_fn(cotangent):
        cots, cot_spec, _ = trees.flatten(cotangent, "cotangent")
        if cot_spec != spec:
            raise GradError(f"{where}: the cotangent must have the structure of the output "
                            f"({len(outs)} tensor(s)); got {len(cots)}")
        cots = _as_like(cots, outs, where, "cotangent")
        return tuple(rebuild(pullback(outs, inputs, nested or _depth.value > 0)(cots)))
    result = (out if nested else _detached(out)), vjp_fn
    return result + ((aux if nested else _detached(aux)),) if has_aux else result


def jvp(fun, primals, tangents, has_aux=False):
    """Forward-mode product: ``(fun(*primals), J @ tangents)``, one tangent per primal.

    ``fun`` returns a tensor or a tuple/list/dict of them (the tangent out has that structure).
    With ``has_aux``, ``fun`` returns ``(output, aux)`` and jvp returns ``(output, tangent_out,
    aux)``. Computed as the transpose of the vjp (see ``pushforward``).
    """
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise GradError(f"jvp: {len(primals)} primal(s) but {len(tangents)} tangent(s)")
    where = f"jvp({getattr(fun, '__name__', 'fun')})"
    nums = tuple(range(len(primals)))
    out, inputs, nested, _ = _call_differentiable(fun, primals, {}, nums, where)
    aux = None
    if has_aux:
        out, aux = _split_aux(out, where)
    outs, spec = _outputs(out, where)
    tangents = _as_like(trees.flatten(tangents)[0], inputs, where, "tangent")
    tangent_out = trees.unflatten(spec, pushforward(outs, inputs, nested)(tangents))
    result = (out if nested else _detached(out)), tangent_out
    return result + ((aux if nested else _detached(aux)),) if has_aux else result


def stop_gradient(x):
    """``x`` with no gradient flowing through it (JAX's ``lax.stop_gradient``): the same values,
    treated as a constant by every transform. ``x`` may be a tensor or a tuple/list/dict of
    them. Unlike ``x.detach()`` it is an op, so it also stands in captured graphs and lk.vmap.

    >>> import labkit as lk
    >>> lk.grad(lambda x: (x * lk.stop_gradient(x)).sum())(lk.tensor([3.0])).tolist()
    [3.0]
    """
    return trees.map_leaves(lambda t: _stop_gradient(t) if isinstance(t, Tensor) else t, x)
