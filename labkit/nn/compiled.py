"""``lk.compile(model)``: the module wrapper PyTorch's ``torch.compile`` returns, and
``Module.compile()`` in place.

``OptimizedModule`` holds the model as its submodule ``_orig_mod`` (so ``state_dict()`` keys
start with ``_orig_mod.`` exactly as PyTorch's do, and ``parameters()`` are the model's own
objects); its ``forward`` is the compiled call of the model (``labkit.graph.compiled``), with
``.traces``, ``.breaks`` and ``.explain()``. Attributes it does not have are the model's
(``compiled.config``, ``compiled.configure_optimizers(...)``); ``train()`` / ``eval()`` reach
the model as they reach any submodule.

>>> import labkit as lk
>>> model = lk.nn.Sequential(lk.nn.Linear(4, 8), lk.nn.ReLU(), lk.nn.Linear(8, 1))
>>> fast = lk.compile(model)
>>> type(fast).__name__, list(fast.state_dict())[:2]
('OptimizedModule', ['_orig_mod.0.weight', '_orig_mod.0.bias'])
>>> fast._orig_mod is model, next(fast.parameters()) is model[0].weight
(True, True)
>>> loss = fast(lk.ones(2, 4)).sum()
>>> loss.backward(); model[0].weight.grad.shape
(8, 4)
>>> _ = fast.eval(); model.training
False
"""
import inspect

from ..graph.compiled import Compiled, check_options
from .module import Module


class OptimizedModule(Module):
    """A module compiled by ``lk.compile`` (``torch._dynamo.eval_frame.OptimizedModule``)."""

    def __init__(self, mod, compiled):
        super().__init__()
        self._modules["_orig_mod"] = mod   # registered as is: its parameters keep their names
        self.forward = compiled
        self.training = mod.training

    def __getattr__(self, name):
        if name == "_orig_mod" or "_modules" not in self.__dict__:
            return super().__getattr__(name)
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)

    def __reduce_ex__(self, protocol):
        raise TypeError("an lk.compile'd module is not pickled: save model._orig_mod (or its "
                        "state_dict()) and compile it again after loading")


def compile_calls(module, fullgraph=False, dynamic=None, backend="inductor", mode=None,
                  options=None, disable=False):
    """The compiled call of ``module`` (hooks included), as ``lk.compile`` makes it (None
    with ``disable=True``)."""
    backend = check_options(backend, mode, options, dynamic)
    if disable:
        return None

    def call(*args, **kwargs):
        return module._call_impl(args, kwargs)
    compiled = Compiled(call, type(module).__name__, fullgraph, backend, mode, options,
                        dynamic)
    try:
        compiled._params = list(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        pass
    return compiled


def compile_module(module, **options):
    """``lk.compile(module)``: an ``OptimizedModule`` around it."""
    return OptimizedModule(module, compile_calls(module, **options))
