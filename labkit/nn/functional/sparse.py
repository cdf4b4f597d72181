"""``F.embedding``."""
from ...errors import DTypeError, ShapeError, describe
from ...tensor.ops.composite import unsqueeze
from ...tensor.ops.elementwise import cast, mul, ne
from ...tensor.ops.index import take


def concrete(t):
    """The backend array behind ``t`` when it holds values now (eager), else None."""
    device, data = getattr(t, "device", None), getattr(t, "_data", None)
    return data if device is not None and isinstance(data, device.array_type) else None


def embedding(input, weight, padding_idx=None):
    """Rows of ``weight`` (num, dim) picked by integer ``input`` of any shape -> (*input, dim).

    Rows at ``padding_idx`` come out as zeros and get no gradient.

    >>> import labkit as lk
    >>> w = lk.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])
    >>> lk.nn.functional.embedding(lk.tensor([[2, 1]]), w).tolist()
    [[[3.0, 4.0], [1.0, 2.0]]]
    """
    if input.dtype.is_floating or input.dtype.name == "bool_":
        raise DTypeError(f"embedding: indices must be integers (int64), got {describe(input)}; "
                         f"convert with x.long()")
    num = weight.shape[0]
    data = concrete(input)
    if data is not None and data.size:
        lo, hi = int(data.min()), int(data.max())
        if lo < 0 or hi >= num:
            raise ShapeError(f"embedding: index {lo if lo < 0 else hi} is out of range for "
                             f"{num} embeddings (valid: 0..{num - 1}). Enlarge the table "
                             f"(num_embeddings) or fix the indices.")
    out = take(weight, input, dim=0)
    if padding_idx is not None:
        keep = cast(ne(input, padding_idx), dtype=weight.dtype.name)
        out = mul(out, unsqueeze(keep, -1))
    return out
