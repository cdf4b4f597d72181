"""Convolution and pooling over (N, C, H, W) tensors, built on two primitives:

- ``unfold``: every sliding window as a strided view (N, C, kh, kw, OH, OW), no Python loop over
  the batch; with stride, padding and dilation;
- ``fold``: its adjoint, summing windows back into an image.

Each is the other's vjp, so ``conv2d`` (unfold + one matmul), ``max_pool2d`` (unfold + max) and
``avg_pool2d`` (unfold + mean) are composites with gradients of every order for free.
"""
from ...errors import ShapeError, describe
from ..op import op
from ..shape_rules import shape_of
from .elementwise import add
from .linalg import matmul
from .reduce import max as _max
from .reduce import sum as _sum
from .shape import moved, permute, reshape


def pair(v, name="argument"):
    """``v`` as an (h, w) pair of ints."""
    if isinstance(v, int):
        return (v, v)
    v = tuple(int(a) for a in v)
    if len(v) != 2:
        raise ShapeError(f"{name} must be an int or a pair of ints, got {v}")
    return v


def out_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _window_geometry(opname, shape, kernel_size, stride, padding, dilation, x=None,
                     error=ShapeError):
    """Output height and width of sliding windows; ``error`` (describing ``x``) if none fit."""
    what = describe(x) if x is not None else f"shape {tuple(shape)}"
    if len(shape) != 4:
        raise error(f"{opname} expects a 4-d (N, C, H, W) input; got {what}. Add a batch "
                    f"dimension with x.unsqueeze(0) for a single (C, H, W) image.")
    n, c, h, w = shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    oh, ow = out_size(h, kh, sh, ph, dh), out_size(w, kw, sw, pw, dw)
    if oh <= 0 or ow <= 0:
        raise error(
            f"{opname}: a {kh}x{kw} window (dilation {dh}x{dw}) does not fit the input {what} "
            f"with padding {ph}x{pw}: the output would be {oh}x{ow}. Use a smaller kernel, more "
            f"padding, or a larger input.")
    return n, c, h, w, oh, ow


def _unfold_rule(x, kernel_size, stride, padding, dilation, pad_value=0.0):
    n, c, h, w, oh, ow = _window_geometry("unfold", shape_of(x), kernel_size, stride, padding,
                                          dilation, x)
    return (n, c) + tuple(kernel_size) + (oh, ow), x.dtype


def _unfold_vjp(g, out, x, kernel_size, stride, padding, dilation, pad_value=0.0):
    return (fold(g, image_shape=tuple(x.shape), kernel_size=kernel_size, stride=stride,
                 padding=padding, dilation=dilation),)


def _merged(x, d):
    """Batched images ``x`` as one batch of images: (B, N, ...) -> (B * N, ...)."""
    x = moved(x, d)
    return reshape(x, shape=(x.shape[0] * x.shape[1],) + tuple(x.shape[2:])), x.shape[:2]


def _unfold_batch(inputs, bdims, **attrs):
    x, (b, n) = _merged(inputs[0], bdims[0])
    cols = unfold(x, **attrs)
    return reshape(cols, shape=(b, n) + tuple(cols.shape[1:])), 0


@op("unfold", shape=_unfold_rule, vjp=_unfold_vjp, batch=_unfold_batch)
def unfold(xp, x, kernel_size, stride, padding, dilation, pad_value=0.0):
    """Sliding windows of ``x`` (N, C, H, W) as a (N, C, kh, kw, OH, OW) strided view."""
    # a plain ValueError: the dispatcher then asks the rule, whose error describes the tensor
    n, c, h, w, oh, ow = _window_geometry("unfold", x.shape, kernel_size, stride, padding,
                                          dilation, error=ValueError)
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    if ph or pw:
        x = xp.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=pad_value)
    s0, s1, s2, s3 = x.strides
    return xp.lib.stride_tricks.as_strided(
        x, shape=(n, c, kh, kw, oh, ow),
        strides=(s0, s1, s2 * dh, s3 * dw, s2 * sh, s3 * sw))


def _fold_rule(cols, image_shape, kernel_size, stride, padding, dilation):
    expected, _ = _unfold_rule(_Shaped(image_shape), kernel_size, stride, padding, dilation)
    if tuple(shape_of(cols)) != expected:
        raise ShapeError(f"fold: windows {describe(cols)} do not match image {image_shape} "
                         f"(expected {expected})")
    return tuple(image_shape), cols.dtype


