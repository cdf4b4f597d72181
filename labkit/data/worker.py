"""Worker processes of a ``DataLoader`` (``num_workers > 0``), on the standard library's
``multiprocessing``.

Each worker holds a copy of the dataset and has two pipes to the main process: tasks in (a
batch's number and its indices), results out (the batch's number and the collated batch, or the
exception it raised with its traceback). The main process hands out ``prefetch_factor`` tasks
per worker in turn, and puts results back in order.

Start method: ``fork`` on Linux (as PyTorch), so that datasets, ``collate_fn`` and
``worker_init_fn`` defined in a notebook cell reach the workers without being pickled (with
``spawn`` or ``forkserver`` the worker would import them by name, and a notebook's ``__main__``
cannot be imported). labkit starts no threads of its own at import or in eager work; a forked
worker only runs the dataset's and the collate function's code, so locks held by other threads
of the parent (Jupyter's, a progress bar's) are never taken in the child. A CUDA context does
not survive a fork: datasets read from host memory and the main process moves batches to a GPU.
``multiprocessing_context="spawn"`` (or a context object) chooses otherwise.

Shutdown: a worker ends when its task pipe says so (``None``), when it is closed (the main
process is gone), or when its result pipe is closed while it writes. The main process ends its
workers when an epoch is over (unless ``persistent_workers``), when a ``KeyboardInterrupt``
reaches it while it waits for a batch, and when the iterator is garbage-collected (a ``for``
loop left by ``break`` or an exception); any worker still alive after a second is terminated.
Workers ignore SIGINT (from their first instruction: the main process blocks it while it starts
them): a Ctrl-C in a terminal reaches the whole process group, and the main process decides.
"""
import contextlib
import os
import pickle
import random
import signal
import time
import traceback
import warnings
import weakref
from multiprocessing import connection

import numpy as np

from ..tensor.random import manual_seed

_POLL_SECONDS = 1.0      # how often an idle worker checks that the main process is alive
_JOIN_SECONDS = 1.0      # how long shutdown waits for workers before terminating them

_PARENT_ENDS = weakref.WeakSet()   # the main process's ends of every worker pipe
_worker_info = None


class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker: ``id`` (0..num_workers-1),
    ``num_workers``, ``seed`` (the worker's seed: labkit's, Python's ``random`` and NumPy's
    global generator were seeded from it) and ``dataset`` (the worker's copy)."""

    __slots__ = ("id", "num_workers", "seed", "dataset")

    def __init__(self, **fields):
        for k, v in fields.items():
            object.__setattr__(self, k, v)

    def __setattr__(self, name, value):
        raise RuntimeError(f"Cannot assign attributes to {type(self).__name__} objects")

    def __repr__(self):
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, "
                f"dataset={type(self.dataset).__name__})")


def get_worker_info():
    """In a DataLoader worker process, its ``WorkerInfo`` (``id``, ``num_workers``, ``seed``,
    ``dataset``); in the main process, None. An ``IterableDataset`` shards its stream by it.

    >>> import labkit as lk
    >>> lk.data.get_worker_info() is None
    True
    """
    return _worker_info


class WorkerException:
    """An exception raised in a worker, carried to the main process and raised there again with
    the worker's id and the original traceback in its message (as PyTorch's ExceptionWrapper)."""

    def __init__(self, worker_id, error, what="in DataLoader worker process"):
        self.worker_id = worker_id
        self.where = f"{what} {worker_id}"
        self.exc_type = type(error)
        self.text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        try:
            pickle.dumps(self.exc_type)
        except Exception:
            self.exc_type = RuntimeError    # a class defined inside a function cannot travel

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.text}"
        if self.exc_type is KeyError:
            error = KeyError(_KeyErrorMessage(msg))
        else:
            try:
                error = self.exc_type(msg)
            except Exception:
                error = RuntimeError(msg)
        error.worker_id = self.worker_id
        try:
            raise error
        finally:
            del error           # no cycle through this frame: the iterator is freed at once


class _KeyErrorMessage(str):
    """A KeyError's message shown as written (KeyError would show its repr, quotes and \\n)."""

    def __repr__(self):
        return self


class WorkerDied(RuntimeError):
    """A DataLoader worker process ended without being asked to (a crash, or killed)."""


class LoaderTimeout(RuntimeError):
    """No batch came within the DataLoader's ``timeout``."""


