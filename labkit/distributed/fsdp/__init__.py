"""``labkit.distributed.fsdp``: ``fully_shard`` (PyTorch's FSDP2 spelling): parameters,
gradients and optimiser state sharded over a mesh dimension (ZeRO-3; ZeRO-2 with
``reshard_after_forward=False``), all-gathered before each unit's forward, gradients
reduce-scattered by the gather's own backward. See ``fully_shard``."""
from .fsdp import FSDPModule, fully_shard, gathered_memory

__all__ = ["FSDPModule", "fully_shard", "gathered_memory"]