class _Shaped:
    def __init__(self, shape):
        self.shape = tuple(shape)
        self.dtype = None


def _fold_vjp(g, out, cols, image_shape, kernel_size, stride, padding, dilation):
    return (unfold(g, kernel_size=kernel_size, stride=stride, padding=padding,
                   dilation=dilation),)


def _fold_batch(inputs, bdims, image_shape, **attrs):
    cols, (b, n) = _merged(inputs[0], bdims[0])
    out = fold(cols, image_shape=(b * n,) + tuple(image_shape[1:]), **attrs)
    return reshape(out, shape=(b, n) + tuple(out.shape[1:])), 0


@op("fold", shape=_fold_rule, vjp=_fold_vjp, batch=_fold_batch)
def fold(xp, cols, image_shape, kernel_size, stride, padding, dilation):
    """Adjoint of ``unfold``: add every window of ``cols`` back into an image of ``image_shape``."""
    n, c, h, w = image_shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    oh, ow = cols.shape[-2:]
    out = xp.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                j * dw:j * dw + sw * (ow - 1) + 1:sw] += cols[:, :, i, j]
    return out[:, :, ph:ph + h, pw:pw + w]


def _geometry_args(kernel_size, stride, padding, dilation):
    return dict(kernel_size=pair(kernel_size, "kernel_size"), stride=pair(stride, "stride"),
                padding=pair(padding, "padding"), dilation=pair(dilation, "dilation"))


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1):
    """2-d convolution (cross-correlation, as in PyTorch) of ``x`` (N, C, H, W) with ``weight``
    (O, C, kh, kw), plus ``bias`` (O,) if given. Returns (N, O, OH, OW).

    >>> import labkit as lk
    >>> lk.conv2d(lk.ones(1, 1, 4, 4), lk.ones(2, 1, 3, 3), padding=1).shape
    (1, 2, 4, 4)
    """
    if x.ndim != 4 or weight.ndim != 4:
        raise ShapeError(f"conv2d expects input (N, C, H, W) and weight (O, C, kh, kw); got "
                         f"{describe(x)} and {describe(weight)}")
    o, c, kh, kw = weight.shape
    if x.shape[1] != c:
        raise ShapeError(f"conv2d: input has {x.shape[1]} channels but weight expects {c} "
                         f"(input {describe(x)}, weight {describe(weight)})")
    geo = _geometry_args((kh, kw), stride, padding, dilation)
    _window_geometry("conv2d", x.shape, x=x, **geo)
    cols = unfold(x, **geo)                                      # (N, C, kh, kw, OH, OW)
    n, oh, ow = x.shape[0], cols.shape[-2], cols.shape[-1]
    # im2col laid out (C*kh*kw, N*OH*OW), so that forward and both gradients are each one
    # large matrix product rather than N small ones
    cols = reshape(permute(cols, dims=(1, 2, 3, 0, 4, 5)), shape=(c * kh * kw, n * oh * ow))
    out = matmul(reshape(weight, shape=(o, c * kh * kw)), cols)  # (O, N*OH*OW)
    if bias is not None:
        out = add(out, reshape(bias, shape=(o, 1)))
    return permute(reshape(out, shape=(o, n, oh, ow)), dims=(1, 0, 2, 3))


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1):
    """Max over each window; ``stride`` defaults to ``kernel_size`` (PyTorch's convention)."""
    geo = _geometry_args(kernel_size, stride if stride is not None else kernel_size, padding,
                         dilation)
    ph, pw = geo["padding"]
    kh, kw = geo["kernel_size"]
    if ph > kh // 2 or pw > kw // 2:
        raise ShapeError(f"max_pool2d: padding {geo['padding']} must be at most half the kernel "
                         f"size {geo['kernel_size']}")
    _window_geometry("max_pool2d", x.shape, x=x, **geo)
    cols = unfold(x, pad_value=float("-inf"), **geo)
    return _max(cols, dim=(2, 3))


def avg_pool2d(x, kernel_size, stride=None, padding=0):
    """Mean over each window (zero padding counted, PyTorch's default); stride defaults to
    kernel_size."""
    geo = _geometry_args(kernel_size, stride if stride is not None else kernel_size, padding, 1)
    kh, kw = geo["kernel_size"]
    _window_geometry("avg_pool2d", x.shape, x=x, **geo)
    return _sum(unfold(x, **geo), dim=(2, 3)) * (1.0 / (kh * kw))
