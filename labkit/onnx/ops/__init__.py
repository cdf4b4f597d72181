"""The converters of labkit's ops to ONNX, one module per family (registered on import)."""
from . import control_flow, elementwise, index, nn, reduce, shape  # noqa: F401
from . import patterns  # noqa: F401  (after shape: wraps its converters)
from . import quantized  # noqa: F401
