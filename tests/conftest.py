"""Shared fixtures: the devices every device-generic test runs on, and GPU gating.

Tests that take the ``device`` fixture run once on ``cpu:0`` and once on ``gpu:0``; the GPU run
is marked ``gpu`` and skipped (not broken) where CuPy or a CUDA device is missing.
"""
import pytest

import labkit as lk
from labkit.devices import gpu_count

HAVE_GPU = gpu_count() > 0


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="no CUDA device (CuPy missing or no GPU): GPU test skipped")
    for item in items:
        if "gpu" in item.keywords and not HAVE_GPU:
            item.add_marker(skip_gpu)


@pytest.fixture(params=["cpu:0", pytest.param("gpu:0", marks=pytest.mark.gpu)])
def device(request):
    """Name of the device to run a device-generic test on."""
    return request.param


@pytest.fixture(autouse=True)
def _seed():
    lk.manual_seed(0)
    yield
