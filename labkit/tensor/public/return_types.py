"""Named results, as PyTorch's ``torch.return_types``: ``values, indices = x.max(1)`` unpacks,
and ``x.max(1).values`` reads a field.

>>> import labkit as lk
>>> r = lk.tensor([[1.0, 5.0], [7.0, 2.0]]).max(1)
>>> r.values.tolist(), r.indices.tolist()
([5.0, 7.0], [1, 0])
"""
from collections import namedtuple


def _named(name, fields):
    cls = namedtuple(name, fields)
    cls.__module__ = __name__
    return cls


max, min, sort, topk, kthvalue, median, nanmedian, mode, cummax, cummin = (
    _named(n, ("values", "indices")) for n in ("max", "min", "sort", "topk", "kthvalue", "median",
                                               "nanmedian", "mode", "cummax", "cummin"))
aminmax = _named("aminmax", ("min", "max"))
slogdet = _named("slogdet", ("sign", "logabsdet"))
qr = _named("qr", ("Q", "R"))
svd = _named("svd", ("U", "S", "V"))                  # torch.svd: V, not its transpose
eigh = _named("eigh", ("eigenvalues", "eigenvectors"))
# torch.linalg's
linalg_slogdet = _named("linalg_slogdet", ("sign", "logabsdet"))
linalg_qr = _named("linalg_qr", ("Q", "R"))
linalg_svd = _named("linalg_svd", ("U", "S", "Vh"))
linalg_eigh = _named("linalg_eigh", ("eigenvalues", "eigenvectors"))
