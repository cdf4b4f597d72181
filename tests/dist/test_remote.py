"""Remote workers over real SSH: the test starts Debian's OpenSSH server on a free loopback port,
with a host key and a client key made for the test, and ``launch(fn, hosts=[...])`` runs through
it. Output comes back labelled by rank, an interrupt stops the remote workers, and no worker
process is left on the "remote" side (the same process table, checked by the cluster's mark).

Needs ``sshd`` (Debian: ``apt-get install openssh-server``), ``ssh`` and ``ssh-keygen``
(``openssh-client``) and root (sshd checks logins against the system's users); skipped with the
reason otherwise.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import _thread

import pytest

import labkit as lk
from labkit.dist import procs, remote

from .conftest import own_worker_processes, wait_until_gone

pytestmark = pytest.mark.dist


def _find(name):
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}")
                                       if os.access(p, os.X_OK)), None)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def sshd():
    """An OpenSSH server on 127.0.0.1 that lets this user in with a throwaway key. Yields
    (host, ssh_options)."""
    sshd_bin, keygen = _find("sshd"), _find("ssh-keygen")
    if sshd_bin is None or keygen is None or _find("ssh") is None:
        pytest.skip("no OpenSSH here: apt-get install openssh-server openssh-client")
    if os.geteuid() != 0:
        pytest.skip("sshd on a private port must run as root to accept logins")
    folder = tempfile.mkdtemp(prefix="labkit-test-sshd-")
    try:
        for name in ("host_key", "client_key"):
            subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f",
                            os.path.join(folder, name)], check=True, timeout=30)
        shutil.copy(os.path.join(folder, "client_key.pub"), os.path.join(folder, "authorized"))
        os.makedirs("/run/sshd", exist_ok=True)          # sshd's privilege separation folder
        port = _free_port()
        config = os.path.join(folder, "sshd_config")
        with open(config, "w") as f:
            f.write(f"Port {port}\nListenAddress 127.0.0.1\n"
                    f"HostKey {folder}/host_key\nPidFile {folder}/sshd.pid\n"
                    f"AuthorizedKeysFile {folder}/authorized\n"
                    f"PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                    f"KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                    f"SetEnv PATH={os.path.dirname(sys.executable)}:/usr/bin:/bin\n")
        server = subprocess.Popen([sshd_bin, "-D", "-e", "-f", config],
                                  stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(folder, "sshd.log"), "wb"))
        options = ["-i", os.path.join(folder, "client_key"), "-o", "StrictHostKeyChecking=no",
                   "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]
        host = f"root@127.0.0.1:{port}"
        probe = remote.ssh_argv(remote.parse_host(host), options) + ["true"]
        deadline = time.monotonic() + 10
        while True:
            if server.poll() is not None:
                with open(os.path.join(folder, "sshd.log")) as f:
                    pytest.skip(f"sshd did not start: {f.read()[-500:]}")
            if subprocess.run(probe, capture_output=True, timeout=10).returncode == 0:
                break
            if time.monotonic() > deadline:
                server.kill()
                pytest.skip("sshd started but does not accept the test's key")
            time.sleep(0.1)
        try:
            yield host, options
        finally:
            server.terminate()
            server.wait(timeout=10)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


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


def _spin_forever(folder):
    open(os.path.join(folder, f"started-{lk.dist.rank()}"), "w").close()
    while True:
        time.sleep(0.01)


def _interrupt_when_started(folder, when):
    """From a thread: Ctrl-C to the main thread once both ranks started ("remote" is this
    machine, so the workers' files are ours to see)."""
    def watch():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if all(os.path.exists(folder / f"started-{r}") for r in range(2)):
                time.sleep(0.3)
                when.append(time.monotonic())
                _thread.interrupt_main()
                return
            time.sleep(0.05)
    threading.Thread(target=watch, daemon=True).start()


@pytest.mark.timeout(90)
def test_interrupt_stops_the_remote_workers(sshd, tmp_path):
    host, options = sshd
    when = []
    _interrupt_when_started(tmp_path, when)
    with pytest.raises(KeyboardInterrupt):
        lk.dist.launch(_spin_forever, str(tmp_path), hosts=[host], n=2, ssh_options=options,
                       output="none")
    assert when, "the remote workers never started"
    assert not wait_until_gone(own_worker_processes, timeout=8.0)
    assert time.monotonic() - when[0] < 10.0


@pytest.mark.timeout(90)
def test_a_kept_remote_cluster_is_interrupted_through_the_agent_and_stays_usable(sshd, tmp_path):
    host, options = sshd
    when = []
    _interrupt_when_started(tmp_path, when)
    with lk.dist.Cluster(n=2, hosts=[host], ssh_options=options, output="none") as cluster:
        pids = cluster.pids
        with pytest.raises(KeyboardInterrupt):
            cluster.run(_spin_forever, str(tmp_path))
        assert time.monotonic() - when[0] < 5.0
        assert cluster.run(lk.dist.rank) == [0, 1]
        assert cluster.pids == pids            # SIGINT reached the workers: not restarted
    assert not wait_until_gone(own_worker_processes, timeout=8.0)


def test_hosts_are_parsed_and_checked():
    assert remote.parse_host("alice@node7:2222") == remote.Host("alice", "node7", 2222)
    assert remote.parse_host("[::1]:22") == remote.Host(None, "::1", 22)
    assert remote.remote_host(["localhost"], None) is None            # local: no SSH
    assert remote.remote_host(["root@127.0.0.1:22"], None).port == 22
    with pytest.raises(lk.dist.DistError, match="bad port"):
        remote.parse_host("node7:http")
    with pytest.raises(lk.dist.DistError, match="several machines"):
        lk.dist.launch(print, hosts=["node7", "node8"])
    with pytest.raises(lk.dist.DistError, match="ssh_options= is for remote hosts"):
        lk.dist.launch(print, ssh_options=["-v"])
