"""Inverses and decompositions of (batches of) matrices: inv, solve, det, slogdet, cholesky, qr,
svd, eigh and pinv.

Each is one primitive whose kernel calls ``xp.linalg`` (NumPy and CuPy share the API) and whose
vjp is written in labkit ops (PyTorch's formulas), so gradients of gradients work. An op has one
output, so decompositions that give several (``qr``'s Q and R, ``svd``'s U, S and Vh, ``eigh``,
``slogdet``) return them *packed*: each part flattened after the batch dimensions and joined
along the last one; ``unpack`` slices them out again (views), and the vjp receives the packed
cotangent, zeros where a part was not used.

Where a part's cotangent is zero, its terms of the vjp are zero too, even when they divide by a
difference of two equal eigen- or singular values (``quotient``): ``svd(A).S`` of a matrix with
repeated singular values has PyTorch's gradient, as ``svdvals`` does.
"""
import contextlib
import math

import numpy as np

from ...errors import DTypeError, GradError, LinAlgError, ShapeError, describe
from ..batching import LEADING
from ..creation import tensor
from ..op import needs_grad, op
from ..shape_rules import broadcast_shapes, shape_of
from .composite import transpose, unsqueeze
from .elementwise import add, div, eq, mul, neg, sub, where
from .index import getitem_slices
from .linalg import matmul, matmul_t
from .shape import concat, reshape


# ---- shared pieces ---------------------------------------------------------------------------
def matrix_dtype(name, a):
    """The dtype of ``a`` if LAPACK takes it (float32 / float64), else a DTypeError."""
    if a.dtype.name not in ("float32", "float64"):
        raise DTypeError(f"{name}: expects a float32 or float64 tensor; got {describe(a)}. "
                         f"Convert it first: x.double() or x.float().")
    return a.dtype


def matrix_shape(name, a, square=False):
    """The shape of ``a``, checked to be a (batch of) matrices, square if ``square``."""
    s = shape_of(a)
    if len(s) < 2:
        raise ShapeError(f"{name}: expects a matrix or a batch of matrices (at least 2 "
                         f"dimensions); got {describe(a)}")
    if square and s[-1] != s[-2]:
        raise ShapeError(f"{name}: expects square matrices; got {describe(a)}, whose matrices "
                         f"are {s[-2]} x {s[-1]}")
    return s


def lapack_ready(*arrays, square=True):
    """Kernel-side check that the arrays are float32/64 (square) matrices; otherwise a plain
    error, which eager mode turns into the shape rule's clear one. (NumPy would take integers,
    converting them, where PyTorch refuses.)"""
    for a in arrays:
        if a.dtype.kind != "f" or a.dtype.itemsize < 4 or a.ndim < 2:
            raise TypeError("not a float32/float64 matrix")
    if square and arrays[0].shape[-1] != arrays[0].shape[-2]:
        raise ValueError("not square")


@contextlib.contextmanager
def lapack_errors(xp, name, a, what, remedy):
    """LAPACK's failure (``LinAlgError``) as labkit's ``LinAlgError`` saying what and why."""
    try:
        yield
    except getattr(xp.linalg, "LinAlgError", np.linalg.LinAlgError) as exc:
        raise LinAlgError(f"{name}: {what} (input of shape {tuple(a.shape)}, {a.dtype}; "
                          f"LAPACK: {exc}). {remedy}") from None


def pack(xp, batch, *parts):
    """Arrays that share the leading ``batch`` dimensions as one: each flattened after them,
    joined along the last axis."""
    n = len(batch)
    return xp.concatenate([p.reshape(batch + (math.prod(p.shape[n:]),)) for p in parts], axis=-1)


def packed_shape(batch, *shapes):
    return tuple(batch) + (sum(math.prod(s) for s in shapes),)


def unpack(packed, *shapes):
    """The parts of a packed result (or cotangent): tensors of ``batch + shape`` per ``shape``."""
    batch, last, start, parts = packed.shape[:-1], packed.ndim - 1, 0, []
    for s in shapes:
        n = math.prod(s)
        parts.append(reshape(getitem_slices(packed, last, start, start + n), shape=batch + s))
        start += n
    return parts


def mT(x):
    """``x`` with its last two dimensions swapped."""
    return transpose(x, -2, -1)


