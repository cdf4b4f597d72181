"""Workers on several machines: ``hosts=[...]``, one MPI world across them.

A host is written ``"[user@]name[:port]"``. The controller runs here, as always; the workers
are started by Open MPI's ``mpiexec`` here, under ipyparallel's MPI engine launcher, with
``--host`` naming every host and its number of ranks. ``mpiexec`` reaches each remote host
with ``ssh`` (through an ``ssh_config`` written for the cluster, so each host keeps its own user
and port) and starts Open MPI's daemon there, which starts that host's workers. So the workers
of all hosts form one MPI world, and the collectives run between hosts.

Ending is Open MPI's: when ``mpiexec`` ends (closed, killed by the cluster's mark, or its
owner died and labkit's reaper ended it), each remote daemon loses its line to it and ends
that host's workers.

What the hosts need: an SSH login that needs no password (a key, or an agent), the Python
given as ``python=`` (default: this one's path) with labkit and the ``dist`` extra, and Open
MPI's daemon (``prted``) at the path of this machine's ``mpiexec`` (a shared filesystem, or the
same image everywhere); routes to this machine's controller and between the hosts (pass
``network="10.1.0.0/16"`` to keep Open MPI to one network). The controller listens on this
machine's address toward the hosts, and its messages are encrypted (CurveZMQ) whenever a host
is remote.

A bare ``"localhost"`` or this machine's name means this machine without SSH; a host with a
user or a port, or any host when ``ssh_options`` are given, is reached over SSH (to try a
remote setup on one machine, e.g. ``hosts=["root@127.0.0.1:2222"]``).

>>> parse_host("alice@node7:2222")
Host(user='alice', name='node7', port=2222)
>>> plan = plan_hosts(["node7", "bob@node8:2222"], n=5, ssh_options=None)
>>> [(str(h), slots) for h, slots in plan.hosts]
[('node7', 3), ('bob@node8:2222', 2)]
"""
import ipaddress
import shlex
import socket
import subprocess
from collections import namedtuple

from .errors import DistError

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


class HostPlan:
    """Where the ranks of one cluster run: ``hosts``, a list of (Host, ranks) in rank order,
    and how ``mpiexec`` and the controller reach them."""

    def __init__(self, hosts, ssh_options, network):
        self.hosts = hosts
        self.ssh_options = _split(ssh_options)
        self.network = network
        local = _local_names()
        self.local = [not (h.user or h.port or self.ssh_options or h.name not in local)
                      for h, _ in hosts]

    @property
    def remote(self):
        """True when any host is reached over SSH."""
        return not all(self.local)

    def controller_address(self):
        """(address the controller listens on, address the workers dial or None): loopback
        when every host is this machine or a loopback address, else this machine's address
        on the route to the first remote host (every interface if the routes differ)."""
        remote = [h for (h, _), here in zip(self.hosts, self.local) if not here]
        if all(h.loopback for h in remote):
            return "127.0.0.1", None
        mine = {_address_toward(h) for h in remote if not h.loopback}
        if len(mine) == 1 and not any(h.loopback for h in remote):
            address = mine.pop()
            return address, address
        return "0.0.0.0", _address_toward(next(h for h in remote if not h.loopback))

    def answering(self, timeout=5):
        """For each host, in order, whether it answers now: one ``ssh host true`` each, all at
        once, within ``timeout`` seconds to connect (this machine always answers). What
        ``train_with_checkpoints(shrink=True)`` asks after a death, to resume on the hosts
        still there."""
        checks = []
        for (host, _), here in zip(self.hosts, self.local):
            if here:
                checks.append(None)
                continue
            argv = (["ssh", "-T", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={timeout}"] +
                    (["-p", str(host.port)] if host.port else []) + self.ssh_options +
                    [host.destination, "true"])
            checks.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                           stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL))
        answers = []
        for check in checks:
            if check is None:
                answers.append(True)
                continue
            try:
                answers.append(check.wait(timeout=timeout + 10) == 0)
            except subprocess.TimeoutExpired:
                check.kill()
                check.wait()
                answers.append(False)
        return answers

    def mpi_args(self, ssh_config, forwarded):
        """``mpiexec`` arguments placing the ranks on the hosts: ``--host``, the SSH agent (an
        ``ssh_config`` written at the path ``ssh_config``), the environment variables to carry
        to the remote ranks (``forwarded``, names) and the network to use."""
        names = []
        entries = []
        for i, ((host, slots), here) in enumerate(zip(self.hosts, self.local)):
            if here:
                names.append(f"{host.name}:{slots}")
                continue
            alias = f"labkit-host-{i}"
            names.append(f"{alias}:{slots}")
            entries.append(f"Host {alias}\n    HostName {host.name}\n" +
                           (f"    User {host.user}\n" if host.user else "") +
                           (f"    Port {host.port}\n" if host.port else ""))
        args = ["--host", ",".join(names)]
        if entries:
            options = ["BatchMode yes", "ServerAliveInterval 5", "ServerAliveCountMax 3"]
            with open(ssh_config, "w") as f:
                f.write("".join(entries))
                f.write("Host *\n" + "".join(f"    {o}\n" for o in options))
            # ssh options are given on ssh's command line (they win over the file); the
            # daemons are all started from here (no tree of daemons starting daemons), so
            # the agent's words never travel to another machine
            agent = " ".join(["ssh", "-F", shlex.quote(ssh_config)] +
                             [shlex.quote(o) for o in self.ssh_options])
            args += ["--mca", "plm_rsh_agent", agent, "--mca", "plm_ssh_no_tree_spawn", "1"]
        for name in forwarded:
            args += ["-x", name]
        if self.network:
            args += ["--mca", "btl_tcp_if_include", self.network,
                     "--mca", "oob_tcp_if_include", self.network]
        return args


