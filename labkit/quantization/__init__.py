"""Post-training quantization, in PyTorch's spelling (``torch.ao.quantization``; also reachable
as ``lk.ao.quantization``): ``quantize_dynamic`` and the QConfigs it takes.

Dynamic quantization stores each Linear's weight as int8 and quantizes its input to uint8 at run
time, per call, from the input's own range; the arithmetic is ONNX's DynamicQuantizeLinear +
MatMulInteger exactly (``labkit.tensor.ops.quantized``), so a model exported to ONNX computes
the same numbers in onnxruntime.

>>> import labkit as lk
>>> net = lk.nn.Sequential(lk.nn.Linear(16, 32), lk.nn.ReLU(), lk.nn.Linear(32, 4))
>>> qnet = lk.quantization.quantize_dynamic(net, {lk.nn.Linear}, dtype=lk.qint8)
>>> x = lk.randn(8, 16)
>>> bool((qnet(x) - net(x)).abs().max() < 0.05)
True
"""
from .qconfig import QConfig, default_dynamic_qconfig, per_channel_dynamic_qconfig
from .quantize import get_default_dynamic_quant_module_mappings, quantize_dynamic

__all__ = ["quantize_dynamic", "QConfig", "default_dynamic_qconfig",
           "per_channel_dynamic_qconfig", "get_default_dynamic_quant_module_mappings"]
