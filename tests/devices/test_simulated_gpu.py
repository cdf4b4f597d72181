"""labkit on a GPU device, checked without one: the simulated GPU of ``fake_gpu`` (NumPy arrays
of a type of their own behind ``gpu:0``) stands in for CuPy. Each test here is a mistake a real
GPU run found: a 0-d tensor that became 1-d on its way over, a number made into a CPU tensor
inside a gradient rule, a CPU index into a GPU tensor, a device thread that died starting.
The last test runs every GPU test of the suite on the simulated GPU.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import labkit as lk
from labkit.devices import workers

from .fake_gpu import FakeArray, FakeGpu, fusion_off, installed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def gpu(monkeypatch):
    fake = FakeGpu(1, kernel_ns=0)
    installed(fake, monkeypatch)
    return fake


def test_a_0d_tensor_stays_0d_on_its_way_to_the_gpu(gpu):
    t = lk.tensor(2.5, device="gpu:0")
    assert t.shape == () and type(t._data) is FakeArray
    assert lk.tensor(np.array(7), device="gpu:0").shape == ()
    assert (lk.tensor([[1.0, 2.0]]) .to("gpu:0") + t).shape == (1, 2)
    assert t.to("cpu").shape == () and t.item() == 2.5


def test_a_cpu_0d_tensor_is_read_as_a_number_by_a_gpu_op_as_in_pytorch(gpu):
    x = lk.tensor([1.0, -2.0, 3.0], device="gpu:0", requires_grad=True)
    s = lk.tensor(2.0, requires_grad=True)                 # on the CPU
    y = (x * s).sum()
    assert y.device.name == "gpu:0" and y.item() == pytest.approx(4.0)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0, 2.0])
    assert s.grad.device.name == "cpu:0" and s.grad.shape == ()   # where s lives, as PyTorch
    assert s.grad.item() == pytest.approx(2.0)


def test_a_cpu_tensor_of_more_dimensions_is_still_refused(gpu):
    x = lk.ones(3, device="gpu:0")
    with pytest.raises(lk.DeviceError, match=r"mul: inputs are on different devices.*gpu:0"):
        x * lk.ones(3)
    v = lk.Variable(lk.zeros(()))                          # a 0-d variable on the CPU
    with pytest.raises(lk.DeviceError, match="assign_add: inputs are on different devices"):
        v.assign_add(lk.tensor(1.0, device="gpu:0"))       # never written through a copy
    assert v.detach().numpy() == 0.0
    s = lk.zeros(())
    s.copy_(lk.tensor(1.0, device="gpu:0"))                 # copy_ moves its source, as PyTorch
    assert s.item() == 1.0 and s.device.name == "cpu:0"


def test_a_gradient_rule_over_numbers_runs_on_the_gpu(gpu):
    """tanh_backward(g, y) with y a Python number: its vjp multiplies numbers (a CPU 0-d
    tensor) with the GPU cotangent."""
    from labkit.tensor.ops.elementwise import tanh_backward
    g = lk.tensor([0.5, 1.0], device="gpu:0")
    grad = lk.grad(lambda g: tanh_backward(g, 0.5).sum())(g)
    assert grad.device.name == "gpu:0"
    np.testing.assert_allclose(grad.numpy(), [0.75, 0.75])


def test_captured_code_moves_cpu_numbers_to_the_gpu_as_eager_code_does(gpu):
    x = lk.tensor([1.0, 2.0], device="gpu:0")
    s = lk.tensor(3.0)

    @lk.function
    def f(x, s):
        return x * s + 1.0

    with fusion_off():
        np.testing.assert_allclose(f(x, s).numpy(), (x * s + 1.0).numpy())
        assert f(x, s).device.name == "gpu:0"
        assert "to_device" in [n.op.name for n in f.graph(x, s).nodes if n.op is not None]


def test_a_gpu_tensor_takes_a_cpu_index_tensor_as_in_pytorch(gpu):
    x = lk.arange(12.0).reshape(3, 4).to("gpu:0")
    picked = x[lk.tensor([2, 0, 2]), 1:]
    assert picked.device.name == "gpu:0"
    np.testing.assert_array_equal(picked.numpy(), np.arange(12.0).reshape(3, 4)[[2, 0, 2], 1:])


def test_a_device_thread_that_cannot_start_raises_instead_of_hanging(monkeypatch):
    fake = FakeGpu(1, kernel_ns=0)
    installed(fake, monkeypatch)
    monkeypatch.setattr(workers, "_workers", {})

    def broken(non_blocking=False, priority=0):
        raise RuntimeError("cudaErrorDevicesUnavailable: simulated")
    monkeypatch.setattr(fake.xp.cuda, "Stream", broken)
    dev = lk.devices.get_device("gpu:0")
    with pytest.raises(RuntimeError, match="cudaErrorDevicesUnavailable"):
        workers.run_parts([(dev, lambda: 1, ())])
    with pytest.raises(RuntimeError, match="cudaErrorDevicesUnavailable"):
        workers.stream(dev)
    workers.worker(dev).queue.put(None)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_gpu_test_passes_on_the_simulated_gpu():
    """``LABKIT_TEST_SIMULATED_GPU=1 pytest -m gpu``: the GPU half of the device-generic tests
    (ops, gradients, vmap, models against PyTorch, placement...), on the simulated GPU; tests
    that call CuPy itself skip. The distributed, notebook and browser tests are left out (they
    start processes of their own)."""
    env = dict(os.environ, LABKIT_TEST_SIMULATED_GPU="1", LABKIT_TEST_EXAMPLES="5")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider",
         "-o", "addopts=", "--timeout=300", "tests", "--ignore=tests/dist",
         "--ignore=tests/ui", "--ignore=tests/notebooks", "--ignore=tests/devices"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=880)
    tail = run.stdout[-6000:] + run.stderr[-2000:]
    assert run.returncode == 0, f"GPU tests fail on the simulated GPU:\n{tail}"
    assert " passed" in run.stdout and " failed" not in run.stdout, tail
