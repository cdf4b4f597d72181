"""Norms, inverses and decompositions in PyTorch's signatures.

``torch.linalg``'s functions are here as plain functions, gathered as ``lk.linalg`` by
``labkit/linalg.py``; PyTorch's top-level spellings (``torch.norm``, ``torch.inverse``,
``torch.det``, ``torch.svd`` (which returns V, not Vh), ``torch.qr``, ``torch.pinverse``...) are
registered as ``lk.<name>`` and ``Tensor.<name>``.

Eigenvectors and singular vectors are defined up to sign, so a loss should depend on them only
through sign-free quantities (``U @ Vh``, ``V * V``...), as in PyTorch.

>>> import labkit as lk
>>> a = lk.tensor([[4.0, 1.0], [1.0, 3.0]])
>>> lk.linalg.det(a).item(), lk.linalg.norm(lk.tensor([3.0, 4.0])).item()
(11.0, 5.0)
"""
import math
import numbers

import numpy as np

from ...errors import ShapeError, describe
from ..creation import zeros
from ..ops import composite as C
from ..ops import decompositions as D
from ..ops import elementwise as E
from ..ops import norm as N
from ..ops import reduce as R
from ..ops.linalg import matmul
from ..ops.shape import permute, reshape
from ..shape_rules import normalize_dim
from . import return_types
from .products import cross as _cross
from .products import matrix_power  # noqa: F401  (lk.linalg.matrix_power)
from .reduce import _cast_to
from .registry import accept_numpy_names, public


# ---- norms -------------------------------------------------------------------------------------
def _dims(dim):
    if dim is None or isinstance(dim, numbers.Integral):
        return dim
    return tuple(dim)


@accept_numpy_names
def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The ``ord``-norm of ``x`` over ``dim`` (None: all elements, as one vector): ``ord`` a
    number, ``inf`` (largest ``|x|``), ``-inf`` (smallest) or 0 (the count of non-zeros).

    >>> import labkit as lk
    >>> lk.linalg.vector_norm(lk.tensor([[3.0, -4.0]]), ord=1, dim=1).tolist()
    [7.0]
    """
    if isinstance(ord, str):
        raise ShapeError(f"linalg.vector_norm: ord must be a number, got {ord!r}; "
                         f"lk.linalg.matrix_norm takes 'fro' and 'nuc'")
    return N.vector_norm(_cast_to(x, dtype), ord=float(ord), dim=_dims(dim), keepdim=keepdim)


def _matrix_dims(name, a, dim):
    D.matrix_shape(name, a)
    if len(dim) != 2:
        raise ShapeError(f"{name}: dim must name two dimensions, got dim={dim}")
    d0, d1 = (normalize_dim(name, d, a.ndim, a) for d in dim)
    if d0 == d1:
        raise ShapeError(f"{name}: dim={dim} names one dimension twice for {describe(a)}")
    return d0, d1


def _keep(x, dims, keepdim):
    """``x`` reduced over ``dims`` (kept as size 1) with those dimensions dropped unless
    ``keepdim``."""
    return x if keepdim else C.squeeze(x, tuple(dims))


@accept_numpy_names
def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """A norm of the matrices of ``A`` (the dimensions ``dim``): 'fro' (Frobenius), 'nuc'
    (sum of singular values), 2 / -2 (largest / smallest singular value), 1 / -1 (largest /
    smallest column sum of ``|A|``), inf / -inf (row sums).

    >>> import labkit as lk
    >>> lk.linalg.matrix_norm(lk.tensor([[1.0, -2.0], [3.0, 4.0]]), ord=1).item()
    6.0
    """
    A = _cast_to(A, dtype)
    d0, d1 = _matrix_dims("linalg.matrix_norm", A, tuple(dim))
    if ord == "fro":
        return N.vector_norm(A, ord=2.0, dim=(d0, d1), keepdim=keepdim)
    if ord in ("nuc", 2, -2):
        rest = [d for d in range(A.ndim) if d not in (d0, d1)]
        s = svdvals(permute(A, dims=tuple(rest + [d0, d1])))
        out = R.sum(s, dim=-1) if ord == "nuc" else (R.max if ord == 2 else R.min)(s, dim=-1)
        if keepdim:
            for d in sorted((d0, d1)):
                out = C.unsqueeze(out, d)
        return out
    if ord in (1, -1, math.inf, -math.inf):
        summed, over = (d0, d1) if ord in (1, -1) else (d1, d0)
        s = R.sum(E.abs(A), dim=summed, keepdim=True)
        out = (R.max if ord > 0 else R.min)(s, dim=over, keepdim=True)
        return _keep(out, (d0, d1), keepdim)
    raise ShapeError(f"linalg.matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or "
                     f"-inf, got {ord!r}")


@accept_numpy_names
def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """``torch.linalg.norm``: a vector norm when ``dim`` is one dimension (or ``A`` is 1-D),
    a matrix norm when it is two (or ``A`` is 2-D and ``ord`` is given); with neither ``ord``
    nor ``dim``, the 2-norm of all elements.

    >>> import labkit as lk
    >>> lk.linalg.norm(lk.ones(2, 2)).item(), lk.linalg.norm(lk.ones(2, 2), ord=1).item()
    (2.0, 2.0)
    """
    dim = (dim,) if isinstance(dim, numbers.Integral) else _dims(dim)
    if dim is None:
        if ord is None:
            return vector_norm(A, 2, None, keepdim, dtype=dtype)
        if A.ndim not in (1, 2):
            raise ShapeError(f"linalg.norm: with ord={ord!r} and no dim, the input must be 1-D "
                             f"or 2-D; got {describe(A)}. Pass dim= (one dimension for a "
                             f"vector norm, two for a matrix norm).")
        dim = tuple(range(A.ndim))
    if len(dim) == 1:
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    raise ShapeError(f"linalg.norm: dim must name one or two dimensions, got dim={dim}; "
                     f"lk.linalg.vector_norm takes more")


@public("norm")
def torch_norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """``torch.norm``: ``p`` 'fro' (the 2-norm over ``dim``, all elements if None), 'nuc'
    (nuclear norm of matrices) or a number (a vector norm over ``dim``, any number of dims).

    >>> import labkit as lk
    >>> lk.tensor([[3.0, 4.0]]).norm().item(), lk.norm(lk.tensor([3.0, -4.0]), p=1).item()
    (5.0, 7.0)
    """
    dim = _dims(dim)
    if p == "fro":
        return vector_norm(input, 2, dim, keepdim, dtype=dtype)
    if p == "nuc":
        return matrix_norm(input, "nuc", (-2, -1) if dim is None else dim, keepdim, dtype=dtype)
    if isinstance(p, str):
        raise ShapeError(f"norm: p must be 'fro', 'nuc' or a number, got {p!r}")
    return vector_norm(input, 2 if p is None else p, dim, keepdim, dtype=dtype)


# ---- inverses and solves ------------------------------------------------------------------------
def inv(A):
    """The inverse of each square matrix of ``A``; a singular one raises
    ``lk.linalg.LinAlgError``.

    >>> import labkit as lk
    >>> lk.linalg.inv(lk.tensor([[2.0, 0.0], [0.0, 4.0]])).tolist()
    [[0.5, 0.0], [0.0, 0.25]]
    """
    return D.inv(A)


@public()
def inverse(input):
    """``torch.inverse``: the inverse of each square matrix (``lk.linalg.inv``).

    >>> import labkit as lk
    >>> lk.tensor([[0.0, 2.0], [4.0, 0.0]]).inverse().tolist()
    [[0.0, 0.25], [0.5, 0.0]]
    """
    return D.inv(input)


def _is_vector(A, B):
    """PyTorch's rule: B is a (batch of) vector(s) if 1-D, or one dimension short of A with
    A's batch shape and length."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])


