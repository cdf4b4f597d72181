"""``lk.devices.memory_stats(device)``: how much memory labkit holds on a device.

On a GPU the numbers are CuPy's memory pool's: ``bytes_in_use`` (held by live arrays),
``bytes_cached`` (freed by arrays but kept by the pool for reuse), ``bytes_reserved`` (both) and
``peak_bytes_in_use``. The peak is tracked by a thin allocator wrapped around the pool, installed
the first time memory statistics are asked for (or ``reset_peak_memory_stats`` is called), so it
is the peak *since then*; a process that never asks pays nothing.

On a CPU, NumPy allocates through the C heap, which labkit does not see on its own: unless
Python's ``tracemalloc`` is tracing, ``bytes_in_use`` and ``peak_bytes_in_use`` are None, and
what is reported is what labkit itself keeps there, the graph executor's workspaces (buffers
reused across runs: ``workspace_bytes``, also counted as ``bytes_cached``). While
``tracemalloc`` traces (``tracemalloc.start()``), NumPy reports its arrays to it, and the CPU's
``bytes_in_use`` / ``peak_bytes_in_use`` are what it counts: every array and Python object of
the process, on every CPU device (``reset_peak_memory_stats("cpu")`` restarts the peak), which
is how the memory activation checkpointing saves is measured on a CPU.

>>> import labkit as lk
>>> stats = lk.devices.memory_stats("cpu:0")
>>> stats["device"], stats["bytes_in_use"]
('cpu:0', None)
>>> import tracemalloc; tracemalloc.start()
>>> lk.devices.reset_peak_memory_stats("cpu"); x = lk.zeros(1000, 1000); del x
>>> lk.devices.memory_stats("cpu")["peak_bytes_in_use"] >= 4_000_000
True
>>> tracemalloc.stop()
"""
import threading
import tracemalloc

from .device import get_device

_sources = []        # callables device_name -> bytes labkit keeps cached there (executor pools)
_peak = {}           # GPU index -> peak bytes in use since tracking started
_tracking = []       # [True] once the peak-tracking allocator is installed
_lock = threading.Lock()


def register_cached_bytes(fn):
    """Let a higher layer report bytes it keeps on devices (``fn(device_name) -> int``)."""
    _sources.append(fn)


def _track_peak(cp):
    with _lock:
        if _tracking:
            return
        pool = cp.get_default_memory_pool()

        def malloc(size):
            mem = pool.malloc(size)
            used = pool.used_bytes()
            dev = mem.device_id
            if used > _peak.get(dev, 0):
                _peak[dev] = used
            return mem

        cp.cuda.set_allocator(malloc)
        _tracking.append(True)


def memory_stats(device=None):
    """Memory held on ``device`` (default: the current default device), as a dict.

    Keys: ``device``, ``bytes_in_use``, ``bytes_cached``, ``bytes_reserved``,
    ``peak_bytes_in_use``, ``workspace_bytes`` (the graph executor's reused buffers there) and
    ``source`` (what the numbers come from). Numbers labkit cannot know are None.
    """
    dev = get_device(device)
    workspaces = sum(fn(dev.name) for fn in _sources)
    if dev.type == "gpu":
        cp = dev.xp
        _track_peak(cp)
        pool = cp.get_default_memory_pool()
        with dev.activate():
            used, total = pool.used_bytes(), pool.total_bytes()
        peak = max(_peak.get(dev.index, 0), used)
        _peak[dev.index] = peak
        return {"device": dev.name, "bytes_in_use": used, "bytes_cached": total - used,
                "bytes_reserved": total, "peak_bytes_in_use": peak,
                "workspace_bytes": workspaces,
                "source": "CuPy's default memory pool (peak since memory stats were first "
                          "asked for)"}
    if tracemalloc.is_tracing():
        used, peak = tracemalloc.get_traced_memory()
        return {"device": dev.name, "bytes_in_use": used, "bytes_cached": workspaces,
                "bytes_reserved": used, "peak_bytes_in_use": peak,
                "workspace_bytes": workspaces,
                "source": "tracemalloc: every NumPy array and Python object of the process "
                          "(peak since tracing started or reset_peak_memory_stats)"}
    return {"device": dev.name, "bytes_in_use": None, "bytes_cached": workspaces,
            "bytes_reserved": workspaces, "peak_bytes_in_use": None,
            "workspace_bytes": workspaces,
            "source": "labkit's graph-executor workspaces only: NumPy's own allocations are "
                      "not tracked (start tracemalloc to count them)"}


def reset_peak_memory_stats(device=None):
    """Start the peak of ``device`` again from what is in use now (a CPU's: tracemalloc's, when
    it is tracing)."""
    dev = get_device(device)
    if dev.type != "gpu":
        if tracemalloc.is_tracing():
            tracemalloc.reset_peak()
        return
    cp = dev.xp
    _track_peak(cp)
    with dev.activate():
        _peak[dev.index] = cp.get_default_memory_pool().used_bytes()
