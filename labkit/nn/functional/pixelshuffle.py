"""``F.pixel_shuffle`` and ``F.pixel_unshuffle``: channels moved into space and back (the
sub-pixel convolution of super-resolution models), as reshapes and one permute, so gradients
and capture come free.

>>> import labkit as lk
>>> x = lk.arange(8.0).reshape(1, 4, 1, 2)
>>> y = lk.nn.functional.pixel_shuffle(x, 2)
>>> y.shape, y[0, 0].tolist()
((1, 1, 2, 4), [[0.0, 2.0, 1.0, 3.0], [4.0, 6.0, 5.0, 7.0]])
>>> bool((lk.nn.functional.pixel_unshuffle(y, 2) == x).all())
True
"""
from ...errors import ShapeError, describe
from ...tensor.ops.shape import permute, reshape


def _factor(name, r):
    if isinstance(r, bool) or int(r) != r or r < 1:
        raise ShapeError(f"{name}: the factor must be a positive integer, got {r!r}")
    return int(r)


def pixel_shuffle(input, upscale_factor):
    """(*, C * r * r, H, W) -> (*, C, H * r, W * r), ``r = upscale_factor``."""
    r = _factor("pixel_shuffle", upscale_factor)
    if input.ndim < 3 or input.shape[-3] % (r * r):
        raise ShapeError(f"pixel_shuffle: expects (*, C * {r * r}, H, W) input (the channels "
                         f"divisible by upscale_factor squared, {r * r}), got {describe(input)}")
    *lead, c, h, w = input.shape
    n = len(lead)
    x = reshape(input, shape=(*lead, c // (r * r), r, r, h, w))
    x = permute(x, dims=(*range(n), n, n + 3, n + 1, n + 4, n + 2))
    return reshape(x, shape=(*lead, c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H * r, W * r) -> (*, C * r * r, H, W), ``r = downscale_factor``: the inverse of
    ``pixel_shuffle``."""
    r = _factor("pixel_unshuffle", downscale_factor)
    if input.ndim < 3 or input.shape[-1] % r or input.shape[-2] % r:
        raise ShapeError(f"pixel_unshuffle: expects (*, C, H, W) input with H and W divisible "
                         f"by downscale_factor={r}, got {describe(input)}")
    *lead, c, h, w = input.shape
    n = len(lead)
    x = reshape(input, shape=(*lead, c, h // r, r, w // r, r))
    x = permute(x, dims=(*range(n), n, n + 2, n + 4, n + 1, n + 3))
    return reshape(x, shape=(*lead, c * r * r, h // r, w // r))
