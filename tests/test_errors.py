"""Every mistake a person makes at the notebook gets a labkit error that says what, where and how
to fix it: the error CLASS, and a MESSAGE naming the op, the shapes / dtypes / devices involved
and a remedy. Also: a failing op leaves no trace, and LABKIT_DEBUG=1 names the op making a NaN.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import labkit as lk
from labkit.devices import gpu_count

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _message(cls, fn, *args, **kwargs):
    """The message of the ``cls`` error that ``fn(*args, **kwargs)`` raises."""
    with pytest.raises(cls) as info:
        fn(*args, **kwargs)
    assert isinstance(info.value, lk.LabkitError)
    return str(info.value)


def _names(msg, *parts):
    missing = [p for p in parts if p not in msg]
    assert not missing, f"message lacks {missing}: {msg}"


@pytest.fixture
def two_cpus():
    lk.devices.configure(cpus=2)
    yield
    lk.devices.configure(cpus=1)


# ---- shapes ------------------------------------------------------------------------------
def test_matmul_inner_dimensions():
    msg = _message(lk.ShapeError, lambda: lk.ones(2, 3) @ lk.ones(2, 3))
    _names(msg, "matmul", "(2, 3) @ (2, 3)", "3 vs 2", "float32", "cpu:0", "transpose")


def test_matmul_batch_dimensions_and_vectors():
    msg = _message(lk.ShapeError, lk.matmul, lk.ones(2, 3), lk.ones(4))
    _names(msg, "matmul", "(2, 3)", "(4,)", "3 vs 4")
    msg = _message(lk.ShapeError, lk.matmul, lk.ones(3, 2, 2), lk.ones(4, 2, 2))
    _names(msg, "matmul", "(3,)", "(4,)", "broadcast")


def test_shapes_that_do_not_broadcast():
    msg = _message(lk.ShapeError, lambda: lk.ones(2, 3) + lk.ones(4))
    _names(msg, "add", "(2, 3) and (4,)", "3 vs 4", "float32", "cpu:0", "reshape or unsqueeze")
    msg = _message(lk.ShapeError, lk.where, lk.ones(2, dtype="bool_"), lk.ones(3), 0.0)
    _names(msg, "where", "(2,)", "(3,)")


def test_reshape_to_a_wrong_size():
    msg = _message(lk.ShapeError, lambda: lk.ones(2, 3).reshape(4, 2))
    _names(msg, "reshape", "(2, 3)", "6 elements", "(4, 2)", "8 elements", "must match")
    msg = _message(lk.ShapeError, lambda: lk.ones(2, 3).reshape(4, -1))
    _names(msg, "reshape", "(2, 3)", "6 elements", "(4, -1)")


def test_conv2d_channel_count():
    msg = _message(lk.ShapeError, lk.conv2d, lk.ones(1, 3, 5, 5), lk.ones(2, 4, 3, 3))
    _names(msg, "conv2d", "3 channels", "expects 4", "(1, 3, 5, 5)", "(2, 4, 3, 3)", "float32",
           "cpu:0")


def test_conv2d_input_rank_and_window():
    msg = _message(lk.ShapeError, lk.conv2d, lk.ones(3, 5, 5), lk.ones(2, 3, 3, 3))
    _names(msg, "conv2d", "(N, C, H, W)", "(3, 5, 5)")
    msg = _message(lk.ShapeError, lk.conv2d, lk.ones(1, 1, 2, 2), lk.ones(1, 1, 3, 3))
    _names(msg, "3x3", "(1, 1, 2, 2)", "padding")


def test_indexing_out_of_range():
    x = lk.ones(2, 3)
    msg = _message(lk.ShapeError, lambda: x[5])
    _names(msg, "getitem", "[5]", "(2, 3)", "float32", "cpu:0", "size 2")
    msg = _message(lk.ShapeError, lambda: x[:, 7])
    _names(msg, "getitem", "[:, 7]", "size 3")
    msg = _message(lk.ShapeError, lambda: x[lk.tensor([0, 9])])   # found only when run
    _names(msg, "getitem", "index 9", "(2, 3)", "int64", "size 2", "-n..n-1")
    msg = _message(lk.ShapeError, lambda: x[0, 0, 0])
    _names(msg, "getitem", "(2, 3)", "3 were indexed")


def test_index_with_a_float_tensor():
    msg = _message(lk.ShapeError, lambda: lk.ones(3)[lk.tensor([0.0, 1.0])])
    _names(msg, "index tensors must be integer or bool", "float32")


def test_item_of_many_elements():
    msg = _message(lk.ShapeError, lambda: lk.ones(2, 2).item())
    _names(msg, "item()", "(2, 2)", "4 elements", "t[0].item()")
    msg = _message(lk.ShapeError, bool, lk.ones(3))
    _names(msg, "truth value", "(3,)", ".any()")


def test_a_list_where_an_op_wants_tensors():
    x = lk.ones(2)
    msg = _message(lk.DTypeError, lk.add, x, [x, x])
    _names(msg, "add", "input 1 is a list", "tensors or Python numbers")


# ---- devices -----------------------------------------------------------------------------
def test_tensors_on_different_devices(two_cpus):
    a, b = lk.ones(2, 3, device="cpu:1"), lk.ones(2, 3)
    msg = _message(lk.DeviceError, lambda: a + b)
    _names(msg, "add", "different devices", "cpu:1", "cpu:0", "(2, 3)", "float32", ".to('cpu:1')")
    msg = _message(lk.DeviceError, lambda: b @ a.T)
    _names(msg, "matmul", "cpu:0", "cpu:1")
    np.testing.assert_array_equal((a.to("cpu:0") + b).numpy(), np.full((2, 3), 2.0))


def test_unknown_device_name():
    msg = _message(lk.DeviceError, lk.zeros, 2, device="tpu:0")
    _names(msg, "unknown device name 'tpu:0'", "'cpu'", "'gpu:N'", "devices here: cpu:0")
    msg = _message(lk.DeviceError, lk.zeros, 2, device=3)
    _names(msg, "'cpu:0'", "got 3")
    msg = _message(lk.DeviceError, lk.zeros, 2, device="cpu:5")
    _names(msg, "'cpu:5' does not exist", "cpu:0..cpu:0", "configure(cpus=6)")


@pytest.mark.skipif(gpu_count() > 0, reason="a GPU is present: asking for one is not an error")
def test_gpu_where_there_is_none():
    for make in (lambda: lk.zeros(2, device="gpu:0"), lambda: lk.ones(2).to("cuda"),
                 lambda: lk.device("gpu").__enter__()):
        msg = _message(lk.DeviceError, make)
        assert "GPU" in msg and "'cpu' device" in msg, msg
        assert "CuPy" in msg or "CUDA" in msg, msg
    assert lk.devices() == [lk.devices.get_device("cpu:0")]     # listing devices never raises


@pytest.mark.gpu
def test_gpu_index_that_does_not_exist():
    msg = _message(lk.DeviceError, lk.zeros, 2, device=f"gpu:{gpu_count()}")
    _names(msg, "does not exist", f"{gpu_count()} GPU(s)", "gpu:0")


@pytest.mark.gpu
def test_gpu_tensor_into_numpy():
    msg = _message(lk.DeviceError, np.asarray, lk.ones(2, device="gpu:0"))
    _names(msg, "gpu:0", "t.numpy()", "to('cpu')")


# ---- autodiff ----------------------------------------------------------------------------
def test_backward_on_a_non_scalar():
    x = lk.ones(3, requires_grad=True)
    y = x * 2
    msg = _message(lk.GradError, y.backward)
    _names(msg, "backward()", "3 elements", "(3,)", "y.sum().backward()", "gradient=")
    y.backward(gradient=lk.ones(3))               # the remedy works, the graph was not freed
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_backward_twice_through_a_freed_graph():
    x = lk.ones(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    msg = _message(lk.GradError, y.backward)
    _names(msg, "'sum'", "second time", "freed", "retain_graph=True")
    z = (x * x).sum()
    z.backward(retain_graph=True)
    z.backward()                                  # the remedy works
    assert x.grad.tolist() == [6.0, 6.0, 6.0]


def test_backward_without_requires_grad():
    msg = _message(lk.GradError, lk.ones(2).sum().backward)
    _names(msg, "backward()", "shape=()", "requires_grad=True")


def test_requires_grad_on_an_integer_tensor():
    msg = _message(lk.DTypeError, lk.tensor, [1, 2], requires_grad=True)
    _names(msg, "requires_grad=True", "floating-point", "lk.int64", "(2,)", "cpu:0", ".float()")
    msg = _message(lk.DTypeError, lambda: lk.arange(3).requires_grad_())
    _names(msg, "lk.int64", "(3,)")
    msg = _message(lk.DTypeError, lk.zeros, 2, dtype="bool_", requires_grad=True)
    _names(msg, "lk.bool_")


def test_gradient_with_a_wrong_shape():
    x = lk.ones(3, requires_grad=True)
    msg = _message(lk.GradError, (x * 2).backward, lk.ones(2))
    _names(msg, "backward", "(2,)", "(3,)")


# ---- checkpoints -------------------------------------------------------------------------
def test_truncated_checkpoint(tmp_path):
    path = str(tmp_path / "model.lk")
    lk.save({"w": lk.ones(4, 4)}, path)
    with open(path, "rb") as f:
        blob = f.read()
    with open(path, "wb") as f:
        f.write(blob[:-20])
    msg = _message(lk.CheckpointError, lk.load, path)
    _names(msg, path, f"truncated at byte {len(blob) - 20} of {len(blob)}", "save it again")
    with open(path, "wb") as f:
        f.write(blob[:100])         # within the header: the whole length is not known yet
    msg = _message(lk.CheckpointError, lk.load, path)
    _names(msg, path, "truncated at byte 100 of at least", "save it again")


def test_corrupted_checkpoint(tmp_path):
    path = str(tmp_path / "model.lk")
    lk.save({"w": lk.ones(4, 4)}, path)
    with open(path, "r+b") as f:
        f.seek(-50, os.SEEK_END)
        f.write(b"\x00")
    msg = _message(lk.CheckpointError, lk.load, path)
    _names(msg, path, "SHA-256 checksum", "corrupted", "another copy")


def test_not_a_checkpoint(tmp_path):
    path = str(tmp_path / "notes.txt")
    with open(path, "w") as f:
        f.write("just some text, long enough to have a header\n")
    msg = _message(lk.CheckpointError, lk.load, path)
    _names(msg, path, "not a labkit checkpoint", "lk.save")


def test_failed_save_keeps_the_file_that_was_there(tmp_path):
    path = str(tmp_path / "model.lk")
    lk.save({"w": lk.ones(2)}, path)
    with open(path, "rb") as f:
        before = f.read()
    msg = _message(lk.CheckpointError, lk.save, {"w": lk.zeros(2), "opt": {"fn": lambda: 0}},
                   path)
    _names(msg, "obj['opt']['fn']", "function", "state dict")
    with open(path, "rb") as f:
        assert f.read() == before
    assert os.listdir(tmp_path) == ["model.lk"]
    assert lk.load(path)["w"].tolist() == [1.0, 1.0]


# ---- a failing op leaves no trace --------------------------------------------------------
def test_failing_ops_do_not_corrupt_state(two_cpus):
    x = lk.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    (x * x).sum().backward()
    data, grad = x.numpy().copy(), x.grad.numpy().copy()
    other = lk.ones(2, 2, device="cpu:1")
    failures = [
        (lk.ShapeError, lambda: x @ lk.ones(3, 3)),
        (lk.ShapeError, lambda: x + lk.ones(3)),
        (lk.ShapeError, lambda: x.reshape(3)),
        (lk.ShapeError, lambda: x[2]),
        (lk.ShapeError, lambda: x[lk.tensor([0, 5])]),
        (lk.DeviceError, lambda: x * other),
        (lk.GradError, lambda: (x * 2).backward()),
        (lk.ShapeError, lambda: lk.conv2d(x.reshape(1, 1, 2, 2), lk.ones(1, 2, 1, 1))),
    ]
    for cls, fn in failures:
        with pytest.raises(cls):
            fn()
        np.testing.assert_array_equal(x.numpy(), data)
        np.testing.assert_array_equal(x.grad.numpy(), grad)
        assert x.requires_grad and x.is_leaf and x.device.name == "cpu:0"
    assert lk.is_grad_enabled()
    with lk.no_grad():
        with pytest.raises(lk.ShapeError):
            x @ lk.ones(3)
    assert lk.is_grad_enabled()
    (x * x).sum().backward()                      # autodiff still works and accumulates
    np.testing.assert_array_equal(x.grad.numpy(), 2 * grad)
    np.testing.assert_array_equal(other.numpy(), np.ones((2, 2)))


def test_failing_op_in_the_middle_of_a_graph_keeps_it_usable():
    x = lk.ones(3, requires_grad=True)
    y = x * 3
    with pytest.raises(lk.ShapeError):
        y + lk.ones(2)
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0, 3.0]


# ---- LABKIT_DEBUG=1 ----------------------------------------------------------------------
def _run_debug(code):
    env = dict(os.environ, LABKIT_DEBUG="1",
               PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-W", "ignore", "-c", code], env=env,
                          capture_output=True, text=True, timeout=60)


def test_debug_mode_names_the_op_that_made_a_nan():
    code = """
