"""Shape functions in PyTorch's argument forms: ``lk.reshape(x, (2, 3))`` and ``x.reshape(2, 3)``,
``lk.permute(x, (2, 0, 1))`` and ``x.permute(2, 0, 1)``, ``x.expand(4, -1)``, ``lk.cat([a, b], 0)``,
``lk.split(x, 2, 1)``, ``x.chunk(3)``, ``x.size(0)``, ``x.view_as(y)``...

>>> import labkit as lk
>>> x = lk.zeros(2, 3)
>>> lk.reshape(x, (3, 2)).shape, x.view(-1).shape, x.permute(1, 0).shape, x.size(1)
((3, 2), (6,), (3, 2), 3)
>>> lk.cat([x, x], 1).shape, lk.stack([x, x]).shape, [t.shape for t in x.chunk(2, 1)]
((2, 6), (2, 2, 3), [(2, 2), (2, 1)])
"""
import math

from ...errors import ShapeError, describe
from ..dtypes import DType, as_dtype
from ..ops import composite as C
from ..ops import shape as S
from .. import arguments
from ..shape_rules import broadcast_shapes, normalize_dim
from ..tensor import Tensor
from .registry import public, tensor_method


def _sizes(sizes, what):
    """PyTorch's two forms of a list of ints: ``f(2, 3)`` and ``f((2, 3))`` (or a Size/list)."""
    return arguments.ints(what, sizes)


# ---- reshaping -------------------------------------------------------------------------------
@public(method=False)
def reshape(x, shape=None, *sizes):
    """``x`` with a new shape (one dimension may be -1): ``lk.reshape(x, (2, 3))``."""
    if shape is None:
        raise TypeError("reshape needs a shape: lk.reshape(x, (2, 3)) or x.reshape(2, 3)")
    return S.reshape(x, shape=arguments.size("reshape", (shape,) + sizes, infer=True,
                                             name="shape"))


@tensor_method("reshape")
def _reshape_method(self, *shape):
    """``x.reshape(2, 3)`` or ``x.reshape((2, 3))``; one dimension may be -1."""
    return S.reshape(self, shape=arguments.size("reshape", shape, infer=True, name="shape"))


@tensor_method("view")
def _view(self, *shape):
    """``x.view(2, 3)``: as ``reshape`` (labkit shares memory whenever the backend can)."""
    if len(shape) == 1 and isinstance(shape[0], (str, DType)):
        raise TypeError(f"view({shape[0]!r}): reinterpreting the bytes as another dtype is not "
                        f"supported; use x.to({as_dtype(shape[0])!r}) to convert the values")
    return S.reshape(self, shape=arguments.size("view", shape, infer=True, name="shape"))


@tensor_method()
def view_as(self, other):
    """``self`` with ``other``'s shape."""
    return S.reshape(self, shape=other.shape)


@tensor_method()
def reshape_as(self, other):
    """``self`` with ``other``'s shape."""
    return S.reshape(self, shape=other.shape)


@public()
def flatten(x, start_dim=0, end_dim=-1):
    """Merge dimensions ``start_dim..end_dim`` into one."""
    return C.flatten(x, start_dim, end_dim)


@public()
def squeeze(x, dim=None):
    """Remove dimensions of size 1 (all, or those of ``dim``: an int or a tuple)."""
    return C.squeeze(x, dim)


@public()
def unsqueeze(x, dim):
    """Insert a dimension of size 1 at ``dim``."""
    return C.unsqueeze(x, dim)


# ---- reordering --------------------------------------------------------------------------------
@public(method=False)
def permute(x, dims):
    """``x`` with its dimensions reordered: ``lk.permute(x, (2, 0, 1))``."""
    return S.permute(x, dims=_dims_of("permute", x, _sizes((dims,), "permute")))


@tensor_method("permute")
def _permute_method(self, *dims):
    """``x.permute(2, 0, 1)`` or ``x.permute((2, 0, 1))``."""
    return S.permute(self, dims=_dims_of("permute", self, _sizes(dims, "permute")))


def _dims_of(name, x, dims):
    """Each of ``dims`` checked against ``x`` (in range), as given."""
    for d in dims:
        normalize_dim(name, d, x.ndim, x)
    return dims


