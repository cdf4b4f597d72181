"""The multivariate normal distribution, as ``torch.distributions.MultivariateNormal``."""
import math

from ..errors import ShapeError
from ..linalg import cholesky, inv, solve
from ..tensor import Tensor, log, randn, tril
from . import constraints
from .distribution import Distribution
from .utils import broadcast_shape, lazy_property


def batch_mahalanobis(scale_tril, x):
    """``x^T (L L^T)^-1 x`` over the last dimension of ``x``, for lower-triangular ``L``
    (batches broadcast): the squared norm of ``L^-1 x``."""
    return (solve_lower(scale_tril, x.unsqueeze(-1)).squeeze(-1) ** 2).sum(-1)


def solve_lower(low, b):
    """``low^-1 b`` for the lower triangle of ``low`` (its upper part is not read, and gets no
    gradient, as with PyTorch's ``solve_triangular(upper=False)``); batches broadcast."""
    n, k = b.shape[-2:]
    batch = broadcast_shape(low.shape[:-2], b.shape[:-2])
    return solve(tril(low).expand(*batch, n, n), b.expand(*batch, n, k))


def half_log_det(scale_tril):
    """``log det(L L^T) / 2`` of lower-triangular ``L``: the sum of its diagonal's logs."""
    return log(scale_tril.diagonal(dim1=-2, dim2=-1)).sum(-1)


class MultivariateNormal(Distribution):
    """The normal distribution of vectors (the event is ``loc``'s last dimension), given its
    covariance matrix, its precision matrix or the lower Cholesky factor ``scale_tril`` of the
    covariance (one of the three; batch dimensions broadcast with ``loc``'s).

    >>> import labkit as lk
    >>> d = lk.distributions.MultivariateNormal(lk.zeros(2), covariance_matrix=lk.eye(2) * 4)
    >>> d.event_shape, d.variance.tolist(), round(d.entropy().item(), 4)
    ((2,), [4.0, 4.0], 4.2242)
    """

    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        if not isinstance(loc, Tensor) or loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        matrix = given[0]
        if matrix.ndim < 2:
            raise ValueError("scale_tril, covariance_matrix or precision_matrix must be at "
                             "least two-dimensional, with optional leading batch dimensions")
        n = loc.shape[-1]
        if matrix.shape[-2:] != (n, n):
            raise ShapeError(f"MultivariateNormal: a {n}-vector loc needs {n} x {n} matrices; "
                             f"got shape {tuple(matrix.shape)}")
        batch = broadcast_shape(matrix.shape[:-2], loc.shape[:-1])
        expanded = matrix.expand(*batch, n, n)
        if scale_tril is not None:
            self.scale_tril = expanded
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self.covariance_matrix = expanded
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self.precision_matrix = expanded
            self._unbroadcasted_scale_tril = cholesky(inv(precision_matrix))
        self.loc = loc.expand(*batch, n)
        super().__init__(batch, (n,), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = _instance or MultivariateNormal.__new__(MultivariateNormal)
        n = self._event_shape[0]
        new.loc = self.loc.expand(*batch_shape, n)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(*batch_shape, n, n))
        return self._expanded(new, batch_shape)

    def _matrix_shape(self):
        return self._batch_shape + self._event_shape + self._event_shape

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(*self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        low = self._unbroadcasted_scale_tril
        return (low @ low.mT).expand(*self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        low = self._unbroadcasted_scale_tril
        return inv(low @ low.mT).expand(*self._matrix_shape())

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return (self._unbroadcasted_scale_tril ** 2).sum(-1).expand(
            *self._batch_shape, *self._event_shape)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        low = self._unbroadcasted_scale_tril
        m = batch_mahalanobis(low, value - self.loc)
        n = self._event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + m) - half_log_det(low)

    def entropy(self):
        n = self._event_shape[0]
        h = 0.5 * n * (1.0 + math.log(2 * math.pi)) + half_log_det(self._unbroadcasted_scale_tril)
        return h.expand(*self._batch_shape) if self._batch_shape else h
