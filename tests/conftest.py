"""Shared fixtures: the devices every device-generic test runs on, and GPU gating.

Tests that take the ``device`` fixture run once on ``cpu:0`` and once on ``gpu:0``; the GPU run
is marked ``gpu`` and skipped (not broken) where CuPy or a CUDA device is missing.

``LABKIT_TEST_SIMULATED_GPU=1`` runs the GPU tests on a machine without one, against the
simulated GPU of ``tests/devices/fake_gpu.py`` (NumPy arrays behind a ``gpu:0`` device): it
finds what labkit itself gets wrong about devices (a transfer, a constant made on the CPU), not
where CuPy's functions differ from NumPy's. Tests that need CuPy itself skip there.
"""
import os

import pytest

import labkit as lk
from labkit.devices import gpu_count

SIMULATED_GPU = os.environ.get("LABKIT_TEST_SIMULATED_GPU") == "1"
if SIMULATED_GPU:
    from labkit.devices import backends

    import sys

    from tests.devices.fake_gpu import FakeGpu, fake_cupyx, fusion_off
    backends._cupy = FakeGpu(1, kernel_ns=0).xp
    sys.modules.update(fake_cupyx())

HAVE_GPU = gpu_count() > 0


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="no CUDA device (CuPy missing or no GPU): GPU test skipped")
    skip_cupy = pytest.mark.skip(reason="calls CuPy itself: not on the simulated GPU")
    for item in items:
        if "gpu" in item.keywords and not HAVE_GPU:
            item.add_marker(skip_gpu)
        elif "cupy" in item.keywords and SIMULATED_GPU:
            item.add_marker(skip_cupy)


@pytest.fixture(params=["cpu:0", pytest.param("gpu:0", marks=pytest.mark.gpu)])
def device(request):
    """Name of the device to run a device-generic test on."""
    return request.param


@pytest.fixture(autouse=True)
def _no_fusion_on_the_simulated_gpu():
    """On the simulated GPU every test runs with graph fusion off (``fake_gpu.fusion_off``)."""
    if not SIMULATED_GPU:
        yield
        return
    with fusion_off():
        yield


@pytest.fixture(autouse=True)
def _seed():
    lk.manual_seed(0)
    yield
