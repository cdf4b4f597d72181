"""Modules over a mesh: ``distribute_module`` (PyTorch's), and the pieces the parallel APIs
share: a module's parameters with the module that owns each (tied ones once), replacing a
parameter by a distributed one everywhere it is used, and laying plain inputs out on a mesh.

``distribute_module(model, mesh)`` with no functions replicates every parameter over the mesh:
data parallelism. Give it an ``input_fn`` that splits the batch (``shard_inputs(0)``) and each
device trains on its part; a backward pass adds up the replicas' shares of every gradient (an
all-reduce), so every replica takes the same optimiser step.

>>> import labkit as lk
>>> from labkit.distributed.tensor import Replicate, init_device_mesh
>>> lk.devices.configure(cpus=2)
>>> mesh = init_device_mesh("cpu", (2,))
>>> layer = distribute_module(lk.nn.Linear(3, 2), mesh, input_fn=shard_inputs(0))
>>> layer.weight.placements, layer(lk.ones(4, 3)).placements
((Replicate(),), (Shard(dim=0),))
>>> lk.devices.configure(cpus=1)
"""
from ...tensor.tensor import Tensor
from .dtensor import DParameter, DTensor, distribute_tensor
from .placement_types import Replicate, Shard


def parameters_with_owners(module):
    """``[(qualified name, owner module, attribute name, parameter)]`` of every parameter of
    ``module`` and its submodules; a parameter shared by several modules (tied weights) is
    listed once per place it is registered."""
    out = []
    for prefix, m in module.named_modules(remove_duplicate=False):
        for name, p in list(m._parameters.items()):
            if p is not None:
                out.append((f"{prefix}.{name}" if prefix else name, m, name, p))
    return out


def replace_parameter(module, old, new):
    """Register ``new`` in every place of ``module``'s tree where ``old`` is registered (so
    tied weights stay tied)."""
    for _, owner, name, p in parameters_with_owners(module):
        if p is old:
            owner._parameters[name] = new
            new.name = getattr(old, "name", None)


def shard_inputs(dim=0, mesh_dims=None):
    """An ``input_fn`` that lays each plain tensor input out split along ``dim`` (the batch)
    over the mesh (or its ``mesh_dims``) and replicated along any other mesh dimension. In
    one process an input is the whole batch; on an MPI rank it is that rank's part of it."""
    def input_fn(module, args, mesh):
        return tuple(to_mesh(a, mesh, dim) if isinstance(a, Tensor) and
                     not isinstance(a, DTensor) else a for a in args)
    return input_fn


def to_mesh(t, mesh, dim=None):
    """A plain tensor as a DTensor on ``mesh``, split along ``dim`` (None: replicated):
    the whole value in one process (split), this rank's piece on an MPI rank."""
    placements = [Replicate() if dim is None else Shard(dim)] * mesh.ndim
    if len(mesh.coordinates()) > 1:
        return distribute_tensor(t, mesh, placements)
    return DTensor.from_local(t, mesh, placements)


def distribute_module(module, device_mesh=None, partition_fn=None, input_fn=None,
                      output_fn=None):
    """Lay ``module``'s parameters out on ``device_mesh``: ``partition_fn(name, module, mesh)``
    for each submodule (it replaces parameters itself); by default every parameter is
    replicated. ``input_fn(module, args, mesh)`` / ``output_fn(module, output, mesh)`` run
    around each forward (PyTorch's spelling)."""
    mesh = device_mesh
    if partition_fn is None:
        done = {}
        for _, owner, name, p in parameters_with_owners(module):
            if isinstance(p, DTensor):
                continue
            new = done.get(id(p))
            if new is None:
                new = done[id(p)] = DParameter.of(
                    distribute_tensor(p.detach(), mesh, [Replicate()] * mesh.ndim),
                    requires_grad=p.requires_grad)
            owner._parameters[name] = new
            new.name = getattr(p, "name", None)
    else:
        for name, m in module.named_modules():
            partition_fn(name, m, mesh)
    if input_fn is not None:
        module.register_forward_pre_hook(lambda m, args: input_fn(m, args, mesh))
    if output_fn is not None:
        module.register_forward_hook(lambda m, args, out: output_fn(m, out, mesh))
    return module


__all__ = ["distribute_module", "shard_inputs", "parameters_with_owners", "replace_parameter",
           "to_mesh"]
