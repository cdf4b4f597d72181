"""Products of vectors, matrices and tensors in PyTorch's signatures: ``mm``, ``bmm``, ``mv``,
``dot``, ``inner``, ``outer``, ``addmm`` and its kin, ``einsum``, ``tensordot``, ``kron``,
``matrix_power``, ``trace``, ``cross``, ``cdist``.

``mm``, ``bmm``, ``mv`` and ``dot`` are as strict as PyTorch's (2-D, 3-D, matrix-vector, 1-D) and
say which spelling fits when the shapes are not theirs; ``lk.matmul`` (``@``) takes any of them.

>>> import labkit as lk
>>> a, b = lk.ones(2, 3), lk.ones(3, 4)
>>> lk.mm(a, b).shape, lk.einsum("ij,jk->ik", a, b).shape, lk.tensordot(a, b, dims=1).shape
((2, 4), (2, 4), (2, 4))
"""
import math
import numbers

from ...errors import ShapeError, describe
from ..creation import arange, eye, tensor
from ..ops import composite as C
from ..ops import elementwise as E
from ..ops import reduce as R
from ..ops.decompositions import inv, matrix_shape
from ..ops.einsum import einsum as _einsum
from ..ops.einsum import explicit_equation, sublist_equation
from ..ops.index import getitem, take
from ..ops.linalg import matmul
from ..ops.norm import vector_norm
from ..ops.shape import broadcast_to, permute, reshape
from ..shape_rules import broadcast_shapes, normalize_dim
from ..tensor import Tensor
from .registry import public


def _need(name, x, ndims, what, instead):
    if x.ndim not in ndims:
        raise ShapeError(f"{name}: expects {what}; got {describe(x)}. {instead}")


@public()
def mm(input, mat2):
    """The product of two matrices (2-D tensors only; ``lk.matmul`` batches and broadcasts).

    >>> import labkit as lk
    >>> lk.mm(lk.ones(2, 3), lk.ones(3, 2)).tolist()
    [[3.0, 3.0], [3.0, 3.0]]
    """
    for x in (input, mat2):
        _need("mm", x, (2,), "two matrices (2-D tensors)",
              "For batches use lk.bmm or lk.matmul (which broadcasts), for a matrix times a "
              "vector lk.mv.")
    return matmul(input, mat2)


@public()
def bmm(input, mat2):
    """Batched matrix product of (b, n, m) and (b, m, p) tensors (no broadcasting).

    >>> import labkit as lk
    >>> lk.bmm(lk.ones(4, 2, 3), lk.ones(4, 3, 5)).shape
    (4, 2, 5)
    """
    for x in (input, mat2):
        _need("bmm", x, (3,), "two 3-D tensors (batches of matrices)",
              "For single matrices use lk.mm; lk.matmul takes any number of batch dimensions "
              "and broadcasts them.")
    if input.shape[0] != mat2.shape[0]:
        raise ShapeError(f"bmm: the batch sizes differ ({describe(input)} and {describe(mat2)});"
                         f" bmm does not broadcast, lk.matmul does")
    return matmul(input, mat2)


@public()
def mv(input, vec):
    """A matrix (n, m) times a vector (m,).

    >>> import labkit as lk
    >>> lk.mv(lk.ones(2, 3), lk.ones(3)).tolist()
    [3.0, 3.0]
    """
    _need("mv", input, (2,), "a matrix (2-D) and a vector (1-D)", "lk.matmul takes batches.")
    _need("mv", vec, (1,), "a matrix (2-D) and a vector (1-D)",
          "For a matrix times a matrix use lk.mm.")
    return matmul(input, vec)


@public()
def dot(input, tensor):
    """The dot product of two 1-D tensors of one length.

    >>> import labkit as lk
    >>> lk.dot(lk.tensor([1.0, 2.0]), lk.tensor([3.0, 4.0])).item()
    11.0
    """
    for x in (input, tensor):
        _need("dot", x, (1,), "two 1-D tensors",
              "For matrices use lk.mm or lk.matmul; lk.inner contracts the last dimensions of "
              "any tensors; lk.tensordot chosen ones.")
    if input.shape != tensor.shape:
        raise ShapeError(f"dot: the vectors have different lengths ({describe(input)} and "
                         f"{describe(tensor)})")
    return matmul(input, tensor)


@public()
def vdot(input, other):
    """``dot`` with the first vector conjugated: for real tensors, ``dot``.

    >>> import labkit as lk
    >>> lk.vdot(lk.tensor([1.0, 2.0]), lk.tensor([3.0, 4.0])).item()
    11.0
    """
    return dot(input, other)


