"""``DataParallel`` and ``data_parallel``: one process, a batch split over several devices.

As ``torch.nn.parallel.DataParallel``: each call splits the tensors of its arguments along
``dim`` into one chunk per device (``chunk``'s sizes), runs the module on each chunk on its
device, and concatenates the outputs on ``output_device``. The module itself runs the first
chunk on ``device_ids[0]``, where its parameters must be; every other device runs a replica
whose parameters and buffers are copies made by differentiable transfers, so gradients from
every chunk reach the module's own parameters. The replicas run one after another in the
calling thread. Changes a replica makes to its buffers (BatchNorm's running statistics) are
lost, as in PyTorch; the first device's, made by the module itself, stay.

With no ``device_ids`` and no GPU (or a single device) the module is simply called, which is
what PyTorch does on a CPU. Devices are GPU indices or labkit device names, so virtual CPU
devices (``lk.devices.configure(cpus=2)``, then ``device_ids=["cpu:0", "cpu:1"]``) show it on
a machine without GPUs.

>>> import labkit as lk
>>> from labkit.nn.parallel import data_parallel
>>> data_parallel(lk.nn.Linear(3, 2), lk.ones(4, 3)).shape
(4, 2)
"""
import warnings

from ...devices import get_device, gpu_count
from ...func import functional_call
from ...tensor.public.shape import cat
from ...tensor.tensor import Tensor
from ..module import Module


def _device(spec):
    """A ``device_ids`` / ``output_device`` entry (a GPU index, a name, a Device)."""
    if isinstance(spec, int) and not isinstance(spec, bool):
        return get_device(f"gpu:{spec}")
    return get_device(spec)


def _devices(device_ids):
    if device_ids is None:
        return [get_device(f"gpu:{i}") for i in range(gpu_count())]
    return [_device(d) for d in device_ids]


def _check_on(module, device, where):
    for name, t in list(module.named_parameters()) + list(module.named_buffers()):
        if t.device is not device:
            raise ValueError(
                f"{where}: module must have its parameters and buffers on device "
                f"{device.name} (device_ids[0]) but found {name!r} on device {t.device.name}; "
                f"move the model there first (model.to('{device.name}'))")


def _scatter(value, devices, dim):
    """``value`` split for each device: [(one chunk per device)]; tensors are chunked along
    ``dim`` and moved, containers split element by element, anything else repeated."""
    if isinstance(value, Tensor):
        parts = value.chunk(len(devices), dim)
        return [p.to(d) for p, d in zip(parts, devices)]
    if isinstance(value, (tuple, list)) and value:
        columns = [_scatter(v, devices, dim) for v in value]
        n = min(len(c) for c in columns)
        return [type(value)(c[i] for c in columns) if isinstance(value, tuple) else
                [c[i] for c in columns] for i in range(n)]
    if isinstance(value, dict) and value:
        keys = list(value)
        columns = [_scatter(value[k], devices, dim) for k in keys]
        n = min(len(c) for c in columns)
        return [dict(zip(keys, (c[i] for c in columns))) for i in range(n)]
    return [value] * len(devices)


def _gather(outputs, device, dim):
    """The replicas' outputs as one: tensors concatenated along ``dim`` on ``device``."""
    first = outputs[0]
    if isinstance(first, Tensor):
        if first.ndim == 0:
            warnings.warn("Was asked to gather along dimension 0, but all input tensors were "
                          "scalars; will instead unsqueeze and return a vector.", stacklevel=3)
            return cat([o.to(device).reshape(1) for o in outputs], 0)
        return cat([o.to(device) for o in outputs], dim)
    if isinstance(first, (tuple, list)):
        parts = [_gather([o[i] for o in outputs], device, dim) for i in range(len(first))]
        return type(first)(parts) if isinstance(first, tuple) else parts
    if isinstance(first, dict):
        return {k: _gather([o[k] for o in outputs], device, dim) for k in first}
    if first is None:
        return None
    return outputs


def _run(module, args, kwargs, devices, output_device, dim, where):
    if not devices:
        return module(*args, **kwargs)
    _check_on(module, devices[0], where)
    if len(devices) == 1:
        (chunk,) = _scatter((args, kwargs), devices, dim)[:1]
        return module(*chunk[0], **chunk[1])
    chunks = _scatter((args, kwargs), devices, dim)
    state = list(module.named_parameters()) + list(module.named_buffers())
    outputs = []
    for device, (a, k) in zip(devices, chunks):
        if device is devices[0]:
            outputs.append(module(*a, **k))
        else:
            copies = {name: t.to(device) for name, t in state}
            outputs.append(functional_call(module, copies, tuple(a), k))
    return _gather(outputs, output_device, dim)


class DataParallel(Module):
    """Run ``module`` on a batch split over ``device_ids`` (default: every GPU; none: the
    module alone), outputs gathered on ``output_device`` (default ``device_ids[0]``); see the
    module's docstring. ``.module`` is the wrapped module (``state_dict`` keys start with
    ``module.``, as in PyTorch).

    >>> import labkit as lk
    >>> lk.devices.configure(cpus=2)
    >>> dp = lk.nn.DataParallel(lk.nn.Linear(3, 2), device_ids=["cpu:0", "cpu:1"])
    >>> y = dp(lk.ones(4, 3)); y.shape, y.device.name
    ((4, 2), 'cpu:0')
    >>> lk.devices.configure(cpus=1)
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel wraps an lk.nn.Module, got {type(module).__name__}")
        self.module = module
        self.device_ids = _devices(device_ids)
        self.output_device = (_device(output_device) if output_device is not None else
                              self.device_ids[0] if self.device_ids else None)
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return _run(self.module, inputs, kwargs, self.device_ids, self.output_device, self.dim,
                    "DataParallel")


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0,
                  module_kwargs=None):
    """``module(*inputs, **module_kwargs)`` with the batch split over ``device_ids``, as
    ``DataParallel`` does for one call (``inputs``: a tuple of arguments, or one tensor)."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    devices = _devices(device_ids)
    out = (_device(output_device) if output_device is not None else
           devices[0] if devices else None)
    return _run(module, inputs, dict(module_kwargs or {}), devices, out, dim, "data_parallel")