def solve(A, B, *, left=True):
    """``X`` with ``A X = B`` (``left=False``: ``X A = B``) for square ``A``; ``B`` a matrix or
    a vector (PyTorch's rule); batch dimensions broadcast.

    >>> import labkit as lk
    >>> lk.linalg.solve(lk.tensor([[2.0, 0.0], [0.0, 4.0]]), lk.tensor([1.0, 1.0])).tolist()
    [0.5, 0.25]
    """
    D.matrix_shape("linalg.solve", A, square=True)
    if not left:
        A = D.mT(A)
    if _is_vector(A, B):
        return C.squeeze(D.solve(A, C.unsqueeze(B, -1)), -1)
    return D.solve(A, B) if left else D.mT(D.solve(A, D.mT(B)))


# ---- determinants -------------------------------------------------------------------------------
@public()
def det(A):
    """The determinant of each square matrix (``torch.det`` and ``torch.linalg.det``).

    >>> import labkit as lk
    >>> round(lk.det(lk.tensor([[1.0, 2.0], [3.0, 4.0]])).item(), 6)
    -2.0
    """
    return D.det(A)


def _slogdet(A, result):
    sign, logabsdet = D.unpack(D.slogdet(A), (), ())
    return result(sign, logabsdet)


@public()
def slogdet(A):
    """``(sign, logabsdet)`` of each square matrix: ``det = sign * exp(logabsdet)``, without
    overflow. The gradient flows through ``logabsdet``.

    >>> import labkit as lk
    >>> sign, logabsdet = lk.slogdet(lk.tensor([[0.0, 1.0], [1.0, 0.0]]))
    >>> sign.item(), logabsdet.item()
    (-1.0, 0.0)
    """
    return _slogdet(A, return_types.slogdet)


