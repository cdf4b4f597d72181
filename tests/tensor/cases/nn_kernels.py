"""Cases of the layer kernels (``gelu``, ``leaky_relu``, ``layer_norm``) and their backward ops,
with PyTorch as the oracle: ``F.gelu``, ``F.leaky_relu`` and ``F.layer_norm`` (without affine
parameters, and with a weight and maybe a bias: ``layer_norm_affine``), and their
gradients taken by ``torch.autograd`` with ``create_graph=True`` for the backward ops, so that
the harness's second-order checks compare with PyTorch's double backward too."""
import numpy as np
import torch
import torch.nn.functional as TF
from hypothesis import strategies as st

from labkit.tensor.ops import nn_kernels as K

from ..case_kit import Case, Sample, _arr, normal, shapes, torch_ref

_GELU_EDGES = [dict(shape=(), approximate="none"), dict(shape=(0,), approximate="tanh"),
               dict(shape=(2, 3), approximate="tanh"), dict(shape=(1, 1), approximate="none")]


def _gelu_params():
    return st.fixed_dictionaries({"shape": shapes(),
                                  "approximate": st.sampled_from(["none", "tanh"])})


def _through(f, x, g):
    """``g``'s gradient through ``f`` at ``x``, itself differentiable (double backward)."""
    x_ = x if x.requires_grad else x.detach().requires_grad_()
    return torch.autograd.grad(f(x_), x_, g, create_graph=True)[0]


def _shifted(rng, shape):
    """Values with a mean and spread far from layer norm's output (0 and 1)."""
    return _arr(normal(rng, shape) * 3 + 1)


def _ln(x, ndim, eps):
    return TF.layer_norm(x, x.shape[x.ndim - ndim:], eps=eps)


@st.composite
def _ln_params(draw, bias=None):
    shape = draw(shapes(min_dims=1, min_side=1))
    params = {"shape": shape, "ndim": draw(st.integers(1, len(shape))),
              "eps": draw(st.sampled_from([1e-5, 0.1]))}
    if bias:
        params["bias"] = draw(st.booleans())
    return params


def _ln_affine(x, w, *b, ndim, eps):
    return TF.layer_norm(x, x.shape[x.ndim - ndim:], w, *b, eps=eps)


def _ln_affine_backward(g, x, w, ndim, eps, bias):
    """PyTorch's gradients of x, w and (``bias``) a bias, flat and joined, as labkit packs
    them; differentiable (double backward)."""
    x_ = x if x.requires_grad else x.detach().requires_grad_()
    w_ = w if w.requires_grad else w.detach().requires_grad_()
    b_ = torch.zeros_like(w, requires_grad=True)
    y = _ln_affine(x_, w_, *((b_,) if bias else ()), ndim=ndim, eps=eps)
    grads = torch.autograd.grad(y, (x_, w_) + ((b_,) if bias else ()), g, create_graph=True)
    return torch.cat([t.reshape(-1) for t in grads])


def _params(rng, shape, ndim, bias):
    """A weight (and with ``bias`` a bias) of the normalised dimensions' shape."""
    normalised = shape[len(shape) - ndim:]
    return (normal(rng, normalised),) + ((normal(rng, normalised),) if bias else ())


_LN_AFFINE_EDGES = [dict(shape=(1,), ndim=1, eps=1e-5, bias=True),
                    dict(shape=(2, 3), ndim=1, eps=1e-5, bias=False),
                    dict(shape=(2, 3), ndim=2, eps=0.1, bias=True),
                    dict(shape=(0, 3), ndim=1, eps=1e-5, bias=True),
                    dict(shape=(2, 1, 3), ndim=1, eps=1e-5, bias=False)]
_LN_EDGES = [dict(shape=(1,), ndim=1, eps=1e-5), dict(shape=(2, 3), ndim=1, eps=1e-5),
             dict(shape=(2, 3), ndim=2, eps=0.1), dict(shape=(0, 3), ndim=1, eps=1e-5),
             dict(shape=(2, 1, 3), ndim=1, eps=1e-5)]


_LEAKY_EDGES = [dict(shape=(), negative_slope=0.01), dict(shape=(0,), negative_slope=0.2),
                dict(shape=(2, 3), negative_slope=0.2), dict(shape=(3,), negative_slope=1.5),
                dict(shape=(2, 1), negative_slope=0.0)]


def _leaky_params():
    return st.fixed_dictionaries({"shape": shapes(),
                                  "negative_slope": st.sampled_from([0.0, 0.01, 0.2, 1.0, 2.5])})


def _away_from_zero(rng, shape):
    """Values at least 0.1 from the kink at 0 (finite differences are exact there)."""
    return _arr(rng.choice([-1.0, 1.0], shape) * rng.uniform(0.1, 2.0, shape))


