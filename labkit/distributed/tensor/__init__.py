"""``labkit.distributed.tensor``: distributed tensors in PyTorch's spelling.

- ``distribute_tensor(t, mesh, placements)``, ``DTensor.from_local(...)``: a tensor laid out
  over a ``DeviceMesh`` (``init_device_mesh``), one placement per mesh dimension: ``Shard(dim)``,
  ``Replicate()``, ``Partial()``;
- ``dt.redistribute(placements=...)``, ``dt.full_tensor()``, ``dt.to_local()``;
- every op on DTensors: its sharding rule (``labkit.distributed.tensor.ops``) moves the inputs
  where the op can run on each device's piece alone; eager and inside ``lk.function``, with
  gradients;
- ``labkit.distributed.tensor.debug.CommDebugMode``: the collectives a block ran, and their
  bytes; ``labkit.distributed.tensor.parallel``: tensor parallelism for modules.

>>> import labkit as lk
>>> from labkit.distributed.tensor import Replicate, Shard, distribute_tensor, init_device_mesh
>>> lk.devices.configure(cpus=4)
>>> mesh = init_device_mesh("cpu", (4,))
>>> x = distribute_tensor(lk.randn(8, 16), mesh, [Shard(0)])      # rows split
>>> w = distribute_tensor(lk.randn(16, 4), mesh, [Replicate()])
>>> (x @ w).placements                                             # rows split, no message
(Shard(dim=0),)
>>> lk.devices.configure(cpus=1)
"""
from ..device_mesh import DeviceMesh, init_device_mesh
from .dtensor import DParameter, DTensor, distribute_tensor
from .module import distribute_module, shard_inputs
from .placement_types import Partial, Placement, Replicate, Shard

__all__ = ["DTensor", "DParameter", "DeviceMesh", "Partial", "Placement", "Replicate", "Shard",
           "distribute_module", "distribute_tensor", "init_device_mesh", "shard_inputs"]
