"""Convolution and pooling over (N, C, H, W) tensors.

- ``unfold``: every sliding window as a strided view (N, C, kh, kw, OH, OW), no Python loop over
  the batch; with stride, padding and dilation; ``fold``: its adjoint, summing windows back into
  an image. Each is the other's vjp, so ``avg_pool2d`` (unfold + mean) is a composite with
  gradients of every order for free.
- ``conv2d`` is a primitive, ``convolution``, with the two halves of its vjp as primitives of
  their own (``conv2d_input_grad``, also the transposed convolution, and
  ``conv2d_weight_grad``): each builds the im2col matrix of a few images at a time and runs one
  GEMM on it while it is in cache, and writes its result in (N, C, H, W) order, where unfold,
  a permute and one matrix product over the whole batch copied a matrix many times the size of
  the cache and left the output permuted. ``max_pool2d`` is a primitive of its own,
``max_pool``: the running maximum of the kh*kw strided slices of the input, and its vjp
``max_pool_backward`` (each window's gradient to its first largest element), instead of copying
every window (unfold, reshape), an argmax, a gather and their vjps (a scatter and a fold); at
one OpenMP thread in float32 the backward is oneDNN's pooling (its forward for where the maxima
are, then its backward), unless a window holds a NaN.
"""
import math

import numpy as np

from ...devices import host_blas, host_dnnl
from ...errors import ArgumentError, IndexingError, ShapeError, describe
from .. import arguments
from .. import creation as _creation
from ..op import needs_grad, op
from ..shape_rules import shape_of, ufunc_dtype
from .elementwise import add, cast, div, holomorphic, mul
from .elementwise_math import floor_divide, remainder, trunc
from .index import _gather
from .layout import pad as _pad
from .reduce import argmax
from .reduce import sum as _sum
from .shape import batch_size, materialized, moved, permute, reshape


def pair(v, name="argument", op="conv2d"):
    """``v`` as an (h, w) pair of ints."""
    if arguments.is_int(v):
        return (int(v), int(v))
    if not isinstance(v, (tuple, list)) or len(v) != 2:
        raise ArgumentError(f"{op}: {name} must be an int or a pair of ints, got "
                            f"{arguments.what(v)}")
    return arguments.ints(op, (v,), name)


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


@op("unfold", shape=_unfold_rule, vjp=_unfold_vjp, batch=_unfold_batch, moves=True)
def unfold(xp, x, kernel_size, stride, padding, dilation, pad_value=0.0):
    """Sliding windows of ``x`` (N, C, H, W) as a (N, C, kh, kw, OH, OW) strided view."""
    # a plain ValueError: the dispatcher then asks the rule, whose error describes the tensor
    _window_geometry("unfold", x.shape, kernel_size, stride, padding, dilation, error=ValueError)
    return _window_view(xp, x, kernel_size, stride, padding, dilation, pad_value)


