"""Parallel styles: how one module is split across a mesh dimension, PyTorch's
``torch.distributed.tensor.parallel`` spellings.

- ``ColwiseParallel``: a Linear's output features split (weight ``Shard(0)``, bias
  ``Shard(0)``; an Embedding's features, ``Shard(1)``): a replicated input in, the output
  split along its last dimension, no message.
- ``RowwiseParallel``: a Linear's input features split (weight ``Shard(1)``, bias
  replicated; an Embedding's vocabulary, ``Shard(0)``): an input split along its last
  dimension in, partial sums out, made whole by an all-reduce (or a reduce-scatter into a
  sequence split, ``output_layouts=Shard(1)``).
- ``SequenceParallel``: a LayerNorm (or any module computing per position) runs on a
  sequence split (``Shard(1)``), its parameters replicated.
- ``PrepareModuleInput`` / ``PrepareModuleOutput``: change the layout of a module's inputs /
  outputs (the all-gather from a sequence split before attention).

Megatron's layout is ColwiseParallel then RowwiseParallel: one all-reduce per attention and
per MLP in forward, and one in backward.

Inputs that are plain tensors become DTensors with ``input_layouts`` (in one process the
value is the whole tensor; on an MPI rank, that rank's piece). ``use_local_output=True``
(PyTorch's default) gives back each rank's piece on MPI ranks; in one process, which holds
every device's piece, outputs stay DTensors.
"""
from ....nn.linear import Linear
from ....nn.sparse import Embedding
from ..dtensor import DParameter, DTensor, distribute_tensor
from ..module import replace_parameter
from ..placement_types import Replicate, Shard, placements_text
from ....tensor.tensor import Tensor


class ParallelStyle:
    """How one module is split (``_apply(module, mesh, root)``)."""

    def _apply(self, module, mesh, root):
        raise NotImplementedError


def on_mesh(t, mesh, placement):
    """``t`` on ``mesh`` (a one-dimension sub-mesh) with ``placement`` there: a plain tensor
    laid out (the whole value in one process, this rank's piece on MPI), a DTensor
    redistributed along that dimension only."""
    if isinstance(t, DTensor):
        full = list(t.placements)
        full[mesh.dims[0]] = _dim_of(placement, t.ndim)
        if tuple(full) == t.placements:
            return t
        return t.redistribute(placements=full)
    if isinstance(t, Tensor):
        placement = _dim_of(placement, t.ndim)
        if len(mesh.coordinates()) > 1:
            if placement.is_partial():
                raise ValueError("a plain tensor cannot be a partial sum in one process")
            return distribute_tensor(t, mesh, [placement])
        return DTensor.from_local(t, mesh, [placement])
    return t


def _dim_of(p, ndim):
    return Shard(p.dim % ndim) if isinstance(p, Shard) else p


def local_output(t, mesh, use_local_output):
    if use_local_output and isinstance(t, DTensor) and len(t._locals) == 1:
        return t.to_local()
    return t


def shard_parameter(module, name, mesh, placement, root):
    """Replace ``module.<name>`` by a DParameter laid out as ``placement`` along ``mesh``'s
    dimension (replicated along the others), everywhere it is registered under ``root``
    (tied weights stay tied). A parameter already on the mesh must already be so."""
    p = module._parameters.get(name)
    if p is None:
        return
    if isinstance(p, DTensor):
        want = _dim_of(placement, p.ndim)
        if p.placements[mesh.dims[0]] != want:
            raise ValueError(
                f"{type(module).__name__}.{name} is already laid out as "
                f"{placements_text(p.placements)} (a weight tied to another layer's?), which "
                f"does not put {want} on mesh dimension {mesh.dims[0]}: tied weights need "
                f"styles that lay them out alike")
        return
    new = DParameter.of(distribute_tensor(p.detach(), mesh, [placement]),
                        requires_grad=p.requires_grad)
    replace_parameter(root, p, new)


class _Layer(ParallelStyle):
    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output=True):
        self.input_layouts = input_layouts
        self.output_layouts = output_layouts
        self.use_local_output = use_local_output

    def _hooks(self, module, mesh, given, wanted, out):
        def pre(m, args):
            if not args:
                return None
            first = args[0]
            if not isinstance(first, DTensor):
                first = on_mesh(first, mesh, given)
            return (on_mesh(first, mesh, wanted),) + tuple(args[1:])

        def post(m, args, output):
            return local_output(on_mesh(output, mesh, out), mesh, self.use_local_output)
        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)


