"""Writing a file so that it is either all there or not changed at all.

The data goes to a temporary file beside the target, is fsync'ed and renamed over it; on any
failure the temporary file is removed and what was at the path before is untouched.
"""
import errno
import os
import secrets


def write_atomically(path, write):
    """Call ``write(tmp_path)`` to write the file's contents, then put it at ``path`` atomically.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "note.txt")
    >>> write_atomically(path, lambda tmp: open(tmp, "w").write("hello"))
    >>> open(path).read()
    'hello'
    """
    directory = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    while True:
        tmp = os.path.join(directory, f".{base}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                         0o666)
            break
        except FileExistsError:
            continue
    try:
        os.close(fd)
        write(tmp)
        fd = os.open(tmp, os.O_RDWR | getattr(os, "O_BINARY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_directory(directory)


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