def _from_output_sample(rng, shape):
    x = _arr(normal(rng, shape) * 2)
    x.reshape(-1)[:1] = 0.0                   # x = 0: Phi(0) = 1/2 where out / x is 0 / 0
    return Sample((normal(rng, shape), x, TF.gelu(torch.from_numpy(x)).numpy()))


PRIMITIVE_CASES = [
    Case("leaky_relu", lambda x, negative_slope: K.leaky_relu(x, negative_slope=negative_slope),
         torch_ref(lambda x, negative_slope: TF.leaky_relu(x, negative_slope)),
         lambda rng, shape, negative_slope: Sample((_away_from_zero(rng, shape),),
                                                   {"negative_slope": negative_slope}),
         _leaky_params(), _LEAKY_EDGES, op="leaky_relu"),
    Case("leaky_relu_backward", lambda g, x, negative_slope: K.leaky_relu_backward(
        g, x, negative_slope=negative_slope),
         torch_ref(lambda g, x, negative_slope: _through(
             lambda v: TF.leaky_relu(v, negative_slope), x, g)),
         lambda rng, shape, negative_slope: Sample((normal(rng, shape),
                                                    _away_from_zero(rng, shape)),
                                                   {"negative_slope": negative_slope}),
         _leaky_params(), _LEAKY_EDGES, op="leaky_relu_backward"),
    Case("gelu", lambda x, approximate: K.gelu(x, approximate=approximate),
         torch_ref(lambda x, approximate: TF.gelu(x, approximate=approximate)),
         lambda rng, shape, approximate: Sample((_arr(normal(rng, shape) * 2),),
                                                {"approximate": approximate}),
         _gelu_params(), _GELU_EDGES, op="gelu"),
    Case("gelu_backward", lambda g, x, approximate: K.gelu_backward(g, x,
                                                                    approximate=approximate),
         torch_ref(lambda g, x, approximate: _through(
             lambda v: TF.gelu(v, approximate=approximate), x, g)),
         lambda rng, shape, approximate: Sample((normal(rng, shape), _arr(normal(rng, shape) * 2)),
                                                {"approximate": approximate}),
         _gelu_params(), _GELU_EDGES, op="gelu_backward"),
    # (out = gelu(x) computed by PyTorch: the op reads Phi(x) from it; no gradient of its own)
    Case("gelu_backward_from_output", lambda g, x, out: K.gelu_backward_from_output(g, x, out),
         torch_ref(lambda g, x, out: _through(TF.gelu, x, g)),
         lambda rng, shape: _from_output_sample(rng, shape),
         st.fixed_dictionaries({"shape": shapes()}),
         [dict(shape=()), dict(shape=(0,)), dict(shape=(2, 3))],
         op="gelu_backward_from_output", differentiable=False),
    Case("layer_norm", lambda x, ndim, eps: K.layer_norm(x, ndim=ndim, eps=eps),
         torch_ref(_ln),
         lambda rng, shape, ndim, eps: Sample((_shifted(rng, shape),),
                                              {"ndim": ndim, "eps": eps}),
         _ln_params(), _LN_EDGES, op="layer_norm", rtol=1e-6, atol=1e-8),
    Case("layer_norm_backward", lambda g, x, ndim, eps: K.layer_norm_backward(
        g, x, ndim=ndim, eps=eps),
         torch_ref(lambda g, x, ndim, eps: _through(lambda v: _ln(v, ndim, eps), x, g)),
         lambda rng, shape, ndim, eps: Sample((normal(rng, shape), _shifted(rng, shape)),
                                              {"ndim": ndim, "eps": eps}),
         _ln_params(), _LN_EDGES, op="layer_norm_backward", rtol=1e-6, atol=1e-8),
    Case("layer_norm_affine", lambda x, w, *b, ndim, eps: K.layer_norm_affine(
        x, w, *b, ndim=ndim, eps=eps),
         torch_ref(_ln_affine),
         lambda rng, shape, ndim, eps, bias: Sample(
             (_shifted(rng, shape),) + _params(rng, shape, ndim, bias), {"ndim": ndim, "eps": eps}),
         _ln_params(bias=True), _LN_AFFINE_EDGES, op="layer_norm_affine", rtol=1e-6,
         atol=1e-8),
    Case("layer_norm_affine_backward", lambda g, x, w, ndim, eps, bias:
         K.layer_norm_affine_backward(g, x, w, ndim=ndim, eps=eps, bias=bias),
         torch_ref(_ln_affine_backward),
         lambda rng, shape, ndim, eps, bias: Sample(
             (normal(rng, shape), _shifted(rng, shape), _params(rng, shape, ndim, False)[0]),
             {"ndim": ndim, "eps": eps, "bias": bias}),
         _ln_params(bias=True), _LN_AFFINE_EDGES, op="layer_norm_affine_backward", rtol=1e-6,
         atol=1e-8),
]
