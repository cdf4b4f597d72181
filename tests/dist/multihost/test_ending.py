"""Ending a cluster over two hosts leaves no process on either: Ctrl-C, close(), and mpiexec's
death (what ends remote workers on real machines, where the cluster's mark cannot reach).
These run with no other cluster on the hosts, so any process left in them is a leftover."""
import os
import subprocess
import threading
import time
import _thread

import pytest

import labkit as lk
from labkit.dist import procs
from labkit.dist.testing.hosts import find

from ..conftest import own_worker_processes, wait_until_gone

pytestmark = [pytest.mark.dist, pytest.mark.multihost]


def _host_processes(hosts):
    """Processes in the hosts' namespaces other than their sshd (which the fixture owns);
    empty where the hosts share this machine's namespace (then the cluster's mark tells)."""
    if hosts.kind != "namespaces":
        return []
    servers = {s.pid for s in hosts.servers}
    left = []
    for ns in hosts.namespaces:
        pids = subprocess.run([find("ip"), "netns", "pids", ns], capture_output=True,
                              text=True, timeout=10).stdout.split()
        left += [int(p) for p in pids if int(p) not in servers]
    return left


def _left(hosts):
    """What is left of clusters: marked processes here, any process in the hosts."""
    return [p.pid for p in own_worker_processes()] + _host_processes(hosts)


def _spin_forever(folder):
    open(os.path.join(folder, f"started-{lk.dist.rank()}"), "w").close()
    while True:
        time.sleep(0.01)


def _interrupt_when_started(folder, ranks, when):
    """From a thread: Ctrl-C to the main thread once every rank started (the hosts share this
    machine's files)."""
    def watch():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if all(os.path.exists(folder / f"started-{r}") for r in range(ranks)):
                time.sleep(0.3)
                when.append(time.monotonic())
                _thread.interrupt_main()
                return
            time.sleep(0.05)
    threading.Thread(target=watch, daemon=True).start()


@pytest.mark.timeout(120)
def test_ctrl_c_ends_every_process_on_both_hosts_within_5_s(hosts, tmp_path):
    when = []
    _interrupt_when_started(tmp_path, 4, when)
    with pytest.raises(KeyboardInterrupt):
        lk.dist.launch(_spin_forever, str(tmp_path), n=4, hosts=hosts.specs,
                       ssh_options=hosts.ssh_options, network=hosts.network, output="none")
    assert when, "the workers never started"
    assert not wait_until_gone(lambda: _left(hosts), timeout=5.0)
    assert time.monotonic() - when[0] < 5.0


@pytest.mark.timeout(120)
def test_open_mpi_ends_the_remote_workers_when_mpiexec_dies(hosts, tmp_path):
    """On real hosts the cluster's mark cannot reach remote processes: mpiexec's end must
    end them (each remote daemon loses its line to it)."""
    cluster = lk.dist.Cluster(n=4, hosts=hosts.specs, ssh_options=hosts.ssh_options,
                              network=hosts.network, output="none")
    try:
        mark = cluster._workers.cluster_id
        mpiexec = [p for p in procs.marked(mark)
                   if os.path.basename(p.cmdline()[0]) in ("mpiexec", "mpirun", "prterun")]
        assert mpiexec, [p.cmdline()[:2] for p in procs.marked(mark)]
        engines = [p for p in procs.marked(mark)
                   if p.cmdline()[1:3] == ["-m", "ipyparallel.engine"]]
        assert len(engines) == 4 and all(p.pid in cluster.pids for p in engines)
        killed = time.monotonic()
        for p in mpiexec:
            p.kill()
        left = wait_until_gone(lambda: [p for p in engines if p.is_running()
                                        and p.status() != "zombie"], timeout=5.0)
        assert not left, f"workers outlived mpiexec: {[p.pid for p in left]}"
        assert time.monotonic() - killed < 5.0
    finally:
        cluster.close()
    assert not wait_until_gone(lambda: _left(hosts), timeout=5.0)


def test_close_ends_every_process_on_both_hosts(hosts):
    cluster = lk.dist.Cluster(n=2, hosts=hosts.specs, ssh_options=hosts.ssh_options,
                              network=hosts.network, output="none")
    assert cluster.run(lk.dist.rank) == [0, 1]
    assert _host_processes(hosts)                 # the workers run inside the hosts
    closed = time.monotonic()
    cluster.close()
    assert not wait_until_gone(lambda: _left(hosts), timeout=5.0)
    assert time.monotonic() - closed < 5.0
