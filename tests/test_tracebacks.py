"""Tracebacks show the user's code: labkit's internal frames are left out of the traceback of an
error that leaves labkit (as JAX filters its own), for each common mistake; the message names
the op or loss the user called; ``lk.config.set_traceback_filtering("off")`` shows them again."""
import os
import sys
import traceback

import pytest

import labkit as lk
import labkit.nn.functional as F
from labkit.errors import FILTERED_NOTE

LABKIT_DIR = os.path.dirname(os.path.abspath(lk.__file__)) + os.sep
HERE = os.path.abspath(__file__)


def caught(fn):
    """The exception ``fn()`` raises, and its traceback as Python prints it."""
    try:
        fn()
    except Exception as e:      # noqa: BLE001 - what the user would see
        return e, "".join(traceback.format_exception(e))
    pytest.fail(f"{fn.__name__} raised nothing")


def assert_shows_user_line(text, code):
    """No frame of labkit's files; this file's line holding ``code`` is shown, with its
    line number."""
    files = [line for line in text.splitlines() if line.strip().startswith("File ")]
    assert not [f for f in files if LABKIT_DIR in f], text
    with open(HERE, encoding="utf-8") as f:
        number = next(i for i, line in enumerate(f, 1) if code in line and "assert" not in line
                      and "caught(" not in line)
    assert f'File "{HERE}", line {number}' in text, text
    assert code in text, text
    assert FILTERED_NOTE in text


def test_matmul_shape():
    def mistake():
        a, b = lk.ones(2, 3), lk.ones(2, 3)
        return a @ b                      # the inner dimensions differ
    e, text = caught(mistake)
    assert isinstance(e, lk.ShapeError) and str(e).startswith("matmul: (2, 3) @ (2, 3)")
    assert_shows_user_line(text, "return a @ b")


def test_cross_entropy_with_float_labels_names_cross_entropy():
    def mistake():
        logits = lk.randn(4, 3, requires_grad=True)
        labels = lk.tensor([0.0, 1.0, 2.0, 1.0])
        return F.cross_entropy(logits, labels)     # float class labels
    e, text = caught(mistake)
    assert isinstance(e, lk.DTypeError)
    assert str(e).startswith("cross_entropy: target must hold integer class indices")
    assert "nll_loss" not in str(e) and "target.long()" in str(e)
    assert_shows_user_line(text, "return F.cross_entropy(logits, labels)")
    # the module form names the loss too, and hides Module.__call__'s frames
    e, text = caught(lambda: lk.nn.CrossEntropyLoss()(lk.randn(4, 3), lk.tensor([0.0, 1, 2, 1])))
    assert str(e).startswith("cross_entropy:") and LABKIT_DIR not in text


def test_backward_twice():
    def mistake():
        x = lk.ones(3, requires_grad=True)
        y = (x * x).sum()
        y.backward()
        y.backward()                      # the saved values were freed by the first
    e, text = caught(mistake)
    assert isinstance(e, lk.GradError) and "retain_graph=True" in str(e)
    number = text.count("y.backward()")
    assert number == 1, text              # the second call's line, once
    assert_shows_user_line(text, "y.backward()                      # the saved")


def test_device_mismatch():
    lk.devices.configure(cpus=2)
    try:
        def mistake():
            a, b = lk.ones(3, device="cpu:0"), lk.ones(3, device="cpu:1")
            return a + b                  # two devices
        e, text = caught(mistake)
    finally:
        lk.devices.configure(cpus=1)
    assert isinstance(e, lk.DeviceError) and "different devices" in str(e)
    assert_shows_user_line(text, "return a + b")


def test_python_if_on_a_traced_value_names_the_line():
    @lk.function
    def f(x):
        if x.sum() > 0:                   # a Python if on a symbolic tensor
            return x
        return -x

    e, text = caught(lambda: f(lk.ones(3)))
    assert isinstance(e, lk.TracingError) and "lk.cond" in str(e)
    assert f"The line: {HERE}:" in str(e) and "if x.sum() > 0:" in str(e)
    assert_shows_user_line(text, "if x.sum() > 0:                   # a Python if")


def test_an_error_in_the_users_forward_shows_the_forward_not_module_call():
    class Net(lk.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lk.nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(x) @ x         # (5, 2) @ (5, 4)

    e, text = caught(lambda: Net()(lk.ones(5, 4)))
    assert isinstance(e, lk.ShapeError)
    assert_shows_user_line(text, "return self.fc(x) @ x")


def test_filtering_off_shows_labkits_frames():
    assert lk.config.traceback_filtering() == "on"
    lk.config.set_traceback_filtering("off")
    try:
        e, text = caught(lambda: lk.ones(2, 3) @ lk.ones(2, 3))
    finally:
        lk.config.set_traceback_filtering("on")
    assert LABKIT_DIR in text and "eager.py" in text and FILTERED_NOTE not in text
    with pytest.raises(ValueError, match="'on' or 'off'"):
        lk.config.set_traceback_filtering("sometimes")


def test_an_error_labkit_catches_itself_keeps_working():
    # labkit's own except clauses still see the exception types they expect
    with pytest.raises(lk.ShapeError):
        lk.ones(2, 3).reshape(4, 4)
    assert lk.ones(2, 3).reshape(3, 2).shape == (3, 2)
    assert sys.exc_info() == (None, None, None)
