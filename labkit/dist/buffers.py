"""A small caching allocator for the host arrays that collectives return.

A 64 MB result allocated fresh on every call costs thousands of page faults while MPI writes
into it (and a new address each time, which defeats MPI's registration caches), which is most
of the gap between a convenient ``allreduce(t) -> new tensor`` and raw MPI into a preallocated
buffer. So large results are carved from buffers that are recycled once *every* array viewing
them has died: each result is a view of a ctypes object over a pooled buffer, numpy's base
chain keeps that object alive as long as any view exists, and its finalizer returns the buffer.

>>> from labkit.dist.buffers import empty
>>> a = empty((1024, 1024), "float32"); a.shape, a.dtype.name
((1024, 1024), 'float32')
"""
import ctypes
import threading
import weakref

import numpy as np

MIN_BYTES = 1 << 20          # smaller arrays come from numpy directly
CAP_BYTES = 256 << 20        # at most this much idle memory is kept for reuse
PER_SIZE = 2                 # and at most this many idle buffers of one size

_free = {}                   # nbytes -> [uint8 arrays]
_cached = 0
_lock = threading.RLock()    # reentrant: a finalizer may run while empty() holds it


def _release(base):
    global _cached
    with _lock:
        stack = _free.setdefault(base.nbytes, [])
        if len(stack) < PER_SIZE and _cached + base.nbytes <= CAP_BYTES:
            stack.append(base)
            _cached += base.nbytes


def empty(shape, dtype):
    """An uninitialised host array of ``shape`` and ``dtype`` (pooled when large)."""
    global _cached
    dtype = np.dtype(dtype)
    shape = tuple(int(s) for s in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes < MIN_BYTES:
        return np.empty(shape, dtype)
    with _lock:
        stack = _free.get(nbytes)
        base = stack.pop() if stack else None
        if base is not None:
            _cached -= nbytes
    if base is None:
        base = np.empty(nbytes, np.uint8)
    owner = (ctypes.c_char * nbytes).from_address(base.ctypes.data)
    weakref.finalize(owner, _release, base)
    return np.frombuffer(owner, dtype=dtype).reshape(shape)


def cached_bytes():
    """How many bytes of idle buffers are kept for reuse."""
    return _cached
