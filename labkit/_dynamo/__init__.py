"""``torch._dynamo``'s spellings that training scripts use: ``reset()``, ``config``
(``cache_size_limit``, ``recompile_limit``), ``explain``, ``list_backends``, ``disable``,
``exc`` and ``OptimizedModule``.

>>> import labkit as lk
>>> lk._dynamo.config.cache_size_limit
8
>>> out = lk._dynamo.explain(lambda x: x * 2.0 if x.sum() > 0 else x)(lk.ones(2))
>>> out.graph_count, out.graph_break_count
(0, 1)
"""
from .. import config as _config
from ..graph.compiled import (LISTED_BACKENDS, Compiled, disable,
                               is_compiling, reset)
from ..nn.compiled import OptimizedModule
from . import exc

__all__ = ["reset", "config", "explain", "list_backends", "disable", "is_compiling", "exc",
           "OptimizedModule"]


class _Config:
    """``torch._dynamo.config``: the settings labkit has (``cache_size_limit``, alias
    ``recompile_limit``); others are kept but change nothing."""

    @property
    def cache_size_limit(self):
        return _config._state["cache_size_limit"]

    @cache_size_limit.setter
    def cache_size_limit(self, value):
        _config.set_cache_size_limit(value)

    recompile_limit = cache_size_limit


config = _Config()


def explain(fn, *args, **kwargs):
    """``lk._dynamo.explain(fn)(*args)``: compile ``fn`` afresh, call it with ``args`` and say
    what was captured and where it broke (an ``Explanation``: ``graph_count``,
    ``graph_break_count``, ``break_reasons``, ``ops_per_graph``, ``out_guards``)."""
    target = fn.fn if isinstance(fn, Compiled) else fn

    def run(*a, **k):
        compiled = Compiled(target)
        compiled(*a, **k)
        return compiled.explain()
    return run(*args, **kwargs) if args or kwargs else run


def list_backends(exclude_tags=("debug", "experimental")):
    """The backend names ``lk.compile`` accepts without an error, as PyTorch lists them."""
    return list(LISTED_BACKENDS)
