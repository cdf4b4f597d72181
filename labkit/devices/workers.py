"""One worker thread per device: where the graph executor runs each device's part of a plan.

Every device (``cpu:0``, ``cpu:1``, ``gpu:0`` ...) gets a daemon thread, made on first use, with
its own queue: work for a device runs in the order it was submitted, and work for two devices
runs concurrently (NumPy and CuPy release the GIL inside their kernels). A GPU device's worker
makes that device current and issues its work on its own CuPy stream (``stream(device)``).

``run_parts([(device, fn, args), ...])`` runs each ``fn(*args)`` on its device's worker and
waits for all of them. Parts of one call are queued on every worker in one step (under one
lock), so that two threads running multi-device plans at once can never queue their parts in
opposite orders on two workers (which could make each wait for the other's message).

>>> from labkit.devices import get_device, workers
>>> workers.run_parts([(get_device("cpu:0"), lambda a, b: a + b, (1, 2))])
[3]
"""
import os
import queue
import threading

_workers = {}                # device name -> Worker
_lock = threading.Lock()     # making workers
_submit = threading.Lock()   # queueing the parts of one call on every worker at once
_local = threading.local()   # .device: the device whose worker this thread is


class Worker:
    """The thread that runs one device's work, in submission order."""

    def __init__(self, device):
        self.device = device
        self.queue = queue.SimpleQueue()
        self.stream = None
        self.failed = None          # why the device could not be set up on this thread
        self.thread = threading.Thread(target=self._loop, name=f"labkit-{device.name}",
                                       daemon=True)
        self.thread.start()

    def _loop(self):
        _local.device = self.device
        if self.device.type == "gpu":
            try:
                cuda = self.device.xp.cuda
                cuda.Device(self.device.index).use()
                self.stream = cuda.Stream(non_blocking=False)
                self.stream.use()
            except Exception as exc:     # every part sent here raises it, none waits forever
                self.failed = exc
        while True:
            item = self.queue.get()
            if item is None:
                return
            fn, args, call, i = item
            if self.failed is not None:
                call.run(i, _raise, (self.failed,))
            else:
                call.run(i, fn, args)

    def __repr__(self):
        return f"<device worker {self.thread.name}>"


def _raise(exc):
    raise exc


class _Call:
    """The parts of one multi-device run: their results, the first error, and a latch."""

    __slots__ = ("results", "errors", "left", "lock", "done", "on_error")

    def __init__(self, n, on_error):
        self.results = [None] * n
        self.errors = [None] * n
        self.left = n
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.on_error = on_error

    def run(self, i, fn, args):
        try:
            self.results[i] = fn(*args)
        except BaseException as exc:     # handed to the caller, who raises it
            self.errors[i] = exc
            if self.on_error is not None:
                self.on_error(exc)
        with self.lock:
            self.left -= 1
            last = self.left == 0
        if last:
            self.done.set()


_blas_limits = []           # the threadpoolctl limits in force while the host is split


def share_host_cores(cpus):
    """Give each of ``cpus`` virtual CPU devices its share of the host's cores.

    BLAS (OpenBLAS, MKL) keeps one pool of threads for the whole process, sized to every core:
    two devices running a matmul each would then fight over the same cores (OpenBLAS even
    queues the second call behind the first), and nothing would really run at once. While the
    host is split, BLAS gets ``cores // cpus`` threads (at least one) per call, so each
    device's kernels use their share; ``cpus=1`` gives back the original sizes. Needs
    threadpoolctl (installed with scikit-learn); without it nothing changes.
    """
    while _blas_limits:
        _blas_limits.pop().restore_original_limits()
    if cpus <= 1:
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:        # pragma: no cover
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    _blas_limits.append(threadpool_limits(max(1, (cores or 1) // cpus), user_api="blas"))


def worker(device):
    """The worker of ``device`` (made, and its thread started, on first use)."""
    w = _workers.get(device.name)
    if w is None:
        with _lock:
            w = _workers.get(device.name)
            if w is None:
                w = _workers[device.name] = Worker(device)
    return w


def current_device():
    """The device whose worker is running this code, or None on any other thread."""
    return getattr(_local, "device", None)


def stream(device):
    """The CuPy stream ``device`` 's worker issues its work on (None for a CPU device)."""
    if device.type != "gpu":
        return None
    w = worker(device)
    while w.stream is None and w.failed is None and w.thread.is_alive():   # set as it starts
        threading.Event().wait(0.0005)
    if w.failed is not None:
        raise w.failed
    return w.stream


def run_parts(parts, on_error=None):
    """Run ``fn(*args)`` for each ``(device, fn, args)`` on that device's worker; wait for all.

    Returns the results in order. If any part raises, ``on_error(exc)`` is called at once (so
    that the other parts can stop waiting for it) and, once every part has finished, the first
    error that is not a consequence of another (one whose ``secondary`` attribute is not
    true, such as a recv that gave up waiting) is raised.
    A part for the device whose worker is the calling thread runs inline.
    """
    call = _Call(len(parts), on_error)
    here = current_device()
    inline = []
    with _submit:
        for i, (device, fn, args) in enumerate(parts):
            if here is not None and device.name == here.name:
                inline.append((i, fn, args))
            else:
                worker(device).queue.put((fn, args, call, i))
    for i, fn, args in inline:
        call.run(i, fn, args)
    call.done.wait()
    errors = [e for e in call.errors if e is not None]
    if errors:
        primary = [e for e in errors if not getattr(e, "secondary", False)]
        raise (primary or errors)[0]
    return call.results