class ColwiseParallel(_Layer):
    """Split a Linear's output features (an Embedding's feature columns) across the mesh.

    >>> import labkit as lk
    >>> from labkit.distributed.tensor import init_device_mesh
    >>> from labkit.distributed.tensor.parallel import parallelize_module
    >>> lk.devices.configure(cpus=2)
    >>> layer = parallelize_module(lk.nn.Linear(3, 4), init_device_mesh("cpu", (2,)),
    ...                            ColwiseParallel(use_local_output=False))
    >>> layer.weight.placements, layer(lk.ones(5, 3)).placements
    ((Shard(dim=0),), (Shard(dim=1),))
    >>> lk.devices.configure(cpus=1)
    """

    def _apply(self, module, mesh, root):
        if isinstance(module, Linear):
            shard_parameter(module, "weight", mesh, Shard(0), root)
            shard_parameter(module, "bias", mesh, Shard(0), root)
        elif isinstance(module, Embedding):
            shard_parameter(module, "weight", mesh, Shard(1), root)
        else:
            raise TypeError(f"ColwiseParallel applies to Linear and Embedding modules, not "
                            f"{type(module).__name__}")
        self._hooks(module, mesh, self.input_layouts or Replicate(), Replicate(),
                    self.output_layouts or Shard(-1))
        return module


class RowwiseParallel(_Layer):
    """Split a Linear's input features (an Embedding's vocabulary) across the mesh: partial
    sums out, made whole (``output_layouts``, default ``Replicate()``: an all-reduce)."""

    def _apply(self, module, mesh, root):
        if isinstance(module, Linear):
            shard_parameter(module, "weight", mesh, Shard(1), root)
            shard_parameter(module, "bias", mesh, Replicate(), root)
            given, wanted = self.input_layouts or Shard(-1), Shard(-1)
        elif isinstance(module, Embedding):
            shard_parameter(module, "weight", mesh, Shard(0), root)
            given, wanted = self.input_layouts or Replicate(), Replicate()
        else:
            raise TypeError(f"RowwiseParallel applies to Linear and Embedding modules, not "
                            f"{type(module).__name__}")
        self._hooks(module, mesh, given, wanted, self.output_layouts or Replicate())
        return module


class SequenceParallel(ParallelStyle):
    """Run a module that computes per position (LayerNorm, Dropout, RMSNorm) on a split of
    the sequence dimension; its parameters are replicated."""

    def __init__(self, *, sequence_dim=1, use_local_output=False):
        self.sequence_dim = sequence_dim
        self.use_local_output = use_local_output

    def _apply(self, module, mesh, root):
        for name in list(module._parameters):
            shard_parameter(module, name, mesh, Replicate(), root)
        seq = Shard(self.sequence_dim)

        def pre(m, args):
            if not args:
                return None
            return (on_mesh(args[0], mesh, seq),) + tuple(args[1:])

        def post(m, args, output):
            return local_output(output, mesh, self.use_local_output)
        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)
        return module


def _layouts(x):
    return x if isinstance(x, (tuple, list)) else (x,)


class PrepareModuleInput(ParallelStyle):
    """Lay a module's positional inputs out as ``desired_input_layouts`` (None: leave one
    alone); plain inputs are first taken as ``input_layouts``."""

    def __init__(self, *, input_layouts=None, desired_input_layouts=None,
                 use_local_output=False):
        self.input_layouts = _layouts(input_layouts)
        self.desired = _layouts(desired_input_layouts)
        self.use_local_output = use_local_output

    def _apply(self, module, mesh, root):
        def pre(m, args):
            out = []
            for i, a in enumerate(args):
                given = self.input_layouts[i] if i < len(self.input_layouts) else None
                want = self.desired[i] if i < len(self.desired) else None
                if given is not None and not isinstance(a, DTensor):
                    a = on_mesh(a, mesh, given)
                if want is not None:
                    a = local_output(on_mesh(a, mesh, want), mesh, self.use_local_output)
                out.append(a)
            return tuple(out)
        module.register_forward_pre_hook(pre)
        return module


class PrepareModuleOutput(ParallelStyle):
    """Lay a module's output(s) out as ``desired_output_layouts``."""

    def __init__(self, *, output_layouts=None, desired_output_layouts=None,
                 use_local_output=True):
        self.desired = _layouts(desired_output_layouts)
        self.use_local_output = use_local_output

    def _apply(self, module, mesh, root):
        def post(m, args, output):
            single = not isinstance(output, tuple)
            outs = (output,) if single else output
            outs = tuple(local_output(on_mesh(o, mesh, want), mesh, self.use_local_output)
                         if want is not None else o
                         for o, want in zip(outs, self.desired + (None,) * len(outs)))
            return outs[0] if single else outs
        module.register_forward_hook(post)
        return module


__all__ = ["ColwiseParallel", "ParallelStyle", "PrepareModuleInput", "PrepareModuleOutput",
           "RowwiseParallel", "SequenceParallel"]
