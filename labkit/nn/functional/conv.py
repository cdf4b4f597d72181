"""Convolutions: ``F.conv1d``, ``F.conv2d``, ``F.conv_transpose1d``, ``F.conv_transpose2d``, and
the windows they are made of, ``F.unfold`` (im2col) and ``F.fold`` (col2im).

A convolution is the tensor layer's ``conv2d`` primitive (labkit/tensor/ops/conv.py) and a
transposed convolution its gradient with respect to the input, ``conv2d_input_grad``; ``unfold``
and ``fold`` are the window primitives, each the other's adjoint. The 1-d forms are
the 2-d ones on a height-1 image. An unbatched input (no N dimension) is accepted, as in PyTorch.

>>> import labkit as lk
>>> import labkit.nn.functional as F
>>> F.conv1d(lk.ones(2, 3, 10), lk.ones(4, 3, 3), padding="same").shape
(2, 4, 10)
>>> F.conv_transpose2d(lk.ones(1, 2, 4, 4), lk.ones(2, 3, 3, 3), stride=2).shape
(1, 3, 9, 9)
"""
from ...errors import IndexingError, ShapeError, describe
from ...tensor.autocast import precision
from ...tensor.ops.composite import squeeze, unsqueeze
from ...tensor.ops.conv import conv2d as _conv2d
from ...tensor.ops.conv import conv2d_input_grad
from ...tensor.ops.conv import fold as fold_
from ...tensor.ops.conv import out_size, pair
from ...tensor.ops.conv import unfold as _unfold
from ...tensor.ops.elementwise import add
from ...tensor.ops.shape import reshape
from ...tensor.public.layout import pad


def batched(fn, x, spatial, name):
    """``fn(x)`` for an input with a batch dimension; an unbatched one gets a batch of one."""
    if x.ndim == spatial + 1:
        out = fn(unsqueeze(x, 0))
        return tuple(squeeze(o, 0) for o in out) if isinstance(out, tuple) else squeeze(out, 0)
    if x.ndim != spatial + 2:     # (an IndexError for PyTorch when dims are missing)
        error = IndexingError if x.ndim < spatial + 1 else ShapeError
        raise error(f"{name} expects a {spatial + 2}-d (N, C, {_dims(spatial)}) or "
                    f"{spatial + 1}-d (C, {_dims(spatial)}) input; got {describe(x)}")
    return fn(x)


def _dims(spatial):
    return ", ".join(("L",) if spatial == 1 else ("H", "W"))


def one(v, name):
    """A 1-d size argument (an int or a 1-tuple) as an int."""
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise ShapeError(f"{name} of a 1-d operation must be an int or a 1-tuple, got {v}")
        v = v[0]
    return int(v)


@precision("low")
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-d convolution of (N, C, H, W) (or (C, H, W)) ``input`` with ``weight``
    (O, C / groups, kh, kw); ``padding`` an int, a pair, ``'valid'`` or ``'same'``.

    >>> import labkit as lk
    >>> lk.nn.functional.conv2d(lk.ones(3, 5, 5), lk.ones(2, 3, 3, 3)).shape
    (2, 3, 3)
    """
    return batched(lambda x: _conv2d(x, weight, bias, stride, padding, dilation, groups),
                   input, 2, "conv2d")


@precision("low")
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-d convolution of (N, C, L) (or (C, L)) ``input`` with ``weight`` (O, C / groups, k).

    >>> import labkit as lk
    >>> lk.nn.functional.conv1d(lk.ones(1, 2, 5), lk.ones(3, 2, 2)).tolist()[0][0]
    [4.0, 4.0, 4.0, 4.0]
    """
    if weight.ndim != 3:
        raise ShapeError(f"conv1d: weight must be 3-d (out_channels, in_channels / groups, "
                         f"kernel_size); got {describe(weight)}")
    padding = padding if isinstance(padding, str) else (0, one(padding, "padding"))
    w2 = unsqueeze(weight, 2)

    def run(x):
        return squeeze(_conv2d(unsqueeze(x, 2), w2, bias, (1, one(stride, "stride")), padding,
                               (1, one(dilation, "dilation")), groups), 2)
    return batched(run, input, 1, "conv1d")


@precision("low")
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """Transposed 2-d convolution (the gradient of ``conv2d`` with respect to its input) of
    (N, C_in, H, W) ``input`` with ``weight`` (C_in, C_out / groups, kh, kw). The output is
    ``(H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1`` high (and
    as wide).

    >>> import labkit as lk
    >>> lk.nn.functional.conv_transpose2d(lk.ones(1, 1, 2, 2), lk.ones(1, 1, 2, 2)).tolist()
    [[[[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]]]
    """
    if weight.ndim != 4:
        raise ShapeError(f"conv_transpose2d: weight must be 4-d (in_channels, out_channels / "
                         f"groups, kh, kw); got {describe(weight)}")
    return batched(lambda x: _conv_transpose2d(x, weight, bias, pair(stride, "stride"),
                                               pair(padding, "padding"),
                                               pair(output_padding, "output_padding"),
                                               int(groups), pair(dilation, "dilation")),
                   input, 2, "conv_transpose2d")


