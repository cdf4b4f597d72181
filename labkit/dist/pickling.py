"""Pickling user code for the workers: by value, keeping the user's file names and lines.

Functions from a notebook, a test file or a script next to the notebook are pickled *by value*
(cloudpickle), so the workers need not import them. cloudpickle 3.1.3 and later write
``<dynamic-code>`` as the file name of every code object it pickles by value (it makes payloads
deterministic), so a worker's traceback or warning would no longer name the user's file. Here
code objects travel whole through ``marshal`` instead, which keeps ``co_filename``, the line
table and nested code exactly as the caller's Python compiled them (callers and workers run the
same Python, as cloudpickle already requires).
"""
import io
import marshal
import types
from collections import ChainMap


def _code_reduce(code):
    return marshal.loads, (marshal.dumps(code),)


def _pickler_class():
    import cloudpickle

    class Pickler(cloudpickle.Pickler):
        dispatch_table = ChainMap({types.CodeType: _code_reduce}, cloudpickle.Pickler.dispatch_table)
    return Pickler


_PICKLER = None


def dumps(obj, by_value=()):
    """``obj`` pickled with cloudpickle, the modules ``by_value`` (module objects) pickled by
    value, and every code object keeping its file name and line numbers."""
    global _PICKLER
    import cloudpickle
    if _PICKLER is None:
        _PICKLER = _pickler_class()
    for m in by_value:
        cloudpickle.register_pickle_by_value(m)
    try:
        buffer = io.BytesIO()
        _PICKLER(buffer).dump(obj)
        return buffer.getvalue()
    finally:
        for m in by_value:
            cloudpickle.unregister_pickle_by_value(m)
