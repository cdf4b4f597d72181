"""A real Slurm cluster of one node on this machine, for ``launcher="slurm"``
(``labkit.dist.testing.start_slurm``: ``munged``, ``slurmctld`` and ``slurmd`` on loopback,
``SLURM_CONF`` pointing at their configuration while the tests run). Skipped, with the reason,
without root or Debian's ``slurmctld``, ``slurmd``, ``slurm-client`` and ``munge``; every
daemon is stopped afterwards.
"""
import pytest

from labkit.dist.testing import Unavailable, start_slurm


@pytest.fixture(scope="session")
def slurm():
    """A started Slurm cluster (``LocalSlurm``: ``folder``, ``jobs()``)."""
    try:
        cluster = start_slurm()
    except Unavailable as why:
        pytest.skip(f"cannot start Slurm here: {why}")
    try:
        yield cluster
    finally:
        cluster.close()
