"""``F.linear`` and ``F.bilinear``."""
from ...errors import ShapeError, describe
from ...tensor.autocast import precision
from ...tensor.ops.composite import unsqueeze
from ...tensor.ops.elementwise import add, mul
from ...tensor.ops.linalg import matmul, matmul_t
from ...tensor.ops.reduce import sum as _sum
from ...tensor.ops.shape import permute, reshape


@precision("low")
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


@precision("promote")
def bilinear(input1, input2, weight, bias=None):
    """``y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]``.

    >>> import labkit as lk
    >>> lk.nn.functional.bilinear(lk.ones(2, 3), lk.ones(2, 4), lk.ones(5, 3, 4)).shape
    (2, 5)
    """
    if weight.ndim != 3:
        raise ShapeError(f"bilinear: weight must be 3-d (out, in1, in2); got {describe(weight)}")
    out, in1, in2 = weight.shape
    if input1.ndim == 0 or input1.shape[-1] != in1 or input2.ndim == 0 or \
            input2.shape[-1] != in2 or tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise ShapeError(f"bilinear: inputs {describe(input1)} and {describe(input2)} must agree "
                         f"but for their last dimensions, which must be in1={in1} and "
                         f"in2={in2} (weight {describe(weight)})")
    # x1 @ W as (in1, out * in2), then the product with x2 summed over in2
    mixed = matmul(input1, reshape(permute(weight, dims=(1, 0, 2)), shape=(in1, out * in2)))
    mixed = reshape(mixed, shape=tuple(input1.shape[:-1]) + (out, in2))
    y = _sum(mul(mixed, unsqueeze(input2, -2)), dim=-1)
    return y if bias is None else add(y, bias)
