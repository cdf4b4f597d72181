"""The agent: runs a cluster's workers on a remote host, started there over SSH.

``lk.dist`` reaches a remote host with one ``ssh`` connection that runs this script (by its
path, not as a labkit module, so it starts fast and imports nothing but the standard library,
psutil and the sibling ``procs.py``). Every process it starts carries the cluster's mark
(``LABKIT_DIST_CLUSTER``), like the workers of a local cluster.

Its standard input is the line to the caller:

- the first line is a JSON object: ``{"cmd": [...], "env": {...}}``, the command that starts
  the workers (``mpiexec ... python -m ipyparallel.engine --mpi``) and what to add to its
  environment (the mark, ``IPP_CONNECTION_INFO``, ``PYTHONPATH``...);
- then ``signal PID SIGNUM`` sends a signal to one of the cluster's processes (an interrupt
  reaches a remote worker this way), and ``stop`` ends the workers.

When the caller writes ``stop``, closes the line, or dies (SSH then closes it), the agent ends
every process of the cluster on this host and removes its temporary folder. When the workers'
``mpiexec`` exits by itself, the agent cleans up and exits too, so the caller sees the SSH
connection end. What ``mpiexec`` prints comes back on the agent's standard output.

    python remote_agent.py CLUSTER_ID
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading


def _procs():
    """This folder's procs.py, imported without importing the labkit package (this script runs
    as a plain file, in a process of its own)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import procs
    return procs


def _say(text):
    try:
        sys.stdout.write(f"labkit-agent: {text}\n")
        sys.stdout.flush()
    except (OSError, ValueError):       # the caller is gone: clean up all the same
        pass


def _exit_on_signal(signum, frame):
    raise SystemExit(128 + signum)      # runs the cleanup in main's ``finally``


def main(argv):
    cluster_id = argv[1]
    procs = _procs()
    if os.environ.get(procs.MARKER) != cluster_id:
        _say(f"refusing to start: {procs.MARKER} is not {cluster_id}")
        return 2
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _exit_on_signal)
    tmp = tempfile.mkdtemp(prefix="labkit-remote-")
    done = threading.Event()
    child = None
    try:
        line, rest = _first_line()
        spec = json.loads(line or "null")
        if not isinstance(spec, dict) or not spec.get("cmd"):
            _say("no command received")
            return 2
        env = dict(os.environ)
        env.update({k: str(v) for k, v in spec.get("env", {}).items()})
        env[procs.MARKER] = cluster_id
        env["IPYTHONDIR"] = os.path.join(tmp, "ipython")
        child = subprocess.Popen(spec["cmd"], env=env, cwd=tmp, stdin=subprocess.DEVNULL,
                                 stdout=sys.stdout, stderr=subprocess.STDOUT)
        _say(f"started pid {child.pid}")

        def watch_child():
            code = child.wait()
            if not done.is_set():
                _say(f"the workers' launcher exited with code {code}")
                done.set()
        threading.Thread(target=watch_child, daemon=True).start()
        _serve(cluster_id, procs, done, rest)
    except (OSError, ValueError) as exc:
        if not done.is_set():
            _say(f"{type(exc).__name__}: {exc}")
    finally:
        done.set()
        procs.end_cluster(cluster_id)
        if child is not None and child.poll() is None:
            child.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _first_line():
    """The first line of standard input (read unbuffered), and any bytes read after it."""
    data = b""
    while b"\n" not in data:
        chunk = os.read(0, 4096)
        if not chunk:
            break
        data += chunk
    line, _, rest = data.partition(b"\n")
    return line.decode(), rest


def _serve(cluster_id, procs, done, buffer):
    """Read commands until ``stop``, end of input, or the workers' launcher exiting."""
    import select
    while not done.is_set():
        if b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            words = line.decode(errors="replace").split()
            if words == ["stop"]:
                return
            if len(words) == 3 and words[0] == "signal":
                _signal(cluster_id, procs, int(words[1]), int(words[2]))
            continue
        try:
            ready, _, _ = select.select([0], [], [], 0.2)
            if not ready:
                continue
            chunk = os.read(0, 4096)
        except OSError:
            return
        if not chunk:
            return
        buffer += chunk


def _signal(cluster_id, procs, pid, signum):
    """Send ``signum`` to ``pid`` only if it is one of this cluster's processes."""
    if any(p.pid == pid for p in procs.marked(cluster_id)):
        try:
            os.kill(pid, signal.Signals(signum))
        except (OSError, ValueError):
            pass


if __name__ == "__main__":
    sys.exit(main(sys.argv))
