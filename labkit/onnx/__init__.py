"""ONNX export: a labkit model or function, captured as a graph, written for serving runtimes.

``lk.onnx.export(model, args, "model.onnx", input_names=[...], dynamic_axes={...})`` has
``torch.onnx.export``'s meaning. Every op of the captured graph maps to ONNX ops through a
converter (``labkit/onnx/ops``); an op without one stops the export with its name and the line
of your code that made it, and ``@lk.onnx.converter("op")`` adds one.

``import labkit.onnx`` works without the onnx package (as ``import torch.onnx`` does); exporting
then says what to install.
"""
from .dims import OnnxExportError
from .registry import CONVERTERS, converter

try:
    from .export import export
except ModuleNotFoundError as _missing:
    if _missing.name not in ("onnx", "onnxruntime"):
        raise
    _MISSING = _missing.name

    def export(model, args, f, *rest, **kwargs):
        """``torch.onnx.export``'s spelling; needs the onnx package, which is not installed."""
        raise ModuleNotFoundError(
            f"lk.onnx.export needs the {_MISSING} package, which is not installed here: "
            f"pip install onnx onnxruntime (labkit's onnx extra: pip install 'labkit[onnx]'; "
            f"scripts/install onnx in a labkit checkout)", name=_MISSING)

__all__ = ["CONVERTERS", "OnnxExportError", "converter", "export"]
