"""Workers on another machine: ``hosts=[...]`` reached over SSH.

A host is written ``"[user@]name[:port]"``. A cluster whose host is remote starts its
controller here, as always, and reaches the host with one ``ssh`` connection, which runs
labkit's small agent there (``remote_agent.py``); the agent starts the workers with
``mpiexec`` on that host, so they form one MPI world exactly like local workers, and they
register with the controller here. Their prints come back through ipyparallel, labelled by
rank, like local workers' prints.

Process hygiene holds across the connection: every process the agent starts carries the
cluster's mark (``LABKIT_DIST_CLUSTER``), and the agent ends all of them when the cluster
closes, when the connection drops, or when the process holding the cluster dies (the SSH
connection ends with it). An interrupt reaches a remote worker through the agent.

What the remote host needs: an SSH login that needs no password (a key, or an agent), labkit,
its Python (with the ``dist`` extra) and ``mpiexec`` at the same paths as here (a shared
filesystem, or the same image on every machine), and a route back to this machine's controller
ports (the controller listens on every interface when the host is not a loopback address; its
connections are signed with the cluster's key).

To go through SSH to this very machine (to try a remote setup), name the host with a user or a
port, e.g. ``hosts=["root@127.0.0.1:2222"]``, or pass ``ssh_options``; a bare ``"localhost"``
or ``"127.0.0.1"`` means local workers without SSH.

>>> parse_host("alice@node7:2222")
Host(user='alice', name='node7', port=2222)
>>> parse_host("node7").destination
'node7'
"""
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections import namedtuple

from .errors import DistError

_AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "remote_agent.py")
_LOOPBACK = ("localhost", "::1")


class Host(namedtuple("Host", "user name port")):
    """One entry of ``hosts=``: an optional SSH user and port, and the machine's name."""

    @property
    def destination(self):
        return f"{self.user}@{self.name}" if self.user else self.name

    @property
    def loopback(self):
        return self.name in _LOOPBACK or self.name.startswith("127.")

    def __str__(self):
        port = f":{self.port}" if self.port else ""
        return f"{self.destination}{port}"


def parse_host(spec):
    """``"[user@]name[:port]"`` (an IPv6 address in brackets: ``"[::1]:22"``) as a Host."""
    if not isinstance(spec, str) or not spec.strip():
        raise DistError(f"lk.dist: a host is a string '[user@]name[:port]', got {spec!r}")
    text = spec.strip()
    user, _, rest = text.rpartition("@")
    port = None
    if rest.startswith("["):                               # [ipv6]:port
        name, _, tail = rest[1:].partition("]")
        if tail.startswith(":"):
            port = tail[1:]
    elif rest.count(":") == 1:
        name, port = rest.split(":")
    else:
        name = rest
    if port is not None:
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise DistError(f"lk.dist: host {spec!r} has a bad port {port!r}; write "
                            f"'[user@]name[:port]' with a port from 1 to 65535")
        port = int(port)
    if not name:
        raise DistError(f"lk.dist: host {spec!r} has no machine name; write '[user@]name[:port]'")
    return Host(user or None, name, port)


def _local_names():
    return {"localhost", "127.0.0.1", "::1", socket.gethostname(), socket.getfqdn()}


def remote_host(hosts, ssh_options):
    """The Host to reach over SSH, or None when every worker runs on this machine (hosts
    that name this machine, with no user, port or ``ssh_options``)."""
    if hosts is None:
        if ssh_options:
            raise DistError("lk.dist: ssh_options= is for remote hosts; pass hosts=[...] too")
        return None
    parsed = [parse_host(h) for h in hosts]
    if not parsed:
        raise DistError("lk.dist: hosts=[] lists no machine; leave hosts=None for this one")
    local = _local_names()
    over_ssh = [h for h in parsed if h.user or h.port or ssh_options or h.name not in local]
    if not over_ssh:
        return None
    if len(set(parsed)) > 1:
        raise DistError(
            f"lk.dist: workers on several machines ({', '.join(map(str, dict.fromkeys(parsed)))})"
            f" are not supported yet: one cluster runs on this machine or on one remote host. "
            f"List one host (n= sets how many workers it runs).")
    return parsed[0]


def controller_address(host):
    """Where the controller listens and the address the workers dial: loopback for a loopback
    host, else every interface, reached at this machine's address on the route to ``host``."""
    if host is None or host.loopback:
        return "127.0.0.1", None
    try:
        family = socket.AF_INET6 if ":" in host.name else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((host.name, host.port or 22))          # no packet is sent
            mine = s.getsockname()[0]
    except OSError as exc:
        raise DistError(f"lk.dist: cannot find a route to host {host} ({exc}); check the "
                        f"name, or use its address") from None
    return "0.0.0.0", mine


def ssh_argv(host, ssh_options):
    """The ``ssh`` command line that reaches ``host`` (no password prompt: it would hang)."""
    ssh = os.environ.get("LABKIT_SSH", "ssh")
    argv = [ssh, "-T", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=5",
            "-o", "ServerAliveCountMax=3"]
    if host.port:
        argv += ["-p", str(host.port)]
    if isinstance(ssh_options, str):
        ssh_options = shlex.split(ssh_options)
    argv += list(ssh_options or ())
    return argv + [host.destination]


class RemoteEngines:
    """The workers of one cluster on one remote host: an SSH connection running the agent,
    which runs ``mpiexec`` and the engines there."""

    def __init__(self, host, ssh_options, cluster_id, log_path, python=None):
        self.host = host
        self.ssh_options = ssh_options
        self.cluster_id = cluster_id
        self.log_path = log_path
        self.python = python or sys.executable
        self.proc = None
        self._log = None

    def start(self, cmd, env, local_env):
        """Connect and start ``cmd`` (a list) on the host with ``env`` added there; the ssh
        process itself runs here with ``local_env`` added (the cluster's mark)."""
        from .procs import MARKER
        remote = " ".join(shlex.quote(w) for w in
                          ["env", f"{MARKER}={self.cluster_id}", self.python, "-u", _AGENT,
                           self.cluster_id])
        self._log = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen(
                ssh_argv(self.host, self.ssh_options) + [remote], stdin=subprocess.PIPE,
                stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, **local_env},
                start_new_session=True)          # a Ctrl-C in a terminal is labkit's to handle
        except OSError as exc:
            raise DistError(f"lk.dist: could not run ssh to reach {self.host}: {exc}. "
                            f"Install an SSH client (Debian: openssh-client).") from None
        self._send(json.dumps({"cmd": cmd, "env": env}))

    def _send(self, line):
        if self.proc is None or self.proc.stdin is None or self.proc.stdin.closed:
            return False
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
            return True
        except OSError:
            return False

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def output(self):
        """What ssh, the agent and ``mpiexec`` printed so far."""
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def signal(self, pid, signum):
        """Send ``signum`` to the cluster's process ``pid`` on the host."""
        self._send(f"signal {int(pid)} {int(signum)}")

    def stop(self, timeout=10.0):
        """End every process of the cluster on the host (the agent does it), then the ssh
        connection. The agent cleans up even if this is never called: the connection ends
        when this process dies."""
        if self.proc is None:
            return
        self._send("stop")
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self._log is not None:
            self._log.close()
