"""Utilities for models, as ``torch.nn.utils``: gradient clipping, parameters as one vector, and
``rnn`` (padded and packed sequences).

>>> import labkit as lk
>>> w = lk.nn.Parameter(lk.tensor([3.0, 4.0]))
>>> (w * w).sum().backward()                     # grad (6, 8), norm 10
>>> round(lk.nn.utils.clip_grad_norm_([w], max_norm=1.0).item(), 4)
10.0
>>> [round(v, 4) for v in w.grad.tolist()]
[0.6, 0.8]
"""
from . import rnn
from .clip_grad import (clip_grad_norm, clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_,
                        get_total_norm)
from .convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["rnn", "clip_grad_norm_", "clip_grad_norm", "clip_grad_value_",
           "clip_grads_with_norm_", "get_total_norm", "parameters_to_vector",
           "vector_to_parameters"]
