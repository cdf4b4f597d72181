"""Normalisation: ``F.layer_norm``, ``F.rms_norm``, ``F.group_norm``, ``F.batch_norm``,
``F.instance_norm`` and ``F.normalize``, in PyTorch's signatures and with its statistics
(biased variance to normalise, unbiased variance in running estimates).

Running statistics are updated in place with ``assign`` ops, out of the gradient's way, so the
same code updates a BatchNorm's buffers eagerly and inside a captured training step.

>>> import labkit as lk
>>> import labkit.nn.functional as F
>>> y = F.layer_norm(lk.tensor([[1.0, 2.0, 3.0]]), (3,))
>>> [round(v, 4) for v in y[0].tolist()]
[-1.2247, 0.0, 1.2247]
"""
import numpy as np

from ...autodiff import no_grad
from ...errors import ShapeError, describe
from ...tensor.autocast import precision
from ...tensor.ops.composite import mean
from ...tensor.ops.elementwise import add, cast, div, mul, sub
from ...tensor.ops.elementwise_math import clamp_min, rsqrt
from ...tensor.ops.channel_norm import batch_norm as _batch_norm
from ...tensor.ops.channel_norm import channel_moments as _channel_moments
from ...tensor.ops.nn_kernels import layer_norm as _layer_norm
from ...tensor.ops.nn_kernels import layer_norm_affine as _layer_norm_affine
from ...tensor.ops.norm import vector_norm
from ...tensor.ops.shape import reshape
from ...tensor.ops.state import assign


def _affine(y, weight, bias, shape=None):
    if weight is not None:
        y = mul(y, weight if shape is None else reshape(weight, shape=shape))
    if bias is not None:
        y = add(y, bias if shape is None else reshape(bias, shape=shape))
    return y


def _last_dims(name, input, normalized_shape):
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise ShapeError(f"{name}: normalized_shape={list(shape)} must be the last dimensions of "
                         f"the input, but the input is {describe(input)}. Build the layer with "
                         f"the size of the input's last dimension(s).")
    return tuple(range(-k, 0))


@precision("float32_gpu")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the last ``len(normalized_shape)`` dimensions, then scale by ``weight``
    and shift by ``bias`` (each of ``normalized_shape``, optional).

    >>> import labkit as lk
    >>> lk.nn.functional.layer_norm(lk.ones(2, 4), [4]).tolist()
    [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
    """
    dims = _last_dims("layer_norm", input, normalized_shape)
    _check_params("layer_norm", input, input.shape[input.ndim - len(dims):],
                  "the normalised dimensions", weight, bias)
    if weight is not None and all(_fits(p, input) for p in (weight, bias)):
        return _layer_norm_affine(input, weight, *(() if bias is None else (bias,)),
                                  ndim=len(dims), eps=eps)
    return _affine(_layer_norm(input, ndim=len(dims), eps=eps), weight, bias)


def _check_params(name, input, shape, meaning, weight, bias):
    """The weight and bias have ``shape`` (NumPy would broadcast a (1,) one silently; PyTorch
    refuses it)."""
    if None in tuple(shape):            # a size that follows a graph's dynamic axis
        return
    for p, what in ((weight, "weight"), (bias, "bias")):
        if p is not None and tuple(p.shape) != tuple(shape):
            raise ShapeError(f"{name}: the {what} {describe(p)} must have shape {tuple(shape)}, "
                             f"{meaning} of the input {describe(input)}")


def _fits(param, input):
    """Whether ``param`` (or None; its shape already checked) is what ``layer_norm_affine``
    takes: the input's dtype, and the input's shape known (else the affine part is separate
    ops)."""
    return param is None or (param.dtype == input.dtype and
                             all(isinstance(d, int) for d in input.shape))


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """``x / sqrt(mean(x**2) + eps)`` over the last dimensions, times ``weight``; ``eps``
    defaults to the machine epsilon of the input's dtype (as PyTorch's).

    >>> import labkit as lk
    >>> lk.nn.functional.rms_norm(lk.tensor([[3.0, 4.0]]), [2]).tolist()[0][0] > 0.84
    True
    """
    dims = _last_dims("rms_norm", input, normalized_shape)
    if eps is None:
        eps = float(np.finfo(np.float32 if input.dtype.itemsize < 4 else input.dtype.np).eps)
    y = mul(input, rsqrt(add(mean(mul(input, input), dim=dims, keepdim=True), eps)))
    return _affine(y, weight, None)


@precision("float32_gpu")
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalise (N, C, *) ``input`` over each group of ``C / num_groups`` channels (and all
    positions), then apply a per-channel ``weight`` and ``bias``.

    >>> import labkit as lk
    >>> lk.nn.functional.group_norm(lk.randn(2, 4, 3), 2).shape
    (2, 4, 3)
    """
    if input.ndim < 2 or input.shape[1] % num_groups:
        raise ShapeError(f"group_norm: {num_groups} groups must divide the channels (dimension "
                         f"1) of {describe(input)}")
    n, c = input.shape[:2]
    _check_params("group_norm", input, (c,), "the channels (dimension 1)", weight, bias)
    grouped = reshape(input, shape=(n, num_groups, -1))
    y = reshape(_layer_norm(grouped, ndim=1, eps=eps), shape=input.shape)
    return _affine(y, weight, bias, (c,) + (1,) * (input.ndim - 2))