import labkit as lk
from labkit.errors import NumericsError
x = lk.tensor([1.0, -1.0])
y = x * 2                        # fine
try:
    lk.log(x)
except NumericsError as e:
    assert isinstance(e, FloatingPointError) and isinstance(e, lk.LabkitError)
    print("ERROR:", e)
try:
    lk.tensor([1.0]) / lk.tensor([0.0])
except NumericsError as e:
    print("ERROR:", e)
lk.max_pool2d(lk.ones(1, 1, 4, 4), 2, padding=1)   # -inf padding is by design, not flagged
x = lk.randn(3, 4, requires_grad=True)
x[x > 0].sum().backward()        # data-dependent shapes pass the shape-rule check
print("DONE")
"""
    result = _run_debug(code)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "DONE"
    nan, inf = lines[0], lines[1]
    _names(nan, "LABKIT_DEBUG", "op log", "NaN", "1 of 2", "(2,)", "float32", "cpu:0",
           "log or sqrt of a negative number")
    _names(inf, "op div", "Inf")


def test_debug_mode_uncaught_error_reaches_the_user():
    result = _run_debug("import labkit as lk\nlk.sqrt(lk.tensor(-4.0))\nprint('not reached')")
    assert result.returncode != 0 and "not reached" not in result.stdout
    _names(result.stderr, "NumericsError", "op sqrt", "NaN")


@pytest.mark.skipif(os.environ.get("LABKIT_DEBUG") == "1", reason="the suite runs in debug mode")
def test_without_debug_mode_nan_is_just_a_value():
    with np.errstate(invalid="ignore"):
        assert np.isnan(lk.log(lk.tensor(-1.0)).item())


@pytest.mark.skipif(os.environ.get("LABKIT_DEBUG") == "1", reason="the suite runs in debug mode")
def test_debug_mode_switches_at_run_time_in_every_thread():
    import threading
    errors = []

    def in_thread():
        try:
            with np.errstate(invalid="ignore"):
                lk.log(lk.tensor(-1.0))
        except lk.NumericsError as e:
            errors.append(e)
    lk.config.set_debug(True)
    try:
        assert lk.config.debug()
        with pytest.raises(lk.NumericsError, match="op sqrt produced NaN"):
            with np.errstate(invalid="ignore"):
                lk.sqrt(lk.tensor(-4.0))
        t = threading.Thread(target=in_thread)
        t.start()
        t.join()
        assert len(errors) == 1 and "op log" in str(errors[0])
    finally:
        lk.config.set_debug(False)
    assert not lk.config.debug()
    with np.errstate(invalid="ignore"):
        assert np.isnan(lk.sqrt(lk.tensor(-4.0)).item())
