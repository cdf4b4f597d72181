"""``lk.fft`` beyond the op harness (tests/tensor/cases/fft.py checks every transform's values
and gradients against PyTorch, finite differences, vmap and capture): dtypes, frequencies and
shifts, empty batches, errors, and a transform used as PyTorch code uses it.
"""
import numpy as np
import pytest
import torch

import labkit as lk


@pytest.mark.parametrize("dtype, expected", [(lk.float32, lk.complex64),
                                             (lk.float64, lk.complex128),
                                             (lk.int64, lk.complex64),
                                             (lk.complex128, lk.complex128)])
def test_result_dtypes_follow_pytorch(dtype, expected):
    x = lk.ones(4, dtype=dtype)
    assert lk.fft.fft(x).dtype is expected
    assert str(torch.fft.fft(torch.ones(4, dtype=getattr(torch, dtype.name))).dtype) == \
        f"torch.{expected.name}"
    if not dtype.is_complex:
        assert lk.fft.rfft(x).dtype is expected
        assert lk.fft.irfft(lk.fft.rfft(x)).dtype is expected.to_real()


@pytest.mark.parametrize("n, d, dtype", [(1, 1.0, None), (5, 0.1, None), (8, 2.5, "float64")])
def test_frequencies_match_pytorch(n, d, dtype):
    kw = {} if dtype is None else {"dtype": getattr(lk, dtype)}
    tkw = {} if dtype is None else {"dtype": getattr(torch, dtype)}
    for name in ("fftfreq", "rfftfreq"):
        got = getattr(lk.fft, name)(n, d, **kw)
        expected = getattr(torch.fft, name)(n, d, **tkw).numpy()
        assert got.dtype.np == expected.dtype
        np.testing.assert_array_equal(got.numpy(), expected)


@pytest.mark.parametrize("dim", [None, 0, (1,), (-1, 0)])
def test_shifts_match_pytorch_and_undo_each_other(dim):
    a = np.arange(20).reshape(4, 5)
    shifted = lk.fft.fftshift(lk.tensor(a), dim=dim)
    np.testing.assert_array_equal(shifted.numpy(),
                                  torch.fft.fftshift(torch.tensor(a), dim=dim).numpy())
    np.testing.assert_array_equal(lk.fft.ifftshift(shifted, dim=dim).numpy(), a)


def test_an_empty_batch_of_transforms():
    x = lk.zeros(0, 6, dtype=lk.float64)
    assert lk.fft.fft(x).shape == (0, 6)
    assert lk.fft.rfft(x).shape == (0, 4)
    assert lk.fft.irfft(lk.fft.rfft(x), n=6).shape == (0, 6)


def test_circular_convolution_by_products_of_spectra_with_gradients():
    """What spectral layers (FNO, long convolutions) do: the convolution theorem, and its
    gradient with respect to the kernel against PyTorch."""
    rng = np.random.default_rng(0)
    signal, kernel = rng.standard_normal((2, 16)), rng.standard_normal(16)

    def conv(fft, s, k):
        return fft.irfft(fft.rfft(s) * fft.rfft(k), n=16)

    k = lk.tensor(kernel, requires_grad=True)
    out = conv(lk.fft, lk.tensor(signal), k)
    direct = np.stack([[sum(row[j] * kernel[(i - j) % 16] for j in range(16))
                        for i in range(16)] for row in signal])
    np.testing.assert_allclose(out.numpy(), direct, atol=1e-12)
    (out ** 2).sum().backward()
    tk = torch.tensor(kernel, requires_grad=True)
    (conv(torch.fft, torch.tensor(signal), tk) ** 2).sum().backward()
    np.testing.assert_allclose(k.grad.numpy(), tk.grad.numpy(), atol=1e-10)


def test_captured_training_step_through_a_spectrum_equals_eager():
    rng = np.random.default_rng(1)
    x = lk.tensor(rng.standard_normal((3, 8)))

    def step(w):
        spectrum = lk.fft.rfft(x, norm="ortho") * lk.complex(w, lk.zeros_like(w))
        loss = (lk.fft.irfft(spectrum, n=8, norm="ortho") - x).abs().mean()
        return loss, lk.grad(lambda w: (lk.fft.irfft(
            lk.fft.rfft(x, norm="ortho") * lk.complex(w, lk.zeros_like(w)), n=8,
            norm="ortho") - x).abs().mean())(w)

    w = lk.tensor(rng.standard_normal(5))
    eager = step(w)
    captured = lk.function(step)(w)
    for e, c in zip(eager, captured):
        np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=1e-12)


@pytest.mark.parametrize("call, kind, match", [
    (lambda: lk.fft.fft(lk.ones(4), norm="unitary"), ValueError, "normalization mode"),
    (lambda: lk.fft.rfft(lk.ones(4) * 1j), lk.DTypeError, "real input"),
    (lambda: lk.fft.irfft(lk.ones(1) * 1j), lk.ShapeError, "number of data points"),
    (lambda: lk.fft.fft(lk.ones(4), n=0), lk.ShapeError, "number of data points"),
    (lambda: lk.fft.fft(lk.ones(4, dtype=lk.float16)), lk.DTypeError, "float16"),
    (lambda: lk.fft.fftn(lk.ones(2, 2), dim=(0, -2)), lk.ShapeError, "twice"),
    (lambda: lk.fft.fft(lk.tensor(1.0)), lk.ShapeError, "at least one dimension"),
    (lambda: lk.fft.fft2(lk.ones(2, 2), s=(2,)), lk.ShapeError, "one length"),
])
def test_errors_say_what_to_do(call, kind, match):
    with pytest.raises(kind, match=match):
        call()
