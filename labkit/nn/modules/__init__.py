"""``torch.nn.modules``' submodule paths for labkit's layers: ``labkit.nn.modules.rnn.LSTM is
labkit.nn.LSTM``.

Programs name layers by these paths, above all to allow them in a weights-only load of a pickled
model (``torch.serialization.safe_globals([torch.nn.modules.rnn.LSTM, ...])``) and in
``isinstance`` checks (``torch.nn.modules.batchnorm._BatchNorm``). Each submodule holds the
classes of the labkit modules PyTorch keeps there (its ``rnn`` is labkit's ``recurrent``, its
``activation`` also holds ``MultiheadAttention``); nothing is defined twice.

>>> import labkit as lk
>>> from labkit.nn.modules.rnn import LSTM
>>> LSTM is lk.nn.LSTM, lk.nn.modules.container.Sequential is lk.nn.Sequential
(True, True)
"""
import importlib
import sys
import types

# PyTorch's submodule -> the labkit.nn modules whose classes it holds
_SOURCES = {
    "activation": ("activation", "attention"), "batchnorm": ("batchnorm",),
    "container": ("container",), "conv": ("conv",), "distance": ("distance",),
    "dropout": ("dropout",), "flatten": ("flatten",), "fold": ("fold",),
    "instancenorm": ("instancenorm",), "linear": ("linear",), "loss": ("loss",),
    "module": ("module",), "normalization": ("normalization",), "padding": ("padding",),
    "pixelshuffle": ("pixelshuffle",), "pooling": ("pooling",), "rnn": ("recurrent",),
    "sparse": ("sparse",), "transformer": ("transformer",), "upsampling": ("upsampling",)}
# classes labkit keeps elsewhere than PyTorch does: PyTorch's submodule -> (labkit module, name)
_MOVED = {"linear": (("attention", "NonDynamicallyQuantizableLinear"),)}


def _classes(source):
    module = importlib.import_module(f"labkit.nn.{source}")
    return {name: obj for name, obj in vars(module).items()
            if isinstance(obj, type) and obj.__module__ == module.__name__}


def _submodule(name):
    module = types.ModuleType(f"{__name__}.{name}", f"PyTorch's torch.nn.modules.{name}: "
                                                    f"labkit's classes under its path.")
    for source in _SOURCES[name]:
        vars(module).update(_classes(source))
    for source, attr in _MOVED.get(name, ()):
        setattr(module, attr, getattr(importlib.import_module(f"labkit.nn.{source}"), attr))
    module.__all__ = sorted(n for n in vars(module) if not n.startswith("__"))
    sys.modules[module.__name__] = module
    return module


for _name in _SOURCES:             # and their public classes here too: torch.nn.modules.Linear
    globals()[_name] = _submodule(_name)
    globals().update((n, getattr(globals()[_name], n)) for n in globals()[_name].__all__
                     if not n.startswith("_"))
del _name