@public()
def transpose(x, dim0=-2, dim1=-1):
    """Swap two dimensions (default: the last two)."""
    return C.transpose(x, dim0, dim1)


@public()
def t(x):
    """The transpose of a matrix (a tensor with at most 2 dimensions, as PyTorch's ``t``)."""
    if x.ndim > 2:
        raise ShapeError(f"t() expects a tensor with at most 2 dimensions, got {describe(x)}; "
                         f"use x.transpose(dim0, dim1) or x.mT for a batch of matrices")
    return C.transpose(x, 0, -1) if x.ndim == 2 else x


def _reversed(self):
    return S.permute(self, dims=tuple(reversed(range(self.ndim))))


def _matrix_transpose(self):
    if self.ndim < 2:
        raise ShapeError(f"x.mT needs a tensor with at least 2 dimensions, got {describe(self)}")
    return C.transpose(self, -2, -1)


Tensor.T = property(_reversed, doc="All dimensions reversed (a matrix's transpose).")
Tensor.mT = property(_matrix_transpose, doc="The last two dimensions swapped (batched matrices).")


# ---- broadcasting ------------------------------------------------------------------------------
def _expand_shape(x, shape, what):
    """PyTorch's expand: -1 keeps a dimension's size; new dimensions go in front."""
    lead = len(shape) - x.ndim
    if lead < 0:
        raise ShapeError(f"{what}: the target {shape} has fewer dimensions than {describe(x)}; "
                         f"give at least {x.ndim} sizes")
    out = []
    for i, s in enumerate(shape):
        if s == -1:
            if i < lead:
                raise ShapeError(f"{what}: -1 is not allowed for a new leading dimension (target "
                                 f"{shape} for {describe(x)})")
            s = x.shape[i - lead]
        out.append(s)
    return tuple(out)


@public(method=False)
def broadcast_to(x, shape):
    """``x`` broadcast to ``shape`` (a read-only view): ``lk.broadcast_to(x, (4, 3))``."""
    return S.broadcast_to(x, shape=_expand_shape(x, _sizes((shape,), "broadcast_to"),
                                                 "broadcast_to"))


@tensor_method("broadcast_to")
def _broadcast_to_method(self, *shape):
    return S.broadcast_to(self, shape=_expand_shape(self, _sizes(shape, "broadcast_to"),
                                                    "broadcast_to"))


@tensor_method()
def expand(self, *sizes):
    """``x.expand(4, -1)``: broadcast to the sizes given, -1 keeping a dimension."""
    return S.broadcast_to(self, shape=_expand_shape(self, _sizes(sizes, "expand"), "expand"))


@tensor_method()
def expand_as(self, other):
    """``self`` broadcast to ``other``'s shape."""
    return S.broadcast_to(self, shape=tuple(other.shape))


@public(method=False)
def broadcast_tensors(*tensors):
    """The tensors broadcast against each other (a tuple of views)."""
    shape = broadcast_shapes("broadcast_tensors", *tensors)
    return tuple(S.broadcast_to(x, shape=shape) for x in tensors)


# ---- joining and splitting ------------------------------------------------------------------
def _tensor_list(tensors, what, example):
    if isinstance(tensors, Tensor):
        raise TypeError(f"{what} takes a sequence of tensors, e.g. {example}; got one "
                        f"{describe(tensors)}")
    tensors = list(tensors)
    if not tensors:
        raise ShapeError(f"{what}: needs at least one tensor")
    return tensors


@public(method=False, aliases=("concat", "concatenate"))
def cat(tensors, *rest, dim=0):
    """Join tensors along an existing dimension: ``lk.cat([a, b], dim)``.

    labkit's earlier form ``lk.concat(a, b, dim=0)`` (tensors as separate arguments) still works.
    """
    if isinstance(tensors, Tensor):                     # the varargs form
        tensors = [tensors, *rest]
        if any(not isinstance(x, Tensor) for x in tensors):
            raise TypeError("cat: pass the tensors as one list and the dim after it: "
                            "lk.cat([a, b], dim)")
    elif rest:
        if len(rest) > 1 or not isinstance(rest[0], int):
            raise TypeError(f"cat takes (tensors, dim); got {1 + len(rest)} positional arguments. "
                            f"Pass the tensors as one list: lk.cat([a, b], dim)")
        dim = rest[0]
    return S.concat(*_tensor_list(tensors, "cat", "lk.cat([a, b], dim=0)"), dim=dim)


