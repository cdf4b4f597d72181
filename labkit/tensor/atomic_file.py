"""Writing a file so that it is either all there or not changed at all, leaving nothing behind.

The data goes to a temporary file beside the target (``.<name>.labkit-<hex>.tmp``), is fsync'ed
and renamed over it. What was at the path before is untouched until that rename, and the
temporary file does not outlive the write:

- an exception (also Ctrl-C) removes it;
- SIGTERM or SIGHUP (a preempted job, a closed terminal) removes it, then ends the process by
  the same signal, as if labkit had not been there (only where the signal's handler is the
  default one and the write runs in the main thread; a handler of your own runs as usual);
- SIGKILL or a power cut cannot be caught: the next atomic write into the same folder removes
  such leftovers. The writer holds a lock on its temporary file while it lives (``flock``, which
  the kernel releases when a process dies), so only files of writers that are gone are removed.
"""
import contextlib
import errno
import os
import re
import secrets
import signal
import threading
import time

try:
    import fcntl
except ImportError:                       # Windows: no locks, no sweeping
    fcntl = None

_SUFFIX = ".tmp"
_OURS = re.compile(r"^\..+\.labkit-[0-9a-f]{8}\.tmp$")
# the temporary files of earlier labkit versions (which held no lock): removed an hour old
_EARLIER = re.compile(r"^\..+\.[0-9a-f]{8}\.tmp$")
_EARLIER_AGE = 3600.0
_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def temporary_name(path):
    """A fresh name for a temporary file beside ``path``, of labkit's own naming."""
    directory, base = os.path.split(os.path.abspath(path))
    return os.path.join(directory, f".{base}.labkit-{secrets.token_hex(4)}{_SUFFIX}")


def write_atomically(path, write):
    """Call ``write(tmp_path)`` to write the file's contents, then put it at ``path`` atomically.

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "note.txt")
    >>> write_atomically(path, lambda tmp: open(tmp, "w").write("hello"))
    >>> open(path).read(), os.listdir(folder)
    ('hello', ['note.txt'])
    """
    directory = os.path.dirname(os.path.abspath(path))
    sweep(directory)
    while True:
        tmp = temporary_name(path)
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                         0o666)
            break
        except FileExistsError:
            continue
    try:
        with _removed_on_termination(tmp):
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)   # held until closed: "a writer is alive"
                write(tmp)
                os.fsync(fd)
                os.replace(tmp, path)
            except BaseException:
                _remove(tmp)
                raise
    finally:
        os.close(fd)
    _fsync_directory(directory)


def sweep(directory):
    """Remove the temporary files that atomic writes into ``directory`` left behind when their
    process was killed (SIGKILL, a power cut): those of labkit's naming that no living writer
    holds. Returns the names removed."""
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        if _OURS.match(name):
            if fcntl is not None and _unheld(os.path.join(directory, name)):
                removed.append(name)
        elif _EARLIER.match(name):
            path = os.path.join(directory, name)
            with contextlib.suppress(OSError):
                if time.time() - os.stat(path).st_mtime > _EARLIER_AGE:
                    os.unlink(path)
                    removed.append(name)
    return removed


def _unheld(path):
    """Remove ``path`` if no process holds its lock; whether it was removed."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False                     # a writer is still at work
        stat = os.fstat(fd)
        if stat.st_size == 0 and time.time() - stat.st_mtime < 5.0:
            return False                     # just made: its writer may not have locked it yet
        with contextlib.suppress(OSError):
            same = os.stat(path)
            if (same.st_ino, same.st_dev) == (stat.st_ino, stat.st_dev):
                os.unlink(path)
                return True
        return False
    finally:
        os.close(fd)


def _remove(path):
    with contextlib.suppress(OSError):
        os.unlink(path)


class _Terminated(BaseException):
    """Raised in the main thread by a termination signal while a temporary file is written."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _removed_on_termination(tmp):
    """While the block runs, SIGTERM / SIGHUP (with their default handlers) raise instead of
    ending the process at once, so the block's cleanup removes ``tmp``; the signal is then
    delivered again with its default handler, which ends the process as it would have."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum in _SIGNALS:
        try:
            if signal.getsignal(signum) is signal.SIG_DFL:
                previous[signum] = signal.signal(signum, _raise_terminated)
        except (ValueError, OSError):
            pass
    try:
        yield
    except _Terminated as stop:
        _restore(previous)
        _remove(tmp)
        os.kill(os.getpid(), stop.signum)
        raise                                # (not reached: the default handler ends us)
    finally:
        _restore(previous)


def _raise_terminated(signum, frame):
    raise _Terminated(signum)


def _restore(previous):
    for signum, handler in previous.items():
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signum, handler)
    previous.clear()


def _fsync_directory(directory):
    """Make the rename durable. Skipped where directories cannot be opened (Windows) or synced
    (EINVAL: some network file systems)."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)
