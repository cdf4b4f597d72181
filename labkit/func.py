"""``lk.func``: labkit's functional transforms under ``torch.func``'s names and signatures, so
code written for ``torch.func`` runs with ``import labkit as torch``.

``vmap``, ``grad``, ``grad_and_value``, ``vjp``, ``jvp``, ``jacrev``, ``jacfwd``, ``hessian``
are the transforms of ``labkit.autodiff`` (``lk.vmap``, ``lk.grad``...) in PyTorch's argument
spellings; ``functional_call`` runs an ``lk.nn.Module`` with parameters given in a dict, which is
how per-example gradients and ensembles of a model are written:

>>> import labkit as lk
>>> from labkit.func import functional_call, grad, vmap
>>> model = lk.nn.Linear(3, 1)
>>> params = {k: v.detach() for k, v in model.named_parameters()}
>>> def loss(params, x, y):
...     return ((functional_call(model, params, (x,)) - y) ** 2).sum()
>>> xs, ys = lk.randn(8, 3), lk.randn(8, 1)
>>> per_example = vmap(grad(loss), in_dims=(None, 0, 0))(params, xs, ys)
>>> per_example["weight"].shape
(8, 1, 3)
"""
import contextlib
import functools

from .autodiff import functional, jacobians
from .autodiff.batched import call, check_options

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian",
           "functional_call", "stack_module_state"]


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``torch.func.vmap``: ``func`` of one example made a function of a batch; ``lk.vmap``,
    whose ``in_axes`` / ``out_axes`` are these ``in_dims`` / ``out_dims``. Keyword arguments
    are shared by every example. Random functions inside draw one value for every example
    (``randomness='same'``; ``'different'`` is refused); ``chunk_size`` changes nothing.

    >>> import labkit as lk
    >>> lk.func.vmap(lambda x, w: x @ w, in_dims=(0, None))(lk.ones(4, 3), lk.ones(3, 2)).shape
    (4, 2)
    """
    where = f"lk.func.vmap({getattr(func, '__name__', 'func')})"
    check_options(where, randomness, chunk_size)

    @functools.wraps(func)
    def batched(*args, **kwargs):
        return call(func, args, kwargs, in_dims, out_dims, None, where, "in_dims", "out_dims")
    return batched


def grad(func, argnums=0, has_aux=False):
    """``torch.func.grad``: the gradient of a scalar ``func`` (``lk.grad``). With ``has_aux``,
    ``func`` returns ``(output, aux)`` and this returns ``(gradient, aux)``."""
    return functional.grad(func, argnums, has_aux)


def grad_and_value(func, argnums=0, has_aux=False):
    """``torch.func.grad_and_value``: ``(gradient, value)``; with ``has_aux``,
    ``(gradient, (value, aux))``.

    >>> import labkit as lk
    >>> g, v = lk.func.grad_and_value(lambda x: (x ** 2).sum())(lk.tensor([3.0]))
    >>> g.tolist(), v.item()
    ([6.0], 9.0)
    """
    value_and_grad = functional.value_and_grad(func, argnums, has_aux, _name="grad_and_value")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        value, g = value_and_grad(*args, **kwargs)
        return g, value
    return wrapped


def vjp(func, *primals, has_aux=False):
    """``torch.func.vjp``: ``(output, vjp_fn)``, or ``(output, vjp_fn, aux)`` with ``has_aux``;
    ``vjp_fn(cotangents)`` returns a tuple with one cotangent per primal."""
    return functional.vjp(func, *primals, has_aux=has_aux)


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """``torch.func.jvp``: ``(output, jvp_out)``, or ``(output, jvp_out, aux)`` with
    ``has_aux``. ``strict`` is accepted (labkit gives zeros for outputs that do not depend on
    the inputs, as PyTorch does without it)."""
    return functional.jvp(func, primals, tangents, has_aux=has_aux)


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """``torch.func.jacrev`` (``lk.jacrev``); ``chunk_size`` changes nothing (one batch)."""
    return jacobians.jacrev(func, argnums, has_aux=has_aux)


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """``torch.func.jacfwd`` (``lk.jacfwd``)."""
    return jacobians.jacfwd(func, argnums, has_aux=has_aux)


def hessian(func, argnums=0):
    """``torch.func.hessian`` (``lk.hessian``): ``jacfwd(jacrev(func))``."""
    return jacobians.hessian(func, argnums)


@contextlib.contextmanager
def _swapped(module, tensors):
    """``module`` with the parameters and buffers named in ``tensors`` (qualified names, as in
    ``named_parameters()``) replaced by those tensors inside the block."""
    saved = []
    try:
        for name, value in tensors.items():
            *path, attr = name.split(".")
            owner = module
            for part in path:
                owner = owner._modules[part]
            table = next((t for t in (owner._parameters, owner._buffers) if attr in t), None)
            if table is None:
                raise KeyError(name)
            saved.append((table, attr, table[attr]))
            table[attr] = value
        yield
    finally:
        for table, attr, old in reversed(saved):
            table[attr] = old


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """``torch.func.functional_call``: call ``module(*args, **kwargs)`` with its parameters and
    buffers replaced by the tensors of ``parameter_and_buffer_dicts`` (a dict from qualified
    names, as ``named_parameters()`` gives them, or a tuple of such dicts), which may be
    batched (inside ``lk.vmap``) or differentiated (inside ``lk.grad``). The module itself is
    unchanged afterwards. ``strict``: every parameter and buffer must be given.

    >>> import labkit as lk
    >>> lin = lk.nn.Linear(2, 1)
    >>> params = {"weight": lk.ones(1, 2), "bias": lk.zeros(1)}
    >>> lk.func.functional_call(lin, params, (lk.tensor([1.0, 2.0]),)).tolist()
    [3.0]
    """
    dicts = parameter_and_buffer_dicts
    if isinstance(dicts, dict):
        dicts = (dicts,)
    tensors = {}
    for d in dicts:
        for name, value in d.items():
            if name in tensors:
                raise ValueError(f"functional_call: {name!r} is given in more than one dict")
            tensors[name] = value
    known = dict(module.named_parameters())
    known.update(dict(module.named_buffers()))
    unknown = sorted(set(tensors) - set(known))
    missing = sorted(set(known) - set(tensors))
    if unknown or (strict and missing):
        raise ValueError(
            f"functional_call on {type(module).__name__}: "
            + (f"unexpected key(s) {unknown}" if unknown else "")
            + ("; " if unknown and strict and missing else "")
            + (f"missing key(s) {missing}" if strict and missing else "")
            + f". Its parameters and buffers are {sorted(known)}.")
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _swapped(module, tensors):
        return module(*args, **(kwargs or {}))


def stack_module_state(models):
    """``torch.func.stack_module_state``: the parameters and buffers of several models of one
    architecture, each stacked along a new first dimension: ``(params, buffers)`` dicts for
    ``vmap(functional_call...)`` over an ensemble. The stacked parameters are new leaves that
    require grad (as in PyTorch).

    >>> import labkit as lk
    >>> params, buffers = lk.func.stack_module_state([lk.nn.Linear(2, 3) for _ in range(4)])
    >>> params["weight"].shape
    (4, 3, 2)
    """
    from .tensor.ops.composite import stack
    models = list(models)
    if not models:
        raise ValueError("stack_module_state: needs at least one model")
    params = {name: stack([dict(m.named_parameters())[name].detach() for m in models])
              .requires_grad_(True) for name, _ in models[0].named_parameters()}
    buffers = {name: stack([dict(m.named_buffers())[name] for m in models])
               for name, _ in models[0].named_buffers()}
    return params, buffers