def _window_view(xp, x, kernel_size, stride, padding, dilation, pad_value=0.0):
    """The windows of array ``x`` (N, C, H, W), padded with ``pad_value``, as a strided view
    (N, C, kh, kw, OH, OW) of it (of a padded copy if there is padding)."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    oh, ow = out_size(h, kh, sh, ph, dh), out_size(w, kw, sw, pw, dw)
    if ph or pw:      # (a filled array written into: about 1.5x faster than xp.pad)
        padded = xp.full((n, c, h + 2 * ph, w + 2 * pw), pad_value, dtype=x.dtype)
        padded[:, :, ph:ph + h, pw:pw + w] = x
        x = padded
    s0, s1, s2, s3 = x.strides
    # a stride is never taken when there is one window (and could overflow the byte strides)
    sh, sw = (sh if oh > 1 else 1), (sw if ow > 1 else 1)
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
    """Adjoint of ``unfold``: add every window of ``cols`` back into an image of ``image_shape``.

    Each of the kh*kw window positions adds its (N, C, OH, OW) slice to the output positions it
    reaches inside the image (the padding is never written: no padded buffer to crop), so the
    result is a C-contiguous array, as fast to read for the ops after it as any other."""
    out = xp.zeros(tuple(image_shape), dtype=cols.dtype)
    _fold_into(out, cols, kernel_size, stride, padding, dilation)
    return out


def _fold_into(out, cols, kernel_size, stride, padding, dilation):
    """Add the windows ``cols`` (N, C, kh, kw, OH, OW) into the image ``out`` (N, C, H, W)."""
    h, w = out.shape[-2:]
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    oh, ow = cols.shape[-2:]
    for i in range(kh):
        r0, r1, top = _inside(i, dh, sh, ph, oh, h)
        if r1 <= r0:
            continue
        for j in range(kw):
            q0, q1, left = _inside(j, dw, sw, pw, ow, w)
            if q1 <= q0:
                continue
            out[:, :, top:top + sh * (r1 - r0 - 1) + 1:sh,
                left:left + sw * (q1 - q0 - 1) + 1:sw] += cols[:, :, i, j, r0:r1, q0:q1]


def _inside(i, d, s, p, windows, size):
    """Along one dimension, the windows ``[lo, hi)`` whose element ``i`` (at ``i * d + s * t - p``
    for window ``t``) falls inside an image of ``size``, and where the first of them falls."""
    lo = max(0, -((i * d - p) // s))
    hi = min(windows, (size - 1 + p - i * d) // s + 1)
    return lo, hi, i * d + s * lo - p


def _geometry_args(kernel_size, stride, padding, dilation, op="conv2d"):
    """The window geometry as pairs of ints: kernel, stride and dilation at least 1, padding at
    least 0 (as PyTorch requires)."""
    geo = dict(kernel_size=pair(kernel_size, "kernel_size", op),
               stride=pair(stride, "stride", op), padding=pair(padding, "padding", op),
               dilation=pair(dilation, "dilation", op))
    for name, low in (("kernel_size", 1), ("stride", 1), ("dilation", 1), ("padding", 0)):
        if min(geo[name]) < low:
            raise ShapeError(f"{op}: {name} must be at least {low}, got {geo[name]}")
    return geo


def same_padding(kernel_size, dilation):
    """PyTorch's ``padding='same'``: per spatial dimension, (before, after) with the odd one
    after."""
    out = []
    for k, d in zip(kernel_size, dilation):
        total = d * (k - 1)
        out.append((total // 2, total - total // 2))
    return out


def _padding_arg(opname, padding, kernel_size, stride, dilation):
    """Symmetric padding (h, w), and the extra (h, w) 'same' needs after the input."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0), (0, 0)
        if padding == "same":
            if stride != (1, 1):
                raise ShapeError(f"{opname}: padding='same' needs stride 1 (got stride={stride}); "
                                 f"pad explicitly with padding=(ph, pw) for a strided "
                                 f"convolution")
            lohi = same_padding(kernel_size, dilation)
            return tuple(lo for lo, _ in lohi), tuple(hi - lo for lo, hi in lohi)
        raise ShapeError(f"{opname}: padding={padding!r} is not 'same', 'valid', an int or a "
                         f"pair of ints")
    padding = pair(padding, "padding", opname)
    if min(padding) < 0:
        raise ShapeError(f"{opname}: padding must be at least 0, got {padding}")
    return padding, (0, 0)


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-d convolution (cross-correlation, as in PyTorch) of ``x`` (N, C, H, W) with ``weight``
    (O, C / groups, kh, kw), plus ``bias`` (O,) if given. Returns (N, O, OH, OW). ``padding``
    is an int, a pair, ``'valid'`` (none) or ``'same'`` (output as large as the input, stride
    1); ``groups`` splits channels into groups convolved separately.

    >>> import labkit as lk
    >>> lk.conv2d(lk.ones(1, 1, 4, 4), lk.ones(2, 1, 3, 3), padding=1).shape
    (1, 2, 4, 4)
    >>> lk.conv2d(lk.ones(1, 4, 5, 5), lk.ones(4, 1, 3, 3), padding="same", groups=4).shape
    (1, 4, 5, 5)
    """
    arguments.tensor("conv2d", "weight", weight)
    if bias is not None:
        arguments.tensor("conv2d", "bias", bias)
    if x.ndim != 4 or weight.ndim != 4:
        raise ShapeError(f"conv2d expects input (N, C, H, W) and weight (O, C, kh, kw); got "
                         f"{describe(x)} and {describe(weight)}")
    o, cg, kh, kw = weight.shape
    groups = arguments.integer("conv2d", "groups", groups)
    if groups < 1 or o % groups:
        raise ShapeError(f"conv2d: groups={groups} must be positive and divide the "
                         f"{o} output channels of weight {describe(weight)}")
    if x.shape[1] != cg * groups:
        raise ShapeError(f"conv2d: input has {x.shape[1]} channels but weight expects "
                         f"{cg * groups} ({cg} per group x {groups} groups) (input "
                         f"{describe(x)}, weight {describe(weight)})")
    geo = _geometry_args((kh, kw), stride, 0, dilation)
    stride, dilation = geo["stride"], geo["dilation"]
    padding, extra = _padding_arg("conv2d", padding, (kh, kw), stride, dilation)
    if extra != (0, 0):          # 'same' with an even kernel: the odd row/column goes after
        x = _pad(x, widths=((0, 0), (0, 0), (0, extra[0]), (0, extra[1])))
    geo = dict(kernel_size=(kh, kw), stride=stride, padding=padding, dilation=dilation)
    _window_geometry("conv2d", x.shape, x=x, **geo)
    out = convolution(x, weight, stride=stride, padding=padding, dilation=dilation, groups=groups)
    if bias is not None:
        out = add(out, reshape(bias, shape=(o, 1, 1)))
    return out


# ---- convolution as three primitives ------------------------------------------------------------
# ``convolution`` and the two halves of its vjp each build the im2col matrix of a few images at a
# time, or of a few rows of one large image (about _CHUNK elements: it stays in cache between its
# copy and the matrix product that reads it), and run one GEMM per chunk and group, writing the
# result in (N, C, H, W) order. Where an image has many output positions, the GEMMs run image by
# image; where it has few (deep layers: 4x4, 2x2), the chunk's images are columns of one GEMM (a
# product with 4 columns per image would read the weight once per image). The two gradients
# also have routes of their own where those measured faster on the corpus's layers: the input
# gradient by phases (``_transposed_by_phases``) or channels last a tap at a time
# (``_transposed_by_taps``), the weight gradient channels last a tap at a time
# (``_weight_grad_by_taps``); each route computes the same values. Before all of these, float32
# convolutions of one group go to oneDNN's direct kernels (``host_dnnl``) where ``_direct`` says
# so, and fall through to the routes here where the library is absent or declines. Each
# primitive is linear in both its inputs, and each one's vjp is written with the other two, so
# gradients of every order come from the same three kernels.
_CHUNK = 1 << 18
_MIN_COLUMNS = 256
_MIN_WEIGHT = 4096


# Measured on the corpus's layers at one thread: oneDNN's direct kernels took 0.5-0.8x the time of
# the routes below (as much as PyTorch's own calls to them), except on tiny outputs (a batch of
# 1x1 or fewer than 32 positions, where the call and its layout reorders cost more than the
# product), input gradients into or out of fewer than 16 channels (DCGAN's 3-channel image:
# 1.6x), and weight gradients of 2x2 outputs (ResNet-18's last block: 1.2x).
# Only where OpenMP runs one thread (``host_dnnl.serves``): at two threads of each, DCGAN's eager
# step took 384-411 ms against 178-347 ms on labkit's routes with BLAS threads (three runs each,
# alternated).
def _direct(xp, kind, n, c, o, positions, *arrays):
    """Whether a convolution (``kind`` "forward", "input_grad" or "weight_grad") of ``n``
    images, ``c`` input and ``o`` output channels and ``positions`` output positions an image,
    on ``arrays`` (its two operands), goes to oneDNN's direct kernels first."""
    if n * positions < 32 or not host_dnnl.serves(xp, *arrays):
        return False
    if kind == "input_grad":
        return c >= 16 and o >= 16
    return kind == "forward" or positions >= 16


def _by_image(og, k, positions):
    """Whether a convolution's GEMMs run image by image: many output positions an image, and a
    weight large enough that one GEMM per image is worth its call (else the images go side by
    side as the columns of one GEMM: W4's 8 filters of 9 taps, say)."""
    return positions >= _MIN_COLUMNS and og * k >= _MIN_WEIGHT


