"""What every MPI rank runs in the multi-process tests (and the tutorial's last cell): the
GPT made parallel one way over a mesh of all the ranks, trained a few steps on this rank's part
of the batch. The same code as on virtual devices: only the inputs differ, each rank passing
its own part (the whole batch where the layout is replicated)."""
import labkit as lk
from labkit.distributed.device_mesh import init_device_mesh

from . import gpt
from .strategies import STRATEGIES


def train_on_ranks(name, config, steps, captured=False):
    """This rank's losses (the whole batch's mean, the same on every rank)."""
    world, rank = lk.dist.world_size(), lk.dist.rank()
    if name == "fsdp_tp":
        mesh = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("dp", "tp"))
    else:
        mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
    model = STRATEGIES[name](gpt.build(lk, config), mesh)
    idx, targets = gpt.batch(config)
    if name in ("fsdp", "fsdp_zero2", "data_parallel", "fsdp_tp"):    # split over "dp"
        rows = mesh.size(0)
        at = mesh.get_coordinate()[0]
        share = len(idx) // rows
        idx, targets = idx[at * share:(at + 1) * share], targets[at * share:(at + 1) * share]
    run = gpt.trainer(lk, model, captured)
    idx, targets = lk.tensor(idx), lk.tensor(targets)
    return [float(run(idx, targets).item()) for _ in range(steps)]