@public()
def inner(input, other):
    """The sum of products over the last dimension of each (a product with a 0-d tensor).

    >>> import labkit as lk
    >>> lk.inner(lk.ones(2, 3), lk.ones(4, 3)).shape
    (2, 4)
    """
    if not input.ndim or not other.ndim:
        return E.mul(input, other)
    if input.shape[-1] != other.shape[-1]:
        raise ShapeError(f"inner: the last dimensions must match, got {describe(input)} and "
                         f"{describe(other)}")
    return tensordot(input, other, dims=([-1], [-1]))


@public(aliases=("ger",))
def outer(input, vec2):
    """The outer product of two vectors: ``out[i, j] = input[i] * vec2[j]``.

    >>> import labkit as lk
    >>> lk.outer(lk.tensor([1.0, 2.0]), lk.tensor([1.0, 10.0, 100.0])).shape
    (2, 3)
    """
    for x in (input, vec2):
        _need("outer", x, (1,), "two 1-D tensors", "Flatten them first (x.flatten()).")
    return E.mul(reshape(input, shape=input.shape + (1,)), vec2)


# ---- the add-a-product family ---------------------------------------------------------------
def _scaled(x, factor):
    return x if factor == 1 else E.mul(x, factor)


def _ignoring(x, value):
    """``value``, with ``x`` (which broadcasts to it) in the graph at a zero gradient: what
    PyTorch gives for an input it reads but does not use (no NaN of ``x`` propagates)."""
    return E.where(False, x, value)


def _plus_scaled(name, input, product, beta, alpha):
    """``beta * input + alpha * product``, ``input`` broadcast to the product's shape and
    ignored when ``beta`` is 0 (NaN in it does not propagate), as in PyTorch."""
    shape = product.shape
    if broadcast_shapes(name, input, product) != shape:
        raise ShapeError(f"{name}: input {describe(input)} does not broadcast to the shape "
                         f"{shape} of the product")
    out = _scaled(product, alpha)
    if beta == 0:
        return _ignoring(input, out)
    return E.add(_scaled(input, beta), out)


@public()
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)`` for matrices ``mat1``, ``mat2``.

    >>> import labkit as lk
    >>> lk.addmm(lk.ones(2), lk.ones(2, 3), lk.ones(3, 2), alpha=2).tolist()
    [[7.0, 7.0], [7.0, 7.0]]
    """
    return _plus_scaled("addmm", input, mm(mat1, mat2), beta, alpha)


@public()
def addmv(input, mat, vec, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat @ vec)``.

    >>> import labkit as lk
    >>> lk.addmv(lk.ones(2), lk.ones(2, 3), lk.ones(3), beta=0.5).tolist()
    [3.5, 3.5]
    """
    return _plus_scaled("addmv", input, mv(mat, vec), beta, alpha)


@public()
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """``beta * input + alpha * outer(vec1, vec2)``.

    >>> import labkit as lk
    >>> lk.addr(lk.zeros(2, 2), lk.ones(2), lk.ones(2), alpha=3).tolist()
    [[3.0, 3.0], [3.0, 3.0]]
    """
    return _plus_scaled("addr", input, outer(vec1, vec2), beta, alpha)


@public()
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * bmm(batch1, batch2)``.

    >>> import labkit as lk
    >>> lk.baddbmm(lk.zeros(1), lk.ones(4, 2, 3), lk.ones(4, 3, 5)).shape
    (4, 2, 5)
    """
    return _plus_scaled("baddbmm", input, bmm(batch1, batch2), beta, alpha)


@public()
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * sum_i batch1[i] @ batch2[i]`` (one matrix product over the
    batch and the inner dimension together).

    >>> import labkit as lk
    >>> lk.addbmm(lk.zeros(2, 2), lk.ones(4, 2, 3), lk.ones(4, 3, 2)).tolist()
    [[12.0, 12.0], [12.0, 12.0]]
    """
    bmm(batch1, batch2)                     # the shape checks
    b, n, m = batch1.shape
    left = reshape(permute(batch1, dims=(1, 0, 2)), shape=(n, b * m))
    right = reshape(batch2, shape=(b * m, batch2.shape[2]))
    return _plus_scaled("addbmm", input, matmul(left, right), beta, alpha)


