"""Dynamically quantized layers (``lk.quantization.quantize_dynamic``) as ONNX's integer ops:
the input quantized per call (DynamicQuantizeLinear), an int8 product accumulated in int32
(MatMulInteger), then scaled back to float: the ops onnxruntime's own dynamic quantization
writes, computing what labkit's kernel computes."""
import numpy as np

from ...graph.node import CAPTURE, CONSTANT
from ..builder import onnx_type
from ..registry import converter


@converter("quantized_linear_dynamic")
def _quantized_linear(b, node, ins):
    x, weight, scale = node.inputs
    xq, x_scale, x_zero = b.emit("DynamicQuantizeLinear", [ins[0]], outputs=3,
                                 name=f"{node.name}/quantize")
    if weight.kind in (CAPTURE, CONSTANT):     # stored transposed, as MatMulInteger reads it
        w_t = b.const(np.ascontiguousarray(b.array_of(weight).T), name=f"{weight.name}_t")
    else:
        w_t = b.emit("Transpose", [ins[1]], perm=[1, 0])
    zero = b.const(np.zeros((), np.int8), name="zero_point")
    acc = b.emit("MatMulInteger", [xq, w_t, x_zero, zero], name=f"{node.name}/matmul")
    total_scale = b.emit("Mul", [x_scale, ins[2]], name=f"{node.name}/scale")
    return b.emit("Mul", [b.emit("Cast", [acc], to=onnx_type(node.dtype)), total_scale],
                  name=node.name)
