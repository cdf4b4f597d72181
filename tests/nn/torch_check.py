"""One helper for nn.functional tests: run a labkit function and PyTorch's on the same arrays
(float64 unless given otherwise), compare the outputs, then the gradients of every float input
for the same random cotangent."""
import numpy as np
import torch

import labkit as lk


def _leaves(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _leaves(o)]
    return [out]


def against_torch(ours, theirs, *arrays, rtol=1e-7, atol=1e-9, grad=True, **kwargs):
    """``ours(*lk tensors, **kwargs)`` against ``theirs(*torch tensors, **kwargs)``; float
    arrays require grad. Returns labkit's outputs."""
    l_in = [lk.tensor(a, requires_grad=grad and a.dtype.kind == "f") if isinstance(a, np.ndarray)
            else a for a in arrays]
    t_in = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f")
            if isinstance(a, np.ndarray) else a for a in arrays]
    l_out, t_out = _leaves(ours(*l_in, **kwargs)), _leaves(theirs(*t_in, **kwargs))
    assert len(l_out) == len(t_out)
    for a, b in zip(l_out, t_out):
        assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol)
    if not grad:
        return l_out
    pairs = [(a, b) for a, b in zip(l_out, t_out) if b.requires_grad]
    if not pairs:
        return l_out
    rng = np.random.default_rng(7)
    cots = [rng.standard_normal(tuple(b.shape)) for _, b in pairs]
    sum((a * lk.tensor(c, dtype=a.dtype)).sum() for (a, _), c in zip(pairs, cots)).backward()
    sum((b * torch.tensor(c, dtype=b.dtype)).sum() for (_, b), c in zip(pairs, cots)).backward()
    for i, (a, b) in enumerate(zip(l_in, t_in)):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            if b.grad is None:
                assert a.grad is None or not np.any(a.grad.numpy()), f"gradient of input {i}"
                continue
            assert a.grad is not None, f"no gradient for input {i}"
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=max(rtol, 1e-6),
                                       atol=max(atol, 1e-8), err_msg=f"gradient of input {i}")
    return l_out
