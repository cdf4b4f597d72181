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
from .op import BatchFamily
from .ops.shape import aligned, expand_dims, moved, reshape
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


def _along_dim(op):
    def rule(inputs, bdims, dim=-1, **attrs):
        x = moved(inputs[0], bdims[0])
        if x.ndim == 1:             # 0-d examples: dim 0 / -1 is the example itself
            out = op(expand_dims(x, axes=(1,)), dim=1, **attrs)
            return reshape(out, shape=tuple(x.shape)), 0
        return op(x, dim=normalize_dim(op.name, dim, x.ndim - 1) + 1, **attrs), 0
    return rule


# Ops along one dimension ``dim`` that keep the shape (softmax, log_softmax).
ALONG_DIM = BatchFamily(_along_dim)
