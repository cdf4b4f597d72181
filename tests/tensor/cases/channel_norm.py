"""Cases of batch normalisation's ops (``labkit.tensor.ops.channel_norm``): the batch's
per-channel moments (against NumPy, gradient by finite differences) and their backward op,
the normalisation with
given statistics, weight and bias, and its backward op, with PyTorch's autograd of
``(x - mean) / sqrt(var + eps) * w + b`` as the oracle (double backward included)."""
import numpy as np
import torch
from hypothesis import strategies as st

from labkit.tensor.ops import channel_norm as K

from ..case_kit import Case, Sample, _arr, normal, positive, torch_ref


@st.composite
def _bn_params(draw, affine=False):
    n = draw(st.integers(1, 3))
    c = draw(st.integers(1, 3))
    rest = draw(st.lists(st.integers(1, 3), max_size=2).map(tuple))
    if n * (1 if not rest else int(np.prod(rest))) == 1:
        n = 2                                   # more than one value per channel
    params = {"shape": (n, c) + rest}
    if affine:
        params.update(eps=draw(st.sampled_from([1e-5, 0.1])), weight=draw(st.booleans()),
                      bias=draw(st.booleans()))
    return params


_MOMENTS_EDGES = [dict(shape=(4, 3)), dict(shape=(2, 3, 4, 4)), dict(shape=(3, 1, 2)),
                  dict(shape=(2, 2, 1, 3))]
_BN_EDGES = [dict(shape=(4, 3), eps=1e-5, weight=True, bias=True),
             dict(shape=(2, 3, 4, 4), eps=1e-5, weight=False, bias=False),
             dict(shape=(3, 1, 2), eps=0.1, weight=True, bias=False),
             dict(shape=(2, 2, 1, 3), eps=1e-5, weight=False, bias=True)]


def _shifted(rng, shape):
    """Values with a mean and spread far from the normalised output's (0 and 1)."""
    return _arr(normal(rng, shape) * 3 + 1)


def _moments(x):
    axes = (0,) + tuple(range(2, x.ndim))
    return np.stack([x.mean(axis=axes), x.var(axis=axes)])


def _moments_backward(g, x, moments):
    """PyTorch's gradient of x through the moments ``(mean, var)`` of x, taken at the given
    ``moments`` (the mean read from them, as labkit's op does), differentiable."""
    shape = (x.shape[1],) + (1,) * (x.ndim - 2)
    n = x.numel() // x.shape[1]
    return (g[0].reshape(shape) + 2 * g[1].reshape(shape) * (x - moments[0].reshape(shape))) / n


def _normalised(x, mean, var, *params, eps, weight, bias):
    shape = (x.shape[1],) + (1,) * (x.ndim - 2)
    y = (x - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + eps)
    if weight:
        y = y * params[0].reshape(shape)
    return y + params[-1].reshape(shape) if bias else y


def _normalised_backward(g, x, mean, var, *w, eps, weight, bias, stats):
    """PyTorch's gradients of x, mean, var, (``weight``) the weight and (``bias``) a bias, flat
    and joined as labkit packs them (zeros for var and the weight without ``stats``);
    differentiable (double backward)."""
    leaves = [t if t.requires_grad else t.detach().requires_grad_() for t in (x, mean, var) + w]
    b = [torch.zeros_like(mean, requires_grad=True)] if bias else []
    y = _normalised(*leaves, *b, eps=eps, weight=weight, bias=bias)
    grads = list(torch.autograd.grad(y, leaves + b, g, create_graph=True))
    if not stats:
        grads[2] = torch.zeros_like(grads[2])
        if weight:
            grads[3] = torch.zeros_like(grads[3])
    return torch.cat([t.reshape(-1) for t in grads])


def _bn_sample(rng, shape, eps, weight, bias, grad=False, stats=True):
    c = shape[1]
    vectors = (normal(rng, (c,)), positive(rng, (c,))) + \
        tuple(normal(rng, (c,)) for _ in range(bool(weight) + (bool(bias) and not grad)))
    head = (normal(rng, shape),) if grad else ()
    kwargs = {"eps": eps, "weight": weight, "bias": bias}
    if grad:
        kwargs["stats"] = stats
    return Sample(head + (_shifted(rng, shape),) + vectors, kwargs)


PRIMITIVE_CASES = [
    Case("channel_moments", K.channel_moments, _moments,
         lambda rng, shape: Sample((_shifted(rng, shape),)),
         _bn_params(), _MOMENTS_EDGES, op="channel_moments"),
    Case("channel_moments_backward", K.channel_moments_backward,
         torch_ref(_moments_backward),
         lambda rng, shape: Sample((normal(rng, (2, shape[1])), _shifted(rng, shape),
                                    _moments(_shifted(rng, shape)))),
         _bn_params(), _MOMENTS_EDGES, op="channel_moments_backward", rtol=1e-6, atol=1e-8),
    Case("batch_norm", lambda x, mean, var, *p, eps, weight, bias: K.batch_norm(
        x, mean, var, *p, eps=eps, weight=weight, bias=bias),
         torch_ref(_normalised), _bn_sample, _bn_params(affine=True), _BN_EDGES,
         op="batch_norm", rtol=1e-6, atol=1e-8),
    Case("batch_norm_backward", lambda g, x, mean, var, *w, eps, weight, bias, stats:
         K.batch_norm_backward(g, x, mean, var, *w, eps=eps, weight=weight, bias=bias,
                               stats=stats),
         torch_ref(_normalised_backward),
         lambda rng, shape, eps, weight, bias: _bn_sample(rng, shape, eps, weight, bias,
                                                          grad=True),
         _bn_params(affine=True), _BN_EDGES, op="batch_norm_backward", rtol=1e-6, atol=1e-8),
    Case("batch_norm_backward_no_stats", lambda g, x, mean, var, *w, eps, weight, bias, stats:
         K.batch_norm_backward(g, x, mean, var, *w, eps=eps, weight=weight, bias=bias,
                               stats=stats),
         torch_ref(_normalised_backward),
         lambda rng, shape, eps, weight, bias: _bn_sample(rng, shape, eps, weight, bias,
                                                          grad=True, stats=False),
         _bn_params(affine=True), _BN_EDGES, op="batch_norm_backward", rtol=1e-6, atol=1e-8),
]
