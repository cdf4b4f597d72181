"""Modes that wrap another mode (``dispatch.WrappingMode``): every hook reaches the mode below,
so wrapping a mode changes only what the wrapper means to change; the ``get_grad`` hook; modes
switched on and off by two calls (the profiler's)."""
import inspect

import numpy as np
import pytest

import labkit as lk
from labkit.autodiff.batched import VmapMode
from labkit.autodiff.engine import _WriteCheck
from labkit.tensor import dispatch
from labkit.tensor.profiling import ProfilingMode


def _hooks(cls):
    return {name for name, member in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith("_")}


def test_a_wrapping_mode_forwards_every_hook_of_mode():
    missing = _hooks(dispatch.Mode) - set(vars(dispatch.WrappingMode))
    assert not missing, f"WrappingMode does not forward {sorted(missing)} to the mode below"


def test_the_modes_that_wrap_another_derive_from_the_base():
    for cls in (ProfilingMode, _WriteCheck, VmapMode):
        assert issubclass(cls, dispatch.WrappingMode), cls


def _add_in_place(x):
    y = x * 2.0
    y.add_(1.0)
    return y * 3.0


def test_an_in_place_write_under_a_wrapping_mode_is_captured_as_without_it():
    @lk.function
    def plain(x):
        return _add_in_place(x)

    @lk.function
    def wrapped(x):
        with dispatch.push_mode(dispatch.WrappingMode(dispatch.current_mode())):
            return _add_in_place(x)

    x = lk.tensor([1.0, 2.0])
    np.testing.assert_allclose(wrapped(x).numpy(), [9.0, 15.0])
    np.testing.assert_allclose(plain(x).numpy(), [9.0, 15.0])
    # the write rebinds the traced value (capture's write_inplace), no assign node
    ops = [n.op_name for n in wrapped.graph(x, passes=[]).nodes]
    assert ops == [n.op_name for n in plain.graph(x, passes=[]).nodes]
    assert "assign" not in ops


def test_get_grad_is_grad_eagerly():
    w = lk.tensor([1.0], requires_grad=True)
    assert dispatch.current_mode().get_grad(w) is None
    (w * 3.0).sum().backward()
    assert dispatch.current_mode().get_grad(w) is w.grad


def test_get_grad_in_a_trace_reads_a_gradient_from_before_it_when_the_graph_runs():
    w = lk.nn.Parameter(lk.tensor([1.0]))
    seen = []

    @lk.function
    def read():
        with dispatch.push_mode(dispatch.WrappingMode(dispatch.current_mode())):
            g = dispatch.current_mode().get_grad(w)
        seen.append(type(g).__name__)
        return g * 1.0

    w.grad = lk.tensor([0.5])
    assert read().item() == 0.5
    w.grad = lk.tensor([0.25])
    assert read().item() == 0.25           # not the value the trace saw
    assert seen == ["SymbolicTensor"]      # traced once
    w.grad = None
    with pytest.raises(lk.GradError, match="has no .grad now"):
        read()


def test_enter_and_leave_mode_out_of_order():
    base = dispatch.current_mode()
    a = dispatch.WrappingMode(base)
    dispatch.enter_mode(a)
    b = dispatch.WrappingMode(a)
    dispatch.enter_mode(b)
    try:
        dispatch.leave_mode(a)                 # the one below goes first (a profile closed)
        assert dispatch.current_mode() is b and a not in dispatch._state.stack
        assert (lk.ones(2) + 1.0).tolist() == [2.0, 2.0]   # b still reaches eager through a
    finally:
        dispatch.leave_mode(b)
    assert dispatch.current_mode() is base
