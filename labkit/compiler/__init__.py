"""``lk.compile`` and ``lk.compiler``: PyTorch's ``torch.compile`` and ``torch.compiler``.

``lk.compile(fn)`` captures a function with ``lk.function``'s machinery and never refuses to
run it: what a graph cannot hold is a graph break (that call runs eagerly, the reason and line
recorded), every Python value the trace read is guarded, and a compiled model trains through
the eager tape (``labkit.graph.compiled``, ``labkit.graph.joint``). ``lk.compile(model)``
returns an ``OptimizedModule`` (``labkit.nn.compiled``); ``model.compile()`` compiles in place.

>>> import labkit as lk
>>> @lk.compile(fullgraph=True)
... def f(x):
...     return (x * 2.0).relu()
>>> f(lk.tensor([-1.0, 1.0])).tolist()
[0.0, 2.0]
"""
from ..graph.compiled import Compiled, check_options, disable, is_compiling, reset
from ..nn.compiled import OptimizedModule, compile_module
from ..nn.module import Module

__all__ = ["compile", "disable", "reset", "is_compiling", "OptimizedModule"]


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None,
            options=None, disable=False):
    """``torch.compile``'s spelling: ``lk.compile(fn)``, ``@lk.compile``,
    ``@lk.compile(fullgraph=True)``, ``lk.compile(model)``.

    - a function becomes a ``Compiled`` function (``.traces``, ``.breaks``, ``.explain()``);
    - an ``nn.Module`` becomes an ``OptimizedModule`` wrapping it (``_orig_mod``, state_dict
      keys prefixed ``_orig_mod.``);
    - ``fullgraph=True``: a graph break raises ``GraphBreak`` naming the line, instead of
      running that call eagerly;
    - ``backend`` / ``mode`` / ``options`` / ``dynamic``: PyTorch's values are accepted and
      checked as PyTorch checks them; ``backend="eager"`` / ``"aot_eager"`` skip labkit's graph
      optimisation passes, the others change nothing further;
    - ``disable=True`` returns ``model`` as it is.
    """
    backend = check_options(backend, mode, options, dynamic)
    options = dict(fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                   options=options)
    if model is None:
        return lambda m: compile(m, disable=disable, **options)
    if disable:
        return model
    if isinstance(model, Module):
        return compile_module(model, **options)
    if not callable(model):
        raise TypeError(f"lk.compile: expected a function or an nn.Module, got "
                        f"{type(model).__name__}")
    return Compiled(model, None, fullgraph, backend, mode, options["options"], dynamic)