def _blocks(n, per_row, oh, ow, budget=None, by_image=True):
    """``[(n0, n1, r0, r1), ...]``: images ``n0:n1`` and output rows ``r0:r1`` of each, covering
    ``n`` images of ``oh`` rows of ``ow`` positions, ``per_row`` im2col elements a row: several
    images of about ``budget`` elements, at least ``_MIN_COLUMNS`` positions; or, for GEMMs
    image by image (``by_image``) where one image holds more than ``budget``, one image's rows
    in runs of about ``budget`` (default ``_CHUNK``, read when called)."""
    budget = _CHUNK if budget is None else budget
    per_image = per_row * oh
    if per_image <= budget or oh == 1 or not by_image:
        step = max(1, budget // max(1, per_image), -(-_MIN_COLUMNS // max(1, oh * ow)))
        return [(i, min(n, i + step), 0, oh) for i in range(0, n, step)]
    rows = max(1, budget // max(1, per_row), -(-_MIN_COLUMNS // max(1, ow)))
    return [(i, i + 1, r, min(oh, r + rows)) for i in range(n) for r in range(0, oh, rows)]


def _stacked_columns(xp, v, groups):
    """Windows ``v`` (m, C, kh, kw, OH, OW) as (groups, C / groups * kh * kw, m * OH * OW): the
    images side by side as columns."""
    m, c, kh, kw, oh, ow = v.shape
    v = v.reshape(m, groups, c // groups, kh, kw, oh, ow).transpose(1, 2, 3, 4, 0, 5, 6)
    return xp.ascontiguousarray(v).reshape(groups, c // groups * kh * kw, m * oh * ow)


def _conv_check(opname, x, weight, groups):
    """The (N, C, H, W) input and (O, C / groups, kh, kw) weight of a convolution agree."""
    sx, sw = tuple(shape_of(x)), tuple(shape_of(weight))
    if len(sx) != 4 or len(sw) != 4:
        raise ShapeError(f"{opname} expects input (N, C, H, W) and weight (O, C / groups, kh, "
                         f"kw); got {describe(x)} and {describe(weight)}")
    if groups < 1 or sw[0] % groups or (sx[1] is not None and sx[1] != sw[1] * groups):
        raise ShapeError(f"{opname}: input {describe(x)} and weight {describe(weight)} do not "
                         f"fit groups={groups}: the input needs C / groups channels per group "
                         f"and groups must divide the output channels")
    return sx, sw


def _conv_shape(opname, x, weight, stride, padding, dilation, groups):
    """The (N, O, OH, OW) shape of a convolution of ``x`` with ``weight``."""
    sx, sw = _conv_check(opname, x, weight, groups)
    if None in sx[2:]:
        return (sx[0], sw[0], None, None)
    geo = dict(kernel_size=sw[2:], stride=stride, padding=padding, dilation=dilation)
    oh, ow = _window_geometry(opname, sx, x=x, **geo)[-2:]
    return (sx[0], sw[0], oh, ow)


def _conv_rule(x, weight, stride, padding, dilation, groups):
    return (_conv_shape("conv2d", x, weight, stride, padding, dilation, groups),
            ufunc_dtype("conv2d", np.matmul, x, weight))


def _conv_vjp(g, out, x, weight, stride, padding, dilation, groups):
    geo = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    gx = conv2d_input_grad(g, weight, image_shape=tuple(x.shape), **geo) \
        if needs_grad(x) else None
    gw = conv2d_weight_grad(g, x, weight_shape=tuple(weight.shape), **geo) \
        if needs_grad(weight) else None
    return gx, gw


def _into_groups(t, d, b, groups):
    """Batched (B at ``d``) images (B, N, C, H, W) as (N, B * C, H, W): the examples as
    ``groups`` more groups each (an unbatched ``t`` broadcast to them)."""
    t = materialized(t, d, b)
    t = permute(t, dims=(1, 0, 2, 3, 4))
    return reshape(t, shape=(t.shape[0], b * t.shape[2]) + tuple(t.shape[3:]))


def _weights_grouped(w, d, b):
    """Batched weights (B, O, Cg, kh, kw) as (B * O, Cg, kh, kw)."""
    w = materialized(w, d, b)
    return reshape(w, shape=(b * w.shape[1],) + tuple(w.shape[2:]))


def _split_groups(t, b):
    """(N, B * C, H, W) back to (N, B, C, H, W): the batch at dimension 1."""
    return reshape(t, shape=(t.shape[0], b, t.shape[1] // b) + tuple(t.shape[2:]))


def _conv_batch(inputs, bdims, groups, **geo):
    (x, w), (dx, dw) = inputs, bdims
    if dw is None:              # one weight for every example: the examples are more images
        x, (b, n) = _merged(x, dx)
        out = convolution(x, w, groups=groups, **geo)
        return reshape(out, shape=(b, n) + tuple(out.shape[1:])), 0
    b = batch_size(inputs, bdims)
    out = convolution(_into_groups(x, dx, b, groups), _weights_grouped(w, dw, b),
                      groups=b * groups, **geo)
    return _split_groups(out, b), 1


@op("conv2d", shape=_conv_rule, vjp=holomorphic(_conv_vjp), batch=_conv_batch, amp="low")
def convolution(xp, x, weight, stride, padding, dilation, groups):
    """2-d cross-correlation of ``x`` (N, C, H, W) with ``weight`` (O, C / groups, kh, kw),
    ``padding`` (ph, pw) zeros on each side: (N, O, OH, OW). ``conv2d`` is its public form
    (bias, ``'same'``, argument checks)."""
    if groups == 1:
        n, o = x.shape[0], weight.shape[0]
        positions = math.prod(out_size(*a) for a in zip(x.shape[2:], weight.shape[2:], stride,
                                                         padding, dilation))
        if _direct(xp, "forward", n, x.shape[1], o, positions, x, weight):
            out = host_dnnl.conv2d(x, weight, stride, padding, dilation)
            if out is not None:
                return out
    return _correlate(xp, x, weight, stride, padding, dilation, groups)


def _correlate(xp, x, weight, stride, padding, dilation, groups):
    """``convolution``'s kernel: im2col of a chunk at a time, one GEMM per chunk and group."""
    o, cg, kh, kw = weight.shape
    v = _window_view(xp, x, (kh, kw), stride, padding, dilation)
    n, c, _, _, oh, ow = v.shape
    og, k, p = o // groups, cg * kh * kw, oh * ow
    w = weight.reshape(groups, og, k)
    out = xp.empty((n, o, oh, ow), dtype=xp.result_type(x.dtype, weight.dtype))
    by_image = _by_image(og, k, p)
    for n0, n1, r0, r1 in _blocks(n, c * kh * kw * ow, oh, ow, by_image=by_image):
        m, q = n1 - n0, (r1 - r0) * ow
        if by_image:
            cols = xp.ascontiguousarray(v[n0:n1, ..., r0:r1, :]).reshape(m, groups, k, q)
            if q == p:
                xp.matmul(w, cols, out=out[n0:n1].reshape(m, groups, og, p))
            else:
                out[n0:n1, :, r0:r1] = xp.matmul(w, cols).reshape(m, o, r1 - r0, ow)
        else:
            y = xp.matmul(w, _stacked_columns(xp, v[n0:n1], groups))   # (groups, og, m * p)
            out[n0:n1].reshape(m, groups, og, p)[...] = \
                y.reshape(groups, og, m, p).transpose(2, 0, 1, 3)
    return out


def _gradient_matches(opname, g, expected, what):
    """``g`` is shaped like the convolution's output ``expected`` (``what`` describes it)."""
    sg = tuple(shape_of(g))
    if len(sg) != 4 or any(a is not None and b is not None and a != b
                           for a, b in zip(sg, expected)):
        raise ShapeError(f"{opname}: the gradient {describe(g)} does not match the output "
                         f"{expected} of {what}")


def _input_grad_rule(g, weight, image_shape, stride, padding, dilation, groups):
    name = "conv2d_input_grad"
    expected = _conv_shape(name, _Shaped(image_shape), weight, stride, padding, dilation, groups)
    _gradient_matches(name, g, expected, f"a convolution of an image {tuple(image_shape)} with "
                                         f"weight {describe(weight)}")
    return tuple(image_shape), ufunc_dtype(name, np.matmul, g, weight)


def _input_grad_vjp(c, out, g, weight, image_shape, **geo):
    gg = convolution(c, weight, **geo) if needs_grad(g) else None
    gw = conv2d_weight_grad(g, c, weight_shape=tuple(weight.shape), **geo) \
        if needs_grad(weight) else None
    return gg, gw


def _input_grad_batch(inputs, bdims, image_shape, groups, **geo):
    (g, w), (dg, dw) = inputs, bdims
    b = batch_size(inputs, bdims)
    n, c = image_shape[:2]
    if dw is None:
        g, _ = _merged(g, dg)
        dx = conv2d_input_grad(g, w, image_shape=(b * n,) + tuple(image_shape[1:]),
                               groups=groups, **geo)
        return reshape(dx, shape=(b, n) + tuple(image_shape[1:])), 0
    dx = conv2d_input_grad(_into_groups(g, dg, b, groups), _weights_grouped(w, dw, b),
                           image_shape=(n, b * c) + tuple(image_shape[2:]), groups=b * groups,
                           **geo)
    return _split_groups(dx, b), 1


@op("conv2d_input_grad", shape=_input_grad_rule, vjp=holomorphic(_input_grad_vjp),
    batch=_input_grad_batch, amp="low")
def conv2d_input_grad(xp, g, weight, image_shape, stride, padding, dilation, groups):
    """``convolution``'s gradient with respect to its input (a transposed convolution): the
    windows ``weight``^T @ ``g`` adds back into an image of ``image_shape``."""
    n, c, h, w = image_shape
    o, cg, kh, kw = weight.shape
    oh, ow = g.shape[2:]
    if (oh, ow) != tuple(out_size(*a) for a in zip((h, w), (kh, kw), stride, padding, dilation)):
        raise ValueError("the gradient's size is not the convolution's")   # the rule explains
    og, k, p = o // groups, cg * kh * kw, oh * ow
    if groups == 1 and _direct(xp, "input_grad", n, c, o, p, g, weight):
        dx = host_dnnl.conv2d_input_grad(g, weight, tuple(image_shape), stride, padding, dilation)
        if dx is not None:
            return dx
    if _by_taps(c, kh * kw, p, stride, dilation, groups):
        return _transposed_by_taps(xp, g, weight, image_shape, stride, padding)
    if dilation == (1, 1):
        plan = [_phase_plan(*a) for a in zip((h, w), (kh, kw), stride, padding, (oh, ow))]
        copied = n * o * sum(jh * uh for _, _, jh, uh, _, _ in plan[0]) \
            * sum(jw * uw for _, _, jw, uw, _, _ in plan[1]) + weight.size // 4
        if copied <= _BY_PHASES * n * c * kh * kw * p:
            return _transposed_by_phases(xp, g, weight, image_shape, plan, stride, groups)
    wt = weight.reshape(groups, og, k).transpose(0, 2, 1)
    g5 = g.reshape(n, groups, og, oh, ow)
    dx = xp.zeros(tuple(image_shape), dtype=xp.result_type(g.dtype, weight.dtype))
    (sh, _), (ph, pw) = stride, padding
    by_image = _by_image(og, k, p)
    for n0, n1, r0, r1 in _blocks(n, c * kh * kw * ow, oh, ow, by_image=by_image):
        m, rows = n1 - n0, r1 - r0
        if by_image:
            gs = g5[n0:n1, :, :, r0:r1].reshape(m, groups, og, rows * ow)
            cols = xp.matmul(wt, gs).reshape(m, c, kh, kw, rows, ow)
        else:
            gs = xp.ascontiguousarray(g5[n0:n1].transpose(1, 2, 0, 3, 4)).reshape(groups, og, -1)
            cols = xp.matmul(wt, gs).reshape(c, kh, kw, m, oh, ow).transpose(3, 0, 1, 2, 4, 5)
        # windows from row r0 on: as if the image had r0 * sh rows less of padding
        _fold_into(dx[n0:n1], cols, (kh, kw), stride, (ph - r0 * sh, pw), dilation)
    return dx


# A transposed convolution of stride s splits into s * s stride-1 correlations, one for each
# phase (row and column residue mod s) of the image: the phase's pixels take the taps
# i = (r + p) mod s, i + s, ... of the kernel, flipped. Each is one im2col copy of the gradient
# and one GEMM, no scatter; the fold route instead adds C * kh * kw windows into the image.
# The phases win where they copy fewer elements than the windows fold adds, by this factor
# (measured on the corpus's layers, counting the transposed weight's copy at a quarter: it
# moves whole runs of taps): where the convolution's output channels O are fewer than or about
# its input channels C, and its images not so small that the weight outweighs them.
_BY_PHASES = 1.25


def _phase_plan(size, k, s, p, windows):
    """Along one dimension of an image of ``size`` pixels that a kernel of ``k`` taps, stride
    ``s`` and padding ``p`` made ``windows`` windows of: for each phase ``r``, (r, the taps it
    takes as a reversed slice, their number J, its number of pixels U, the gradient's padding
    before and after it needs)."""
    plan = []
    for r in range(min(s, size)):
        first = (r + p) % s
        taps, pixels = len(range(first, k, s)), len(range(r, size, s))
        base = (r + p - first) // s          # the window whose tap ``first`` lands on pixel r
        plan.append((r, slice(first + (taps - 1) * s, None, -s), taps, pixels,
                     taps - 1 - base, pixels - 1 + base - (windows - 1)))
    return plan


def _transposed_by_phases(xp, g, weight, image_shape, plan, stride, groups):
    """``conv2d_input_grad`` (dilation 1) as one stride-1 correlation per phase."""
    n, c = image_shape[:2]
    o, cg, kh, kw = weight.shape
    oh, ow = g.shape[2:]
    # the weight of the transposed convolution: (C, O / groups, kh, kw)
    wt = weight.reshape(groups, o // groups, cg, kh, kw).transpose(0, 2, 1, 3, 4)
    wt = wt.reshape(c, o // groups, kh, kw)
    (top, bottom), (left, right) = (
        (max(0, max(e[4] for e in p)), max(0, max(e[5] for e in p))) for p in plan)
    if top or bottom or left or right:
        gp = xp.zeros((n, o, oh + top + bottom, ow + left + right), dtype=g.dtype)
        gp[:, :, top:top + oh, left:left + ow] = g
    else:
        gp = g

    def phase(row, column):            # the pixels of one phase, (N, C, U_h, U_w)
        (_, th, jh, uh, lh, _), (_, tw, jw, uw, lw, _) = row, column
        return _correlate(xp, gp[:, :, top - lh:top - lh + uh + jh - 1,
                                 left - lw:left - lw + uw + jw - 1],
                          xp.ascontiguousarray(wt[:, :, th, tw]), (1, 1), (0, 0), (1, 1), groups)
    if stride == (1, 1):               # one phase: the image itself
        return phase(plan[0][0], plan[1][0])
    (sh, sw), empty = stride, any(e[2] == 0 for p in plan for e in p)
    dx = (xp.zeros if empty else xp.empty)(tuple(image_shape),
                                           dtype=xp.result_type(g.dtype, weight.dtype))
    for row in plan[0]:
        for column in plan[1]:
            if row[2] and column[2]:   # (a phase no tap reaches stays zero)
                dx[:, :, row[0]::sh, column[0]::sw] = phase(row, column)
    return dx


# Channels last, a tap at a time: for each tap (i, j) one GEMM of the gradient's positions
# (rows, channels last) by that tap's (O, C) weight, added into the image laid out (N, H, W, C),
# where a window's row of pixels is one contiguous run of OW * C numbers (NCHW's fold adds runs
# of OW, strided by the stride). The gradient in and the image out are transposed once each.
# Measured on the corpus's layers: faster than fold and than the phases for strided layers and
# small images with 32 or more channels (DCGAN's 4x4 stride 2: 4.8-5.9 -> 3.6-4.9 ms; ResNet's
# 3x3 stride 2 and 4x4 / 8x8 images 0.75-0.85x); slower with few channels (a GEMM 3 columns
# wide), on large stride-1 images (the phases' one GEMM wins) and on 2x2 images.
def _by_taps(c, taps, positions, stride, dilation, groups):
    """Whether ``conv2d_input_grad`` goes channels last, a tap at a time."""
    return c >= 32 and taps > 1 and groups == 1 and dilation == (1, 1) and \
        positions >= 16 and (stride != (1, 1) or positions <= 64)


def _transposed_by_taps(xp, g, weight, image_shape, stride, padding):
    """``conv2d_input_grad`` (one group, dilation 1) channels last, one GEMM per tap."""
    n, c, h, w = image_shape
    o, _, kh, kw = weight.shape
    oh, ow = g.shape[2:]
    (sh, sw), (ph, pw) = stride, padding
    dtype = xp.result_type(g.dtype, weight.dtype)
    rows = xp.ascontiguousarray(g.transpose(0, 2, 3, 1)).reshape(n, oh * ow, o)
    taps = xp.ascontiguousarray(weight.transpose(2, 3, 0, 1)).astype(dtype, copy=False)
    image = xp.zeros((n, h + 2 * ph, w + 2 * pw, c), dtype=dtype)     # padded: no bounds
    step = max(1, _CHUNK // max(1, oh * ow * c))
    for n0 in range(0, n, step):
        n1 = min(n, n0 + step)
        block = rows[n0:n1].reshape(-1, o)
        product = xp.empty((block.shape[0], c), dtype=dtype)
        for i in range(kh):
            for j in range(kw):
                xp.matmul(block, taps[i, j], out=product)
                image[n0:n1, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw] += \
                    product.reshape(n1 - n0, oh, ow, c)
    return xp.ascontiguousarray(image[:, ph:ph + h, pw:pw + w].transpose(0, 3, 1, 2))


def _weight_grad_rule(g, x, weight_shape, stride, padding, dilation, groups):
    name = "conv2d_weight_grad"
    expected = _conv_shape(name, x, _Shaped(weight_shape), stride, padding, dilation, groups)
    _gradient_matches(name, g, expected, f"a convolution of {describe(x)} with a weight "
                                         f"{tuple(weight_shape)}")
    return tuple(weight_shape), ufunc_dtype(name, np.matmul, g, x)


def _weight_grad_vjp(c, out, g, x, weight_shape, **geo):
    gg = convolution(x, c, **geo) if needs_grad(g) else None
    gx = conv2d_input_grad(g, c, image_shape=tuple(x.shape), **geo) if needs_grad(x) else None
    return gg, gx


def _weight_grad_batch(inputs, bdims, weight_shape, groups, **geo):
    b = batch_size(inputs, bdims)
    (g, x), (dg, dx) = inputs, bdims
    dw = conv2d_weight_grad(_into_groups(g, dg, b, groups), _into_groups(x, dx, b, groups),
                            weight_shape=(b * weight_shape[0],) + tuple(weight_shape[1:]),
                            groups=b * groups, **geo)
    return reshape(dw, shape=(b,) + tuple(weight_shape)), 0


@op("conv2d_weight_grad", shape=_weight_grad_rule, vjp=holomorphic(_weight_grad_vjp),
    batch=_weight_grad_batch, amp="low")
def conv2d_weight_grad(xp, g, x, weight_shape, stride, padding, dilation, groups):
    """``convolution``'s gradient with respect to its weight: for each group, ``g`` times the
    im2col matrix of ``x``, transposed, summed over the images."""
    o, cg, kh, kw = weight_shape
    v = _window_view(xp, x, (kh, kw), stride, padding, dilation)
    n, c, _, _, oh, ow = v.shape
    if tuple(g.shape) != (n, o, oh, ow):
        raise ValueError("the gradient's shape is not the convolution's")   # the rule explains
    og, k = o // groups, cg * kh * kw
    if groups == 1 and _direct(xp, "weight_grad", n, c, o, oh * ow, g, x):
        dw = host_dnnl.conv2d_weight_grad(g, x, tuple(weight_shape), stride, padding, dilation)
        if dw is not None:
            return dw
    if _weight_by_taps(o, c, kh * kw, oh * ow, dilation, groups):
        return _weight_grad_by_taps(xp, g, x, weight_shape, stride, padding)
    g5 = g.reshape(n, groups, og, oh, ow)
    dw = xp.zeros((groups, og, k), dtype=xp.result_type(g.dtype, x.dtype))
    # the positions are the GEMMs' inner dimension here: blocks four times as large serve
    for n0, n1, r0, r1 in _blocks(n, c * kh * kw * ow, oh, ow, budget=4 * _CHUNK,
                                  by_image=oh * ow >= _MIN_COLUMNS):
        # one GEMM per group over the block's positions: (og, positions) @ (positions, k)
        gs = xp.ascontiguousarray(g5[n0:n1, :, :, r0:r1].transpose(1, 2, 0, 3, 4))
        gs = gs.reshape(groups, og, -1)
        cols = _stacked_columns(xp, v[n0:n1, ..., r0:r1, :], groups).transpose(0, 2, 1)
        # (BLAS adds into dw where it can; a partial success over several groups would then
        # add some twice, so only one group goes that way)
        if xp is not np or groups != 1 or not host_blas.gemm(dw[0], gs[0], cols[0]):
            dw += xp.matmul(gs, cols)
    return dw.reshape(tuple(weight_shape))


# The weight's gradient channels last, a tap at a time: per tap (i, j) the input's pixels that
# tap reads, copied as (positions, C) rows (runs of C numbers, where NCHW's im2col copies runs of
# OW, strided by the stride), and one GEMM (O, positions) @ (positions, C) into the tap's
# (O, C). Measured on the corpus's layers: 0.73-0.86x the im2col route with 32 or more input
# channels on images of up to 16x16 (DCGAN, ResNet) and 0.46x with 9 output channels
# (super_resolution's last layer); slower with 3 input channels and on large images with more
# output channels (mnist's 24x24, super_resolution's 85x85: 1.02-1.15x).
def _weight_by_taps(o, c, taps, positions, dilation, groups):
    """Whether ``conv2d_weight_grad`` goes channels last, a tap at a time."""
    return c >= 32 and taps > 1 and groups == 1 and dilation == (1, 1) and \
        (positions <= 256 or o <= 16)


def _weight_grad_by_taps(xp, g, x, weight_shape, stride, padding):
    """``conv2d_weight_grad`` (one group, dilation 1) channels last, one GEMM per tap."""
    n, c, h, w = x.shape
    o, _, kh, kw = weight_shape
    oh, ow = g.shape[2:]
    (sh, sw), (ph, pw) = stride, padding
    dtype = xp.result_type(g.dtype, x.dtype)
    image = xp.zeros((n, h + 2 * ph, w + 2 * pw, c), dtype=dtype)
    image[:, ph:ph + h, pw:pw + w] = x.transpose(0, 2, 3, 1)
    rows = xp.ascontiguousarray(g.transpose(1, 0, 2, 3), dtype=dtype).reshape(o, n * oh * ow)
    dw = xp.empty((kh, kw, o, c), dtype=dtype)
    read = xp.empty((n, oh, ow, c), dtype=dtype)
    for i in range(kh):
        for j in range(kw):
            read[...] = image[:, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
            xp.matmul(rows, read.reshape(-1, c), out=dw[i, j])
    return xp.ascontiguousarray(dw.transpose(2, 3, 0, 1))


def pool_out_size(size, k, s, p, d, ceil_mode):
    """PyTorch's pooled size: with ``ceil_mode`` a last partial window is kept if it starts
    inside the input or its left padding."""
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _pool_geometry(opname, x, kernel_size, stride, padding, dilation, ceil_mode):
    """Geometry keywords for ``unfold`` and the extra (h, w) padding after the input that
    ``ceil_mode``'s last windows reach into."""
    geo = _geometry_args(kernel_size, kernel_size if stride is None or (
        isinstance(stride, (tuple, list)) and not stride) else stride, padding, dilation, opname)
    (kh, kw), (ph, pw), (dh, dw) = geo["kernel_size"], geo["padding"], geo["dilation"]
    if ph > ((kh - 1) * dh + 1) // 2 or pw > ((kw - 1) * dw + 1) // 2:
        raise ShapeError(f"{opname}: padding {geo['padding']} must be at most half the "
                         f"(dilated) kernel size {geo['kernel_size']}")
    if x.ndim != 4:     # explains the rank (an IndexError for PyTorch: dim -3 is not there)
        _window_geometry(opname, x.shape, x=x, error=IndexingError, **geo)
    extra = []
    for size, k, s, p, d in zip(x.shape[2:], geo["kernel_size"], geo["stride"], geo["padding"],
                                geo["dilation"]):
        out = pool_out_size(size, k, s, p, d, ceil_mode)
        if out <= 0:
            _window_geometry(opname, x.shape, x=x, **geo)    # explains the empty output
        extra.append(max(0, (out - 1) * s + d * (k - 1) + 1 - (size + 2 * p)))
    return geo, tuple(extra)


def _windows(x, geo, extra, value):
    """``unfold`` of ``x`` padded with ``value`` (and ``extra`` more after, for ceil_mode)."""
    if extra == (0, 0):
        return unfold(x, pad_value=value, **geo)
    (ph, pw) = geo["padding"]
    x = _pad(x, widths=((0, 0), (0, 0), (ph, ph + extra[0]), (pw, pw + extra[1])), value=value)
    return unfold(x, **dict(geo, padding=(0, 0)))


# ---- max pooling as a primitive -------------------------------------------------------------------
def _pool_window(a, i, j, stride, dilation, oh, ow):
    """The elements of ``a`` (..., H, W) at window position (i, j) of every window: a strided
    view (..., oh, ow)."""
    (sh, sw), (dh, dw) = stride, dilation
    return a[..., i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]


def _lowest(dtype):
    """The padding value no element of NumPy ``dtype`` is below: -inf, False, or an integer
    type's least (bfloat16, whose kind is not "f", is a float here too)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return False
    if dtype.kind in "iu":
        return int(np.iinfo(dtype).min)
    return float("-inf")


def _pool_padded(xp, x, padding):
    """``x`` with ``padding`` ((top, bottom), (left, right)) of the dtype's lowest value."""
    (pt, pb), (pl, pr) = padding
    if not (pt or pb or pl or pr):
        return x
    widths = ((0, 0),) * (x.ndim - 2) + ((pt, pb), (pl, pr))
    return xp.pad(x, widths, constant_values=_lowest(x.dtype))


def _max_pool_rule(x, kernel_size, stride, padding, dilation):
    sx = shape_of(x)
    if len(sx) < 2:
        raise ShapeError(f"max_pool: expects (..., H, W), got {describe(x)}")
    out = []
    for size, k, s, (lo, hi), d in zip(sx[-2:], kernel_size, stride, padding, dilation):
        o = (size + lo + hi - d * (k - 1) - 1) // s + 1 if size is not None else None
        if o is not None and o <= 0:
            raise ShapeError(f"max_pool: a {kernel_size} window does not fit {describe(x)} "
                             f"with padding {padding}")
        out.append(o)
    return tuple(sx[:-2]) + tuple(out), x.dtype


def _max_pool_batch(op_):
    def rule(inputs, bdims, **attrs):
        n = next(x.shape[d] for x, d in zip(inputs, bdims) if d is not None)
        return op_(*[materialized(x, d, n) for x, d in zip(inputs, bdims)], **attrs), 0
    return rule


def _max_pool_vjp(g, out, x, **geo):
    return (max_pool_backward(g, x, out, **geo),)


@op("max_pool", shape=_max_pool_rule, vjp=_max_pool_vjp,
    batch=lambda inputs, bdims, **attrs: _max_pool_batch(max_pool)(inputs, bdims, **attrs))
def max_pool(xp, x, kernel_size, stride, padding, dilation):
    """The largest element of each kh x kw window of ``x`` (..., H, W) (NaN if the window holds
    one), ``padding`` ((top, bottom), (left, right)) counting as the lowest value."""
    xpad = _pool_padded(xp, x, padding)
    oh, ow = _max_pool_rule(x, kernel_size, stride, padding, dilation)[0][-2:]
    kh, kw = kernel_size
    out = _pool_window(xpad, 0, 0, stride, dilation, oh, ow).copy()
    for i in range(kh):
        for j in range(kw):
            if i or j:
                xp.maximum(out, _pool_window(xpad, i, j, stride, dilation, oh, ow), out=out)
    return out


def _max_pool_backward_rule(g, x, out, **geo):
    shape, dtype = _max_pool_rule(x, **geo)
    if tuple(shape_of(g)) != tuple(shape) or tuple(shape_of(out)) != tuple(shape):
        raise ShapeError(f"max_pool_backward: the gradient {describe(g)} and the pooled "
                         f"{describe(out)} must both be shaped like max_pool's result {shape}")
    return tuple(shape_of(x)), g.dtype


def _first_max_gather(c, x, kernel_size, stride, padding, dilation):
    """``c`` (..., H, W) read at each window's first largest element of ``x``: the adjoint of
    ``max_pool_backward``'s routing, in ops (for its vjp)."""
    (pt, pb), (pl, pr) = padding
    lead = tuple(x.shape[:-2])
    n = math.prod(lead) if lead else 1
    shape4 = (n, 1) + tuple(x.shape[-2:])
    geo = dict(kernel_size=kernel_size, stride=stride, padding=(0, 0), dilation=dilation)
    low = _lowest(x.dtype.np)
    xs = _pad(reshape(x, shape=shape4), widths=((0, 0), (0, 0), (pt, pb), (pl, pr)), value=low)
    cs = _pad(reshape(c, shape=shape4), widths=((0, 0), (0, 0), (pt, pb), (pl, pr)))
    wx, wc = unfold(xs, **geo), unfold(cs, **geo)                 # (n, 1, kh, kw, oh, ow)
    kh, kw, oh, ow = wx.shape[2:]
    flat = (n, 1, kh * kw, oh, ow)
    picked = _gather(reshape(wc, shape=flat), argmax(reshape(wx, shape=flat), dim=2,
                                                     keepdim=True), dim=2)
    return reshape(picked, shape=lead + (oh, ow))


def _max_pool_backward_vjp(c, result, g, x, out, **geo):
    # linear in g (the adjoint of the routing); piecewise constant in x and out
    return (_first_max_gather(c, x, **geo) if needs_grad(g) else None, None, None)


@op("max_pool_backward", shape=_max_pool_backward_rule, vjp=_max_pool_backward_vjp,
    batch=lambda inputs, bdims, **attrs: _max_pool_batch(max_pool_backward)(inputs, bdims,
                                                                             **attrs))
def max_pool_backward(xp, g, x, out, kernel_size, stride, padding, dilation):
    """max_pool's vjp: each window's gradient ``g`` added at the window's first largest element
    of ``x`` (in row-major order of the window, as PyTorch's), ``out`` being max_pool's result."""
    nan = out.dtype.kind == "f" and bool(xp.isnan(out).any())
    if not nan and x.ndim == 4 and host_dnnl.serves(xp, x):
        dx = host_dnnl.max_pool_backward(g, x, kernel_size, stride, padding, dilation)
        if dx is not None:
            return dx
    xpad = _pool_padded(xp, x, padding)
    oh, ow = out.shape[-2:]
    dpad = xp.zeros(xpad.shape, dtype=g.dtype)
    taken = xp.zeros(out.shape, dtype=bool)
    last = kernel_size[0] * kernel_size[1] - 1
    # windows that do not overlap write each input element at most once: no sum needed
    apart = all(s >= (k - 1) * d + 1 for s, k, d in zip(stride, kernel_size, dilation))
    for k in range(last + 1):
        i, j = divmod(k, kernel_size[1])
        w = _pool_window(xpad, i, j, stride, dilation, oh, ow)
        hit = w == out
        if nan:
            hit |= xp.isnan(w) & xp.isnan(out)
        if k:
            xp.greater(hit, taken, out=hit)          # a hit not taken by an earlier position
        if k < last:
            taken |= hit
        target = _pool_window(dpad, i, j, stride, dilation, oh, ow)
        if apart:
            xp.multiply(g, hit, out=target)
        else:
            target += g * hit
    (pt, _), (pl, _) = padding
    return dpad[..., pt:pt + x.shape[-2], pl:pl + x.shape[-1]]


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over each window of ``x`` (N, C, H, W); ``stride`` defaults to ``kernel_size``.
    The gradient goes to the first largest element of each window (as in PyTorch, also when
    several are equal). ``return_indices=True`` also returns where each maximum is, as an
    index into the flattened H*W plane.

    >>> import labkit as lk
    >>> x = lk.arange(16.0).reshape(1, 1, 4, 4)
    >>> lk.max_pool2d(x, 2).tolist()
    [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    geo, extra = _pool_geometry("max_pool2d", x, kernel_size, stride, padding, dilation,
                                ceil_mode)
    if not return_indices:
        (ph, pw) = geo["padding"]
        return max_pool(x, kernel_size=geo["kernel_size"], stride=geo["stride"],
                        padding=((ph, ph + extra[0]), (pw, pw + extra[1])),
                        dilation=geo["dilation"])
    cols = _windows(x, geo, extra, _lowest(x.dtype.np))   # (N, C, kh, kw, OH, OW)
    n, c, kh, kw, oh, ow = cols.shape
    flat = reshape(cols, shape=(n, c, kh * kw, oh, ow))
    where_max = argmax(flat, dim=2, keepdim=True)
    out = reshape(_gather(flat, where_max, dim=2), shape=(n, c, oh, ow))
    if not return_indices:
        return out
    return out, _plane_index(where_max, geo, kw, x.shape[3], oh, ow)


def _plane_index(where_max, geo, kw, width, oh, ow):
    """Index into the input's H*W plane of each window's maximum (window position ``k``)."""
    (sh, sw), (ph, pw), (dh, dw) = geo["stride"], geo["padding"], geo["dilation"]
    k = reshape(where_max, shape=where_max.shape[:2] + (oh, ow))
    rows = _creation.tensor((np.arange(oh) * sh - ph).reshape(oh, 1), device=k.device)
    cols = _creation.tensor((np.arange(ow) * sw - pw).reshape(1, ow), device=k.device)
    r = add(rows, mul(floor_divide(k, kw), dh))
    q = add(cols, mul(remainder(k, kw), dw))
    return add(mul(r, width), q)


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Mean over each window of ``x`` (N, C, H, W); ``stride`` defaults to ``kernel_size``.
    ``count_include_pad``: zero padding counts towards the mean (PyTorch's default);
    ``divisor_override``: divide every window's sum by this instead.

    >>> import labkit as lk
    >>> lk.avg_pool2d(lk.ones(1, 1, 3, 3), 2, padding=1, count_include_pad=False).tolist()
    [[[[1.0, 1.0], [1.0, 1.0]]]]
    """
    geo, extra = _pool_geometry("avg_pool2d", x, kernel_size, stride, padding, 1, ceil_mode)
    sums = _sum(_windows(x, geo, extra, 0.0), dim=(2, 3))
    if not x.dtype.is_floating:     # PyTorch: the sum divided as integers (toward zero)
        means = _avg_of_sums(cast(sums, dtype="float64"), x, geo, count_include_pad,
                             divisor_override)
        return cast(trunc(means), dtype=x.dtype.name)
    return _avg_of_sums(sums, x, geo, count_include_pad, divisor_override)


def _avg_of_sums(sums, x, geo, count_include_pad, divisor_override):
    if divisor_override:
        return div(sums, divisor_override)
    oh, ow = sums.shape[-2:]
    div_h = _pool_counts(x.shape[2], oh, geo["kernel_size"][0], geo["stride"][0],
                         geo["padding"][0], count_include_pad)
    div_w = _pool_counts(x.shape[3], ow, geo["kernel_size"][1], geo["stride"][1],
                         geo["padding"][1], count_include_pad)
    if count_include_pad and (div_h == div_h[0]).all() and (div_w == div_w[0]).all():
        return div(sums, float(div_h[0] * div_w[0]))
    divisor = np.maximum(np.outer(div_h, div_w), 1).astype(sums.dtype.np)
    return div(sums, _creation.tensor(divisor, device=x.device))


def _pool_counts(size, out, k, s, p, count_include_pad):
    """Per output position along one dimension, how many elements its window averages
    (PyTorch's: padding counts if ``count_include_pad``, the ceil_mode overhang never)."""
    start = np.arange(out) * s - p
    end = np.minimum(start + k, size + p)
    if count_include_pad:
        return end - start
    return np.minimum(end, size) - np.maximum(start, 0)
