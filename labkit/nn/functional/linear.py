"""``F.linear``."""
from ...errors import ShapeError, describe
from ...tensor.ops.elementwise import add
from ...tensor.ops.linalg import matmul_t


def linear(x, weight, bias=None):
    """``x @ weight.T + bias``, with ``weight`` of shape (out, in) as in PyTorch.

    >>> import labkit as lk
    >>> lk.nn.functional.linear(lk.ones(2, 3), lk.ones(4, 3), lk.zeros(4)).tolist()[0]
    [3.0, 3.0, 3.0, 3.0]
    """
    if weight.ndim != 2:
        raise ShapeError(f"linear: weight must be 2-d (out_features, in_features); got "
                         f"{describe(weight)}")
    if x.ndim == 0 or x.shape[-1] != weight.shape[1]:
        raise ShapeError(
            f"linear: input {describe(x)} does not fit weight {describe(weight)}: the input's "
            f"last dimension must be in_features={weight.shape[1]}. Did you forget to flatten "
            f"(x.flatten(1) or nn.Flatten()), or is the layer's in_features wrong?")
    out = matmul_t(x, weight, transpose_b=True)
    if bias is not None:
        out = add(out, bias)
    return out
