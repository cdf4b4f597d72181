"""``spawn`` / ``start_processes``: ``nprocs`` processes running ``fn(i, *args)``, joined as
``torch.multiprocessing.spawn`` joins them.

Each child runs ``fn(i, *args)``; if it raises, it writes its traceback to a file of its own
and exits with status 1. The parent waits for any process to end: when one fails, it stops the
others (SIGTERM, then SIGKILL after a grace period) and raises ``ProcessRaisedException`` with
the child's traceback and index (``ProcessExitedException`` if it died of a signal or exited
with a non-zero status without raising).
"""
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import tempfile
import time
import traceback
import warnings

_GRACE = 30.0       # seconds stopped processes get before SIGKILL when no grace_period is given


class ProcessException(Exception):
    """A process started by ``spawn`` failed: ``error_index`` is its index, ``error_pid`` its id."""

    def __init__(self, msg, error_index, error_pid):
        super().__init__(msg)
        self.msg, self.error_index, self.error_pid = msg, error_index, error_pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid)


class ProcessRaisedException(ProcessException):
    """The process's ``fn`` raised; the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """The process died of a signal or exited with a non-zero status without raising."""

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code, self.signal_name = exit_code, signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid, self.exit_code,
                            self.signal_name)


def _run(fn, i, args, error_file):
    """A child's body: ``fn(i, *args)``, its traceback to ``error_file`` if it raises."""
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass                                    # stopped by the parent
    except Exception:
        with open(error_file, "wb") as f:
            pickle.dump(traceback.format_exc(), f)
        sys.exit(1)


class ProcessContext:
    """The processes ``start_processes(..., join=False)`` started; ``join()`` waits for them."""

    def __init__(self, processes, error_files):
        self.processes = processes
        self.error_files = error_files
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self):
        return [int(p.pid) for p in self.processes]

    def _join_all(self, timeout):
        end = time.monotonic() + timeout
        for process in self.processes:
            process.join(max(0.0, end - time.monotonic()))

    def join(self, timeout=None, grace_period=None):
        """Wait up to ``timeout`` seconds for a process to end. Returns True once all have ended
        well, False while some still run; raises ``ProcessRaisedException`` /
        ``ProcessExitedException`` for the first that failed, after stopping the others."""
        if not self.sentinels:
            return True
        failed = None
        for sentinel in multiprocessing.connection.wait(list(self.sentinels), timeout=timeout):
            index = self.sentinels.pop(sentinel)
            self.processes[index].join()
            if self.processes[index].exitcode != 0:
                failed = index
                break
        if failed is None:
            return not self.sentinels
        if grace_period is not None:
            self._join_all(grace_period)
        for process in self.processes:
            if process.is_alive():
                process.terminate()
        self._join_all(_GRACE if grace_period is None else grace_period)
        for process in self.processes:
            if process.is_alive():
                process.kill()
            process.join()
        self.sentinels.clear()
        process = self.processes[failed]
        try:
            with open(self.error_files[failed], "rb") as f:
                trace = pickle.load(f)
        except FileNotFoundError:
            code = process.exitcode
            if code < 0:
                try:
                    name = signal.Signals(-code).name
                except ValueError:
                    name = f"<unknown signal {-code}>"
                raise ProcessExitedException(f"process {failed} terminated with signal {name}",
                                             failed, process.pid, code, name) from None
            raise ProcessExitedException(f"process {failed} terminated with exit code {code}",
                                         failed, process.pid, code) from None
        finally:
            self._remove_error_files()
        raise ProcessRaisedException(
            f"\n\n-- Process {failed} terminated with the following error:\n{trace}",
            failed, process.pid)

    def _remove_error_files(self):
        for name in self.error_files:
            try:
                os.unlink(name)
            except FileNotFoundError:
                pass


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Start ``nprocs`` processes by ``start_method`` ('spawn', 'fork', 'forkserver'), each
    running ``fn(i, *args)`` with its index ``i``; with ``join``, wait for all and raise if one
    fails, else return their ``ProcessContext``."""
    context = multiprocessing.get_context(start_method)
    processes, error_files = [], []
    for i in range(nprocs):
        # a name no file has: the child creates it only if fn raises
        fd, name = tempfile.mkstemp(prefix="labkit-errorfile-", suffix=".pickle")
        os.close(fd)
        os.unlink(name)
        process = context.Process(target=_run, args=(fn, i, args, name), daemon=daemon)
        process.start()
        processes.append(process)
        error_files.append(name)
    started = ProcessContext(processes, error_files)
    if not join:
        return started
    while not started.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Run ``fn(i, *args)`` in ``nprocs`` new processes (``i`` = 0 .. nprocs-1), as
    ``torch.multiprocessing.spawn``. ``fn`` must be defined at the top level of a module (the
    'spawn' start method pickles it). If one process raises, the others are stopped and
    ``ProcessRaisedException`` is raised here with its index and traceback. With
    ``join=False``, returns the ``ProcessContext`` to join later::

        def train(rank, world_size):         # at the top level of a module
            ...
        mp.spawn(train, args=(2,), nprocs=2)
    """
    if start_method != "spawn":
        warnings.warn(f"spawn only starts processes with start_method='spawn' (got "
                      f"{start_method!r}); use labkit.multiprocessing.start_processes(..., "
                      f"start_method={start_method!r}) for another", FutureWarning, stacklevel=2)
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")
