"""What every workload shares: the registry of implementations, the seeded data, timing and memory.

A workload module (``benchmarks/workloads/wN_*.py``) declares:

- ``NAME`` ("W3"), ``TITLE`` (one line), ``UNIT`` ("ms/step", "us/op" or "GFLOP/s");
- ``data(rng)``: the initial weights and inputs, drawn from one seeded NumPy generator, as a
  dict of NumPy arrays; every implementation receives the very same arrays;
- ``metric(seconds_per_step)``: the number reported in ``UNIT`` for one step's time;
- ``IMPLS``: a :class:`Registry` of implementations, one factory per name
  (``labkit_eager``, ``labkit_captured``, ``numpy``, ``torch``).

A factory is called as ``factory(data, device)`` (``device`` is "cpu" or "gpu") in a worker
process of its own and returns a :class:`Bench`. A factory that cannot run here raises
:class:`NotAvailable` with the reason, which the runner prints in the table instead of a number:
that is how ``labkit_captured`` shows "n/a (graph capture not built yet)" today and is measured,
with no change to the runner, once ``lk.function`` exists.
"""
import hashlib
import os
import resource
import time

import numpy as np

SEED = 20240601
IMPLEMENTATION_ORDER = ("labkit_eager", "labkit_captured", "numpy", "torch")
LR = 0.05   # the SGD learning rate of every training workload


class NotAvailable(Exception):
    """Raised by a factory whose implementation cannot run here; the message says why."""


class Bench:
    """One implementation of one workload, ready to run.

    ``step()`` runs one unit of the workload (a training step, a chain of ops, one matmul).
    ``check()`` runs the first step(s) from the initial weights and returns a list of floats
    (losses, checksums) that must agree across implementations before anything is timed.
    ``sync()`` waits for queued device work (GPU implementations); a no-op on CPU.
    ``info`` holds facts to report (threads, library versions).
    """

    def __init__(self, step, check, sync=None, info=None):
        self.step = step
        self.check = check
        self.sync = sync or (lambda: None)
        self.info = info or {}


class Registry:
    """The implementations of one workload, by name: ``@IMPLS.register("torch")``."""

    def __init__(self):
        self.factories = {}

    def register(self, name):
        if name not in IMPLEMENTATION_ORDER:
            raise ValueError(f"unknown implementation {name!r}; known: {IMPLEMENTATION_ORDER}")

        def add(factory):
            self.factories[name] = factory
            return factory
        return add

    def names(self):
        return [n for n in IMPLEMENTATION_ORDER if n in self.factories]


# ---- data --------------------------------------------------------------------------------------
def rng():
    """The one seeded generator the initial weights and inputs are drawn from."""
    return np.random.default_rng(SEED)


def fingerprint(arrays):
    """A short hash of a dict of arrays: proves every implementation got the same bits."""
    h = hashlib.sha1()
    for key in sorted(arrays):
        a = np.ascontiguousarray(arrays[key])
        h.update(key.encode())
        h.update(str(a.dtype).encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:12]


def glorot(rng, fan_in, fan_out, shape=None):
    """Uniform Glorot initial weights, float32."""
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=shape or (fan_in, fan_out)).astype(np.float32)


def labels(rng, n, classes=10):
    return rng.integers(0, classes, size=n).astype(np.int64)


# ---- implementation helpers ----------------------------------------------------------------
def labkit_device(device):
    """The labkit device name for "cpu" / "gpu", or NotAvailable if labkit has no such device."""
    import labkit as lk
    if device == "cpu":
        return "cpu:0"
    if lk.devices.gpu_count() == 0:
        raise NotAvailable("no GPU for labkit here (needs CuPy and a CUDA device)")
    return "gpu:0"


def labkit_sync(device):
    if device == "cpu":
        return None
    import cupy
    return cupy.cuda.Device().synchronize


def labkit_call_bench(fn, arrays, device, capture, checksum):
    """A Bench for ``fn(*tensors)`` in labkit (``lk.function(fn)`` if ``capture``), with
    ``checksum(result_array)`` as its agreement check."""
    import labkit as lk
    dev = labkit_device(device)
    f = require_capture()(fn) if capture else fn
    tensors = [lk.tensor(a, device=dev) for a in arrays]
    return Bench(step=lambda: f(*tensors), check=lambda: checksum(f(*tensors).numpy()),
                 sync=labkit_sync(device))


def require_capture():
    """NotAvailable until labkit has graph capture (``lk.function``)."""
    import labkit as lk
    if not hasattr(lk, "function"):
        raise NotAvailable("n/a (graph capture not built yet)")
    return lk.function


def torch_device(device):
    import torch
    if device == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise NotAvailable("no CUDA for PyTorch here")
    return torch.device("cuda")


def torch_sync(device):
    import torch
    return torch.cuda.synchronize if device == "gpu" else None


def torch_info():
    import torch
    return {"torch": torch.__version__, "torch_threads": torch.get_num_threads()}


def numpy_only(device):
    if device != "cpu":
        raise NotAvailable("NumPy runs on the CPU only")


def labkit_sgd(params, lr):
    """Plain SGD on raw labkit tensors, the way an optimiser does it: in place, no tape."""
    import labkit as lk
    with lk.no_grad():
        for p in params:
            xp = p._device.xp
            xp.subtract(p._data, lr * p.grad._data, out=p._data)
            p.grad = None


