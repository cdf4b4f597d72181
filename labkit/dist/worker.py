"""Sending a function to the workers and running it there.

The caller's function and arguments travel as one cloudpickle payload. Functions defined in a
notebook (``__main__``) or in any module the workers could not import (a test file, a script
next to the notebook) are pickled *by value*, so they need not be importable on the workers;
functions of installed packages and of labkit travel by reference.

On the worker, ``run_task`` unpickles the call, runs it with the worker's device as the
default device (module-level globals that earlier runs assigned stay visible), and returns
``("ok", pickled result)`` or ``("error", details)``: the exception's type, message and
traceback as text (and the exception itself when it pickles), so the caller can raise it with
the worker's rank.
"""
import os
import sys
import sysconfig
import traceback

_INSTALLED = None


def _installed_roots():
    """Folders whose modules every worker imports the same way: the standard library, site
    packages and labkit itself."""
    global _INSTALLED
    if _INSTALLED is None:
        roots = set()
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            path = sysconfig.get_paths().get(key)
            if path:
                roots.add(os.path.realpath(path))
        labkit_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        roots.add(os.path.join(os.path.realpath(labkit_root), "labkit"))
        _INSTALLED = tuple(sorted(roots))
    return _INSTALLED


def _by_value(module_name):
    """True when functions and classes of ``module_name`` must be pickled by value."""
    if module_name in (None, "__main__", "builtins"):
        return False                      # __main__ is by value already; builtins never
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if module is None or path is None:
        return False
    path = os.path.realpath(path)
    return not any(path.startswith(root + os.sep) for root in _installed_roots())


def _user_modules(fn, args):
    names = {getattr(fn, "__module__", None)}
    names.update(type(a).__module__ for a in args)
    return [sys.modules[n] for n in names if _by_value(n)]


def dumps_call(fn, args):
    """Pickle ``(fn, args)`` for the workers (user modules by value). Raises a DistError naming
    what could not be pickled."""
    from .errors import DistError
    from .pickling import dumps
    try:
        return dumps((fn, args), by_value=_user_modules(fn, args))
    except Exception as exc:
        raise DistError(
            f"lk.dist could not send {getattr(fn, '__qualname__', fn)!r} and its arguments to "
            f"the workers: {type(exc).__name__}: {exc}. Everything a launched function uses "
            f"(its arguments, the globals it reads) must be picklable: open files, locks, "
            f"sockets and live widgets are not. Create those inside the function instead."
        ) from None


def _portable(value):
    """Results travel back to the caller: drop autodiff history and bring GPU tensors to the
    host, walking lists, tuples and dicts."""
    from ..tensor.tensor import Tensor
    if isinstance(value, Tensor):
        return Tensor._make(value.numpy(force=True), _cpu()) if value.device.type != "cpu" \
            else value.detach()
    if type(value) in (list, tuple):
        return type(value)(_portable(v) for v in value)
    if type(value) is dict:
        return {k: _portable(v) for k, v in value.items()}
    return value


def _cpu():
    from ..devices import get_device
    return get_device("cpu:0")


def _remote_traceback(exc):
    """The traceback as text, without this module's frame."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


_PREVIOUS_GLOBALS = {}     # module name -> globals of the last function of it run here


def _carry_state(fn):
    """Give a by-value function the module-level state left by earlier runs on this worker.

    A function pickled by value arrives with a fresh globals dict holding only what it reads
    from the caller's module; names it does not bring (e.g. a global an earlier run assigned)
    are filled in from the previous run's globals, so a kept Cluster keeps its workers' state.
    Values sent by the caller win over the worker's.
    """
    g = getattr(fn, "__globals__", None)
    if not isinstance(g, dict):
        return
    name = g.get("__name__")
    module = sys.modules.get(name)
    if module is not None and module.__dict__ is g:
        return                                   # a real module's function: state is there
    previous = _PREVIOUS_GLOBALS.get(name)
    if previous is not None and previous is not g:
        for key, value in previous.items():
            g.setdefault(key, value)
    _PREVIOUS_GLOBALS[name] = g


def run_task(payload):
    """Run one pickled call on this worker (called by the launcher through ipyparallel)."""
    import cloudpickle
    from ..devices import device as use_device
    from . import runtime
    try:
        fn, args = cloudpickle.loads(payload)
        _carry_state(fn)
        with use_device(runtime.device()):
            result = fn(*args)
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            return ("ok", cloudpickle.dumps(_portable(result)))
        except Exception as exc:
            raise TypeError(f"the launched function returned a {type(result).__name__} that "
                            f"cannot be pickled back to the caller ({exc}); return plain "
                            f"values, arrays or tensors") from None
    except BaseException as exc:      # KeyboardInterrupt too: the caller is told, not the kernel
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pickled = cloudpickle.dumps(exc)
        except Exception:
            pickled = None
        return ("error", {"type": type(exc).__name__, "message": str(exc),
                          "traceback": _remote_traceback(exc), "exception": pickled,
                          "interrupted": isinstance(exc, KeyboardInterrupt)})
