"""Nothing is fixed silently: a trace reports what it froze (labkit/graph/frozen.py)."""
import inspect
import random
import warnings

import numpy as np
import pytest

import labkit as lk
from labkit import FrozenValueWarning


def _line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _call_recording(f, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = f(*args)
    return out, [w for w in caught if issubclass(w.category, FrozenValueWarning)]


def test_numpy_noise_is_reported_with_the_line_that_made_the_constant():
    def body(x):
        noise = np.random.rand(3).astype(np.float32)
        return x + lk.tensor(noise)

    f = lk.function(body)
    first, caught = _call_recording(f, lk.zeros(3))
    assert len(caught) == 1
    text = str(caught[0].message)
    assert "NumPy's global random generator" in text and "lk.randn" in text
    assert f"{__file__}:{_line_of(body, 'lk.tensor(noise)')}" in text
    assert caught[0].filename == __file__          # the warning points at the call of f
    kinds = [v.kind for v in f.traces[0].frozen]
    assert kinds == ["random", "constant"]
    assert f.traces[0].frozen[1].source == (__file__, _line_of(body, "lk.tensor(noise)"))
    assert "fixed at trace time" in repr(f.traces[0])
    # the second call replays the trace (same numbers) and does not warn again
    second, caught = _call_recording(f, lk.zeros(3))
    assert caught == [] and np.array_equal(first.numpy(), second.numpy())


def test_python_random_steering_the_trace_is_reported():
    def body(x):
        return x * 2.0 if random.random() < 0.5 else x * 3.0

    f = lk.function(body)
    _, caught = _call_recording(f, lk.ones(2))
    assert len(caught) == 1
    assert "Python's random module" in str(caught[0].message)
    assert "steered Python code" in str(caught[0].message)


@pytest.mark.parametrize("how, read", [
    ("float(t)", lambda t: float(t)),
    ("item()", lambda t: t.item()),
    ("numpy()", lambda t: t.numpy()[()]),
    ("np.asarray(t)", lambda t: np.asarray(t)[()]),
    ("bool(t)", lambda t: 2.0 if t else 1.0),
])
def test_reading_an_outside_tensor_into_python_is_reported(how, read):
    scale = lk.tensor(3.0)

    def body(x):
        return x * read(scale)

    f = lk.function(body)
    out, caught = _call_recording(f, lk.ones(2))
    assert len(caught) == 1
    text = str(caught[0].message)
    assert how in text and "from outside the function" in text and "shape=()" in text
    [frozen] = f.traces[0].frozen
    assert frozen.kind == "read" and frozen.source[0] == __file__
    # what the warning is about: the trace keeps the value it read
    scale.copy_(lk.tensor(5.0))
    assert np.array_equal(f(lk.ones(2)).numpy(), out.numpy())


def test_labkit_draws_and_captured_tensors_fix_nothing():
    weight = lk.tensor([1.0, 2.0])

    def body(x):
        return x * weight + lk.randn(2) + x.sum()

    f = lk.function(body)
    _, caught = _call_recording(f, lk.ones(2))
    assert caught == [] and f.traces[0].frozen == []
    assert "fixed" not in repr(f.traces[0])


def test_constants_from_literals_are_listed_without_a_warning():
    def body(x):
        local = lk.tensor(4.0)
        return x + lk.tensor([1.0, 2.0]) * local.item()   # reading a value made here is no loss

    f = lk.function(body)
    out, caught = _call_recording(f, lk.zeros(2))
    assert caught == []
    assert [v.kind for v in f.traces[0].frozen] == ["constant"]   # `local` reached no op
    np.testing.assert_array_equal(out.numpy(), [4.0, 8.0])


def test_a_symbolic_value_read_into_python_still_raises():
    f = lk.function(lambda x: x * float(x.sum()))
    with pytest.raises(lk.TracingError, match="needs a concrete value"):
        f(lk.ones(2))
