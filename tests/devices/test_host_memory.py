"""labkit keeps freed host memory for reuse (glibc thresholds), unless told not to."""
import subprocess
import sys

import pytest

from labkit.devices import host_memory

glibc = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")


@glibc
def test_import_configures_the_allocator():
    assert host_memory.configured is True


def _configured_in_fresh_process(env_value):
    code = "import labkit.devices.host_memory as h, labkit; print(h.configured)"
    env = {"LABKIT_KEEP_FREED_MEMORY": env_value, "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True)
    return out.stdout.strip()


@glibc
def test_environment_opt_out_leaves_the_allocator_alone():
    assert _configured_in_fresh_process("0") == "False"
    assert _configured_in_fresh_process("1") == "True"
