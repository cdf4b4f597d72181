"""``DistributedDataParallel``: PyTorch's spelling of ``lk.dist.DataParallel``.

It is ``lk.dist.DataParallel`` (rank 0's parameters and buffers broadcast at construction;
gradients averaged over the ranks in buckets whose allreduce starts while backward goes on;
``no_sync()``) with ``torch.nn.parallel.DistributedDataParallel``'s constructor, the default
process group's checks, ``require_backward_grad_sync`` and buffers broadcast from rank 0 before
each forward (``broadcast_buffers=True``). ``labkit.nn.parallel.DistributedDataParallel`` is
this class.

>>> import labkit as lk, labkit.distributed as dist
>>> from labkit.nn.parallel import DistributedDataParallel as DDP
>>> dist.init_process_group("gloo", rank=0, world_size=1)
>>> model = DDP(lk.nn.Linear(3, 1))
>>> model(lk.ones(2, 3)).sum().backward(); model.module.bias.grad.tolist()
[2.0]
>>> sorted(model.state_dict())
['module.bias', 'module.weight']
>>> dist.destroy_process_group()
"""
import sys

from ..devices import get_device
from ..dist.data_parallel import DataParallel
from ..dist.errors import DistError
from ..nn import parallel as _nn_parallel
from . import process_group


def _device_of(spec):
    """A ``device_ids`` entry (a GPU index, a name or a Device) as a Device."""
    if isinstance(spec, int) and not isinstance(spec, bool):
        return get_device(f"gpu:{spec}")
    return get_device(spec)


class DistributedDataParallel(DataParallel):
    """Wrap ``module`` for data-parallel training over the default process group, as
    ``torch.nn.parallel.DistributedDataParallel``: call it like the module; after
    ``loss.backward()`` every parameter's ``.grad`` is the mean over the ranks.

    - ``device_ids``: None for a CPU model; for a model on one GPU, None or ``[i]`` naming
      that GPU (``[local_rank]``). ``output_device`` and ``dim`` change nothing (one device
      per rank).
    - ``broadcast_buffers`` (default True): rank 0's buffers (BatchNorm's running statistics)
      are copied to every rank before each forward.
    - ``bucket_cap_mb`` (default 25): the size of the buckets gradients are averaged in.
    - ``require_backward_grad_sync``: set it False to keep gradients local (gradient
      accumulation; ``no_sync()`` does it for a block).
    - ``find_unused_parameters``, ``gradient_as_bucket_view``, ``static_graph``,
      ``check_reduction`` and the other tuning flags are accepted: a parameter no rank's
      backward reached is handled anyway (its ``.grad`` stays None), and gradients already
      are views into the buckets. ``init_sync=False`` still starts every replica as rank 0's.
    - ``process_group``: the default group only; ``mixed_precision`` and ``device_mesh`` are
      not supported (errors say so).
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=None, init_sync=True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False,
                 delay_all_reduce_named_params=None, param_to_hook_all_reduce=None,
                 mixed_precision=None, device_mesh=None, skip_all_reduce_unused_params=False,
                 bucket_cap_mb_list=None, batched_grad_copy=False, forward_sync_buffers=None):
        where = "DistributedDataParallel"
        pg = _process_group(process_group)
        for name, value in (("mixed_precision", mixed_precision), ("device_mesh", device_mesh),
                            ("delay_all_reduce_named_params", delay_all_reduce_named_params),
                            ("param_to_hook_all_reduce", param_to_hook_all_reduce)):
            if value is not None:
                raise NotImplementedError(f"{where}({name}=...) is not supported in labkit")
        _check_devices(module, device_ids, output_device)
        super().__init__(module, bucket_cap_mb=25.0 if bucket_cap_mb is None else bucket_cap_mb)
        self.process_group = pg
        self.device_ids = list(device_ids) if device_ids else None
        self.output_device = output_device
        self.dim = dim
        self.broadcast_buffers = True if broadcast_buffers is None else bool(broadcast_buffers)
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_forward_param_sync = True

    def forward(self, *args, **kwargs):
        self._refuse_capture()
        if self.broadcast_buffers and self.require_forward_param_sync:
            self._broadcast(list(self.module.buffers()), 0)
        return self.module(*args, **kwargs)


def _process_group(pg):
    """The default process group (the only kind DDP runs over here); its checks are PyTorch's."""
    world = process_group.resolve(None, "DistributedDataParallel")
    if pg is not None and pg is not process_group.group.WORLD:
        resolved = process_group.resolve(pg, "DistributedDataParallel")
        if resolved is None or resolved.ranks != world.ranks:
            raise NotImplementedError(
                "DistributedDataParallel(process_group=...) over a group other than the "
                "default one is not supported in labkit: leave process_group out")
    return world


def _check_devices(module, device_ids, output_device):
    devices = {p.device for p in module.parameters()}
    if not device_ids and output_device is None:
        return
    if len(devices) != 1 or next(iter(devices)).type != "gpu":
        raise ValueError(
            f"DistributedDataParallel device_ids and output_device arguments only work with "
            f"single-device/multiple-device GPU modules or CPU modules, but got device_ids "
            f"{list(device_ids) if device_ids else device_ids}, output_device {output_device}, "
            f"and module parameters {sorted(d.name for d in devices)}. For a model on the CPU "
            f"leave device_ids out (device_ids=None).")
    here = next(iter(devices))
    wanted = [_device_of(d) for d in (device_ids or [])]
    if len(wanted) > 1 or (wanted and wanted[0].name != here.name):
        raise DistError(
            f"DistributedDataParallel(device_ids={list(device_ids)}): the model's parameters "
            f"are on {here.name}; give device_ids=[{here.index}] (each rank's own GPU), or "
            f"move the model to the device you name first (model.to(...)).")


# torch.nn.parallel.DistributedDataParallel and torch.nn.parallel.distributed: this class lives
# with the process groups it needs, a layer above labkit.nn, and is named there from here
_nn_parallel.DistributedDataParallel = DistributedDataParallel
sys.modules[f"{_nn_parallel.__name__}.distributed"] = sys.modules[__name__]