@public()
def logdet(input):
    """``log(det(input))``: NaN where the determinant is negative, -inf where it is 0.

    >>> import labkit as lk
    >>> round(lk.logdet(lk.eye(2) * 3).item(), 4), lk.logdet(-lk.eye(3)).item()
    (2.1972, nan)
    """
    sign, logabsdet = D.unpack(D.slogdet(input), (), ())
    return E.where(E.lt(sign, 0), math.nan, logabsdet)   # sign 0: logabsdet is already -inf


# ---- decompositions -----------------------------------------------------------------------------
def cholesky(A, *, upper=False):
    """The Cholesky factor of each symmetric positive-definite matrix: lower-triangular ``L``
    with ``A = L L^T`` (``upper=True``: ``U = L^T``, read from the upper triangle).

    >>> import labkit as lk
    >>> lk.linalg.cholesky(lk.tensor([[4.0, 2.0], [2.0, 5.0]])).tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    """
    if upper:
        return D.mT(D.cholesky(D.mT(A)))
    return D.cholesky(A)


@public("cholesky")
def torch_cholesky(input, upper=False):
    """``torch.cholesky`` (``lk.linalg.cholesky``)."""
    return cholesky(input, upper=upper)


def _qr(A, mode, result):
    D.matrix_shape("linalg.qr", A)
    m, n = A.shape[-2:]
    parts = D.unpack(D.qr(A, mode=mode), *D.qr_shapes(m, n, mode))
    if mode == "r":
        parts = [zeros(0, dtype=A.dtype, device=A.device)] + parts
    return result(*parts)


def qr(A, mode="reduced"):
    """``(Q, R)`` with ``A = Q R``, Q with orthonormal columns and R upper-triangular; mode
    'reduced' (Q is m x k, k = min(m, n)), 'complete' (m x m) or 'r' (R only; Q is empty).

    >>> import labkit as lk
    >>> q, r = lk.linalg.qr(lk.ones(3, 2))
    >>> q.shape, r.shape, lk.linalg.qr(lk.ones(3, 2), mode="complete").Q.shape
    ((3, 2), (2, 2), (3, 3))
    """
    return _qr(A, mode, return_types.linalg_qr)


@public("qr")
def torch_qr(input, some=True):
    """``torch.qr``: ``some=True`` is mode 'reduced', ``some=False`` 'complete'."""
    return _qr(input, "reduced" if some else "complete", return_types.qr)


def _svd(A, full_matrices):
    D.matrix_shape("linalg.svd", A)
    m, n = A.shape[-2:]
    return D.unpack(D.svd(A, full_matrices=full_matrices), *D.svd_shapes(m, n, full_matrices))


def svd(A, full_matrices=True):
    """``(U, S, Vh)`` with ``A = U diag(S) Vh``, S descending; ``full_matrices=False`` keeps
    only the first min(m, n) columns of U and rows of Vh.

    >>> import labkit as lk
    >>> lk.linalg.svd(lk.tensor([[3.0, 0.0], [0.0, -2.0]])).S.tolist()
    [3.0, 2.0]
    """
    return return_types.linalg_svd(*_svd(A, full_matrices))


@public("svd")
def torch_svd(input, some=True, compute_uv=True):
    """``torch.svd``: ``(U, S, V)`` (V, not its transpose), reduced unless ``some=False``;
    ``compute_uv=False`` gives zero-filled U and V."""
    u, s, vh = _svd(input, full_matrices=not some)
    if not compute_uv:
        m, n = input.shape[-2:]
        batch = input.shape[:-2]
        return return_types.svd(zeros(batch + (m, m if not some else min(m, n)),
                                       dtype=input.dtype, device=input.device), s,
                                 zeros(batch + (n, n if not some else min(m, n)),
                                       dtype=input.dtype, device=input.device))
    return return_types.svd(u, s, D.mT(vh))


def svdvals(A):
    """The singular values of each matrix, descending.

    >>> import labkit as lk
    >>> lk.linalg.svdvals(lk.tensor([[0.0, 2.0], [-3.0, 0.0]])).tolist()
    [3.0, 2.0]
    """
    return _svd(A, False)[1]


def eigh(A, UPLO="L"):
    """``(eigenvalues, eigenvectors)`` of each symmetric matrix, eigenvalues ascending, read
    from the lower (``UPLO='L'``) or upper triangle.

    >>> import labkit as lk
    >>> lk.linalg.eigh(lk.tensor([[2.0, 0.0], [0.0, 1.0]])).eigenvalues.tolist()
    [1.0, 2.0]
    """
    D.matrix_shape("linalg.eigh", A, square=True)
    n = A.shape[-1]
    return return_types.linalg_eigh(*D.unpack(D.eigh(A, UPLO=UPLO), (n,), (n, n)))


