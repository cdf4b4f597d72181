"""%%lk_dist: a notebook cell run on every worker of a kept Cluster."""
import pytest

import labkit as lk
from labkit.dist import magic

pytestmark = pytest.mark.dist


def test_a_cell_runs_on_every_worker_and_keeps_its_namespace(cluster):
    assert magic.run_cell(cluster, "x = lk.tensor([float(lk.dist.rank()) + 1.0])") == [None, None]
    # the next cell sees x, and its last expression comes back per rank
    assert magic.run_cell(cluster, "y = x * 10.0\nlk.dist.allreduce(y).item()") == [30.0, 30.0]
    assert magic.run_cell(cluster, "float(x.item())") == [1.0, 2.0]


def test_the_default_cluster_is_the_newest_open_one(cluster):
    assert magic.default_cluster() is cluster


def test_the_magic_registers_in_ipython_and_runs_a_cell(cluster):
    shell_mod = pytest.importorskip("IPython.core.interactiveshell")
    from traitlets.config import Config
    config = Config()
    config.HistoryManager.enabled = False     # no history database for a test shell
    shell = shell_mod.InteractiveShell.instance(config=config)
    magic.remember(cluster)
    assert "lk_dist" in shell.magics_manager.magics["cell"]
    shell.user_ns["mycluster"] = cluster
    result = shell.run_cell_magic("lk_dist", "mycluster", "lk.dist.world_size()")
    assert result == [2, 2]
    with pytest.raises(lk.dist.DistError, match="no variable 'nothere'"):
        shell.run_cell_magic("lk_dist", "nothere", "1")


def test_a_cell_error_names_the_rank(cluster):
    with pytest.raises(lk.dist.WorkerError) as info:
        magic.run_cell(cluster, "raise ValueError('boom on purpose')")
    assert "boom on purpose" in str(info.value)
