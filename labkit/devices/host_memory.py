"""Host memory: keep freed blocks for reuse instead of returning them to the OS.

Large temporaries (im2col buffers, activations) are freed and allocated again every training
step. glibc returns blocks above its mmap threshold to the OS at once, so each step pays page
faults on fresh memory again (more than half of a NumPy CNN step on these machines). Raising the
thresholds makes glibc keep them, the way PyTorch's caching allocator keeps device memory:
peak memory stays reserved for the process, and steps get faster.

Done once at import, on Linux with glibc only. Set ``LABKIT_KEEP_FREED_MEMORY=0`` before importing
labkit to leave the allocator alone.
"""
import ctypes
import ctypes.util
import os
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
KEEP_BYTES = 1 << 30

configured = False


def keep_freed_memory():
    """Ask glibc to keep freed blocks up to 1 GiB; returns whether it took effect."""
    global configured
    if configured or not sys.platform.startswith("linux"):
        return configured
    if os.environ.get("LABKIT_KEEP_FREED_MEMORY", "1") == "0":
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):   # not glibc (musl...): nothing to tune
        return False
    ok = mallopt(M_MMAP_THRESHOLD, KEEP_BYTES) == 1 and mallopt(M_TRIM_THRESHOLD, KEEP_BYTES) == 1
    configured = ok
    return ok
