"""Finding and ending the processes of one cluster, by a mark in their environment.

Every process a ``Cluster`` starts (the ipyparallel controller, ``mpiexec`` and its daemons, the
engines, anything the launched function spawns) inherits ``LABKIT_DIST_CLUSTER=<id>``. Ending
a cluster ends every process carrying its id, whichever process is their parent by then, so
nothing outlives it: not a nanny, not a process orphaned when the notebook's kernel died.
"""
import os

MARKER = "LABKIT_DIST_CLUSTER"


def marked(cluster_id=None, prefix=None):
    """The live processes carrying ``cluster_id`` (any labkit cluster when None), or a cluster id
    starting with ``prefix`` (a launcher's ``"<pid>-"``), as psutil.Process objects."""
    import psutil
    me = os.getpid()
    found = []
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            value = proc.environ().get(MARKER)
            if value is None or (cluster_id is not None and value != cluster_id):
                continue
            if prefix is not None and not value.startswith(prefix):
                continue
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
        except (psutil.Error, OSError):
            continue
        found.append(proc)
    return found


def _gone(proc):
    """True once ``proc`` has exited (a zombie counts; our own zombie children are reaped)."""
    import psutil
    try:
        if proc.status() != psutil.STATUS_ZOMBIE:
            return False
    except psutil.Error:
        return True
    try:
        os.waitpid(proc.pid, os.WNOHANG)
    except (ChildProcessError, OSError):
        pass
    return True


def _wait(procs, timeout):
    """Wait up to ``timeout`` s for ``procs`` to exit; return those still alive."""
    import time
    deadline = time.monotonic() + timeout
    alive = [p for p in procs if not _gone(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.02)
        alive = [p for p in alive if not _gone(p)]
    return alive


def _send(procs, how):
    import psutil
    for proc in procs:
        try:
            getattr(proc, how)()
        except psutil.Error:
            pass


def end(procs, grace=0.3):
    """End ``procs``: children first with SIGKILL (their parents, e.g. mpiexec, then reap them),
    then the rest with SIGTERM, and SIGKILL for any still alive after ``grace`` seconds."""
    import psutil
    pids = {p.pid for p in procs}
    children = []
    for proc in procs:
        try:
            if proc.ppid() in pids:
                children.append(proc)
        except psutil.Error:
            pass
    parents = [p for p in procs if p not in children]
    _send(children, "kill")
    _wait(children, 1.0)
    _send(parents, "terminate")
    alive = _wait(parents, grace)
    _send(alive, "kill")
    _wait(alive, 3.0)


def end_cluster(cluster_id, grace=0.3, rounds=3):
    """End every process of ``cluster_id`` (a few rounds, for processes started meanwhile)."""
    for _ in range(rounds):
        procs = marked(cluster_id)
        if not procs:
            return
        end(procs, grace)
