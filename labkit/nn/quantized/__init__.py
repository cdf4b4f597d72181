"""Quantized layers, in PyTorch's spelling (``torch.ao.nn.quantized``): so far the dynamically
quantized ``dynamic.Linear`` that ``lk.quantization.quantize_dynamic`` puts in a model."""
from . import dynamic

__all__ = ["dynamic"]
