"""The small edits real PyTorch programs needed, each fixed as PyTorch behaves and checked against
it (the program written once, ``T`` being torch or labkit where both run it)."""
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest
import torch

import labkit as lk
import labkit.nn.functional as LF
import torch.nn.functional as TF

BOTH = pytest.mark.parametrize("T", [torch, lk], ids=["torch", "labkit"])


def _np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else t.numpy()


# ---- devices -------------------------------------------------------------------------------
@BOTH
def test_device_kind_questions(T):
    x = T.ones(2)
    assert (x.is_cpu, x.is_cuda, x.is_xpu, x.is_mps) == (True, False, False, False)
    assert str(T.device("cpu")) == "cpu" and str(x.device) == "cpu"
    assert f"{x.device}" == "cpu"


def test_device_text_keeps_its_index_where_there_are_several():
    assert lk.device("cpu") is lk.device("cpu:0") and repr(lk.device("cpu")) == "Device('cpu:0')"
    lk.devices.configure(cpus=2)
    try:
        assert str(lk.device("cpu:1")) == "cpu:1" and lk.device("cpu").name == "cpu:0"
        assert "on cpu:1" in lk.errors.describe(lk.ones(1, device="cpu:1"))
    finally:
        lk.devices.configure(cpus=1)


# ---- formatting ----------------------------------------------------------------------------
@BOTH
def test_a_0d_tensor_formats_as_its_value(T):
    assert f"{T.tensor(83.)}" == "83.0"
    assert f"{T.tensor(2.5):.3f}" == "2.500" and "{:>6}".format(T.tensor(7)) == "     7"
    assert f"{T.tensor([1.0, 2.0])}" == str(T.tensor([1.0, 2.0]))


# ---- pixel shuffle ----------------------------------------------------------------------------
@pytest.mark.parametrize("shape,r", [((2, 18, 3, 4), 3), ((8, 2, 2), 2), ((1, 2, 4, 1, 1), 1)])
def test_pixel_shuffle_and_unshuffle_match_torch(shape, r):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    ours = lk.nn.PixelShuffle(r)(lk.tensor(x))
    theirs = torch.nn.PixelShuffle(r)(torch.tensor(x))
    np.testing.assert_array_equal(ours.numpy(), _np(theirs))
    back = lk.nn.PixelUnshuffle(r)(ours)
    np.testing.assert_array_equal(back.numpy(), _np(torch.nn.PixelUnshuffle(r)(theirs)))
    np.testing.assert_array_equal(back.numpy(), x)
    captured = lk.function(lambda t: LF.pixel_shuffle(t, r))(lk.tensor(x))
    np.testing.assert_array_equal(captured.numpy(), ours.numpy())


def test_pixel_shuffle_gradients_and_errors():
    x = lk.tensor(np.random.default_rng(1).standard_normal((1, 4, 2, 3)))
    assert lk.gradcheck(lambda t: LF.pixel_shuffle(t, 2) ** 2, [x.requires_grad_()])
    with pytest.raises(lk.ShapeError, match="divisible"):
        LF.pixel_shuffle(lk.ones(1, 3, 2, 2), 2)
    with pytest.raises(lk.ShapeError, match="divisible"):
        LF.pixel_unshuffle(lk.ones(1, 1, 3, 2), 2)
    assert repr(lk.nn.PixelUnshuffle(2)) == repr(torch.nn.PixelUnshuffle(2))


# ---- dropout2d on inputs of other ranks ---------------------------------------------------------
@BOTH
def test_dropout2d_on_a_2d_input_warns_and_drops_elementwise(T):
    T.manual_seed(0)
    x = T.ones(64, 64)
    with pytest.warns(UserWarning, match="dropout2d.*2-D input.*dropout"):
        y = T.nn.Dropout2d(0.5)(x)
    kept = _np(y) != 0
    assert 0.3 < kept.mean() < 0.7
    assert not (kept.all(1) | ~kept.any(1)).all()      # rows mixed: not whole channels
    with pytest.warns(UserWarning, match="3D input|3-D input"):
        z = _np(T.nn.Dropout2d(0.5)(T.ones(4, 8, 16)))
    assert ((z == 0).all(-1) | (z != 0).all(-1)).all()   # (N, C, L): whole channels


