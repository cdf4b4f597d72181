"""Steady-state calls leave no reference cycles: results and temporaries are freed by reference
counting the moment they are dropped, not whenever the cyclic garbage collector next runs (a
captured 2048x2048 matmul called in a loop once held ~30 results, 500 MB, that way)."""
import gc
import weakref

import numpy as np

import labkit as lk
from labkit import nn


def cyclic_garbage(fn, calls=5):
    """How many objects ``calls`` calls of ``fn`` leave that only the cyclic GC can free."""
    for _ in range(2):          # warm up: traces and plans are made once and kept
        fn()
    gc.collect()
    gc.disable()
    try:
        for _ in range(calls):
            fn()
        return gc.collect()
    finally:
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