def quotient(num, den):
    """``num / den``, 0 where ``num`` is 0 (even where ``den`` is 0 too), with no NaN in its
    gradient either."""
    zero = eq(num, 0)
    return where(zero, 0, div(num, where(zero, 1, den)))


def _constant(array, like):
    return tensor(array, dtype=like.dtype, device=like.device)


def eye_like(n, like):
    """The ``n`` x ``n`` identity in ``like``'s dtype and device (a constant)."""
    return _constant(np.eye(n), like)


def tril(x, k=0):
    """The lower triangle of the matrices of ``x`` (on and below diagonal ``k``), the rest 0."""
    return mul(x, _constant(np.tri(x.shape[-2], x.shape[-1], k), x))


def triu(x, k=0):
    """The upper triangle of the matrices of ``x`` (on and above diagonal ``k``), the rest 0."""
    return mul(x, _constant(1 - np.tri(x.shape[-2], x.shape[-1], k - 1), x))


def diag_embed(v):
    """Matrices with the vectors ``v`` (..., n) on their diagonals."""
    return mul(unsqueeze(v, -2), eye_like(v.shape[-1], v))


def solve_right(b, a):
    """``b @ inv(a)``, as a solve: ``x a = b`` <=> ``a^T x^T = b^T``."""
    return mT(solve(mT(a), mT(b)))


def _scaled_inverse_transpose(g, a):
    """``g[..., None, None] * inv(a)^T``: the vjp of det and of slogdet's logabsdet."""
    return mul(reshape(g, shape=g.shape + (1, 1)), mT(inv(a)))


# ---- inv ------------------------------------------------------------------------------------
def _square_rule(name):
    def rule(a):
        matrix_shape(name, a, square=True)
        return shape_of(a), matrix_dtype(name, a)
    return rule


def _inv_vjp(g, out, a):
    # d(A^-1) = -A^-1 dA A^-1, so gA = -A^-T g A^-T
    return (neg(matmul_t(matmul_t(out, g, transpose_a=True), out, transpose_b=True)),)


@op("inv", shape=_square_rule("linalg.inv"), vjp=_inv_vjp, batch=LEADING)
def inv(xp, a):
    """The inverse of each square matrix of ``a``."""
    lapack_ready(a)
    with lapack_errors(xp, "linalg.inv", a, "a matrix is singular, so it has no inverse",
                       "lk.linalg.pinv gives a pseudo-inverse; lk.linalg.matrix_rank shows the "
                       "rank."):
        return xp.linalg.inv(a)


# ---- solve ----------------------------------------------------------------------------------
class _Shape:
    def __init__(self, shape):
        self.shape = shape


def _solve_rule(a, b):
    sa = matrix_shape("linalg.solve", a, square=True)
    sb = matrix_shape("linalg.solve", b)
    if sb[-2] != sa[-1]:
        raise ShapeError(f"linalg.solve: A {describe(a)} is {sa[-2]} x {sa[-1]} but B "
                         f"{describe(b)} has {sb[-2]} rows; B needs as many rows as A")
    if a.dtype is not b.dtype:
        raise DTypeError(f"linalg.solve: A {describe(a)} and B {describe(b)} must have one "
                         f"dtype; convert one (e.g. b.to(a.dtype))")
    batch = broadcast_shapes("linalg.solve (batch dimensions)", _Shape(sa[:-2]), _Shape(sb[:-2]))
    return batch + sb[-2:], matrix_dtype("linalg.solve", a)


def _solve_vjp(g, out, a, b):
    # A X = B: gB = A^-T g, gA = -gB X^T
    gb = solve(mT(a), g)
    ga = neg(matmul_t(gb, out, transpose_b=True)) if needs_grad(a) else None
    return ga, gb


@op("solve", shape=_solve_rule, vjp=_solve_vjp, batch=LEADING)
def solve(xp, a, b):
    """``X`` with ``A X = B`` for square ``A`` (..., n, n) and ``B`` (..., n, k); the batch
    dimensions broadcast."""
    lapack_ready(a, b)
    if a.dtype != b.dtype:
        raise TypeError("A and B of different dtypes")      # the rule explains
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    a = xp.broadcast_to(a, batch + a.shape[-2:])
    b = xp.broadcast_to(b, batch + b.shape[-2:])
    if a.size == 0 or b.size == 0:           # nothing to solve (CuPy's solve divides by 0)
        return xp.zeros(b.shape, dtype=b.dtype)
    with lapack_errors(xp, "linalg.solve", a, "a matrix A is singular, so A X = B has no "
                       "unique solution", "lk.linalg.pinv(A) @ B gives the least-squares one."):
        return xp.linalg.solve(a, b)