# ---- training steps shared by the training workloads (W3, W4, W6) -----------------------------
def labkit_trainer(params, inputs, loss_fn, device, capture=False):
    """A Bench for SGD on ``loss_fn(*params, *inputs)`` with raw labkit tensors.

    Eager: ``loss.backward()`` fills ``p.grad`` and a manual in-place SGD update follows.
    Captured: the whole step (forward, ``backward()``, ``lk.optim.SGD.step()`` and
    ``zero_grad()``) is one ``lk.function``, so the update runs in the graph as in-place assigns.
    """
    import labkit as lk
    dev = labkit_device(device)
    function = require_capture() if capture else None
    params = [lk.tensor(a, device=dev, requires_grad=True) for a in params]
    inputs = [lk.tensor(a, device=dev) for a in inputs]
    if capture:
        opt = lk.optim.SGD(params, lr=LR)

        @function
        def train_step(*inputs):
            loss = loss_fn(*params, *inputs)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        def step():
            return train_step(*inputs)
    else:
        def step():
            loss = loss_fn(*params, *inputs)
            loss.backward()
            labkit_sgd(params, LR)
            return loss

    def check():
        return [step().item(), step().item()]
    return Bench(step=step, check=check, sync=labkit_sync(device))


def register_labkit_trainers(registry, params, input_keys, loss_fn):
    """Register ``labkit_eager`` and ``labkit_captured`` in ``registry``: ``labkit_trainer`` on
    ``params(d)`` and the inputs ``d[k]`` for each of ``input_keys``, with ``loss_fn``."""
    for name, capture in (("labkit_eager", False), ("labkit_captured", True)):
        def factory(d, device, capture=capture):
            return labkit_trainer(params(d), [d[k] for k in input_keys], loss_fn, device,
                                  capture=capture)
        registry.register(name)(factory)


def torch_trainer(params, inputs, loss_fn, device):
    """A Bench for SGD on ``loss_fn(*params, *inputs)`` in PyTorch eager (manual in-place SGD)."""
    import torch
    dev = torch_device(device)
    params = [torch.tensor(a, device=dev, requires_grad=True) for a in params]
    inputs = [torch.tensor(a, device=dev) for a in inputs]

    def step():
        loss = loss_fn(*params, *inputs)
        loss.backward()
        with torch.no_grad():
            for p in params:
                p.sub_(p.grad, alpha=LR)
                p.grad = None
        return loss

    def check():
        return [step().item(), step().item()]
    return Bench(step=step, check=check, sync=torch_sync(device), info=torch_info())


def numpy_trainer(params, inputs, loss_and_grads, device):
    """A Bench for SGD with a hand-written ``loss_and_grads(params, *inputs) -> (loss, grads)``."""
    numpy_only(device)
    params = [a.copy() for a in params]

    def step():
        loss, grads = loss_and_grads(params, *inputs)
        for p, g in zip(params, grads):
            p -= LR * g
        return loss

    def check():
        return [float(step()), float(step())]
    return Bench(step=step, check=check, info=blas_info())


def numpy_cross_entropy(logits, y):
    """Mean softmax cross-entropy and its gradient with respect to ``logits``, in NumPy."""
    n = logits.shape[0]
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    total = e.sum(axis=1, keepdims=True)
    rows = np.arange(n)
    loss = float(np.mean(np.log(total[:, 0]) - shifted[rows, y]))
    dlogits = e / total
    dlogits[rows, y] -= 1.0
    dlogits *= 1.0 / n
    return loss, dlogits


def blas_info():
    """The BLAS NumPy uses, its core type and threads (from threadpoolctl when installed)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return {}
    for pool in threadpool_info():
        if pool.get("user_api") == "blas":
            return {"blas": f"{pool.get('internal_api')} {pool.get('version')}",
                    "blas_core": pool.get("architecture"), "blas_threads": pool.get("num_threads")}
    return {}


# ---- timing and memory ---------------------------------------------------------------------
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def timed(bench, n, clock="wall"):
    """Seconds per step over ``n`` consecutive steps (synchronised at both ends).

    ``clock``: "wall" (elapsed time) or "cpu" (this process's CPU time, all its threads: on a
    machine shared with other work, single-threaded runs measured in CPU time do not count the
    time the process was waiting for a core)."""
    step, sync, now = bench.step, bench.sync, CLOCKS[clock]
    sync()
    t0 = now()
    for _ in range(n):
        step()
    sync()
    return (now() - t0) / n


def slowest_rank_seconds(comm, fn):
    """Seconds ``fn()`` takes on the slowest rank of ``comm`` (an mpi4py communicator), started
    together after a barrier; what ``fn`` returns is freed after the clock stops."""
    from mpi4py import MPI
    comm.Barrier()
    start = time.perf_counter()
    out = fn()
    elapsed = time.perf_counter() - start
    del out
    return comm.allreduce(elapsed, op=MPI.MAX)


def steps_for(seconds_per_step, target_s):
    """How many steps make one sample of about ``target_s`` seconds (at least one)."""
    return max(1, int(round(target_s / max(seconds_per_step, 1e-9))))


def current_rss():
    """Resident memory of this process now, in bytes."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        try:
            import psutil
            return psutil.Process().memory_info().rss
        except ImportError:
            return float("nan")


def peak_rss():
    """The high-water mark of this process's resident memory, in bytes."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if os.uname().sysname == "Darwin" else peak * 1024


def median(values):
    values = sorted(values)
    n = len(values)
    if n == 0:
        return float("nan")
    mid = n // 2
    return values[mid] if n % 2 else 0.5 * (values[mid - 1] + values[mid])
