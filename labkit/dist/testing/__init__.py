"""Clusters made on one machine, to try what needs several: ``start_hosts(2)`` makes two hosts
(network namespaces, each with its own address, host name and SSH server) for ``hosts=[...]``,
and ``start_slurm()`` a one-node Slurm cluster for ``launcher="slurm"``. labkit's multi-host and
Slurm tests use them, and so does the tutorial "From one notebook to a cluster". Both need root;
where this machine cannot make them they raise ``Unavailable`` with the reason.

>>> from labkit.dist.testing import Unavailable, start_hosts
>>> try:
...     hosts = start_hosts(2)
... except Unavailable as why:
...     print(f"no hosts here: {why}")                             # doctest: +SKIP
"""
from .hosts import Hosts, Unavailable, start_hosts
from .slurm import LocalSlurm, start_slurm

__all__ = ["start_hosts", "Hosts", "start_slurm", "LocalSlurm", "Unavailable"]