def _split(ssh_options):
    if isinstance(ssh_options, str):
        return shlex.split(ssh_options)
    return list(ssh_options or ())


def plan_hosts(hosts, n, ssh_options, network=None):
    """The HostPlan of ``hosts`` (a list of ``"[user@]name[:port]"``) for ``n`` ranks: ranks
    fill the hosts in order, as evenly as they divide (the first hosts get one more), or None
    for this machine alone (``hosts`` None)."""
    if network is not None:
        try:
            network = str(ipaddress.ip_network(network, strict=False))
        except ValueError:
            raise DistError(f"lk.dist: network={network!r} is not a network; write it as "
                            f"an address and prefix length, e.g. '10.1.0.0/16'") from None
    if hosts is None:
        if ssh_options:
            raise DistError("lk.dist: ssh_options= is for remote hosts; pass hosts=[...] too")
        if network:
            raise DistError("lk.dist: network= is for clusters across hosts; pass hosts=[...]")
        return None
    if isinstance(hosts, str):
        hosts = [hosts]
    parsed = [parse_host(h) for h in hosts]
    if not parsed:
        raise DistError("lk.dist: hosts=[] lists no machine; leave hosts=None for this one")
    twice = sorted({str(h) for h in parsed if parsed.count(h) > 1})
    if twice:
        raise DistError(f"lk.dist: hosts= lists {', '.join(twice)} more than once; list each "
                        f"host once (n= spreads the workers over them)")
    if n < len(parsed):
        raise DistError(f"lk.dist: n={n} workers cannot cover {len(parsed)} hosts; give at "
                        f"least one worker per host (n={len(parsed)} or more)")
    share, extra = divmod(n, len(parsed))
    plan = HostPlan([(h, share + (i < extra)) for i, h in enumerate(parsed)], ssh_options,
                    network)
    if all(plan.local):
        return None
    return plan


def _address_toward(host):
    """This machine's address on the route to ``host`` (no packet is sent)."""
    try:
        family = socket.AF_INET6 if ":" in host.name else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((host.name, host.port or 22))
            return s.getsockname()[0]
    except OSError as exc:
        raise DistError(f"lk.dist: cannot find a route to host {host} ({exc}); check the "
                        f"name, or use its address") from None