# ---- det, slogdet ---------------------------------------------------------------------------
def _det_rule(name):
    def rule(a):
        return matrix_shape(name, a, square=True)[:-2], matrix_dtype(name, a)
    return rule


def _det_vjp(g, out, a):
    # d det(A) = det(A) tr(A^-1 dA): gA = g det(A) A^-T (for an invertible A)
    return (_scaled_inverse_transpose(mul(g, out), a),)


@op("det", shape=_det_rule("linalg.det"), vjp=_det_vjp, batch=LEADING)
def det(xp, a):
    """The determinant of each square matrix of ``a``."""
    lapack_ready(a)
    return xp.linalg.det(a)


def _slogdet_rule(a):
    s = matrix_shape("linalg.slogdet", a, square=True)
    return s[:-2] + (2,), matrix_dtype("linalg.slogdet", a)


def _slogdet_vjp(g, out, a):
    logabs = reshape(getitem_slices(g, g.ndim - 1, 1, 2), shape=g.shape[:-1])  # sign: none
    return (_scaled_inverse_transpose(logabs, a),)


@op("slogdet", shape=_slogdet_rule, vjp=_slogdet_vjp, batch=LEADING)
def slogdet(xp, a):
    """``(sign, log|det|)`` of each square matrix, packed as (..., 2)."""
    lapack_ready(a)
    sign, logabs = xp.linalg.slogdet(a)
    return xp.stack([sign, logabs], axis=-1)


# ---- cholesky -------------------------------------------------------------------------------
def _cholesky_vjp(g, out, a):
    # PyTorch's rule: gA = L^-T Phi(L^T gL) L^-1, Phi(X) = (tril(X) + tril(X)^T) / 2
    x = tril(matmul_t(out, g, transpose_a=True))
    x = mul(add(x, mT(tril(x, -1))), 0.5)
    return (solve_right(solve(mT(out), x), out),)


@op("cholesky", shape=_square_rule("linalg.cholesky"), vjp=_cholesky_vjp, batch=LEADING)
def cholesky(xp, a):
    """The lower-triangular ``L`` with ``L L^T = A`` for each symmetric positive-definite ``A``
    (reading only the lower triangle of ``A``)."""
    lapack_ready(a)
    with lapack_errors(xp, "linalg.cholesky", a, "a matrix is not positive-definite",
                       "Check that it is symmetric with positive eigenvalues "
                       "(lk.linalg.eigvalsh); adding a small multiple of the identity often "
                       "helps."):
        return xp.linalg.cholesky(a)


# ---- qr ---------------------------------------------------------------------------------------
def qr_shapes(m, n, mode):
    """Trailing shapes of (Q, R) for ``mode`` ('r': R only)."""
    k = min(m, n)
    if mode == "complete":
        return (m, m), (m, n)
    if mode == "reduced":
        return (m, k), (k, n)
    return ((k, n),)


