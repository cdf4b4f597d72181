"""Dynamically quantized layers (PyTorch's ``torch.ao.nn.quantized.dynamic``): int8 weights,
inputs quantized to uint8 at run time, float in and float out."""
from .linear import QSCHEMES, Linear, quantize_weight

__all__ = ["Linear", "quantize_weight", "QSCHEMES"]
