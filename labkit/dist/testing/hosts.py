"""Hosts made on this machine, to try ``hosts=[...]`` without a second machine: each a network
namespace with its own address, host name and OpenSSH server, joined to this machine's
namespace by a bridge, reached with a throwaway key. Where the kernel forbids namespaces, two
``sshd`` on loopback ports stand in (``Hosts.kind`` says which). Everything they make is
removed by ``close()``. labkit's multi-host tests and the tutorial "From one notebook to a
cluster" use them; on a real cluster you write the machines' names instead.

Needs root, ``ip`` (iproute2), ``unshare`` (util-linux), ``sshd``, ``ssh`` and ``ssh-keygen``
(openssh-server, openssh-client); ``start_hosts`` raises ``Unavailable`` with the reason.

>>> from labkit.dist.testing import start_hosts
>>> hosts = start_hosts(2)                                        # doctest: +SKIP
>>> lk.dist.launch(fn, n=4, hosts=hosts.specs, ssh_options=hosts.ssh_options,
...                network=hosts.network)                         # doctest: +SKIP
>>> hosts.close()                                                 # doctest: +SKIP
"""
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time


class Unavailable(Exception):
    """This machine cannot make the hosts (or the Slurm cluster); the message says why."""


def find(name):
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}",
                                                    f"/sbin/{name}") if os.access(p, os.X_OK)),
                                      None)


def _run(*argv, check=True):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise Unavailable(f"{' '.join(argv)} failed: {done.stderr.strip()[-300:]}")
    return done


