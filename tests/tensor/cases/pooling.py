"""Cases of the max-pooling primitive (``max_pool``) and its backward op, with PyTorch's
``F.max_pool2d`` as the oracle (and its gradient by ``torch.autograd`` with ``create_graph=True``
for the backward op, so the second-order checks compare with PyTorch's double backward).
Random normal inputs have no ties, so finite differences see one maximum per window. (A window
wholly in the padding gives -inf and no gradient here; PyTorch's backward crashes on one.)"""
import torch
import torch.nn.functional as TF
from hypothesis import strategies as st

from labkit.tensor.ops import conv as C

from ..case_kit import Case, Sample, normal, torch_ref


@st.composite
def _params(draw):
    k = draw(st.integers(1, 3))
    s = draw(st.integers(1, 2))
    d = draw(st.integers(1, 2))
    # dilated windows with padding can lie wholly in the padding, where PyTorch 2.13's
    # backward writes out of bounds (its process aborts): no padding with dilation
    p = draw(st.integers(0, k // 2)) if d == 1 else 0
    span = d * (k - 1) + 1
    lead = draw(st.lists(st.integers(1, 2), min_size=0, max_size=2).map(tuple))
    h = draw(st.integers(max(span - 2 * p, 1), span + 3))
    w = draw(st.integers(max(span - 2 * p, 1), span + 3))
    return {"shape": lead + (h, w), "k": k, "s": s, "p": p, "d": d}


_EDGES = [dict(shape=(2, 3, 4, 4), k=2, s=2, p=0, d=1), dict(shape=(1, 2, 5, 5), k=3, s=2, p=1, d=1),
          dict(shape=(3, 5), k=2, s=1, p=0, d=2), dict(shape=(1, 1, 3, 4), k=3, s=1, p=1, d=1)]


def _geo(k, s, p, d):
    return dict(kernel_size=(k, k), stride=(s, s), padding=((p, p), (p, p)), dilation=(d, d))


def _torch_pool(x, k, s, p, d):
    lead = x.shape[:-2]
    y = TF.max_pool2d(x.reshape((-1, 1) + tuple(x.shape[-2:])), k, s, p, d)
    return y.reshape(tuple(lead) + tuple(y.shape[-2:]))


def _torch_backward(g, x, out, k, s, p, d):
    x_ = x if x.requires_grad else x.detach().requires_grad_()
    return torch.autograd.grad(_torch_pool(x_, k, s, p, d), x_, g, create_graph=True)[0]


def _out_shape(shape, k, s, p, d):
    return shape[:-2] + tuple((n + 2 * p - d * (k - 1) - 1) // s + 1 for n in shape[-2:])


def _backward_sample(rng, shape, k, s, p, d):
    x = normal(rng, shape)
    out = _torch_pool(torch.tensor(x), k, s, p, d).numpy()
    return Sample((normal(rng, _out_shape(shape, k, s, p, d)), x, out),
                  {"k": k, "s": s, "p": p, "d": d}, grad=(0,))


PRIMITIVE_CASES = [
    Case("max_pool", lambda x, k, s, p, d: C.max_pool(x, **_geo(k, s, p, d)),
         torch_ref(_torch_pool),
         lambda rng, shape, **kw: Sample((normal(rng, shape),), kw), _params(), _EDGES,
         op="max_pool"),
    Case("max_pool_backward",
         lambda g, x, out, k, s, p, d: C.max_pool_backward(g, x, out, **_geo(k, s, p, d)),
         torch_ref(_torch_backward), _backward_sample, _params(), _EDGES,
         op="max_pool_backward"),
]