def eigvalsh(A, UPLO="L"):
    """The eigenvalues of each symmetric matrix, ascending.

    >>> import labkit as lk
    >>> lk.linalg.eigvalsh(lk.tensor([[2.0, 1.0], [1.0, 2.0]])).tolist()
    [1.0, 3.0]
    """
    return eigh(A, UPLO).eigenvalues


def _tolerances(A, atol, rtol):
    """PyTorch's defaults: rtol = eps * max(m, n) unless atol > 0 is given."""
    if rtol is None:
        rtol = np.finfo(A.dtype.np).eps * max(A.shape[-2:]) if not atol else 0.0
    return float(atol or 0.0), float(rtol)


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse of each matrix: singular values at or below
    ``max(atol, rtol * largest)`` count as zero (default rtol: eps * max(m, n)).

    >>> import labkit as lk
    >>> lk.linalg.pinv(lk.tensor([[2.0, 0.0], [0.0, 0.0]])).tolist()
    [[0.5, 0.0], [0.0, 0.0]]
    """
    D.matrix_shape("linalg.pinv", A)
    atol, rtol = _tolerances(A, atol, rtol)
    return D.pinv(A, atol=atol, rtol=rtol, hermitian=hermitian)


@public()
def pinverse(input, rcond=1e-15):
    """``torch.pinverse``: ``lk.linalg.pinv`` with ``rtol=rcond``."""
    return pinv(input, rtol=rcond)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False):
    """The number of singular values (absolute eigenvalues, if ``hermitian``) above
    ``max(atol, rtol * largest)`` of each matrix (int64).

    >>> import labkit as lk
    >>> lk.linalg.matrix_rank(lk.ones(3, 3)).item()
    1
    """
    D.matrix_shape("linalg.matrix_rank", A, square=hermitian)
    atol, rtol = _tolerances(A, atol, rtol)
    s = E.abs(eigvalsh(A)) if hermitian else svdvals(A)
    if not s.shape[-1]:
        return R.sum(E.cast(s, dtype="int64"), dim=-1)
    tol = E.maximum(R.max(s, dim=-1, keepdim=True).detach() * rtol, atol)
    return R.sum(E.gt(s.detach(), tol), dim=-1)


# ---- products -----------------------------------------------------------------------------------
def _chain_order(dims):
    """The cheapest order of a matrix chain (``dims[i]`` x ``dims[i+1]`` the i-th matrix):
    ``split[i][j]``, where the product of matrices i..j is split."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def multi_dot(tensors):
    """The product of a chain of matrices, multiplied in the cheapest order; the first may be
    a 1-D row vector and the last a 1-D column vector.

    >>> import labkit as lk
    >>> lk.linalg.multi_dot([lk.ones(3), lk.ones(3, 4), lk.ones(4)]).item()
    12.0
    """
    tensors = list(tensors)
    if len(tensors) < 2:
        raise ShapeError(f"linalg.multi_dot: expects at least 2 tensors, got {len(tensors)}")
    first, last = tensors[0].ndim == 1, tensors[-1].ndim == 1
    mats = list(tensors)
    if first:
        mats[0] = C.unsqueeze(mats[0], 0)
    if last:
        mats[-1] = C.unsqueeze(mats[-1], -1)
    for k, t in enumerate(mats):
        if t.ndim != 2:
            raise ShapeError(f"linalg.multi_dot: tensor {k} must be 2-D (the first and last "
                             f"may be 1-D); got {describe(tensors[k])}")
        if k and mats[k - 1].shape[1] != t.shape[0]:
            raise ShapeError(f"linalg.multi_dot: tensors {k - 1} and {k} cannot be multiplied "
                             f"({describe(tensors[k - 1])} and {describe(tensors[k])})")
    split = _chain_order([m.shape[0] for m in mats] + [mats[-1].shape[1]])

    def product(i, j):
        if i == j:
            return mats[i]
        return matmul(product(i, split[i][j]), product(split[i][j] + 1, j))
    out = product(0, len(mats) - 1)
    if first or last:
        out = reshape(out, shape=out.shape[int(first):out.ndim - int(last)])
    return out


@public(method=False)
def chain_matmul(*matrices):
    """``torch.chain_matmul``: ``lk.linalg.multi_dot(matrices)`` for 2-D tensors."""
    return multi_dot(matrices)


def cross(input, other, *, dim=-1):
    """``torch.linalg.cross``: the cross product along ``dim`` (default the last)."""
    return _cross(input, other, dim)


def vecdot(x, y, *, dim=-1):
    """The dot product of vectors along ``dim`` (broadcasting the rest).

    >>> import labkit as lk
    >>> lk.linalg.vecdot(lk.ones(2, 3), lk.ones(3)).tolist()
    [3.0, 3.0]
    """
    return R.sum(E.mul(x, y), dim=dim)
