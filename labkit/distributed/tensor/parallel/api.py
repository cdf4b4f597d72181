"""``parallelize_module(module, device_mesh, parallelize_plan)``: apply parallel styles to a
module's submodules, named by their paths (``"blocks.*.attn.q"``: ``*`` matches one level),
PyTorch's spelling.

Every parameter the plan leaves plain is then replicated over the mesh (a ``DParameter`` with
``Replicate()``), labkit's one addition: in one process a plain parameter lives on one device
and would be copied to every other at each use, and on MPI ranks each rank's copy would get
only its share of the gradient. Replicated, it stays on every device, and a backward pass adds
up the replicas' shares of its gradient (an all-reduce of the small LayerNorm weights).
"""
import fnmatch

from ..module import distribute_module
from .style import ParallelStyle


def _matches(module, pattern):
    parts = pattern.split(".")
    out = []
    for name, m in module.named_modules():
        names = name.split(".") if name else []
        if len(names) == len(parts) and all(fnmatch.fnmatchcase(n, p)
                                            for n, p in zip(names, parts)):
            out.append(m)
    return out


def parallelize_module(module, device_mesh=None, parallelize_plan=None):
    """Split ``module`` across ``device_mesh`` (a 1-d mesh or one named dimension of a bigger
    one, ``mesh["tp"]``) by ``parallelize_plan``: one ``ParallelStyle`` for the module
    itself, or ``{path: style}`` for its submodules. Returns the module.

    >>> import labkit as lk
    >>> from labkit.distributed.tensor import init_device_mesh
    >>> from labkit.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel
    >>> lk.devices.configure(cpus=2)
    >>> mlp = lk.nn.Sequential(lk.nn.Linear(4, 8), lk.nn.ReLU(), lk.nn.Linear(8, 4))
    >>> mlp = parallelize_module(mlp, init_device_mesh("cpu", (2,)),
    ...                          {"0": ColwiseParallel(), "2": RowwiseParallel()})
    >>> mlp[0].weight.placements, mlp[2].weight.placements, mlp(lk.ones(3, 4)).placements
    ((Shard(dim=0),), (Shard(dim=1),), (Replicate(),))
    >>> lk.devices.configure(cpus=1)
    """
    mesh = device_mesh
    if mesh is None:
        raise ValueError("parallelize_module: give the device_mesh")
    if mesh.ndim != 1:
        raise ValueError(f"parallelize_module: give a 1-d mesh, or one named dimension of a "
                         f"bigger one (mesh['tp']); got a {mesh.ndim}-d mesh")
    if isinstance(parallelize_plan, ParallelStyle):
        parallelize_plan._apply(module, mesh, module)
    elif parallelize_plan is not None:
        for pattern, style in parallelize_plan.items():
            if not isinstance(style, ParallelStyle):
                raise TypeError(f"parallelize_module: plan[{pattern!r}] is a "
                                f"{type(style).__name__}, not a parallel style")
            found = _matches(module, pattern)
            if not found:
                raise ValueError(f"parallelize_module: no submodule of "
                                 f"{type(module).__name__} matches {pattern!r}")
            for m in found:
                style._apply(m, mesh, module)
    distribute_module(module, mesh)      # the rest: replicated
    return module
