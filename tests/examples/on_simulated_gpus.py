"""``python on_simulated_gpus.py script.py args...``: run ``script.py`` as ``__main__`` (from its
own folder, with ``args`` as its command line) on a machine of two simulated GPUs
(``tests/devices/fake_gpu.py``), so a program written for CUDA devices, such as nanoGPT's DDP
branch (``cuda:{LOCAL_RANK}``), runs where there is no GPU."""
import os
import runpy
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    sys.path.insert(0, ROOT)
    from labkit.devices import backends
    from tests.devices.fake_gpu import FakeGpu, fake_cupyx, fusion_off
    backends._cupy = FakeGpu(2, kernel_ns=0).xp
    sys.modules.update(fake_cupyx())
    script = os.path.abspath(sys.argv[1])
    sys.argv = sys.argv[1:]
    sys.path.insert(0, os.path.dirname(script))
    os.chdir(os.path.dirname(script))
    with fusion_off():
        runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