def _qr_rule(a, mode="reduced"):
    if mode not in ("reduced", "complete", "r"):
        raise ShapeError(f"linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    s = matrix_shape("linalg.qr", a)
    return packed_shape(s[:-2], *qr_shapes(s[-2], s[-1], mode)), matrix_dtype("linalg.qr", a)


def _copyltu(m):
    """The symmetric matrix with ``m``'s lower triangle."""
    return add(tril(m), mT(tril(m, -1)))


def _qr_backward_tall(gq, gr, q, r):
    """gA for A = QR with A (m x n), m >= n (Q m x n, R n x n):
    (gQ + Q copyltu(M)) R^-T with M = R gR^T - gQ^T Q."""
    m = sub(matmul_t(r, gr, transpose_b=True), matmul_t(gq, q, transpose_a=True))
    return solve_right(add(gq, matmul(q, _copyltu(m))), mT(r))


def _qr_vjp(g, out, a, mode="reduced"):
    m, n = a.shape[-2:]
    if mode == "r":
        raise GradError("linalg.qr: the gradient depends on Q, which mode='r' does not compute; "
                        "use mode='reduced' to differentiate through QR")
    if mode == "complete" and m > n:
        raise GradError(f"linalg.qr: the QR decomposition of a {m} x {n} matrix with more rows "
                        f"than columns is not differentiable with mode='complete' (Q is not "
                        f"unique); use mode='reduced'")
    shapes = qr_shapes(m, n, mode)
    q, r = unpack(out, *shapes)
    gq, gr = unpack(g, *shapes)
    if m >= n:
        return (_qr_backward_tall(gq, gr, q, r),)
    # A = [X | Y] with X square: X = Q U, Y = Q V for R = [U | V]
    y = getitem_slices(a, a.ndim - 1, m, n)
    u, gu = (getitem_slices(t, t.ndim - 1, 0, m) for t in (r, gr))
    gv = getitem_slices(gr, gr.ndim - 1, m, n)
    gx = _qr_backward_tall(add(gq, matmul_t(y, gv, transpose_b=True)), gu, q, u)
    return (concat(gx, matmul(q, gv), dim=-1),)


@op("qr", shape=_qr_rule, vjp=_qr_vjp, batch=LEADING)
def qr(xp, a, mode="reduced"):
    """The QR decomposition of each matrix, (Q, R) packed ('r': R alone)."""
    lapack_ready(a, square=False)
    parts = xp.linalg.qr(a, mode=mode)
    parts = (parts,) if mode == "r" else tuple(parts)
    return pack(xp, a.shape[:-2], *parts)


# ---- svd --------------------------------------------------------------------------------------
def svd_shapes(m, n, full_matrices):
    """Trailing shapes of (U, S, Vh)."""
    k = min(m, n)
    return ((m, m if full_matrices else k), (k,), (n if full_matrices else k, n))


def _svd_rule(a, full_matrices=True):
    s = matrix_shape("linalg.svd", a)
    return (packed_shape(s[:-2], *svd_shapes(s[-2], s[-1], full_matrices)),
            matrix_dtype("linalg.svd", a))


def _svd_vjp(g, out, a, full_matrices=True):
    m, n = a.shape[-2:]
    k = min(m, n)
    shapes = svd_shapes(m, n, full_matrices)
    u, s, vh = unpack(out, *shapes)
    gu, gs, gvh = unpack(g, *shapes)
    if full_matrices:          # only the first k columns of U (rows of Vh) are determined
        u, gu = (getitem_slices(t, t.ndim - 1, 0, k) for t in (u, gu))
        vh, gvh = (getitem_slices(t, t.ndim - 2, 0, k) for t in (vh, gvh))
    return (svd_backward(gu, gs, gvh, u, s, vh),)


def _skew(x):
    return sub(x, mT(x))


def svd_backward(gu, gs, gvh, u, s, vh):
    """PyTorch's gradient of A = U diag(S) Vh (reduced, distinct singular values)."""
    m, n = u.shape[-2], vh.shape[-1]
    s_row, s_col = unsqueeze(s, -2), unsqueeze(s, -1)
    s2 = mul(s, s)
    e = sub(unsqueeze(s2, -2), unsqueeze(s2, -1))            # E_ij = s_j^2 - s_i^2
    num = add(mul(_skew(matmul_t(u, gu, transpose_a=True)), s_row),
              mul(s_col, _skew(matmul_t(vh, gvh, transpose_b=True))))
    inner = add(quotient(num, e), diag_embed(gs))
    if m > n:      # gA = [U inner + (I - U U^T) gU S^-1] Vh
        gu_s = quotient(gu, s_row)
        ga = sub(add(matmul(u, inner), gu_s), matmul(u, matmul_t(u, gu_s, transpose_a=True)))
        return matmul(ga, vh)
    if m < n:      # gA = U [inner Vh + S^-1 gVh (I - V V^T)]
        s_gvh = quotient(gvh, s_col)
        ga = sub(add(matmul(inner, vh), s_gvh), matmul(matmul_t(s_gvh, vh, transpose_b=True), vh))
        return matmul(u, ga)
    return matmul(matmul(u, inner), vh)


@op("svd", shape=_svd_rule, vjp=_svd_vjp, batch=LEADING)
def svd(xp, a, full_matrices=True):
    """The singular value decomposition of each matrix, (U, S, Vh) packed."""
    lapack_ready(a, square=False)
    with lapack_errors(xp, "linalg.svd", a, "the SVD did not converge",
                       "Check the input for NaN or Inf."):
        u, s, vh = xp.linalg.svd(a, full_matrices=full_matrices)
    return pack(xp, a.shape[:-2], u, s, vh)


# ---- eigh -------------------------------------------------------------------------------------
def _eigh_rule(a, UPLO="L"):
    if UPLO not in ("L", "U"):
        raise ShapeError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    s = matrix_shape("linalg.eigh", a, square=True)
    n = s[-1]
    return packed_shape(s[:-2], (n,), (n, n)), matrix_dtype("linalg.eigh", a)


def _eigh_vjp(g, out, a, UPLO="L"):
    # PyTorch's rule: gA = V (diag(gL) + skew(V^T gV) / 2E) V^T, E_ij = L_j - L_i
    n = a.shape[-1]
    lam, v = unpack(out, (n,), (n, n))
    glam, gv = unpack(g, (n,), (n, n))
    e = sub(unsqueeze(lam, -2), unsqueeze(lam, -1))
    inner = add(quotient(mul(_skew(matmul_t(v, gv, transpose_a=True)), 0.5), e),
                diag_embed(glam))
    return (matmul_t(matmul(v, inner), v, transpose_b=True),)


@op("eigh", shape=_eigh_rule, vjp=_eigh_vjp, batch=LEADING)
def eigh(xp, a, UPLO="L"):
    """Eigenvalues (ascending) and eigenvectors of each symmetric matrix, packed, reading the
    triangle ``UPLO`` names."""
    lapack_ready(a)
    with lapack_errors(xp, "linalg.eigh", a, "the eigenvalue algorithm did not converge",
                       "Check the input for NaN or Inf."):
        w, v = xp.linalg.eigh(a, UPLO=UPLO)
    return pack(xp, a.shape[:-2], w, v)


# ---- pinv -------------------------------------------------------------------------------------
def _pinv_rule(a, atol=0.0, rtol=0.0, hermitian=False):
    s = matrix_shape("linalg.pinv", a, square=hermitian)
    return s[:-2] + (s[-1], s[-2]), matrix_dtype("linalg.pinv", a)


def _pinv_vjp(g, out, a, atol=0.0, rtol=0.0, hermitian=False):
    # PyTorch's rule (for a rank that does not change near A), with P = pinv(A)
    m, n = a.shape[-2:]
    if m <= n:
        k = matmul_t(g, out, transpose_a=True)                    # g^T P
        kp = matmul_t(k, out, transpose_b=True)                   # g^T P P^T
        return (add(sub(kp, mT(matmul(out, k))),
                    sub(matmul_t(out, matmul(out, sub(mT(g), matmul(k, a))), transpose_a=True),
                        matmul(matmul(a, out), kp))),)
    k = matmul_t(out, g, transpose_b=True)                        # P g^T
    pk = matmul_t(out, k, transpose_a=True)                       # P^T P g^T
    return (add(sub(matmul_t(matmul(sub(mT(g), matmul(a, k)), out), out, transpose_b=True),
                    mT(matmul(k, out))),
                sub(pk, matmul(matmul(pk, out), a))),)


@op("pinv", shape=_pinv_rule, vjp=_pinv_vjp, batch=LEADING)
def pinv(xp, a, atol=0.0, rtol=0.0, hermitian=False):
    """The pseudo-inverse of each matrix: singular values (absolute eigenvalues, if
    ``hermitian``) at or below ``max(atol, rtol * largest)`` count as zero."""
    lapack_ready(a, square=hermitian)
    m, n = a.shape[-2:]
    if not min(m, n):
        return xp.zeros(a.shape[:-2] + (n, m), a.dtype)
    if hermitian:
        w, u = xp.linalg.eigh(a)
        s, vt = xp.abs(w), xp.swapaxes(u, -1, -2)
    else:
        u, w, vt = xp.linalg.svd(a, full_matrices=False)
        s = w
    keep = s > xp.maximum(atol, rtol * s.max(axis=-1, keepdims=True))
    scale = xp.where(keep, 1 / xp.where(keep, w, 1), 0).astype(a.dtype)
    return xp.matmul(xp.swapaxes(vt, -1, -2) * scale[..., None, :], xp.swapaxes(u, -1, -2))
