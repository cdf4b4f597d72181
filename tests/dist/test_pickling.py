"""User code travels to the workers by value and keeps its file name and line numbers."""
import sys

import cloudpickle

from labkit.dist.pickling import dumps


def _helper(x):
    def inner(y):
        return y + x
    return inner


def _user_function(x):
    return _helper(x)(1) / 0


def test_by_value_code_keeps_file_names_and_lines_whatever_cloudpickle_writes():
    module = sys.modules[__name__]
    payload = dumps(_user_function, by_value=[module])
    fn = cloudpickle.loads(payload)
    assert fn is not _user_function                 # it travelled by value, not by reference
    assert fn.__code__.co_filename == __file__
    assert fn.__code__.co_firstlineno == _user_function.__code__.co_firstlineno
    helper = fn.__globals__["_helper"]
    assert helper.__code__.co_filename == __file__
    nested = [c for c in helper.__code__.co_consts if hasattr(c, "co_filename")]
    assert nested and all(c.co_filename == __file__ for c in nested)
    try:
        fn(2)
    except ZeroDivisionError as exc:
        tb = exc.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        assert tb.tb_frame.f_code.co_filename == __file__
    else:
        raise AssertionError("the pickled function did not run its body")


def test_modules_registered_by_value_are_unregistered_after_pickling():
    module = sys.modules[__name__]
    dumps(_user_function, by_value=[module])
    assert cloudpickle.loads(cloudpickle.dumps(_user_function)) is _user_function
