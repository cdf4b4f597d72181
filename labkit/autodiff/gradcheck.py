"""Numerical gradient checking: compare reverse-mode gradients with central differences.

>>> import labkit as lk
>>> x = lk.randn(3, dtype=lk.float64)
>>> lk.gradcheck(lambda x: (x.tanh() * x).sum(), [x])
True
"""
import numpy as np

from ..errors import GradError
from ..tensor import dispatch
from ..tensor.creation import tensor as _tensor
from ..tensor.random import generator
from ..tensor.tensor import Tensor
from .engine import gradients


class GradcheckError(GradError, AssertionError):
    """Analytic and numerical gradients disagree."""


def _wide(x):
    """The host array of tensor ``x`` in float64, or complex128 if it is complex."""
    return np.array(x.numpy(), dtype=np.complex128 if x.dtype.is_complex else np.float64)


def numerical_vjp(fun, inputs, cotangent, eps=1e-6):
    """<cotangent, d fun / d input_i> for each input by central differences (float64, host).

    Complex numbers count as pairs of reals, as in PyTorch: the product with a complex
    cotangent ``c`` is ``sum(Re(conj(c) * y))``, and a complex input's gradient is
    ``d/dx + i d/dy`` of it (``z = x + iy``)."""
    base = [_wide(x) for x in inputs]
    cot = _wide(cotangent)
    results = []
    for i, arr in enumerate(base):
        grad = np.zeros_like(arr)
        flat = arr.reshape(-1)
        for j in range(flat.size):
            old = flat[j]
            for direction in ((1, 1j) if arr.dtype.kind == "c" else (1,)):
                vals = []
                for step in (eps, -eps):
                    flat[j] = old + step * direction
                    args = [_tensor(a.reshape(x.shape), dtype=a.dtype, device=x.device)
                            for a, x in zip(base, inputs)]
                    with dispatch.grad_enabled(False):
                        y = fun(*args)
                    vals.append(np.sum(np.real(np.conj(cot) * _wide(y))))
                flat[j] = old
                grad.reshape(-1)[j] += direction * (vals[0] - vals[1]) / (2 * eps)
        results.append(grad)
    return results


def gradcheck(fun, inputs, eps=1e-6, atol=1e-5, rtol=1e-4, raise_exception=True):
    """Check ``fun``'s reverse-mode gradients against central differences, in float64.

    ``inputs`` are float tensors (converted to float64) or complex ones (complex128, checked
    against PyTorch's convention ``dL/dx + i dL/dy``). A random cotangent is used, so functions
    with non-scalar outputs are checked fully. Returns True, or raises GradcheckError naming the
    input and the largest difference (False instead if ``raise_exception`` is False).

    >>> import labkit as lk
    >>> lk.gradcheck(lambda z: (z * z.conj() + lk.exp(z)).sum(), [lk.tensor([1 + 2j])])
    True
    """
    xs = []
    for x in inputs:
        kind = "complex128" if isinstance(x, Tensor) and x.dtype.is_complex or \
            isinstance(x, complex) else "float64"
        xs.append(_tensor(x.numpy() if isinstance(x, Tensor) else x, dtype=kind,
                          device=x.device if isinstance(x, Tensor) else None)
                  .requires_grad_(True))
    with dispatch.grad_enabled(True):
        out = fun(*xs)
    draw = generator().standard_normal
    cot = _tensor(draw(out.shape) + 1j * draw(out.shape) if out.dtype.is_complex else
                  draw(out.shape), dtype="complex128" if out.dtype.is_complex else "float64",
                  device=out.device)
    if out._requires_grad:
        analytic = gradients(out, xs, grad_outputs=cot)
    else:
        from ..tensor.creation import zeros_like
        analytic = [zeros_like(x) for x in xs]
    numeric = numerical_vjp(fun, xs, cot, eps)
    for i, (a, n) in enumerate(zip(analytic, numeric)):
        a = np.asarray(a.numpy(), dtype=n.dtype)
        if a.shape != n.shape or not np.allclose(a, n, atol=atol, rtol=rtol, equal_nan=True):
            worst = float(np.max(np.abs(a - n))) if a.shape == n.shape and a.size else float("nan")
            msg = (f"gradcheck: input {i} (shape {n.shape}): analytic and numerical gradients "
                   f"differ (max abs difference {worst:.3g}, atol={atol}, rtol={rtol}).\n"
                   f"analytic:\n{a}\nnumerical:\n{n}")
            if raise_exception:
                raise GradcheckError(msg)
            return False
    return True
