"""``labkit.distributed``: PyTorch's ``torch.distributed`` spellings.

Sharding lives in the subpackages, one implementation that runs on a mesh of virtual devices in
one process (``lk.devices.configure(cpus=N)``) and on a mesh of MPI ranks (``labkit.dist``):

- ``labkit.distributed.device_mesh``: ``init_device_mesh``, ``DeviceMesh``;
- ``labkit.distributed.tensor``: ``DTensor``, ``distribute_tensor``, ``Shard`` / ``Replicate`` /
  ``Partial``, and ``labkit.distributed.tensor.parallel`` (tensor parallelism);
- ``labkit.distributed.fsdp``: ``fully_shard`` (FSDP2, ZeRO-3 / ZeRO-2);
- ``labkit.distributed.pipelining``: ``pipeline``, ``PipelineStage`` and the schedules;
- ``labkit.distributed.checkpoint.state_dict``: ``get_model_state_dict`` /
  ``set_model_state_dict``.
"""
