"""``lk.linalg``: PyTorch's ``torch.linalg`` namespace.

>>> import labkit as lk
>>> a = lk.tensor([[2.0, 1.0], [1.0, 2.0]])
>>> lk.linalg.eigvalsh(a).tolist(), lk.linalg.matrix_rank(a).item()
([1.0, 3.0], 2)
"""
from .errors import LinAlgError  # noqa: F401
from .tensor.ops.decompositions import det  # noqa: F401
from .tensor.ops.linalg import matmul  # noqa: F401
from .tensor.public.linalg import (cholesky, cross, eigh, eigvalsh, inv, matrix_norm,  # noqa: F401
                                   matrix_power, matrix_rank, multi_dot, norm, pinv, qr,
                                   solve, svd, svdvals, vecdot, vector_norm)
from .tensor.public.linalg import slogdet as _slogdet
from .tensor.public import return_types as _return_types


def slogdet(A):
    """``(sign, logabsdet)`` of each square matrix: ``det = sign * exp(logabsdet)``."""
    return _return_types.linalg_slogdet(*_slogdet(A))
