"""Fixtures for clusters across hosts: two hosts made on this machine (``labkit.dist.testing``),
and one 4-worker cluster over them (2 workers each) shared by the module's tests.

Tests here are marked ``multihost``; they skip, with the reason, where this machine cannot
make the hosts (not root, no OpenSSH), and everything the fixtures made (namespaces, bridge,
sshd processes) is removed afterwards, however the tests end.
"""
import pytest

import labkit as lk
from labkit.dist.testing import Unavailable, start_hosts

from ..conftest import _shared


@pytest.fixture(scope="session")
def hosts():
    """Two hosts (``Hosts``: specs, names, ssh_options, network, kind)."""
    try:
        made = start_hosts(2)
    except Unavailable as why:
        pytest.skip(f"cannot make two hosts here: {why}")
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(scope="module")
def cluster4(hosts):
    """Four workers, two on each host, in one MPI world."""
    cluster = lk.dist.Cluster(n=4, hosts=hosts.specs, ssh_options=hosts.ssh_options,
                              network=hosts.network, output="text")
    _shared["multihost"] = cluster         # its processes are not leftovers between tests
    try:
        yield cluster
    finally:
        _shared.pop("multihost", None)
        cluster.close()