def _channel_shape(input):
    return (input.shape[1],) + (1,) * (input.ndim - 2)


def _update_running(running, batch_value, momentum):
    """``running = (1 - momentum) * running + momentum * batch_value``, in place, no gradient
    (``momentum`` a number, or a 0-d tensor for a cumulative average)."""
    with no_grad():
        if isinstance(momentum, (int, float)):
            keep = 1.0 - momentum
        else:
            momentum = cast(momentum, dtype=running.dtype.name)
            keep = sub(1.0, momentum)
        new = add(mul(batch_value, momentum), mul(running, keep))
        assign(running, cast(new, dtype=running.dtype.name) if new.dtype is not running.dtype
               else new)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Normalise (N, C, *) ``input`` per channel. ``training=True``: with the batch's mean and
    (biased) variance, updating ``running_mean`` / ``running_var`` (if given) in place with
    ``momentum`` (the running variance takes the unbiased batch variance); ``training=False``:
    with the running statistics.

    >>> import labkit as lk
    >>> rm, rv = lk.zeros(2), lk.ones(2)
    >>> y = lk.nn.functional.batch_norm(lk.tensor([[1.0, 2.0], [3.0, 6.0]]), rm, rv,
    ...                                 training=True)
    >>> rm.tolist()
    [0.20000000298023224, 0.4000000059604645]
    """
    if input.ndim < 2:
        raise ShapeError(f"batch_norm: expects (N, C, *) input, got {describe(input)}")
    params = tuple(p for p in (weight, bias) if p is not None)
    if training:
        count = input.numel() // max(input.shape[1], 1) if None not in input.shape else None
        if count == 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when "
                             f"training, got input {describe(input)}; use a larger batch, or "
                             f"model.eval() to use the running statistics")
        moments = _channel_moments(input)             # (2, C): mean and biased variance
        mean, var = moments[0], moments[1]
        if running_mean is not None:
            _update_running(running_mean, mean, momentum)
        if running_var is not None:
            with no_grad():
                unbiased = mul(var, count / max(count - 1, 1))
            _update_running(running_var, unbiased, momentum)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: training=False needs running_mean and running_var")
        mean, var = running_mean, running_var
    # one op each way (tensor.ops.channel_norm); the batch's moments have their own gradient
    return _batch_norm(input, mean, var, *params, eps=eps, weight=weight is not None,
                       bias=bias is not None)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalise each channel of each example of (N, C, *) ``input`` over its positions.
    Running statistics (if given) are updated with the batch's average of the per-example
    statistics, and used instead when ``use_input_stats=False``.

    >>> import labkit as lk
    >>> y = lk.nn.functional.instance_norm(lk.randn(2, 3, 4, 4))
    >>> abs(y[0, 0].mean().item()) < 1e-5
    True
    """
    if input.ndim < 3:
        raise ShapeError(f"instance_norm: expects (N, C, *) input with positions, got "
                         f"{describe(input)}")
    shape = _channel_shape(input)
    dims = tuple(range(2, input.ndim))
    if use_input_stats:
        inst_mean = mean(input, dim=dims, keepdim=True)
        centered = sub(input, inst_mean)
        inst_var = mean(mul(centered, centered), dim=dims, keepdim=True)
        count = int(np.prod(input.shape[2:]))
        if running_mean is not None:
            _update_running(running_mean, mean(reshape(inst_mean, shape=input.shape[:2]), dim=0),
                            momentum)
        if running_var is not None:
            unbiased = mul(mean(reshape(inst_var, shape=input.shape[:2]), dim=0),
                           count / max(count - 1, 1))
            _update_running(running_var, unbiased, momentum)
        y = mul(centered, rsqrt(add(inst_var, eps)))
    else:
        y = mul(sub(input, reshape(running_mean, shape=shape)),
                rsqrt(add(reshape(running_var, shape=shape), eps)))
    return _affine(y, weight, bias, shape)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``x / max(||x||_p, eps)`` along ``dim``.

    >>> import labkit as lk
    >>> [round(v, 4) for v in lk.nn.functional.normalize(lk.tensor([[3.0, 4.0]]))[0].tolist()]
    [0.6, 0.8]
    """
    if out is not None:
        raise TypeError("normalize: out= is not supported; use the returned tensor")
    norm = vector_norm(input, ord=float(p), dim=(dim,), keepdim=True)
    return div(input, clamp_min(norm, eps))