class IterableEnd:
    """A worker's answer when its copy of an IterableDataset is exhausted."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class Resume:
    """A task asking a persistent worker to start a new epoch (it answers with the same)."""


def _numpy_seed(base_seed, worker_id):
    return np.random.SeedSequence([worker_id, base_seed]).generate_state(4)


def _send(results, message, worker_id):
    """Send a result; False when the main process has closed its end (shutdown)."""
    try:
        results.send(message)
    except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
        return False
    except Exception as e:                        # the batch itself cannot be pickled
        idx, _ = message
        return _send(results, (idx, WorkerException(
            worker_id, e, "sending a batch from DataLoader worker process")), worker_id)
    return True


def worker_loop(make_fetcher, is_iterable, base_seed, init_fn, worker_id, num_workers,
                dataset, tasks, results, parent_pid):
    """The body of worker ``worker_id``: seed, run ``worker_init_fn``, then answer tasks."""
    global _worker_info
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):   # blocked by the main process until now
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    for conn in list(_PARENT_ENDS):          # inherited by fork: not ours to hold open
        conn.close()
    seed = base_seed + worker_id
    random.seed(seed)
    manual_seed(seed)
    np.random.seed(_numpy_seed(base_seed, worker_id))
    _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
    init_error = fetch = None
    try:
        if init_fn is not None:
            init_fn(worker_id)
        fetch = make_fetcher(dataset)
    except Exception as e:
        init_error = WorkerException(worker_id, e)
    ended = False
    while True:
        try:
            if not tasks.poll(_POLL_SECONDS):
                if os.getppid() != parent_pid:
                    return                          # the main process is gone
                continue
            task = tasks.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        if isinstance(task, Resume):
            ended = False
            if init_error is None:
                fetch = make_fetcher(dataset)
            if not _send(results, (task, None), worker_id):
                return
            continue
        if ended:
            continue                                # the main process knows; it sends no more
        idx, index = task
        if init_error is not None:
            data = init_error
        else:
            try:
                data = fetch(index)
            except Exception as e:
                if is_iterable and isinstance(e, StopIteration):
                    data, ended = IterableEnd(worker_id), True
                else:
                    data = WorkerException(worker_id, e)
        if not _send(results, (idx, data), worker_id):
            return
        del data, index, task


class WorkerPool:
    """``num_workers`` processes running ``worker_loop``, with their pipes; ``shutdown()`` ends
    them (it holds no reference to the loader or its iterator, so a finaliser can call it)."""

    def __init__(self, context, num_workers, make_fetcher, is_iterable, base_seed, init_fn,
                 dataset):
        self.processes, self.tasks, self.results = [], [], []
        self.closed = False
        try:
            for worker_id in range(num_workers):
                task_out, task_in = context.Pipe(duplex=False)
                result_out, result_in = context.Pipe(duplex=False)
                _PARENT_ENDS.add(task_in)
                _PARENT_ENDS.add(result_out)
                self.tasks.append(task_in)
                self.results.append(result_out)
                process = context.Process(
                    target=worker_loop, daemon=True,
                    args=(make_fetcher, is_iterable, base_seed, init_fn, worker_id, num_workers,
                          dataset, task_out, result_in, os.getpid()))
                with warnings.catch_warnings(), _sigint_blocked():
                    # Python 3.12+ warns about any fork in a process with threads; see above
                    warnings.filterwarnings("ignore", "This process .* is multi-threaded",
                                            DeprecationWarning)
                    process.start()
                self.processes.append(process)
                task_out.close()
                result_in.close()
        except BaseException:
            self.shutdown()
            raise

    def send(self, worker_id, task):
        """Send a task; a worker that has died raises ``WorkerDied`` (not the pipe's error)."""
        try:
            self.tasks[worker_id].send(task)
        except OSError:          # BrokenPipeError, ConnectionResetError: its end is closed
            raise self._died(worker_id) from None

    def receive(self, worker_ids, timeout):
        """The next message from any of ``worker_ids``: ``(worker_id, message)``. Raises if
        one of them has died, or after ``timeout`` seconds (None: wait as long as it takes)."""
        waiting = {self.results[w]: w for w in worker_ids}
        waiting.update({self.processes[w].sentinel: w for w in worker_ids})
        ready = connection.wait(list(waiting), timeout)
        if not ready:
            raise LoaderTimeout(f"DataLoader timed out after {timeout} seconds (timeout=); no "
                               f"worker delivered a batch in that time")
        ready.sort(key=lambda r: not isinstance(r, connection.Connection))   # data first
        worker_id = waiting[ready[0]]
        if isinstance(ready[0], connection.Connection):
            try:
                return worker_id, ready[0].recv()
            except (EOFError, OSError):     # the worker ended while (or before) it wrote
                pass
        raise self._died(worker_id)

    def _died(self, worker_id):
        process = self.processes[worker_id]
        process.join(_JOIN_SECONDS)
        return WorkerDied(
            f"DataLoader worker {worker_id} (pid {process.pid}) exited unexpectedly with exit "
            f"code {process.exitcode}{_signal_name(process.exitcode)}; a crash in native code "
            f"or running out of memory are the usual causes. Run with num_workers=0 to see "
            f"the error in this process")

    def stop(self, worker_id):
        """Tell one worker to end (its stream is exhausted)."""
        try:
            self.tasks[worker_id].send(None)
        except OSError:
            pass

    def shutdown(self):
        if self.closed:
            return
        self.closed = True
        for conn in self.tasks:
            try:
                conn.send(None)
            except OSError:
                pass
        for conn in self.results:       # a worker blocked writing a batch gets EPIPE and ends
            conn.close()
        deadline = time.monotonic() + _JOIN_SECONDS
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
        for process in self.processes:
            if process.is_alive():
                process.terminate()
                process.join(_JOIN_SECONDS)
            if process.is_alive():
                process.kill()
                process.join()
        for conn in self.tasks + self.results:
            conn.close()
            _PARENT_ENDS.discard(conn)


@contextlib.contextmanager
def _sigint_blocked():
    """SIGINT held back while a worker starts: the worker begins with it blocked and ignores
    it before unblocking, so a Ctrl-C at that moment cannot kill it half-started (here it is
    delivered when the block ends)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _signal_name(exitcode):
    if exitcode is not None and exitcode < 0:
        try:
            return f" ({signal.Signals(-exitcode).name})"
        except ValueError:
            pass
    return ""
