"""Global switches, read by the layers that honour them.

>>> import labkit as lk
>>> lk.config.run_functions_eagerly(True)    # every lk.function runs its Python body eagerly
>>> lk.config.run_functions_eagerly(False)
"""

import os

_state = {"functions_eagerly": False, "retrace_warning": 5,
          "debug": os.environ.get("LABKIT_DEBUG") == "1"}
_watchers = {}     # switch name -> [functions called with the new value] (lower layers register)


def _watch(name, fn):
    _watchers.setdefault(name, []).append(fn)


def set_debug(flag=True):
    """Check every eager op: its shape rule against its kernel's output, and its output for NaN
    or Inf that its inputs did not hold (a ``NumericsError`` names the op). Slower; the same as
    starting Python with ``LABKIT_DEBUG=1``, but switchable from a notebook cell.

    >>> import numpy as np
    >>> import labkit as lk
    >>> lk.config.set_debug(True)
    >>> with np.errstate(invalid="ignore"):      # doctest: +ELLIPSIS
    ...     lk.tensor([-1.0]).log()
    Traceback (most recent call last):
    ...
    labkit.errors.NumericsError: LABKIT_DEBUG: op log produced NaN ...
    >>> lk.config.set_debug(False)
    """
    _state["debug"] = bool(flag)
    for fn in _watchers.get("debug", ()):
        fn(_state["debug"])


def debug():
    """Whether the checking mode of ``set_debug`` is on."""
    return _state["debug"]


def run_functions_eagerly(flag=True):
    """Make every ``lk.function`` call its Python function directly (for debugging)."""
    _state["functions_eagerly"] = bool(flag)


def functions_run_eagerly():
    """Whether ``lk.function`` currently runs functions eagerly."""
    return _state["functions_eagerly"]


def set_retrace_warning(count):
    """Warn (naming the calling line) once a function has been traced ``count`` times."""
    _state["retrace_warning"] = int(count)


# ---- graph optimisation passes (see labkit.graph.passes) -------------------------------------
_state.update({"disabled_passes": frozenset(), "passes_version": 0, "cpu_fusion": "cost"})
_pass_names = []     # every declared pass, in order of declaration (``graph_pass`` adds to it)


def register_pass(name):
    """Make ``name`` a pass that ``disable_pass`` / ``enable_pass`` accept (``graph_pass`` in
    ``labkit.graph.passes`` calls this when a pass is declared)."""
    if name not in _pass_names:
        _pass_names.append(name)


def _known_passes(names):
    unknown = [n for n in names if n not in _pass_names]
    if unknown:
        raise ValueError(f"unknown graph pass(es) {unknown}; the passes are {_pass_names}")


def _set_disabled(disabled):
    _state["disabled_passes"] = frozenset(disabled)
    _state["passes_version"] += 1    # every lk.function re-optimises its traces on next call


def disable_pass(*names):
    """Switch graph passes off by name for every ``lk.function`` (e.g. to see a graph without
    fusion): ``lk.config.disable_pass("fusion")``. Functions re-optimise on their next call.

    >>> import labkit as lk
    >>> lk.config.disable_pass("fusion", "memory")
    >>> sorted(lk.config.disabled_passes())
    ['fusion', 'memory']
    >>> lk.config.enable_pass()              # no names: every pass on again
    >>> lk.config.disabled_passes()
    frozenset()
    """
    _known_passes(names)
    _set_disabled(_state["disabled_passes"] | set(names))


def enable_pass(*names):
    """Switch graph passes back on by name (no names: all of them)."""
    _known_passes(names)
    _set_disabled(_state["disabled_passes"] - set(names) if names else ())


def disabled_passes():
    """The names of the graph passes switched off."""
    return _state["disabled_passes"]


def set_cpu_fusion(policy):
    """How elementwise fusion treats CPU chains: ``"cost"`` (default: fuse where one numexpr
    pass is faster than separate NumPy calls, i.e. small tensors), ``"always"`` or ``"never"``."""
    if policy not in ("cost", "always", "never"):
        raise ValueError(f"set_cpu_fusion: policy must be 'cost', 'always' or 'never', "
                         f"not {policy!r}")
    _state["cpu_fusion"] = policy
    _state["passes_version"] += 1
