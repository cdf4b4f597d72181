"""Lookups in a table of vectors: ``F.embedding`` and ``F.embedding_bag``.

``padding_idx`` and ``scale_grad_by_freq`` change only the gradient: the rows looked up are
passed on as ``stop_gradient(rows) + (rows - stop_gradient(rows)) * factor``, which has the rows'
exact values and ``factor`` times their gradient (0 for the padding row, 1 / its count in the
batch with ``scale_grad_by_freq``). ``max_norm`` rescales, in place and without gradient, the
rows a lookup reads whose norm exceeds it, as PyTorch does.

>>> import labkit as lk
>>> import labkit.nn.functional as F
>>> w = lk.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])
>>> F.embedding_bag(lk.tensor([1, 2, 2]), w, lk.tensor([0, 1]), mode="sum").tolist()
[[1.0, 2.0], [6.0, 8.0]]
"""
from ...autodiff import no_grad
from ...errors import DTypeError, ShapeError, describe
from ...tensor import creation
from ...tensor.ops.composite import unsqueeze
from ...tensor.ops.elementwise import add, cast, div, mul, ne, stop_gradient, sub
from ...tensor.ops.index import take
from ...tensor.public.sorting import searchsorted
from ...tensor.tensor import concrete


def _check_indices(name, input, num):
    if input.dtype.is_floating or input.dtype.name == "bool_":
        raise DTypeError(f"{name}: indices must be integers (int64), got {describe(input)}; "
                         f"convert with x.long()")
    data = concrete(input)
    if data is not None and data.size:
        lo, hi = int(data.min()), int(data.max())
        if lo < 0 or hi >= num:
            raise ShapeError(f"{name}: index {lo if lo < 0 else hi} is out of range for "
                             f"{num} embeddings (valid: 0..{num - 1}). Enlarge the table "
                             f"(num_embeddings) or fix the indices.")


def _padding_index(name, padding_idx, num):
    if padding_idx is None:
        return None
    if not -num <= padding_idx < num:
        raise ValueError(f"{name}: padding_idx={padding_idx} is outside the table of {num} rows")
    return padding_idx % num


def renorm_(weight, input, max_norm, norm_type=2.0):
    """Rescale, in place, the rows of ``weight`` that ``input`` reads and whose
    ``norm_type``-norm exceeds ``max_norm`` to norm ``max_norm`` (PyTorch's embedding_renorm_)."""
    with no_grad():
        index = input.reshape(-1)
        rows = weight[index]
        norms = rows.norm(p=norm_type, dim=-1, keepdim=True)
        scale = (max_norm / (norms + 1e-7)).where(norms > max_norm, 1.0)
        weight[index] = rows * scale


