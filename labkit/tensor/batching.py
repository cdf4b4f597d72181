"""Batching rules shared by families of ops (``lk.vmap``), declared with ``@op(..., batch=...)``.

A batching rule runs an op on a whole batch of examples at once. It gets ``inputs`` (each with
its batch dimension still in it), ``bdims`` (where that dimension is in each input, None for an
input shared by every example) and the op's attributes, and returns ``(output, bdim)``. It
computes in labkit ops, so batched ops have gradients, can be captured, and can be batched
again (nested vmaps). The pieces rules are made of (``moved``, ``aligned``, ``materialized``)
are in ``labkit.tensor.ops.shape``.

>>> import labkit as lk
>>> lk.vmap(lambda x, y: x * y + 1.0, in_axes=(0, None))(lk.ones(3, 2), lk.tensor([2.0, 3.0])).tolist()
[[3.0, 4.0], [3.0, 4.0], [3.0, 4.0]]
"""
import math

from ..errors import DataDependentShapeError
from .op import BatchFamily
from .ops.shape import aligned, batch_size, expand_dims, materialized, moved, reshape
from .shape_rules import normalize_dim, normalize_dims
from .tensor import Tensor


def _ndim(x, d):
    """How many dimensions one example of input ``x`` has (0 for a Python number)."""
    return (x.ndim - (d is not None)) if isinstance(x, Tensor) else 0


def _elementwise(op):
    def rule(inputs, bdims, **attrs):
        batched = [d for d in bdims if d is not None]
        if len(batched) == 1 and all(d is not None or not isinstance(x, Tensor)
                                     for x, d in zip(inputs, bdims)):
            return op(*inputs, **attrs), batched[0]     # one tensor: its batch dim stays put
        nd = max(_ndim(x, d) for x, d in zip(inputs, bdims))
        return op(*[x if d is None else aligned(x, d, nd) for x, d in zip(inputs, bdims)],
                  **attrs), 0
    return rule


# Elementwise ops (every ufunc_op, where, casts...): batch dimensions first, each batched input
# given the example rank of the widest input, so that broadcasting among one example's inputs
# is unchanged.
ELEMENTWISE = BatchFamily(_elementwise)


def _reduction(op):
    def rule(inputs, bdims, dim=None, keepdim=False, **attrs):
        x = moved(inputs[0], bdims[0])
        nd = x.ndim - 1
        axes = tuple(a + 1 for a in normalize_dims(op.name, dim, nd)) if nd else ()
        return op(x, dim=axes, keepdim=keepdim, **attrs), 0
    return rule


# Reductions over ``dim`` (an int, a tuple or None) with ``keepdim``: the same reduction over the
# example's dimensions, shifted past the batch dimension (a 0-d example reduces over nothing).
REDUCTION = BatchFamily(_reduction)


def _one_dim_reduction(op):
    def rule(inputs, bdims, dim=None, keepdim=False, **attrs):
        x = moved(inputs[0], bdims[0])
        nd = x.ndim - 1
        if dim is None or not nd:     # over the whole example, flattened
            out = op(reshape(x, shape=(x.shape[0], math.prod(x.shape[1:]))), dim=1, **attrs)
            return (reshape(out, shape=out.shape + (1,) * nd) if keepdim else out), 0
        return op(x, dim=normalize_dim(op.name, dim, nd) + 1, keepdim=keepdim, **attrs), 0
    return rule


# Reductions over one ``dim`` or every element (None) with ``keepdim`` (argmax, prod): the
# example's dimension shifted past the batch dimension, or the flattened example.
ONE_DIM_REDUCTION = BatchFamily(_one_dim_reduction)


def _along_dim(op):
    def rule(inputs, bdims, dim=-1, **attrs):
        size = batch_size(inputs, bdims)
        xs = [materialized(x, d, size) if isinstance(x, Tensor) else x
              for x, d in zip(inputs, bdims)]
        if xs[0].ndim == 1:             # 0-d examples: dim 0 / -1 is the example itself
            xs = [expand_dims(x, axes=(1,)) if isinstance(x, Tensor) else x for x in xs]
            return reshape(op(*xs, dim=1, **attrs), shape=(size,)), 0
        return op(*xs, dim=normalize_dim(op.name, dim, xs[0].ndim - 1) + 1, **attrs), 0
    return rule


# Ops along one dimension ``dim`` whose tensor inputs and result have one rank (softmax, cumsum,
# argsort, gather, scatter...): every tensor input batch first (one shared by the examples
# broadcast to the batch, a view), ``dim`` shifted past the batch dimension.
ALONG_DIM = BatchFamily(_along_dim)


def _leading(op):
    def rule(inputs, bdims, **attrs):
        nd = max(_ndim(x, d) for x, d in zip(inputs, bdims))
        return op(*[x if d is None else aligned(x, d, nd) for x, d in zip(inputs, bdims)],
                  **attrs), 0
    return rule


# Ops on the last dimensions of their inputs (matrices: inv, solve, det, the decompositions,
# tril) that broadcast over the leading ones: the batch dimension becomes one more leading
# dimension, each batched input given the example rank of the widest input (as ELEMENTWISE).
LEADING = BatchFamily(_leading)


def data_dependent(why, instead):
    """The rule of an op whose result's shape depends on each example's values: examples'
    results need not have one shape, so lk.vmap refuses the op, as PyTorch's vmap does.
    ``why`` says what the size depends on, ``instead`` what to do."""
    def make(op):
        def rule(inputs, bdims, **attrs):
            raise DataDependentShapeError(
                op.name, f"lk.vmap cannot batch {op.name}: the size of its result depends on "
                         f"each example's values ({why}), so the examples' results need not "
                         f"have one shape and cannot be stacked into one batch (PyTorch's vmap "
                         f"refuses it too). {instead}")
        return rule
    return BatchFamily(make)
