"""A model's state dict across layouts, PyTorch's ``torch.distributed.checkpoint.state_dict``
spellings: ``get_model_state_dict`` (sharded: each value a DTensor as the model holds it; or
``full_state_dict=True``: each value a whole plain tensor) and ``set_model_state_dict`` (values
of any layout: whole tensors are split, DTensors redistributed, to the model's own layout).
So a sharded model's weights load into an unsharded one and back.

>>> import labkit as lk
>>> from labkit.distributed.device_mesh import init_device_mesh
>>> from labkit.distributed.fsdp import fully_shard
>>> lk.devices.configure(cpus=2)
>>> sharded = fully_shard(lk.nn.Linear(4, 2), mesh=init_device_mesh("cpu", (2,)))
>>> full = get_model_state_dict(sharded, options=StateDictOptions(full_state_dict=True))
>>> plain = lk.nn.Linear(4, 2)
>>> plain.load_state_dict(full)
<All keys matched successfully>
>>> bool((plain.weight == sharded.weight.full_tensor()).all())
True
>>> lk.devices.configure(cpus=1)
"""
from dataclasses import dataclass

import numpy as np

from ...autodiff import no_grad
from ...devices import transfer
from ...errors import ShapeError
from ...tensor.creation import tensor as _tensor
from ...tensor.tensor import Tensor
from ..tensor.dtensor import DTensor


@dataclass
class StateDictOptions:
    """``full_state_dict``: whole plain tensors instead of the model's DTensors;
    ``cpu_offload``: those on ``cpu:0``; ``strict``: every key must match on set."""
    full_state_dict: bool = False
    cpu_offload: bool = False
    strict: bool = True


def get_model_state_dict(model, *, submodules=None, options=None):
    """``model``'s parameters and persistent buffers by qualified name: as the model holds
    them (DTensors for distributed ones), or whole (``options.full_state_dict``)."""
    options = options or StateDictOptions()
    out = model.state_dict()
    if options.full_state_dict:
        with no_grad():
            out = {k: v.full_tensor() if isinstance(v, DTensor) else v for k, v in out.items()}
        if options.cpu_offload:
            out = {k: v.to("cpu") for k, v in out.items()}
    return out


def set_model_state_dict(model, model_state_dict, *, options=None):
    """Load ``model_state_dict`` into ``model`` in place, whatever the layout of either: a
    whole tensor into a distributed parameter is split (each device keeps its piece), a
    DTensor into a plain one is gathered, one DTensor into another redistributed. Returns the
    missing and unexpected keys (as ``load_state_dict``)."""
    options = options or StateDictOptions()
    own = dict(model._state_items())
    missing = [k for k in own if k not in model_state_dict]
    unexpected = [k for k in model_state_dict if k not in own]
    if options.strict and (missing or unexpected):
        raise ShapeError(f"set_model_state_dict: keys do not match: missing {missing}, "
                         f"unexpected {unexpected} (pass StateDictOptions(strict=False))")
    with no_grad():
        for key, target in own.items():
            if key in model_state_dict:
                _load(key, target, model_state_dict[key])
    return missing, unexpected


def _load(key, target, value):
    if tuple(getattr(value, "shape", np.shape(value))) != tuple(target.shape):
        raise ShapeError(f"set_model_state_dict: {key} has shape "
                         f"{tuple(getattr(value, 'shape', np.shape(value)))}, the model's "
                         f"{tuple(target.shape)}")
    if not isinstance(target, DTensor):
        whole = value.full_tensor() if isinstance(value, DTensor) else value
        model_piece(target, whole)
        return
    spec = target._spec
    if isinstance(value, DTensor):
        value = value.redistribute(placements=spec.placements)
        pieces = value._locals
    else:
        whole = value if isinstance(value, Tensor) else _tensor(np.asarray(value))
        pieces = {c: whole[spec.local_slices(c)] for c in target._locals}
    for c, piece in target._locals.items():
        model_piece(piece, pieces[c])


def model_piece(target, value):
    """Copy ``value``'s values into the plain tensor ``target`` (its device and dtype)."""
    if not isinstance(value, Tensor):
        value = _tensor(np.asarray(value))
    array = transfer(value._data, value.device, target.device)
    target._data[...] = array.astype(target._data.dtype, copy=False)
