"""Steady-state calls leave no reference cycles: results and temporaries are freed by reference
counting the moment they are dropped, not whenever the cyclic garbage collector next runs (a
captured 2048x2048 matmul called in a loop once held ~30 results, 500 MB, that way)."""
import gc
import os
import types
import weakref

import numpy as np

import labkit as lk
from labkit import nn


def _labkit_object(obj):
    """Whether ``obj`` belongs to labkit: an instance of a labkit class, or a frame or function
    of labkit's code (a cycle labkit makes holds at least one of those)."""
    if type(obj).__module__.startswith("labkit"):
        return True
    code = obj.f_code if isinstance(obj, types.FrameType) else \
        obj.__code__ if isinstance(obj, types.FunctionType) else None
    return code is not None and f"{os.sep}labkit{os.sep}" in code.co_filename


def cyclic_garbage(fn, calls=5):
    """How many labkit objects ``calls`` calls of ``fn`` leave that only the cyclic GC can free
    (garbage of other threads, such as a cluster's client threads left by earlier tests, is not
    counted)."""
    for _ in range(2):          # warm up: traces and plans are made once and kept
        fn()
    gc.collect()
    gc.disable()
    try:
        for _ in range(calls):
            fn()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        found = sum(1 for obj in gc.garbage if _labkit_object(obj))
        gc.garbage.clear()
        return found
    finally:
        gc.set_debug(0)
        gc.enable()


def _training_step():
    lk.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = lk.optim.SGD(model.parameters(), lr=0.1)
    x, y = lk.randn(4, 8), lk.tensor([0, 1, 2, 0])

    def step(x, y):
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    return step, x, y


def test_an_eager_training_step_leaves_no_cycles():
    step, x, y = _training_step()
    assert cyclic_garbage(lambda: step(x, y)) == 0


def test_a_captured_training_step_leaves_no_cycles():
    step, x, y = _training_step()
    f = lk.function(step)
    assert cyclic_garbage(lambda: f(x, y)) == 0


def test_a_captured_result_is_freed_when_dropped():
    f = lk.function(lambda a, b: {"out": [a @ b]})
    a = lk.ones(64, 64)
    f(a, a)
    gc.disable()
    try:
        result = f(a, a)["out"][0]
        ref = weakref.ref(result.numpy())      # the array behind the result
        del result
        assert ref() is None
    finally:
        gc.enable()


def test_eager_control_flow_leaves_no_cycles():
    def body(c, x):
        return c + x, c * x
    xs = lk.tensor(np.ones((5, 3), np.float32))
    assert cyclic_garbage(lambda: lk.scan(body, lk.zeros(3), xs)) == 0
    assert cyclic_garbage(lambda: lk.while_loop(lambda i: i < 5, lambda i: (i + 1,),
                                                (lk.tensor(0),))) == 0
