"""Jacobians and Hessians from grad and vmap, as in JAX: ``jacrev`` is vmap of the vjp over the
rows of an identity (one backward pass for the whole Jacobian), ``jacfwd`` vmap of the jvp over
its columns, and ``hessian`` is ``jacfwd(jacrev(f))``.

The Jacobian of an output of shape ``O`` with respect to an argument of shape ``I`` has shape
``O + I``. ``argnums`` picks the arguments (an int, or a tuple: then a tuple of Jacobians, one per
argument); a function returning a tuple of tensors gets a tuple of Jacobians, one per output
(each a tuple per argument when ``argnums`` is one).

>>> import labkit as lk
>>> f = lambda x: x ** 3
>>> lk.jacrev(f)(lk.tensor([1.0, 2.0])).tolist()
[[3.0, 0.0], [0.0, 12.0]]
>>> lk.jacfwd(f)(lk.tensor([1.0, 2.0])).tolist()
[[3.0, 0.0], [0.0, 12.0]]
>>> lk.hessian(lambda x: (x ** 3).sum())(lk.tensor([1.0, 2.0])).tolist()
[[6.0, 0.0], [0.0, 12.0]]
"""
import functools

from ..tensor.creation import eye
from ..tensor.ops.elementwise import cast
from ..tensor.ops.index import getitem_slices
from ..tensor.ops.shape import reshape
from . import functional, trees
from .batched import vmap


def _pieces(flat, tensors, axis=-1):
    """``flat`` cut along its first or last dimension (``axis`` 0 or -1) into one piece per
    tensor of ``tensors``, that dimension of each piece reshaped to the tensor's shape."""
    out, start = [], 0
    shape = tuple(flat.shape)
    for t in tensors:
        n = t.numel()
        piece = getitem_slices(flat, axis, start, start + n)
        out.append(reshape(piece, shape=shape[:-1] + t.shape if axis else t.shape + shape[1:]))
        start += n
    return out


def _basis(tensors):
    """The identity, one row per element of ``tensors`` (in their first one's dtype)."""
    total = sum(t.numel() for t in tensors)
    first = tensors[0]
    return eye(total, dtype=first.dtype, device=first.device)


def _prepare(fun, args, kwargs, argnums, has_aux, where):
    single, nums = functional._argnums(argnums, len(args), where)
    out, inputs, nested, rebuild = functional._call_differentiable(fun, args, kwargs, nums,
                                                                    where)
    aux = None
    if has_aux:
        out, aux = functional._split_aux(out, where)
    outs, spec = functional._outputs(out, where)
    return single, inputs, nested, outs, spec, aux, rebuild


def _assemble(jac, single, rebuild, spec, aux, has_aux, nested):
    """``jac[k][j]`` (output k, input tensor j) in the structure the caller expects."""
    if not nested:
        jac = [[j.detach() for j in row] for row in jac]
        aux = functional._detached(aux)
    rows = [rebuild(row) for row in jac]
    result = trees.unflatten(spec, [row[0] if single else tuple(row) for row in rows])
    return (result, aux) if has_aux else result


def jacrev(fun, argnums=0, has_aux=False):
    """The Jacobian of ``fun`` with respect to argument(s) ``argnums``, by reverse mode: vmap of
    the vjp over the rows of an identity, one batched backward pass for every output element.
    Best when outputs are fewer than inputs. With ``has_aux``, ``fun`` returns
    ``(output, aux)`` and the result is ``(jacobian, aux)``.

    >>> import labkit as lk
    >>> W = lk.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> lk.jacrev(lambda x: W @ x)(lk.ones(2)).tolist()
    [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    """
    where = f"jacrev({getattr(fun, '__name__', 'fun')})"

    @functools.wraps(fun)
    def jacobian(*args, **kwargs):
        single, inputs, nested, outs, spec, aux, rebuild = _prepare(fun, args, kwargs, argnums,
                                                                    has_aux, where)
        pull = functional.pullback(outs, inputs, nested or functional._depth.value > 0)

        def row_pullback(row):
            return pull([c if c.dtype is o.dtype else cast(c, dtype=o.dtype.name)
                         for c, o in zip(_pieces(row, outs), outs)])

        rows = vmap(row_pullback)(_basis(outs))     # per input: (outputs' size, *input.shape)
        per_input = [_pieces(r, outs, axis=0) for r in rows]
        jac = [[per_input[j][k] for j in range(len(inputs))] for k in range(len(outs))]
        return _assemble(jac, single, rebuild, spec, aux, has_aux, nested)
    return jacobian


def jacfwd(fun, argnums=0, has_aux=False):
    """The Jacobian of ``fun`` with respect to argument(s) ``argnums``, by forward mode: vmap of
    the jvp over the columns of an identity. Best when inputs are fewer than outputs.
    ``has_aux`` as for ``jacrev``.

    >>> import labkit as lk
    >>> lk.jacfwd(lambda x, y: x * y, argnums=(0, 1))(lk.ones(2), lk.tensor([2.0, 3.0]))[1].tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    where = f"jacfwd({getattr(fun, '__name__', 'fun')})"

    @functools.wraps(fun)
    def jacobian(*args, **kwargs):
        single, inputs, nested, outs, spec, aux, rebuild = _prepare(fun, args, kwargs, argnums,
                                                                    has_aux, where)
        push = functional.pushforward(outs, inputs, nested)
        columns = vmap(lambda column: push(_pieces(column, inputs)),
                       out_axes=-1)(_basis(inputs))       # per output: (*output.shape, inputs' size)
        jac = [_pieces(c, inputs) for c in columns]
        return _assemble(jac, single, rebuild, spec, aux, has_aux, nested)
    return jacobian


def hessian(fun, argnums=0, has_aux=False):
    """The Hessian of a scalar ``fun``: ``jacfwd(jacrev(fun, argnums), argnums)`` (forward over
    reverse). With a tuple ``argnums``, a tuple of tuples: block (i, j) differentiates with
    respect to arguments i and j.

    >>> import labkit as lk
    >>> lk.hessian(lambda x, y: (x * y).sum(), argnums=(0, 1))(lk.ones(1), lk.ones(1))[0][1].tolist()
    [[1.0]]
    """
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux), argnums, has_aux=has_aux)
