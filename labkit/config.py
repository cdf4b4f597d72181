"""Global switches, read by the layers that honour them.

>>> import labkit as lk
>>> lk.config.run_functions_eagerly(True)    # every lk.function runs its Python body eagerly
>>> lk.config.run_functions_eagerly(False)
"""

_state = {"functions_eagerly": False, "retrace_warning": 5}


def run_functions_eagerly(flag=True):
    """Make every ``lk.function`` call its Python function directly (for debugging)."""
    _state["functions_eagerly"] = bool(flag)


def functions_run_eagerly():
    """Whether ``lk.function`` currently runs functions eagerly."""
    return _state["functions_eagerly"]


def set_retrace_warning(count):
    """Warn (naming the calling line) once a function has been traced ``count`` times."""
    _state["retrace_warning"] = int(count)
