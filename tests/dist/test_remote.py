"""Remote workers over real SSH: the test starts Debian's OpenSSH server on a free loopback port,
with a host key and a client key made for the test, and ``launch(fn, hosts=[...])`` runs through
it (mpiexec reaches the host with ssh). Output comes back labelled by rank, an interrupt stops
the remote workers, and no worker process is left on the "remote" side (the same process table,
checked by the cluster's mark). Several hosts: ``tests/dist/multihost``.

Needs ``sshd`` (Debian: ``apt-get install openssh-server``), ``ssh`` and ``ssh-keygen``
(``openssh-client``) and root (sshd checks logins against the system's users); skipped with the
reason otherwise.
"""
import os
import time

import pytest

import labkit as lk
from labkit.dist import procs, remote
from labkit.dist.testing import Unavailable, start_hosts

from .conftest import own_worker_processes, wait_until_gone
from .multihost.test_ending import _interrupt_when_started, _spin_forever

pytestmark = pytest.mark.dist


@pytest.fixture(scope="module")
def sshd():
    """An OpenSSH server on a loopback port that lets this user in with a throwaway key.
    Yields (host, ssh_options)."""
    try:
        hosts = start_hosts(1, loopback=True)
    except Unavailable as why:
        pytest.skip(f"no sshd for the test: {why}")
    try:
        yield hosts.specs[0], hosts.ssh_options
    finally:
        hosts.close()


def _remote_hello():
    import os
    rank = lk.dist.rank()
    print(f"hello from remote rank {rank}")
    total = lk.dist.allreduce(lk.tensor([float(rank + 1)])).item()
    return rank, lk.dist.world_size(), total, os.environ.get(procs.MARKER)


def test_launch_on_a_host_over_ssh_streams_output_and_leaves_nothing(sshd, capfd):
    host, options = sshd
    results = lk.dist.launch(_remote_hello, hosts=[host], n=2, ssh_options=options,
                             output="text")
    assert [r[:3] for r in results] == [(0, 2, 3.0), (1, 2, 3.0)]
    marks = {r[3] for r in results}
    assert len(marks) == 1 and marks.pop().startswith(f"{os.getpid()}-")   # the cluster's mark
    out, _ = capfd.readouterr()
    assert "[rank 0] hello from remote rank 0" in out
    assert "[rank 1] hello from remote rank 1" in out
    assert not wait_until_gone(own_worker_processes, timeout=8.0)


@pytest.mark.timeout(90)
def test_interrupt_stops_the_remote_workers(sshd, tmp_path):
    host, options = sshd
    when = []
    _interrupt_when_started(tmp_path, 2, when)
    with pytest.raises(KeyboardInterrupt):
        lk.dist.launch(_spin_forever, str(tmp_path), hosts=[host], n=2, ssh_options=options,
                       output="none")
    assert when, "the remote workers never started"
    assert not wait_until_gone(own_worker_processes, timeout=8.0)
    assert time.monotonic() - when[0] < 10.0


def test_hosts_are_parsed_and_checked():
    assert remote.parse_host("alice@node7:2222") == remote.Host("alice", "node7", 2222)
    assert remote.parse_host("[::1]:22") == remote.Host(None, "::1", 22)
    assert remote.plan_hosts(["localhost"], 2, None) is None            # local: no SSH
    plan = remote.plan_hosts(["root@127.0.0.1:22", "b", "c"], 7, None)
    assert [(h.port, slots) for h, slots in plan.hosts] == [(22, 3), (None, 2), (None, 2)]
    with pytest.raises(lk.dist.DistError, match="bad port"):
        remote.parse_host("node7:http")
    with pytest.raises(lk.dist.DistError, match="more than once"):
        lk.dist.launch(print, hosts=["node7", "node7"], n=2)
    with pytest.raises(lk.dist.DistError, match="cannot cover 3 hosts"):
        lk.dist.launch(print, hosts=["a", "b", "c"], n=2)
    with pytest.raises(lk.dist.DistError, match="not a network"):
        lk.dist.launch(print, hosts=["a"], network="10.1.0.0/99")
    with pytest.raises(lk.dist.DistError, match="ssh_options= is for remote hosts"):
        lk.dist.launch(print, ssh_options=["-v"])


def test_mpiexec_reaches_each_host_with_its_own_user_and_port(tmp_path):
    plan = remote.plan_hosts(["alice@node7:2222", "node8"], 4, ["-i", "key file"],
                             network="10.1.0.0/16")
    args = plan.mpi_args(str(tmp_path / "ssh_config"), ["A", "B"])
    assert args[:2] == ["--host", "labkit-host-0:2,labkit-host-1:2"]
    agent = args[args.index("plm_rsh_agent") + 1]
    assert agent == f"ssh -F {tmp_path / 'ssh_config'} -i 'key file'"
    config = (tmp_path / "ssh_config").read_text()
    assert "Host labkit-host-0\n    HostName node7\n    User alice\n    Port 2222\n" in config
    assert "Host labkit-host-1\n    HostName node8\n" in config
    assert args.count("-x") == 2 and "10.1.0.0/16" in args