# ---- einsum, tensordot, kron ---------------------------------------------------------------
@public(method=False)
def einsum(*args):
    """Einstein summation, as ``torch.einsum``: ``einsum("ij,jk->ik", a, b)``,
    ``einsum(eq, [a, b])``, ``einsum(a, [0, 1], b, [1, 2], [0, 2])``; ``...`` broadcasts, size-1
    dimensions broadcast, a repeated subscript reads a diagonal, and without ``->`` the output
    holds the subscripts that appear once, in alphabetical order. Differentiable to any order.

    >>> import labkit as lk
    >>> lk.einsum("ii", lk.eye(3)).item(), lk.einsum("i,j", lk.ones(2), lk.ones(3)).shape
    (3.0, (2, 3))
    """
    if not args:
        raise TypeError("einsum() needs an equation and operands")
    if isinstance(args[0], str):
        equation, operands = args[0], list(args[1:])
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = list(operands[0])
    else:
        operands, equation = sublist_equation(args)
    for k, x in enumerate(operands):
        if not isinstance(x, Tensor):
            raise TypeError(f"einsum {equation!r}: operand {k} is a {type(x).__name__}; the "
                            f"operands are tensors (make one with lk.tensor(...))")
    try:
        explicit = explicit_equation(equation, tuple(x.ndim for x in operands))
    except ShapeError as exc:
        raise ShapeError(f"{exc}. Operands: {', '.join(describe(x) for x in operands)}") \
            from None
    return _einsum(*operands, equation=explicit)


def _dims_lists(a, b, dims):
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, numbers.Integral):
        if dims < 0:
            raise ShapeError(f"tensordot: dims must be a non-negative int, got {dims}")
        if dims > min(a.ndim, b.ndim):
            raise ShapeError(f"tensordot: dims={dims} is more than {describe(a)} or "
                             f"{describe(b)} has")
        return list(range(a.ndim - dims, a.ndim)), list(range(dims))
    da, db = dims
    da = [da] if isinstance(da, numbers.Integral) else list(da)
    db = [db] if isinstance(db, numbers.Integral) else list(db)
    if len(da) != len(db):
        raise ShapeError(f"tensordot: dims lists of different lengths ({da} and {db}); pair "
                         f"each dimension of the first tensor with one of the second")
    return ([normalize_dim("tensordot", d, a.ndim, a) for d in da],
            [normalize_dim("tensordot", d, b.ndim, b) for d in db])


@public(method=False)
def tensordot(a, b, dims=2):
    """Sum of products over chosen dimensions: ``dims`` an int (the last ``dims`` of ``a``
    with the first of ``b``) or two lists of dimensions. One matrix product.

    >>> import labkit as lk
    >>> lk.tensordot(lk.ones(2, 3, 4), lk.ones(4, 3, 5), dims=([1, 2], [1, 0])).shape
    (2, 5)
    """
    da, db = _dims_lists(a, b, dims)
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j] and 1 not in (a.shape[i], b.shape[j]):
            raise ShapeError(f"tensordot: contracted dimensions must match, but dim {i} of "
                             f"{describe(a)} has size {a.shape[i]} and dim {j} of "
                             f"{describe(b)} has size {b.shape[j]}")
    sizes = [max(a.shape[i], b.shape[j]) for i, j in zip(da, db)]
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    a = _broadcast_dims(a, da, sizes)
    b = _broadcast_dims(b, db, sizes)
    k = math.prod(sizes)
    left = reshape(permute(a, dims=tuple(free_a + da)),
                   shape=(math.prod(a.shape[d] for d in free_a), k))
    right = reshape(permute(b, dims=tuple(db + free_b)),
                    shape=(k, math.prod(b.shape[d] for d in free_b)))
    return reshape(matmul(left, right), shape=tuple(a.shape[d] for d in free_a) +
                   tuple(b.shape[d] for d in free_b))


def _broadcast_dims(x, dims, sizes):
    """``x`` with its size-1 dimensions ``dims`` broadcast to ``sizes`` (a no-op if none are)."""
    shape = list(x.shape)
    for d, n in zip(dims, sizes):
        shape[d] = n
    return x if tuple(shape) == x.shape else broadcast_to(x, shape=tuple(shape))


@public()
def kron(input, other):
    """The Kronecker product: block ``(i, j)`` is ``input[i, j] * other`` (any number of
    dimensions; the shorter shape is padded with leading ones).

    >>> import labkit as lk
    >>> lk.kron(lk.eye(2), lk.ones(2, 2)).shape
    (4, 4)
    """
    nd = max(input.ndim, other.ndim)
    sa = (1,) * (nd - input.ndim) + input.shape
    sb = (1,) * (nd - other.ndim) + other.shape
    a = reshape(input, shape=tuple(s for n in sa for s in (n, 1)))
    b = reshape(other, shape=tuple(s for n in sb for s in (1, n)))
    return reshape(E.mul(a, b), shape=tuple(x * y for x, y in zip(sa, sb)))


