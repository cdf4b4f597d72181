"""ONNX export: a labkit model or function, captured as a graph, written for serving runtimes.

``lk.onnx.export(model, args, "model.onnx", input_names=[...], dynamic_axes={...})`` has
``torch.onnx.export``'s meaning. Every op of the captured graph maps to ONNX ops through a
converter (``labkit/onnx/ops``); an op without one stops the export with its name and the line
of your code that made it, and ``@lk.onnx.converter("op")`` adds one.
"""
from .dims import OnnxExportError
from .export import export
from .registry import CONVERTERS, converter

__all__ = ["CONVERTERS", "OnnxExportError", "converter", "export"]