def _gradient_factor(rows, factor):
    """``rows`` with their gradient scaled by ``factor`` (one per row), values unchanged."""
    frozen = stop_gradient(rows)
    return add(frozen, mul(sub(rows, frozen), unsqueeze(factor, -1)))


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` (num, dim) picked by integer ``input`` of any shape ->
    (*input, dim). The row at ``padding_idx`` receives no gradient.

    >>> import labkit as lk
    >>> w = lk.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])
    >>> lk.nn.functional.embedding(lk.tensor([[2, 1]]), w).tolist()
    [[[3.0, 4.0], [1.0, 2.0]]]
    """
    if sparse:
        raise NotImplementedError("embedding: sparse=True (sparse gradients) is not "
                                  "implemented; use sparse=False (dense gradients)")
    if weight.ndim != 2:
        raise ShapeError(f"embedding: weight must be 2-d (num_embeddings, embedding_dim); got "
                         f"{describe(weight)}")
    num = weight.shape[0]
    _check_indices("embedding", input, num)
    padding_idx = _padding_index("embedding", padding_idx, num)
    if max_norm is not None:
        renorm_(weight, input, max_norm, norm_type)
    rows = take(weight, input, dim=0)
    factor = None
    if padding_idx is not None:
        factor = cast(ne(input, padding_idx), dtype=weight.dtype.name)
    if scale_grad_by_freq:
        flat = input.reshape(-1)
        counts = creation.zeros(num, dtype=weight.dtype, device=weight.device).index_add(
            0, flat, creation.ones(flat.shape, dtype=weight.dtype, device=weight.device))
        inverse = div(1.0, take(counts, input, dim=0))
        factor = inverse if factor is None else mul(factor, inverse)
    return rows if factor is None else _gradient_factor(rows, factor)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """Sums, means or maxima of bags of rows of ``weight``: a 2-d ``input`` (B, L) holds one
    bag per row; a 1-d one is cut into bags at ``offsets`` (the start of each bag; with
    ``include_last_offset`` the last offset is the end). Entries equal to ``padding_idx`` are
    left out (an empty bag gives zeros). ``per_sample_weights`` (the input's shape) scales
    each row, with ``mode='sum'`` only.

    >>> import labkit as lk
    >>> w = lk.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])
    >>> lk.nn.functional.embedding_bag(lk.tensor([[1, 2], [2, 2]]), w).tolist()
    [[2.0, 3.0], [3.0, 4.0]]
    """
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode={mode!r} is not 'sum', 'mean' or 'max'")
    if per_sample_weights is not None and mode != "sum":
        raise ValueError(f"embedding_bag: per_sample_weights need mode='sum' (got "
                         f"mode={mode!r})")
    if sparse:
        raise NotImplementedError("embedding_bag: sparse=True is not implemented")
    num = weight.shape[0]
    padding_idx = _padding_index("embedding_bag", padding_idx, num)
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: offsets must be None for a 2-d input (each row is "
                             "a bag)")
        bags, length = input.shape
        flat = input.reshape(-1)
        segment = creation.arange(bags, device=input.device).repeat_interleave(length)
    elif input.ndim == 1:
        if offsets is None or offsets.ndim != 1:
            got = describe(offsets) if offsets is not None else None
            raise ValueError(f"embedding_bag: a 1-d input needs 1-d offsets (where each bag "
                             f"starts); got offsets {got}")
        flat = input
        bags = offsets.shape[0] - (1 if include_last_offset else 0)
        positions = creation.arange(flat.shape[0], device=input.device)
        first = concrete(offsets)
        if first is not None and first.size and int(first[0]) != 0:
            raise ValueError(f"embedding_bag: offsets must start at 0 (the first bag's start); "
                             f"got {int(first[0])}")
        segment = searchsorted(offsets, positions, right=True) - 1    # each position's bag
    else:
        raise ShapeError(f"embedding_bag: input must be 1-d (with offsets) or 2-d (B, L); got "
                         f"{describe(input)}")
    _check_indices("embedding_bag", flat, num)
    if max_norm is not None:
        renorm_(weight, flat, max_norm, norm_type)
    rows = embedding(flat, weight, scale_grad_by_freq=scale_grad_by_freq)      # (n, D)
    if per_sample_weights is not None:
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ShapeError(f"embedding_bag: per_sample_weights {describe(per_sample_weights)} "
                             f"must have the input's shape {tuple(input.shape)}")
        rows = rows * per_sample_weights.reshape(-1, 1)
    dim = weight.shape[1]
    keep = None if padding_idx is None else (flat != padding_idx)
    if mode == "max":
        index = segment.reshape(-1, 1).expand(-1, dim)
        if keep is not None:       # left-out entries go to an extra bag, dropped after
            index = index.where(keep.reshape(-1, 1), bags)
        out = creation.zeros((bags + 1, dim), dtype=weight.dtype, device=weight.device)
        return out.scatter_reduce(0, index, rows, "amax", include_self=False)[:bags]
    if keep is not None:
        rows = rows * keep.reshape(-1, 1).to(weight.dtype)
    out = creation.zeros((bags, dim), dtype=weight.dtype, device=weight.device)
    total = out.index_add(0, segment, rows)
    if mode == "sum":
        return total
    ones = creation.ones(flat.shape, dtype=weight.dtype, device=weight.device)
    if keep is not None:
        ones = ones * keep.to(weight.dtype)
    counts = creation.zeros(bags, dtype=weight.dtype, device=weight.device).index_add(
        0, segment, ones)
    return total / counts.clamp(min=1.0).reshape(-1, 1)