@public(method=False)
def stack(tensors, dim=0):
    """Join tensors of one shape along a new dimension: ``lk.stack([a, b], dim)``."""
    return C.stack(_tensor_list(tensors, "stack", "lk.stack([a, b], dim=0)"), dim=dim)


@public(method=False)
def hstack(tensors):
    """Join along dim 1 (dim 0 for 1-D tensors), as NumPy's and PyTorch's hstack."""
    tensors = _tensor_list(tensors, "hstack", "lk.hstack([a, b])")
    tensors = [C.unsqueeze(x, 0) if x.ndim == 0 else x for x in tensors]
    return S.concat(*tensors, dim=0 if tensors[0].ndim == 1 else 1)


@public(method=False, aliases=("row_stack",))
def vstack(tensors):
    """Join along dim 0, making 0-d and 1-D tensors rows first."""
    tensors = _tensor_list(tensors, "vstack", "lk.vstack([a, b])")
    tensors = [S.reshape(x, shape=(1, -1)) if x.ndim < 2 else x for x in tensors]
    return S.concat(*tensors, dim=0)


@public()
def split(x, split_size_or_sections, dim=0):
    """Pieces of ``split_size`` along ``dim`` (the last may be smaller), or of the sizes listed."""
    return C.split(x, split_size_or_sections, dim=dim)


@public()
def chunk(x, chunks, dim=0):
    """``chunks`` pieces of equal size along ``dim`` (the last may be smaller, and there may be
    fewer pieces), as PyTorch's chunk."""
    chunks = arguments.positive("chunk", "chunks", chunks)
    d = normalize_dim("chunk", dim, x.ndim, x)
    n = x.shape[d]
    if n == 0:                  # PyTorch: chunks empty pieces
        return C.split(x, [0] * chunks, dim=d)
    return C.split(x, math.ceil(n / chunks), dim=d)


@public()
def tensor_split(x, indices_or_sections, dim=0):
    """NumPy's array_split: ``n`` pieces whose sizes differ by at most one, or cut at indices."""
    d = normalize_dim("tensor_split", dim, x.ndim, x)
    n = x.shape[d]
    if isinstance(indices_or_sections, int):
        k = indices_or_sections
        if k <= 0:
            raise ShapeError(f"tensor_split: sections must be positive, got {k}")
        sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
    else:
        cuts = [min(max(int(c), 0), n) for c in indices_or_sections]
        bounds = [0] + cuts + [n]
        sizes = [max(b - a, 0) for a, b in zip(bounds, bounds[1:])]
    return C.split(x, sizes, dim=d) if n or len(sizes) == 1 else tuple(
        C.split(x, [0], dim=d) * len(sizes))


# ---- sizes ---------------------------------------------------------------------------------
@tensor_method()
def size(self, dim=None):
    """The shape (``x.size()``) or one dimension's size (``x.size(0)``), as in PyTorch; the
    element count is ``x.numel()``."""
    if dim is None:
        return self.shape
    return self.shape[normalize_dim("size", dim, self.ndim, self)]


@public(method=False)
def numel(x):
    """The number of elements."""
    return x.numel()


@tensor_method()
def dim(self):
    """The number of dimensions (``x.ndim``)."""
    return self.ndim


@tensor_method("ndimension")
def _ndimension(self):
    return self.ndim


@tensor_method("nelement")
def _nelement(self):
    return self.numel()


@tensor_method()
def contiguous(self, memory_format=None):
    """``self`` (labkit's kernels take any layout)."""
    return self


@tensor_method()
def is_contiguous(self, memory_format=None):
    """True: labkit's kernels take any layout, so every tensor counts as contiguous (``view``
    and ``contiguous()`` work on all of them).

    >>> import labkit as lk
    >>> lk.ones(2, 3).t().is_contiguous()
    True
    """
    return True
