"""``torch.serialization``'s spellings: which classes a weights-only ``lk.load`` may build.

``lk.load`` (``weights_only=True``, the default, as PyTorch 2.6+) reads a pickled object (a
whole module saved with ``lk.save(model, f)``) with a restricted unpickler: it builds only the
*safe globals* (tensors, ``OrderedDict`` and a few more by default, plus what you allow here) and
never imports or calls anything else; a class that is not allowed is named in the error.

>>> import io, labkit as lk
>>> buffer = io.BytesIO()
>>> lk.save(lk.nn.Sequential(lk.nn.Linear(2, 2), lk.nn.ReLU()), buffer)
>>> allowed = [lk.nn.modules.container.Sequential, lk.nn.modules.linear.Linear,
...            lk.nn.modules.activation.ReLU]
>>> with lk.serialization.safe_globals(allowed):
...     model = lk.load(io.BytesIO(buffer.getvalue()))
>>> type(model).__name__
'Sequential'
"""
from .tensor.checkpoint import load, save
from .tensor.pickled import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals

__all__ = ["add_safe_globals", "clear_safe_globals", "get_safe_globals", "safe_globals", "load",
           "save"]
