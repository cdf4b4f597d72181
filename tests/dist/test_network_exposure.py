"""A cluster on this machine keeps off the network: none of its processes (controller, MPI
launcher, workers) listens on an address other than loopback, and labkit's own messages between
ranks are data (JSON in MPI buffers), never unpickled."""
import os
import socket
import struct

import pytest

import labkit as lk

pytestmark = pytest.mark.dist


def _listening():
    """{socket inode: (address, port)} of every listening TCP socket, from /proc/net/tcp{,6}."""
    found = {}
    for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        with open(f"/proc/net/{name}") as f:
            rows = f.read().splitlines()[1:]
        for row in rows:
            fields = row.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A":                                 # TCP_LISTEN
                continue
            address, port = local.split(":")
            raw = bytes.fromhex(address)
            if family == socket.AF_INET:
                raw = struct.pack("<I", int(address, 16))
            else:                                             # four host-order 32-bit words
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
            found[inode] = (socket.inet_ntop(family, raw), int(port, 16))
    return found


def _listeners_of(pids):
    sockets = _listening()
    out = []
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in sockets:
                with open(f"/proc/{pid}/comm") as f:
                    out.append((f.read().strip(), pid) + sockets[target[8:-1]])
    return out


def _loopback(address):
    return address.startswith("127.") or address == "::1"


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux's /proc/net")
def test_no_process_of_a_local_cluster_listens_beyond_loopback():
    from labkit.dist import procs
    with lk.dist.Cluster(n=2, output="none") as cluster:
        assert cluster.run(lambda: lk.dist.allreduce(lk.ones(3)).tolist()) == [[2.0] * 3] * 2
        mark = cluster._workers.cluster_id
        pids = [p.pid for p in procs.marked() if p.environ().get(procs.MARKER) == mark]
        names = {open(f"/proc/{pid}/comm").read().strip() for pid in pids}
        assert "prterun" in names or "mpiexec" in names, names   # the MPI launcher is counted
        listeners = _listeners_of(pids)
        assert listeners, "the controller listens (on loopback)"
        exposed = [entry for entry in listeners if not _loopback(entry[2])]
        assert exposed == [], exposed


def _collectives_without_unpickling():
    from mpi4py import MPI

    def refuse(*args, **kwargs):
        raise AssertionError("an MPI message was unpickled")
    saved = MPI.pickle.loads
    MPI.pickle.__init__(MPI.pickle.dumps, refuse)
    try:
        model = lk.dist.DataParallel(lk.nn.Linear(3, 2))
        total = lk.dist.allreduce(lk.ones(2) * (lk.dist.rank() + 1)).tolist()
        lk.dist.broadcast(lk.zeros(2), src=0)
        try:
            lk.dist.allreduce(lk.ones(lk.dist.rank() + 1))        # ranks disagree: refused
        except lk.dist.DistError as exc:
            refused = "different arguments" in str(exc)
        return total, refused, type(model).__name__
    finally:
        MPI.pickle.__init__(MPI.pickle.dumps, saved)


def test_labkits_messages_between_ranks_are_never_unpickled(cluster):
    assert cluster.run(_collectives_without_unpickling) == [([3.0, 3.0], True, "DataParallel")] * 2
