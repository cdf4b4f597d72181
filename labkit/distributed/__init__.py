"""``torch.distributed``'s spellings over ``labkit.dist``: process groups and collectives.

A PyTorch training script written for ``torchrun`` runs as it is with the import changed, under
``python -m labkit.dist.run --nproc_per_node=N script.py`` (torchrun's flags and environment;
``python -m labkit.distributed.run`` is the same launcher under torchrun's module path):

    import labkit as torch
    from labkit.distributed import init_process_group, destroy_process_group
    from labkit.nn.parallel import DistributedDataParallel as DDP

    init_process_group(backend="gloo")                  # "nccl", "mpi" or None too
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    model = DDP(model)                                  # gradients averaged over the ranks
    ...
    destroy_process_group()

- process groups (``process_group.py``): ``init_process_group``, ``destroy_process_group``,
  ``is_initialized``, ``is_available``, ``get_rank``, ``get_world_size``, ``get_backend``,
  ``new_group``, ``group.WORLD``, ``Backend``, ``ProcessGroup``;
- collectives (``collectives.py``), in place as in PyTorch: ``all_reduce``, ``broadcast``,
  ``all_gather``, ``all_gather_into_tensor``, ``reduce_scatter``, ``reduce_scatter_tensor``,
  ``reduce``, ``gather``, ``scatter``, ``barrier``, ``all_gather_object``,
  ``broadcast_object_list``, with ``ReduceOp`` (SUM, AVG, PRODUCT, MIN, MAX) and
  ``async_op=True`` returning a ``Work``;
- ``DistributedDataParallel`` (``data_parallel.py``, also ``labkit.nn.parallel``'s).

The ranks are one MPI world (see ``labkit.dist``); inside a worker launched from a notebook
cell (``lk.dist.launch``) the default group is there already.

Sharding lives in the subpackages, one implementation that runs on a mesh of virtual devices in
one process (``lk.devices.configure(cpus=N)``) and on a mesh of MPI ranks:

- ``labkit.distributed.device_mesh``: ``init_device_mesh``, ``DeviceMesh``;
- ``labkit.distributed.tensor``: ``DTensor``, ``distribute_tensor``, ``Shard`` / ``Replicate`` /
  ``Partial``, and ``labkit.distributed.tensor.parallel`` (tensor parallelism);
- ``labkit.distributed.fsdp``: ``fully_shard`` (FSDP2, ZeRO-3 / ZeRO-2);
- ``labkit.distributed.pipelining``: ``pipeline``, ``PipelineStage`` and the schedules;
- ``labkit.distributed.checkpoint.state_dict``: ``get_model_state_dict`` /
  ``set_model_state_dict``.

>>> import labkit as lk
>>> import labkit.distributed as dist
>>> dist.is_initialized()
False
>>> dist.init_process_group("gloo", rank=0, world_size=1)
>>> t = lk.tensor([1.0, 2.0]); dist.all_reduce(t, op=dist.ReduceOp.SUM); t.tolist()
[1.0, 2.0]
>>> dist.destroy_process_group()
"""
from .collectives import (ReduceOp, Work, all_gather, all_gather_into_tensor, all_gather_object,
                          all_reduce, barrier, broadcast, broadcast_object_list, gather, reduce,
                          reduce_op, reduce_scatter, reduce_scatter_tensor, scatter)
from .data_parallel import DistributedDataParallel
from .process_group import (Backend, GroupMember, NotInitializedError, ProcessGroup,
                            destroy_process_group, get_backend, get_global_rank,
                            get_group_rank, get_process_group_ranks, get_rank, get_world_size,
                            group, init_process_group, is_available, is_gloo_available,
                            is_initialized, is_mpi_available, is_nccl_available,
                            is_torchelastic_launched, new_group)
from ..dist.errors import DistError

__all__ = ["init_process_group", "destroy_process_group", "is_initialized", "is_available",
           "is_mpi_available", "is_gloo_available", "is_nccl_available",
           "is_torchelastic_launched", "get_rank", "get_world_size", "get_backend", "new_group",
           "get_process_group_ranks", "get_global_rank", "get_group_rank", "group",
           "GroupMember", "Backend", "ProcessGroup", "ReduceOp", "reduce_op", "Work",
           "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
           "reduce_scatter_tensor", "reduce", "gather", "scatter", "barrier",
           "all_gather_object", "broadcast_object_list", "DistributedDataParallel",
           "DistError", "NotInitializedError"]
