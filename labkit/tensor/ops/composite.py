"""Composite ops: written in primitives, so they get gradients and capture for free."""
import math

from ...errors import ShapeError, describe
from ..shape_rules import normalize_dim, normalize_dims
from .elementwise import abs, div, eq, exp, log, maximum, minimum, sub, where
from .elementwise_math import clamp, clamp_max, clamp_min
from .index import getitem_slices
from .reduce import max, reduction_size, sum
from .shape import concat, permute, reshape


def mean(x, dim=None, keepdim=False):
    """Average over ``dim`` (None: all elements)."""
    count = _count(x, normalize_dims("mean", dim, x.ndim, x))
    return div(sum(x, dim=dim, keepdim=keepdim), count)


def var(x, dim=None, keepdim=False, correction=1):
    """Variance over ``dim`` with Bessel's ``correction`` (PyTorch's default: 1)."""
    count = _count(x, normalize_dims("var", dim, x.ndim, x))
    centered = sub(x, mean(x, dim=dim, keepdim=True))
    return div(sum(centered * centered, dim=dim, keepdim=keepdim), _at_least_zero(count - correction))


def _count(x, axes):
    """How many elements a reduction over ``axes`` combines (1 for a 0-d tensor): a number, or
    a 0-d tensor read at run time where a captured shape is known only then."""
    if not x.ndim:
        return 1
    sizes = [x.shape[a] for a in axes]
    if None in sizes:
        return reduction_size(x, dim=tuple(axes))
    return math.prod(sizes)


def _at_least_zero(n):
    if not isinstance(n, (int, float)):
        return maximum(n, 0)
    return n if n > 0 else 0


def transpose(x, dim0=-2, dim1=-1):
    """Swap two dimensions (default: the last two)."""
    nd = x.ndim
    d0, d1 = normalize_dim("transpose", dim0, nd, x), normalize_dim("transpose", dim1, nd, x)
    dims = list(range(nd))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return permute(x, dims=tuple(dims))


def squeeze(x, dim=None):
    """Remove dimensions of size 1 (all of them, or only ``dim``)."""
    if dim is None:
        shape = tuple(s for s in x.shape if s != 1)
    else:
        axes = normalize_dims("squeeze", dim, x.ndim, x)
        shape = tuple(s for i, s in enumerate(x.shape) if not (i in axes and s == 1))
    return reshape(x, shape=shape)


def unsqueeze(x, dim):
    """Insert a dimension of size 1 at position ``dim``."""
    d = normalize_dim("unsqueeze", dim, x.ndim + 1, x)
    return reshape(x, shape=x.shape[:d] + (1,) + x.shape[d:])


def flatten(x, start_dim=0, end_dim=-1):
    """Merge dimensions ``start_dim..end_dim`` into one."""
    if x.ndim == 0:
        return reshape(x, shape=(1,))
    s = normalize_dim("flatten", start_dim, x.ndim, x)
    e = normalize_dim("flatten", end_dim, x.ndim, x)
    if s > e:
        raise ShapeError(f"flatten: start_dim={start_dim} comes after end_dim={end_dim} for "
                         f"{describe(x)}; pass start_dim <= end_dim")
    return reshape(x, shape=x.shape[:s] + (math.prod(x.shape[s:e + 1]),) + x.shape[e + 1:])


def clip(x, min=None, max=None):
    """Limit values to ``[min, max]`` (either may be None; ``max`` wins where ``min > max``);
    gradient 1 inside, bounds included, 0 outside (PyTorch's clamp)."""
    if min is None:
        return x if max is None else clamp_max(x, max)
    return clamp_min(x, min) if max is None else clamp(x, min, max)


def logsumexp(x, dim=-1, keepdim=False):
    """log(sum(exp(x))) over ``dim``, computed stably (the max is subtracted first; an infinite
    max is not, so all -inf gives -inf and a +inf gives inf, as in PyTorch; -inf over no
    elements)."""
    axes = normalize_dims("logsumexp", dim, x.ndim, x)
    if x.ndim and any(x.shape[a] == 0 for a in axes):
        return log(sum(exp(x), dim=dim, keepdim=keepdim))
    m = max(x, dim=dim, keepdim=True).detach()
    m = where(eq(abs(m), math.inf), 0, m)
    out = log(sum(exp(sub(x, m)), dim=dim, keepdim=True)) + m
    return out if keepdim else squeeze(out, dim)


def stack(tensors, dim=0):
    """Join tensors of one shape along a new dimension ``dim``."""
    tensors = list(tensors)
    if not tensors:
        raise ShapeError("stack: needs at least one tensor")
    if any(t.shape != tensors[0].shape for t in tensors[1:]):
        raise ShapeError(f"stack: every tensor must have the same shape; got "
                         f"{', '.join(describe(t) for t in tensors)}. Reshape or pad them to one "
                         f"shape, or use lk.concat to join along an existing dimension.")
    d = normalize_dim("stack", dim, tensors[0].ndim + 1, tensors[0])
    return concat(*[unsqueeze(t, d) for t in tensors], dim=d)


def split(x, split_size_or_sections, dim=0):
    """Split ``x`` along ``dim`` into pieces of ``split_size`` (the last may be smaller), or into
    pieces of the sizes listed (PyTorch's semantics). Returns a tuple of tensors."""
    d = normalize_dim("split", dim, x.ndim, x)
    n = x.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0:
            raise ShapeError(f"split: split_size must be positive, got {step} for {describe(x)}")
        sizes = [min(step, n - s) for s in range(0, n, step)] or [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
    bounds, start = [], 0
    for s in sizes:
        bounds.append((start, start + s))
        start += s
    if start != n:
        raise ShapeError(f"split: sections {sizes} add up to {start}, but dim {dim} of "
                         f"{describe(x)} has size {n}; give sections that add up to {n}")
    return tuple(getitem_slices(x, d, a, b) for a, b in bounds)