# ---- repeat gives new memory ---------------------------------------------------------------------
@BOTH
def test_repeat_result_is_writable_new_memory(T):
    x = T.ones(3)
    r = x.repeat(2)
    r.div_(2)
    assert _np(r).tolist() == [0.5] * 6 and _np(x).tolist() == [1.0] * 3
    y = T.ones(1, 3)
    same = y.repeat(1, 1)                 # no repetition at all: still a copy
    same.add_(1)
    assert _np(y).tolist() == [[1.0, 1.0, 1.0]]


def test_pin_memory_gives_a_copy_to_move_to_a_gpu():
    """nanoGPT's get_batch on CUDA: ``x.pin_memory().to(device, non_blocking=True)``. PyTorch
    copies into page-locked memory (and, without a GPU, raises); labkit's host memory is
    NumPy's, so it copies, keeping the history."""
    x = lk.arange(3.0, requires_grad=True)
    y = x.pin_memory()
    assert y is not x and y.tolist() == [0.0, 1.0, 2.0]
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]
    assert y.to("cpu", non_blocking=True).tolist() == [0.0, 1.0, 2.0]


@pytest.mark.gpu
def test_pin_memory_of_a_gpu_tensor_is_refused():
    with pytest.raises(lk.DeviceError, match="only a CPU tensor can be pinned"):
        lk.ones(2, device="gpu:0").pin_memory()


# ---- indexing with a range -----------------------------------------------------------------
@BOTH
def test_indexing_with_a_python_range(T):
    x = T.arange(12.0).reshape(3, 4)
    assert _np(x[range(1, 3)]).tolist() == [[4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0]]
    assert _np(x[:, range(0, 4, 2)]).tolist() == [[0.0, 2.0], [4.0, 6.0], [8.0, 10.0]]
    x[range(2)] = 0.0
    assert _np(x).sum() == 38.0


# ---- a huge sampler is lazy ----------------------------------------------------------------
@BOTH
def test_random_sampler_with_replacement_draws_lazily(T):
    sampler = T.utils.data.RandomSampler(range(10), replacement=True, num_samples=int(1e10))
    assert len(sampler) == int(1e10)
    start = time.perf_counter()
    it = iter(sampler)
    first = [next(it) for _ in range(100)]
    assert time.perf_counter() - start < 5.0 and all(0 <= i < 10 for i in first)


# ---- inplace=True writes in place ---------------------------------------------------------------
INPLACE = [("ReLU", ()), ("ReLU6", ()), ("LeakyReLU", (0.2,)), ("ELU", (1.5,)), ("SELU", ()),
           ("CELU", (0.5,)), ("SiLU", ()), ("Mish", ()), ("Hardtanh", (-0.5, 0.5)),
           ("Hardsigmoid", ()), ("Hardswish", ()), ("Threshold", (0.1, -2.0))]


@pytest.mark.parametrize("name,args", INPLACE, ids=[n for n, _ in INPLACE])
def test_inplace_activations_write_into_their_input_as_torch(name, args):
    data = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    for T in (torch, lk):
        x = T.tensor(data)
        out = getattr(T.nn, name)(*args, inplace=True)(x)
        assert out is x, f"{T.__name__}.nn.{name}(inplace=True) did not return its input"
    expected = getattr(torch.nn, name)(*args)(torch.tensor(data))
    np.testing.assert_allclose(x.numpy(), _np(expected), rtol=1e-6, atol=1e-6)


@BOTH
def test_inplace_relu_keeps_autograd_right(T):
    data = np.random.default_rng(2).standard_normal((4, 3)).astype(np.float32)
    w = T.tensor(data, requires_grad=True)
    h = w * 2.0
    T.nn.functional.relu(h, inplace=True)         # relu's gradient needs only its output
    (h * h).sum().backward()
    np.testing.assert_allclose(_np(w.grad), 8 * data * (data > 0), rtol=1e-6)
    s = T.sigmoid(T.tensor(data, requires_grad=True))   # sigmoid's gradient needs its output
    T.nn.functional.relu(s, inplace=True)
    with pytest.raises((RuntimeError, lk.GradError), match="in-?place"):
        s.sum().backward()
    with pytest.raises((RuntimeError, lk.GradError), match="leaf"):
        T.nn.functional.relu(T.ones(2, requires_grad=True), inplace=True)


