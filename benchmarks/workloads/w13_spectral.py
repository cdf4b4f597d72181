"""W13 spectral layer: a Fourier-neural-operator-style convolution in the frequency domain
(``rfft`` of the signals, a product with learned complex weights per channel and frequency,
``irfft`` back), trained on a Gaussian likelihood (``-Normal(y, exp(log_scale)).log_prob(target)
.mean()``, arguments validated as PyTorch does by default): backward through irfft, the complex
product, rfft and the distribution, then SGD. Batch 32, 16 channels of 256 samples, float32.

There is no hand-written NumPy version: its backward through the one-sided spectra is the
subtle part this workload times.
"""
import numpy as np

from ..common import Registry, register_labkit_trainers, torch_trainer

NAME = "W13"
TITLE = ("spectral layer (rfft, complex weights per channel and frequency, irfft) with a "
         "Normal log-likelihood, batch 32 x 16 channels x 256, backward, SGD")
UNIT = "ms/step"
BATCH, CHANNELS, LENGTH = 32, 16, 256
FREQS = LENGTH // 2 + 1
IMPLS = Registry()


def data(rng):
    return {"w_re": (rng.standard_normal((CHANNELS, FREQS)) * 0.5).astype(np.float32),
            "w_im": (rng.standard_normal((CHANNELS, FREQS)) * 0.5).astype(np.float32),
            "log_scale": np.zeros((), np.float32),
            "x": rng.standard_normal((BATCH, CHANNELS, LENGTH)).astype(np.float32),
            "target": rng.standard_normal((BATCH, CHANNELS, LENGTH)).astype(np.float32)}


def metric(seconds_per_step):
    return seconds_per_step * 1e3


def params(d):
    return [d["w_re"], d["w_im"], d["log_scale"]]


def _labkit_loss(w_re, w_im, log_scale, x, target):
    import labkit as lk
    y = lk.fft.irfft(lk.fft.rfft(x) * lk.complex(w_re, w_im), n=LENGTH)
    return -lk.distributions.Normal(y, log_scale.exp()).log_prob(target).mean()


register_labkit_trainers(IMPLS, params, ("x", "target"), _labkit_loss)


def _torch_loss(w_re, w_im, log_scale, x, target):
    import torch
    y = torch.fft.irfft(torch.fft.rfft(x) * torch.complex(w_re, w_im), n=LENGTH)
    return -torch.distributions.Normal(y, log_scale.exp()).log_prob(target).mean()


@IMPLS.register("torch")
def torch_impl(d, device):
    return torch_trainer(params(d), [d["x"], d["target"]], _torch_loss, device)
