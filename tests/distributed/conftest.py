"""Fixtures for the sharding tests: a host split into four virtual CPU devices (and back to one
after each test), and meshes over them."""
import pytest

import labkit as lk
from labkit.distributed.device_mesh import init_device_mesh


@pytest.fixture
def four_devices():
    lk.devices.configure(cpus=4)
    yield
    lk.devices.configure(cpus=1)


@pytest.fixture
def mesh1d(four_devices):
    return init_device_mesh("cpu", (4,), mesh_dim_names=("x",))


@pytest.fixture
def mesh2d(four_devices):
    return init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