def _conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation):
    cin, og, kh, kw = weight.shape
    n, c, h, w = x.shape
    if groups < 1 or cin % groups:
        raise ShapeError(f"conv_transpose2d: groups={groups} must be positive and divide the "
                         f"{cin} input channels of weight {describe(weight)}")
    if c != cin:
        raise ShapeError(f"conv_transpose2d: input has {c} channels but weight expects {cin} "
                         f"(input {describe(x)}, weight {describe(weight)})")
    for op_, s, d in zip(output_padding, stride, dilation):
        if op_ >= max(s, d):
            raise ShapeError(f"conv_transpose2d: output_padding {output_padding} must be smaller "
                             f"than stride {stride} or dilation {dilation}")
    out_hw = tuple((size - 1) * s - 2 * p + d * (k - 1) + op_ + 1 for size, s, p, d, k, op_ in
                   zip((h, w), stride, padding, dilation, (kh, kw), output_padding))
    if min(out_hw) <= 0:
        raise ShapeError(f"conv_transpose2d: the output of {describe(x)} with padding "
                         f"{padding} would be {out_hw[0]}x{out_hw[1]}; use less padding")
    cout = og * groups
    # the gradient of a convolution of the (N, C_out, ...) output by the same weight
    geo = dict(stride=stride, dilation=dilation, groups=groups)
    if all(op_ < s for op_, s in zip(output_padding, stride)):
        out = conv2d_input_grad(x, weight, image_shape=(n, cout) + out_hw, padding=padding,
                                **geo)
    else:       # output_padding beyond the stride: the whole image, then crop or pad
        full = tuple((size - 1) * s + d * (k - 1) + 1 for size, s, d, k in
                     zip((h, w), stride, dilation, (kh, kw)))
        out = conv2d_input_grad(x, weight, image_shape=(n, cout) + full, padding=(0, 0), **geo)
        out = pad(out, (-padding[1], out_hw[1] + padding[1] - full[1],
                        -padding[0], out_hw[0] + padding[0] - full[0]))
    if bias is not None:
        out = add(out, reshape(bias, shape=(cout, 1, 1)))
    return out


@precision("low")
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """Transposed 1-d convolution of (N, C_in, L) ``input`` with ``weight``
    (C_in, C_out / groups, k).

    >>> import labkit as lk
    >>> lk.nn.functional.conv_transpose1d(lk.ones(1, 1, 3), lk.ones(1, 1, 2), stride=2).shape
    (1, 1, 6)
    """
    if weight.ndim != 3:
        raise ShapeError(f"conv_transpose1d: weight must be 3-d (in_channels, out_channels / "
                         f"groups, kernel_size); got {describe(weight)}")
    w2 = unsqueeze(weight, 2)

    def run(x):
        return squeeze(_conv_transpose2d(
            unsqueeze(x, 2), w2, bias, (1, one(stride, "stride")), (0, one(padding, "padding")),
            (0, one(output_padding, "output_padding")), int(groups),
            (1, one(dilation, "dilation"))), 2)
    return batched(run, input, 1, "conv_transpose1d")


def _pairs(kernel_size, dilation, padding, stride):
    return dict(kernel_size=pair(kernel_size, "kernel_size"), dilation=pair(dilation, "dilation"),
                padding=pair(padding, "padding"), stride=pair(stride, "stride"))


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Sliding windows of (N, C, H, W) ``input`` as columns (im2col): (N, C * kh * kw, L) with L
    the number of windows.

    >>> import labkit as lk
    >>> lk.nn.functional.unfold(lk.ones(2, 3, 4, 4), 2).shape
    (2, 12, 9)
    """
    geo = _pairs(kernel_size, dilation, padding, stride)

    def run(x):
        cols = _unfold(x, **geo)                                  # (N, C, kh, kw, OH, OW)
        n, c, kh, kw, oh, ow = cols.shape
        return reshape(cols, shape=(n, c * kh * kw, oh * ow))
    return batched(run, input, 2, "unfold")


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """The adjoint of ``unfold`` (col2im): columns (N, C * kh * kw, L) summed back into images
    (N, C, *output_size), overlapping windows adding up.

    >>> import labkit as lk
    >>> lk.nn.functional.fold(lk.ones(1, 4, 4), (3, 3), 2).tolist()[0][0]
    [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
    """
    geo = _pairs(kernel_size, dilation, padding, stride)
    h, w = pair(output_size, "output_size")
    (kh, kw) = geo["kernel_size"]

    def run(x):
        n, ck, length = x.shape
        oh = out_size(h, kh, geo["stride"][0], geo["padding"][0], geo["dilation"][0])
        ow = out_size(w, kw, geo["stride"][1], geo["padding"][1], geo["dilation"][1])
        if ck % (kh * kw) or oh * ow != length:
            raise ShapeError(f"fold: input {describe(x)} does not hold {kh}x{kw} windows of "
                             f"{oh}x{ow} positions in an image of {(h, w)} (expected "
                             f"(N, C * {kh * kw}, {oh * ow}))")
        c = ck // (kh * kw)
        return fold_(reshape(x, shape=(n, c, kh, kw, oh, ow)), image_shape=(n, c, h, w), **geo)
    if input.ndim == 2:
        return squeeze(run(unsqueeze(input, 0)), 0)
    if input.ndim != 3:
        raise ShapeError(f"fold expects (N, C * kh * kw, L) or (C * kh * kw, L) input, got "
                         f"{describe(input)}")
    return run(input)
