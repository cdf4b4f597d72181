"""The reaper: ends a cluster's processes when the process that started the cluster dies.

A ``Cluster`` starts this script (by its path, not as a labkit module, so it starts fast) with
the cluster's id and keeps the write end of a pipe to its stdin. The pipe reaches end-of-file
when the owner closes it or when the owner dies (a crashed or killed notebook kernel); then,
unless the owner wrote ``release`` first, the reaper runs the cluster's cancel command if it
has one (``scancel`` of its Slurm job, whose workers may run on nodes no mark here reaches),
ends every process marked with the cluster's id, and removes the cluster's temporary folder.
It runs in a session of its own, so a Ctrl-C in a terminal does not reach it.

    python reaper.py CLUSTER_ID FOLDER [CANCEL_COMMAND...]

``start`` and ``release`` are the owner's side (a ``Cluster``, ``python -m labkit.dist.run``).
"""
import os
import subprocess
import sys


def start(owner_id, folder, cancel=None):
    """Start the reaper of the processes marked ``owner_id`` (and of ``folder``); returns it.
    ``cancel``: a command (argv) it runs first if the owner dies, e.g. ``scancel`` of a job."""
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), owner_id, folder] +
                            list(cancel or ()),
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def release(reaper):
    """Tell a reaper from ``start`` that its owner ended everything itself, and wait for it."""
    if reaper is None or reaper.poll() is not None:
        return
    try:
        reaper.stdin.write(b"release\n")
        reaper.stdin.close()
    except OSError:
        pass
    try:
        reaper.wait(timeout=5)
    except subprocess.TimeoutExpired:
        reaper.kill()
        reaper.wait()


def _procs():
    """This folder's procs.py, imported without importing the labkit package (this script runs
    as a plain file, in a process of its own)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import procs
    return procs


def main(argv):
    cluster_id, folder, cancel = argv[1], argv[2], argv[3:]
    procs = _procs()
    data = sys.stdin.read()          # blocks until the owner closes the pipe or dies
    if "release" in data:
        return 0
    if cancel:
        try:
            subprocess.run(cancel, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60)
        except (OSError, subprocess.SubprocessError):
            pass
    procs.end_cluster(cluster_id)
    import shutil
    shutil.rmtree(folder, ignore_errors=True)     # the cluster's temporary files
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