@BOTH
def test_inplace_dropout(T):
    T.manual_seed(0)
    x = T.ones(100)
    assert T.nn.Dropout(0.5, inplace=True)(x) is x
    assert set(np.unique(_np(x)).tolist()) == {0.0, 2.0}


def test_inplace_activation_in_a_captured_step_matches_eager():
    lin = lk.nn.Linear(3, 3)
    relu = lk.nn.ReLU(inplace=True)

    def f(x):
        h = lin(x)
        relu(h)
        return h.sum()
    x = lk.randn(4, 3)
    assert lk.function(f)(x).item() == pytest.approx(f(x).item(), rel=1e-6)


# ---- import labkit.onnx without onnx ------------------------------------------------------
def test_labkit_onnx_imports_without_onnx_and_export_says_what_to_install():
    script = ("import sys; sys.modules['onnx'] = None; sys.modules['onnxruntime'] = None\n"
              "import labkit as lk, labkit.onnx\n"
              "assert callable(lk.onnx.converter)\n"
              "try:\n"
              "    lk.onnx.export(lk.nn.Linear(2, 1), (lk.ones(1, 2),), 'never.onnx')\n"
              "except ModuleNotFoundError as e:\n"
              "    print(e)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "pip install onnx" in out.stdout


# ---- an unknown batch dimension in a graph ------------------------------------------------------
def test_placeholder_with_an_unknown_batch_dimension():
    w = lk.Variable(lk.ones(3, 2), name="w")
    with lk.Graph() as g:
        x = lk.placeholder((None, 3), name="x")
        y = lk.relu(x @ w - 1.0)
        loss = (y * y).mean()
        grad_w, = lk.gradients(loss, [w])
    assert x.shape == (None, 3) and y.shape == (None, 2) and loss.shape == ()
    for n in (1, 5):
        data = np.arange(3 * n, dtype=np.float32).reshape(n, 3) / 10
        got, got_grad = g.run([loss, grad_w], {x: data})
        wt = torch.ones(3, 2, requires_grad=True)
        expected = (torch.relu(torch.tensor(data) @ wt - 1.0) ** 2).mean()
        expected.backward()
        assert got.item() == pytest.approx(expected.item(), rel=1e-6)
        np.testing.assert_allclose(got_grad.numpy(), wt.grad.numpy(), rtol=1e-6, atol=1e-7)
    with pytest.raises(lk.GraphError, match=r"\(\?, 3\)"):
        g.run(loss, {x: np.ones((2, 4), np.float32)})


# ---- bfloat16 conversions --------------------------------------------------------------------------
@BOTH
def test_bfloat16_conversions(T):
    model = T.nn.Linear(2, 3).bfloat16()
    assert model.weight.dtype == T.bfloat16 and T.ones(2).bfloat16().dtype == T.bfloat16
    y = model(T.ones(4, 2, dtype=T.bfloat16))
    assert y.dtype == T.bfloat16 and T.finfo(T.bfloat16).eps == 0.0078125


# ---- uint16 / uint32 / uint64 -----------------------------------------------------------------------
@BOTH
@pytest.mark.parametrize("name", ["uint16", "uint32", "uint64"])
def test_wide_unsigned_dtypes(T, name):
    d = getattr(T, name)
    x = T.tensor([1, 2, 3], dtype=d)
    assert x.dtype == d and (x * 2).dtype == d and (x + 1.5).dtype == T.float32
    assert _np(x.to(T.int64)).tolist() == [1, 2, 3] and (x == 2).dtype == T.bool
    assert _np(T.cat([x, x])).dtype == np.dtype(name)
    with pytest.raises((RuntimeError, lk.DTypeError), match="romotion"):
        x + T.tensor([1], dtype=T.int64)