# ---- powers, trace, cross, distances ---------------------------------------------------------
@public()
def matrix_power(input, n):
    """The ``n``-th power of each square matrix (``n`` < 0: of its inverse), by repeated
    squaring.

    >>> import labkit as lk
    >>> lk.matrix_power(lk.tensor([[1.0, 1.0], [0.0, 1.0]]), 3).tolist()
    [[1.0, 3.0], [0.0, 1.0]]
    """
    matrix_shape("linalg.matrix_power", input, square=True)
    if not isinstance(n, numbers.Integral):
        raise TypeError(f"matrix_power: n must be an int, got {n!r}")
    if n == 0:
        return _ignoring(input, eye(input.shape[-1], dtype=input.dtype, device=input.device))
    x = inv(input) if n < 0 else input
    n = abs(int(n))
    result = None
    while n:
        if n & 1:
            result = x if result is None else matmul(result, x)
        n >>= 1
        if n:
            x = matmul(x, x)
    return result


def diagonal_of(x):
    """The main diagonal of the matrices of ``x`` (the last two dimensions), as (..., k)."""
    k = min(x.shape[-2:])
    idx = arange(k, device=x.device)
    return getitem(x, (Ellipsis, idx, idx))


@public()
def trace(input):
    """The sum of the main diagonal of a 2-D tensor (integers summed as int64, as ``sum``).

    >>> import labkit as lk
    >>> lk.trace(lk.tensor([[1.0, 2.0], [3.0, 4.0]])).item()
    5.0
    """
    _need("trace", input, (2,), "a matrix (2-D tensor)",
          "For a batch of matrices use lk.einsum('...ii->...', x).")
    return R.sum(diagonal_of(input))


def _cross_dim(input, other, dim):
    if input.ndim != other.ndim:
        raise ShapeError(f"cross: the inputs must have the same number of dimensions, got "
                         f"{describe(input)} and {describe(other)}; unsqueeze the smaller one")
    shape = broadcast_shapes("cross", input, other)
    if dim is None:                     # PyTorch's older default: the first dimension of size 3
        dim = next((d for d, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise ShapeError(f"cross: no dimension of size 3 in {describe(input)} and "
                             f"{describe(other)}; pass dim=")
    d = normalize_dim("cross", dim, len(shape))
    if shape[d] != 3:
        raise ShapeError(f"cross: dimension {dim} of {describe(input)} and {describe(other)} "
                         f"must have size 3 (3-vectors), not {shape[d]}")
    return shape, d


@public()
def cross(input, other, dim=None):
    """The cross product of 3-vectors along ``dim`` (None: the first dimension of size 3, as
    ``torch.cross``; ``lk.linalg.cross`` defaults to the last). The inputs have one number
    of dimensions, and sizes that broadcast.

    >>> import labkit as lk
    >>> lk.cross(lk.tensor([1.0, 0.0, 0.0]), lk.tensor([0.0, 1.0, 0.0])).tolist()
    [0.0, 0.0, 1.0]
    """
    shape, d = _cross_dim(input, other, dim)
    a, b = broadcast_to(input, shape=shape), broadcast_to(other, shape=shape)
    one = tensor([1, 2, 0], device=a.device)
    two = tensor([2, 0, 1], device=a.device)
    return E.sub(E.mul(take(a, one, d), take(b, two, d)),
                 E.mul(take(a, two, d), take(b, one, d)))


@public(method=False)
def cdist(x1, x2, p=2.0, compute_mode=None):
    """The p-norm distance between each row of ``x1`` (..., P, M) and each of ``x2``
    (..., R, M): (..., P, R). The gradient at a zero distance is 0, as in PyTorch.

    >>> import labkit as lk
    >>> lk.cdist(lk.tensor([[0.0, 0.0]]), lk.tensor([[3.0, 4.0], [0.0, 1.0]])).tolist()
    [[5.0, 1.0]]
    """
    for x in (x1, x2):
        if x.ndim < 2:
            raise ShapeError(f"cdist: expects tensors of rows (at least 2-D); got {describe(x)}")
    if x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(f"cdist: the rows must have one length, got {describe(x1)} and "
                         f"{describe(x2)}")
    if p < 0:
        raise ShapeError(f"cdist: p must be non-negative, got {p}")
    diff = E.sub(C.unsqueeze(x1, -2), C.unsqueeze(x2, -3))
    # rows of length 0 are 0 apart in every norm (the inf norms of nothing included)
    return vector_norm(diff, ord=float(p) if x1.shape[-1] else 2.0, dim=-1)
