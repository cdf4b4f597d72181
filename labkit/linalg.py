"""``lk.linalg``: PyTorch's ``torch.linalg`` namespace.

>>> import labkit as lk
>>> a = lk.tensor([[2.0, 1.0], [1.0, 2.0]])
>>> lk.linalg.eigvalsh(a).tolist(), lk.linalg.matrix_rank(a).item()
([1.0, 3.0], 2)
"""
from .errors import LinAlgError  # noqa: F401
from .tensor.ops.linalg import matmul  # noqa: F401
from .tensor.public.linalg import (cholesky, cross, det, eigh, eigvalsh, inv,  # noqa: F401
                                   matrix_norm, matrix_power, matrix_rank, multi_dot, norm, pinv,
                                   qr, solve, svd, svdvals, vecdot, vector_norm)
from .tensor.public import return_types as _return_types
from .tensor.public.linalg import _slogdet


def slogdet(A):
    """``(sign, logabsdet)`` of each square matrix: ``det = sign * exp(logabsdet)``.

    >>> import labkit as lk
    >>> lk.linalg.slogdet(lk.tensor([[0.0, 1.0], [1.0, 0.0]])).sign.item()
    -1.0
    """
    return _slogdet(A, _return_types.linalg_slogdet)