def stop(processes, timeout=10):
    """End the daemons started here (Popen objects, in that order): SIGTERM, then SIGKILL
    for any still running after ``timeout`` seconds."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Hosts:
    """The hosts made here: ``specs`` (``"root@address:port"`` each), ``names`` (each
    host's own host name, or its address where hosts share this machine's name),
    ``ssh_options`` (the key and no host-key checks), ``network`` (the subnet between them,
    or None on loopback) and ``kind`` ("namespaces" or "loopback")."""

    def __init__(self, count, loopback=False):
        self.count = count
        self.loopback = loopback
        self.tag = secrets.token_hex(3)
        self.folder = tempfile.mkdtemp(prefix="labkit-test-hosts-")
        self.servers = []
        self.argvs = []                    # each server's command line, to restore it
        self.namespaces = []
        self.bridge = None
        self.specs, self.names, self.kind, self.network = [], [], None, None
        self.ssh_options = ["-i", os.path.join(self.folder, "client_key"),
                            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                            "-o", "LogLevel=ERROR"]

    # -- making them --
    def start(self):
        keygen, sshd = find("ssh-keygen"), find("sshd")
        if sshd is None or keygen is None or find("ssh") is None:
            raise Unavailable("no OpenSSH here: apt-get install openssh-server openssh-client")
        if os.geteuid() != 0:
            raise Unavailable("the hosts' sshd must run as root to accept logins")
        for name in ("host_key", "client_key"):
            _run(keygen, "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(self.folder, name))
        shutil.copy(os.path.join(self.folder, "client_key.pub"),
                    os.path.join(self.folder, "authorized"))
        os.makedirs("/run/sshd", exist_ok=True)             # sshd's privilege separation folder
        try:
            if self.loopback:
                raise Unavailable("loopback hosts were asked for")
            self._namespaces(sshd)
            self.kind = "namespaces"
        except Unavailable as why:
            self.close_namespaces()
            self.why_not_namespaces = str(why)
            self._loopback(sshd)
            self.kind = "loopback"
        self._wait_for_logins()
        return self

    def _namespaces(self, sshd):
        ip, unshare = find("ip"), find("unshare")
        if ip is None or unshare is None:
            raise Unavailable("no ip (iproute2) or unshare (util-linux)")
        subnet = f"10.{200 + int(self.tag[:2], 16) % 50}.{int(self.tag[2:4], 16)}"
        self.network = f"{subnet}.0/24"
        self.bridge = f"lkbr{self.tag}"
        _run(ip, "link", "add", self.bridge, "type", "bridge")
        _run(ip, "addr", "add", f"{subnet}.1/24", "dev", self.bridge)
        _run(ip, "link", "set", self.bridge, "up")
        for i in range(self.count):
            ns, address, name = f"lk{self.tag}h{i}", f"{subnet}.{i + 2}", f"lkhost{i}"
            _run(ip, "netns", "add", ns)
            self.namespaces.append(ns)
            outside, inside = f"lk{self.tag}v{i}", f"lk{self.tag}p{i}"
            _run(ip, "link", "add", outside, "type", "veth", "peer", "name", inside)
            _run(ip, "link", "set", inside, "netns", ns)
            _run(ip, "link", "set", outside, "master", self.bridge)
            _run(ip, "link", "set", outside, "up")
            _run(ip, "-n", ns, "addr", "add", f"{address}/24", "dev", inside)
            _run(ip, "-n", ns, "link", "set", inside, "up")
            _run(ip, "-n", ns, "link", "set", "lo", "up")
            _run(ip, "-n", ns, "route", "add", "default", "via", f"{subnet}.1")
            config = self._config(i, 22, address)
            # its own UTS namespace: the host answers to its own host name
            self._serve([ip, "netns", "exec", ns, unshare, "--uts", "sh", "-c",
                         f'hostname {name} && exec "$0" -D -e -f {config}', sshd], i)
            self.specs.append(f"root@{address}")
            self.names.append(name)

    def _loopback(self, sshd):
        for i in range(self.count):
            port = _free_port()
            self._serve([sshd, "-D", "-e", "-f", self._config(i, port, "127.0.0.1")], i)
            self.specs.append(f"root@127.0.0.1:{port}")
            self.names.append(socket.gethostname())

    def _config(self, i, port, address):
        path = os.path.join(self.folder, f"sshd_config{i}")
        with open(path, "w") as f:
            f.write(f"Port {port}\nListenAddress {address}\n"
                    f"HostKey {self.folder}/host_key\nPidFile none\n"
                    f"AuthorizedKeysFile {self.folder}/authorized\n"
                    f"PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                    f"KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                    f"SetEnv PATH={os.path.dirname(sys.executable)}:/usr/bin:/bin\n")
        return path

    def _serve(self, argv, i):
        log = open(os.path.join(self.folder, f"sshd{i}.log"), "ab")
        server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log,
                                  start_new_session=True)
        if i < len(self.servers):
            self.servers[i] = server
        else:
            self.servers.append(server)
            self.argvs.append(argv)

    def processes(self, i):
        """Process ids running "on" host ``i``: every process in its namespace, or (loopback)
        its sshd and everything started under it."""
        if self.kind == "namespaces":
            return [int(p) for p in _run(find("ip"), "netns", "pids", self.namespaces[i],
                                         check=False).stdout.split()]
        import psutil
        try:
            server = psutil.Process(self.servers[i].pid)
            return [server.pid] + [p.pid for p in server.children(recursive=True)]
        except psutil.Error:
            return []

    def crash(self, i):
        """Host ``i`` goes down as a machine does: every process on it is killed at once
        (SIGKILL: its sshd, Open MPI's daemon, the workers), and it answers nothing until
        ``restore(i)``. Returns the process ids killed."""
        pids = self.processes(i)
        for pid in pids:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        self.servers[i].wait()
        return pids

    def restore(self, i):
        """Host ``i`` back up after ``crash(i)``: its sshd started again, logins checked."""
        if self.servers[i].poll() is None:
            return
        self._serve(self.argvs[i], i)
        self._wait_for_logins()

    def ssh(self, i, *command):
        """argv running ``command`` on host ``i`` over SSH."""
        user, _, rest = self.specs[i].partition("@")
        address, _, port = rest.partition(":")
        return (["ssh", "-T", "-o", "BatchMode=yes", "-p", port or "22"] + self.ssh_options +
                [f"{user}@{address}"] + list(command))

    def _wait_for_logins(self):
        deadline = time.monotonic() + 15
        for i, server in enumerate(self.servers):
            while subprocess.run(self.ssh(i, "true"), capture_output=True,
                                 timeout=15).returncode != 0:
                if server.poll() is not None or time.monotonic() > deadline:
                    with open(os.path.join(self.folder, f"sshd{i}.log")) as f:
                        raise Unavailable(f"sshd of host {i} does not let the test in: "
                                          f"{f.read()[-500:]}")
                time.sleep(0.1)

    # -- removing them --
    def close(self):
        stop(self.servers)
        self.servers = []
        self.close_namespaces()
        shutil.rmtree(self.folder, ignore_errors=True)

    def close_namespaces(self):
        ip = find("ip")
        for ns in self.namespaces:         # the veth pairs go with their namespace
            self._end_processes_in(ns)
            _run(ip, "netns", "delete", ns, check=False)
        self.namespaces = []
        if self.bridge:
            _run(ip, "link", "delete", self.bridge, check=False)
            self.bridge = None

    @staticmethod
    def _end_processes_in(ns):
        pids = _run(find("ip"), "netns", "pids", ns, check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), 9)
            except (OSError, ValueError):
                pass


def start_hosts(count=2, loopback=False):
    """``count`` hosts, started (sshd on loopback ports if ``loopback``, else namespaces where
    the kernel allows); the caller must ``close()`` them."""
    hosts = Hosts(count, loopback)
    try:
        return hosts.start()
    except BaseException:
        hosts.close()
        raise
