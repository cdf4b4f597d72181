"""``DTensor``: one logical tensor laid out over a device mesh, PyTorch's spelling.

A DTensor holds the local tensor of every mesh coordinate this process holds (all of them on
virtual devices, its own on an MPI rank) and a layout (``placements``, one per mesh
dimension: ``Shard(d)``, ``Replicate()`` or ``Partial()``). Every op applied to a DTensor goes
through ``dispatch``: the op's sharding rule (``labkit.distributed.tensor.ops``) says where the
inputs must be, they are redistributed there (collectives: ``redistribute``), and the op runs
on each device's local tensors. The local tensors are ordinary labkit tensors, so all of it
runs eagerly and inside ``lk.function``, and is differentiated by labkit's one autodiff engine.

Gradients are those of what each device computes. So the gradient of a replicated value comes
back as partial sums (each device's share of it), that of a partial sum as a whole value on
every device, that of a shard as a shard. A backward pass adds up the shares of every
replicated leaf it reaches (an all-reduce along the replicated mesh dimensions, before it hands
gradients out), so that ``x.grad`` has ``x``'s placements, as in PyTorch.

>>> import labkit as lk
>>> from labkit.distributed.tensor import Shard, distribute_tensor, init_device_mesh
>>> lk.devices.configure(cpus=2)
>>> mesh = init_device_mesh("cpu", (2,))
>>> x = distribute_tensor(lk.arange(8.0).reshape(4, 2), mesh, [Shard(0)])
>>> x.placements, x.to_local((1,)).tolist(), x.to_local((1,)).device
((Shard(dim=0),), [[4.0, 5.0], [6.0, 7.0]], Device('cpu:1'))
>>> (x * 2).sum().full_tensor().item()
56.0
>>> lk.devices.configure(cpus=1)
"""
import weakref

from ...autodiff.engine import run_backward
from ...autodiff.hooks import register_leaf_grads_hook
from ...errors import DeviceError, GradError, LabkitError, ShapeError, describe
from ...nn.parameter import Parameter
from ...tensor import dispatch
from ...tensor.creation import ones_like
from ...tensor.methods import install_operators
from ...tensor.ops.elementwise import clone, stop_gradient, to_device
from ...tensor.ops.index import zeros_like
from ...tensor.tensor import Tensor
from ..device_mesh import DeviceMesh
from .ops import Arg, no_rule_error, rule_for
from .placement_types import (DTensorSpec, Partial, Replicate, Shard, check_divisible,
                              normalize_placements, placements_text)
from .redistribute import redistribute_locals

# id(piece) -> the DTensor leaf it belongs to, for leaves replicated along some mesh dimension:
# a backward pass adds up their pieces' shares (``_add_up_replicas``)
_replicated_leaves = weakref.WeakValueDictionary()


def _track(t):
    """Note ``t`` (a leaf that requires grad) if its replicas must add up their shares."""
    if any(p.is_replicate() for p in t._spec.placements):
        for x in t._locals.values():
            _replicated_leaves[id(x)] = t


def _add_up_replicas(leaf_grads, done):
    """Before a backward pass hands gradients out: each replicated DTensor leaf it reached
    gets, on every replica, the sum of the replicas' shares (an all-reduce along its
    replicated mesh dimensions), so that ``.grad`` has the leaf's placements."""
    if not _replicated_leaves:
        return
    seen = []
    for key, (piece, _) in list(leaf_grads.items()):
        t = _replicated_leaves.get(key)
        if t is not None and key not in done and _coord_of(t, piece) is not None \
                and all(t is not s for s in seen):
            seen.append(t)
    for t in seen:
        got = {}
        for c, x in t._locals.items():
            entry = leaf_grads.get(id(x))
            got[c] = entry[1] if entry is not None else zeros_like(x)
        comm = t._spec.mesh.comm
        for m, p in enumerate(t._spec.placements):
            if p.is_replicate():
                got = comm.all_reduce(m, got)
        for c, x in t._locals.items():
            leaf_grads[id(x)] = (x, got[c])


def _coord_of(t, piece):
    return next((c for c, x in t._locals.items() if x is piece), None)


register_leaf_grads_hook(_add_up_replicas)


class DTensor(Tensor):
    """A tensor laid out over a ``DeviceMesh``: ``placements`` say how, ``to_local()`` is one
    device's piece, ``full_tensor()`` the whole value, ``redistribute(...)`` another layout.
    Make one with ``distribute_tensor`` or ``DTensor.from_local``; every op and method of a
    Tensor works on it (an op with no sharding rule is an error naming it)."""

    # no __slots__: a parameter DTensor (DParameter) is an nn.Parameter too

    @classmethod
    def _of(cls, locals_, spec):
        _register()
        t = object.__new__(cls)
        t._data = None
        t._locals = dict(locals_)
        t._spec = spec
        first = next(iter(t._locals.values()))
        t._device = first._device
        t._requires_grad = any(x._requires_grad for x in t._locals.values())
        t._grad = None
        t._node = None
        return t

    # ---- what it is ----------------------------------------------------------------------------
    @property
    def shape(self):
        return self._spec.shape

    @property
    def ndim(self):
        return len(self._spec.shape)

    @property
    def dtype(self):
        return self._spec.dtype

    @property
    def device(self):
        """The device of this process's first piece (``device_mesh`` has them all)."""
        return self._device

    def numel(self):
        n = 1
        for s in self._spec.shape:
            n *= s
        return n

    def __len__(self):
        if not self._spec.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._spec.shape[0]

    @property
    def device_mesh(self):
        return self._spec.mesh

    @property
    def placements(self):
        return self._spec.placements

    @property
    def is_leaf(self):
        return all(x._node is None for x in self._locals.values())

    # ---- pieces ---------------------------------------------------------------------------------
    def local_tensors(self):
        """``{mesh coordinate: local tensor}`` for the coordinates this process holds."""
        return dict(self._locals)

    def to_local(self, coordinate=None):
        """This device's piece: on an MPI rank its own; on virtual devices, the one at mesh
        ``coordinate`` (a tuple, or a flat index), which must then be given."""
        if coordinate is None:
            if len(self._locals) == 1:
                return next(iter(self._locals.values()))
            raise ValueError(
                f"to_local(): this process holds the pieces of all {len(self._locals)} devices "
                f"of the mesh (virtual devices); name one, dt.to_local((0,)), or take them all "
                f"with dt.local_tensors()")
        if isinstance(coordinate, int):
            coordinate = self._coords()[coordinate]
        coordinate = tuple(coordinate)
        if coordinate not in self._locals:
            raise KeyError(f"to_local({coordinate}): this process holds coordinates "
                           f"{self._coords()}")
        return self._locals[coordinate]

    def _coords(self):
        return list(self._locals)

    def redistribute(self, device_mesh=None, placements=None, *, async_op=False):
        """The same value laid out as ``placements`` (collectives as needed; differentiable).

        >>> import labkit as lk
        >>> from labkit.distributed.tensor import (Replicate, Shard, distribute_tensor,
        ...                                        init_device_mesh)
        >>> lk.devices.configure(cpus=2)
        >>> x = distribute_tensor(lk.ones(4, 2), init_device_mesh("cpu", (2,)), [Shard(0)])
        >>> x.redistribute(placements=[Replicate()]).to_local((1,)).shape
        (4, 2)
        >>> lk.devices.configure(cpus=1)
        """
        mesh, placements = _on_root(device_mesh or self._spec.mesh, placements, self.ndim,
                                    "redistribute")
        if mesh is not self._spec.mesh:
            raise ValueError("redistribute to another mesh is not supported: a DTensor "
                             "stays on its mesh")
        check_divisible("redistribute", self.shape, placements, mesh.mesh.shape,
                        mesh.mesh_dim_names)
        locals_, spec = redistribute_locals(self._locals, self._spec, placements)
        return DTensor._of(locals_, spec)

    def full_tensor(self):
        """The whole value as a plain tensor on the first device (gathered or summed as
        needed; differentiable)."""
        whole = self.redistribute(placements=[Replicate()] * self._spec.mesh.ndim)
        return next(iter(whole._locals.values()))

    # ---- autodiff -------------------------------------------------------------------------------
    @property
    def requires_grad(self):
        return any(x._requires_grad for x in self._locals.values())

    @requires_grad.setter
    def requires_grad(self, flag):
        for x in self._locals.values():
            x.requires_grad = flag
        self._requires_grad = bool(flag)
        if flag:
            _track(self)

    def requires_grad_(self, flag=True):
        self.requires_grad = flag
        return self

    @property
    def grad(self):
        """The gradient as a DTensor with this tensor's placements (a partial sum's gradient
        is the same whole value on every device: ``Replicate()``)."""
        grads = {c: x._grad for c, x in self._locals.items()}
        if all(g is None for g in grads.values()):
            return None
        grads = {c: g if g is not None else zeros_like(self._locals[c])
                 for c, g in grads.items()}
        placements = tuple(Replicate() if p.is_partial() else p for p in self._spec.placements)
        return DTensor._of(grads, self._spec.with_(placements=placements))

    @grad.setter
    def grad(self, value):
        if value is None:
            for x in self._locals.values():
                x.grad = None
            return
        if not isinstance(value, DTensor):
            raise TypeError(f"the .grad of a DTensor is a DTensor or None, got "
                            f"{type(value).__name__}")
        value = value.redistribute(placements=tuple(
            Replicate() if p.is_partial() else p for p in self._spec.placements))
        for c, x in self._locals.items():
            x.grad = value._locals[c]

    def backward(self, gradient=None, retain_graph=None, create_graph=False):
        """Differentiate from this DTensor: every device's pieces backward at once, seeded so
        that the whole value counts once (a replicated seed on the first device of each
        replicated mesh dimension)."""
        roots = list(self._locals.values())
        if not any(r._requires_grad for r in roots):
            raise GradError(f"backward() on a DTensor {list(self.shape)} "
                            f"{placements_text(self.placements)} that does not require grad")
        if gradient is None:
            if self.numel() != 1:
                raise GradError(f"backward() on a DTensor with {self.numel()} elements needs a "
                                f"gradient argument (a DTensor of its shape)")
            seeds = {c: ones_like(r) for c, r in self._locals.items()}
            spec = self._spec.with_(placements=tuple(
                Replicate() if p.is_partial() else p for p in self._spec.placements))
        else:
            if not isinstance(gradient, DTensor):
                gradient = distribute_tensor(gradient, self._spec.mesh,
                                             [Replicate()] * self._spec.mesh.ndim)
            g = gradient.redistribute(placements=tuple(
                Replicate() if p.is_partial() else p for p in self._spec.placements))
            seeds, spec = g._locals, g._spec
        seeds = _partition(seeds, spec, [m for m, p in enumerate(self._spec.placements)
                                         if p.is_replicate()])
        keep = create_graph if retain_graph is None else retain_graph
        run_backward(roots, [seeds[c] for c in self._locals], None, keep, create_graph,
                     accumulate=True)

    def detach(self):
        return DTensor._of({c: x.detach() for c, x in self._locals.items()}, self._spec)

    # ---- values ---------------------------------------------------------------------------------
    def numpy(self):
        return self.full_tensor().numpy()

    def __array__(self, dtype=None, copy=None):
        return self.full_tensor().__array__(dtype, copy)

    def item(self):
        return self.full_tensor().item()

    def tolist(self):
        return self.full_tensor().tolist()

    def __bool__(self):
        return bool(self.full_tensor())

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def to(self, *args, device=None, dtype=None, non_blocking=False, copy=False):
        if device is not None or any(not hasattr(a, "is_floating") for a in args):
            raise DeviceError(
                f"DTensor.to(device): a DTensor lives on the devices of its mesh. Use "
                f"dt.redistribute(...) to change its layout, dt.full_tensor().to(device) for "
                f"its whole value on one device, or dt.to_local(...) for one piece.")
        return super().to(*args, dtype=dtype, copy=copy)

    def __dlpack__(self, *args, **kwargs):
        raise DeviceError("DLPack export of a DTensor: export dt.full_tensor() or a piece")

    def __repr__(self):
        mesh = self._spec.mesh
        pieces = ", ".join(f"{mesh.device(c).name}: {list(x.shape)}"
                           for c, x in self._locals.items())
        return (f"DTensor(shape={list(self.shape)}, dtype={self.dtype}, "
                f"placements={placements_text(self.placements)}, mesh={mesh!r}, "
                f"pieces={{{pieces}}})")

    def _repr_html_(self):
        from html import escape
        return f"<pre>{escape(repr(self))}</pre>"

    def __format__(self, spec):
        if spec and self.numel() == 1:
            return format(self.item(), spec)
        return format(repr(self), spec)

    # ---- a tensor made of tensors (lk.function flattens it into its pieces) --------------------
    def __tensor_flatten__(self):
        coords = tuple(self._locals)
        return [self._locals[c] for c in coords], (self._spec, coords)

    @classmethod
    def __tensor_unflatten__(cls, parts, context):
        spec, coords = context
        return DTensor._of(dict(zip(coords, parts)), spec)

    # ---- construction ---------------------------------------------------------------------------
    @staticmethod
    def from_local(local_tensor, device_mesh=None, placements=None, *, run_check=False,
                   shape=None, stride=None):
        """A DTensor from each device's piece, laid out as ``placements``.

        On an MPI rank ``local_tensor`` is this rank's piece, as in PyTorch; a piece declared
        ``Replicate()`` is taken to be the same on every rank, and its gradient comes back
        whole on every rank (the ranks' shares added up). On virtual devices give every
        piece: a list in mesh order (or a dict by coordinate); one tensor is taken as every
        device's piece.
        """
        mesh = device_mesh
        if mesh is None:
            raise ValueError("DTensor.from_local: give the device_mesh")
        ndim = _local_ndim(local_tensor)
        mesh, placements = _on_root(mesh, placements, ndim, "from_local")
        coords = mesh.coordinates()
        if isinstance(local_tensor, Tensor):      # this rank's piece, or every device's
            pieces = mesh.comm.replicate(local_tensor, coords, [
                m for m, p in enumerate(placements) if p.is_replicate()])
        elif isinstance(local_tensor, dict):
            pieces = {tuple(c): t for c, t in local_tensor.items()}
        else:
            pieces = dict(zip(coords, local_tensor))
        if set(pieces) != set(coords):
            raise ValueError(f"from_local: give one piece per mesh coordinate this process "
                             f"holds ({len(coords)}), got {len(pieces)}")
        pieces = {c: t if t._device is mesh.device(c) else to_device(
            t, device=mesh.device(c).name) for c, t in pieces.items()}
        first = pieces[coords[0]]
        if any(tuple(t.shape) != tuple(first.shape) for t in pieces.values()):
            raise ShapeError(f"from_local: the pieces have different shapes "
                             f"({sorted({tuple(t.shape) for t in pieces.values()})}); labkit "
                             f"has no uneven shards")
        global_shape = list(first.shape)
        for m, p in enumerate(placements):
            if isinstance(p, Shard):
                global_shape[p.dim] *= mesh.mesh.shape[m]
        if shape is not None and tuple(shape) != tuple(global_shape):
            raise ShapeError(f"from_local: shape={tuple(shape)} does not match the pieces' "
                             f"{tuple(global_shape)}")
        spec = DTensorSpec(mesh, placements, global_shape, first.dtype)
        out = DTensor._of({c: pieces[c] for c in coords}, spec)
        if out.is_leaf and out.requires_grad:
            _track(out)
        return out


def _local_ndim(local):
    if isinstance(local, Tensor):
        return local.ndim
    first = next(iter(local.values())) if isinstance(local, dict) else local[0]
    return first.ndim


class DParameter(DTensor, Parameter):
    """A DTensor that is a module's parameter (an ``nn.Parameter``): made by the parallel APIs
    (``fully_shard``, ``parallelize_module``) or by ``DParameter.of(dtensor)``. Optimisers see
    its local pieces, each optimised on its device with its own state there."""

    @classmethod
    def of(cls, dt, requires_grad=True):
        pieces = {c: x.detach() for c, x in dt._locals.items()}
        for x in pieces.values():
            x.requires_grad = requires_grad and x.dtype.is_floating
        p = cls._of(pieces, dt._spec)
        p.name = None
        if requires_grad:
            _track(p)
        return p

    def __repr__(self):
        return "DParameter containing:\n" + DTensor.__repr__(self)


def _partition(seeds, spec, mesh_dims):
    """``seeds`` kept on the first device of each mesh dimension in ``mesh_dims``, zeros on
    the others (a replicated value, counted once)."""
    if not mesh_dims:
        return seeds
    return {c: s if all(c[m] == 0 for m in mesh_dims) else zeros_like(s)
            for c, s in seeds.items()}


# ---- making DTensors ---------------------------------------------------------------------------
def _on_root(mesh, placements, ndim, what):
    """``(root mesh, placements over its dimensions)`` for ``placements`` given over ``mesh``
    (a sub-mesh's placements padded with Replicate on the root's other dimensions)."""
    if not isinstance(mesh, DeviceMesh):
        raise TypeError(f"{what}: device_mesh must be a DeviceMesh, got {type(mesh).__name__}")
    if placements is None:
        placements = [Replicate()] * mesh.ndim
    placements = normalize_placements(placements, ndim, mesh.ndim, what)
    root = mesh.root
    full = [Replicate()] * root.mesh.ndim
    for d, p in zip(mesh.dims, placements):
        full[d] = p
    return root, tuple(full)


def distribute_tensor(tensor, device_mesh=None, placements=None, *, src_data_rank=0):
    """``tensor`` laid out over ``device_mesh`` as ``placements`` (default: replicated).

    In one process each device gets its piece as a tensor of its own (a copy), a leaf if
    ``tensor`` is one (``requires_grad`` carried over). On MPI ranks every rank passes the
    whole tensor and keeps its piece; rank ``src_data_rank``'s values are used (broadcast
    first), as PyTorch's; ``src_data_rank=None`` trusts every rank to pass the same values.

    >>> import labkit as lk
    >>> from labkit.distributed.tensor import Shard, init_device_mesh
    >>> lk.devices.configure(cpus=4)
    >>> x = distribute_tensor(lk.ones(6, 4), init_device_mesh("cpu", (4,)), [Shard(1)])
    >>> [tuple(p.shape) for p in x.local_tensors().values()]
    [(6, 1), (6, 1), (6, 1), (6, 1)]
    >>> lk.devices.configure(cpus=1)
    """
    if isinstance(tensor, DTensor):
        raise TypeError("distribute_tensor: the tensor is already a DTensor; use "
                        "dt.redistribute(...)")
    if not isinstance(tensor, Tensor):
        raise TypeError(f"distribute_tensor takes a labkit Tensor, got {type(tensor).__name__}")
    if device_mesh is None:
        raise ValueError("distribute_tensor: give the device_mesh")
    mesh, placements = _on_root(device_mesh, placements, tensor.ndim, "distribute_tensor")
    check_divisible("distribute_tensor", tensor.shape, placements, mesh.mesh.shape,
                    mesh.mesh_dim_names)
    spec = DTensorSpec(mesh, placements, tensor.shape, tensor.dtype)
    coords = mesh.coordinates()
    leaf = tensor._node is None
    if len(coords) == 1 and src_data_rank is not None:       # an MPI rank
        from ...dist import broadcast
        tensor = broadcast(tensor.detach(), src=src_data_rank) if leaf else tensor
    pieces = {}
    for c in coords:
        piece = tensor[spec.local_slices(c)] if any(
            isinstance(p, Shard) for p in placements) else tensor
        piece = to_device(piece, device=mesh.device(c).name)
        if leaf:
            piece = clone(stop_gradient(piece))     # its own memory, a leaf
            if tensor._requires_grad:
                piece.requires_grad_()
        pieces[c] = piece
    pieces = _partition(pieces, spec, [m for m, p in enumerate(placements) if p.is_partial()])
    out = DTensor._of(pieces, spec)
    if leaf and tensor._requires_grad:
        _track(out)
    return out


# ---- the dispatch of every op with a DTensor input ------------------------------------------------
def _check_global(op, inputs, attrs):
    """Run the op's shape rule on the global shapes, so that a wrong shape is reported with
    the shapes the user wrote, not a device's piece."""
    try:
        op.shape(*inputs, **attrs)
    except LabkitError:
        raise
    except Exception:      # a rule that needs more than shapes: the local op will tell
        pass


def dispatch_op(op, inputs, attrs):
    """Apply ``op`` to ``inputs`` of which some are DTensors (``labkit.tensor.dispatch``)."""
    dts = [a for a in inputs if isinstance(a, DTensor)]
    mesh = dts[0]._spec.mesh
    for d in dts[1:]:
        if d._spec.mesh is not mesh:
            raise ValueError(f"{op.name}: DTensors on two different meshes ({mesh!r} and "
                             f"{d._spec.mesh!r}); redistribute one onto the other's mesh first")
    if op.out_device is not None:
        raise DeviceError(
            f"{op.name} of a DTensor: a DTensor lives on the devices of its mesh. Use "
            f"dt.redistribute(...) to change its layout, dt.full_tensor().to(device) for its "
            f"whole value on one device, or dt.to_local(...) for one piece.")
    mesh_shape = mesh.mesh.shape
    nd = len(mesh_shape)
    args = []
    for a in inputs:
        if isinstance(a, DTensor):
            args.append(Arg(a._spec.placements, a.shape, a.dtype, a._spec.order, False,
                            mesh_shape))
        elif isinstance(a, Tensor):
            args.append(Arg((Replicate(),) * nd, a.shape, a.dtype, None, True, mesh_shape))
        else:
            args.append(None)
    _check_global(op, inputs, attrs)
    if op.writes is not None:
        plan = _in_place_plan(op, inputs, args)
    else:
        rule = rule_for(op)
        if rule is None:
            raise no_rule_error(op, args, attrs)
        plan = rule(op, args, attrs, mesh_shape)
    order = dts[0]._spec.order
    coords = mesh.coordinates()
    per_input, specs = [], []
    for a, target in zip(inputs, plan.inputs):
        if target is None or not isinstance(a, Tensor):
            per_input.append(a)
            specs.append(None)
            continue
        if isinstance(a, DTensor):
            pieces, spec = a._locals, a._spec
        else:
            spec = DTensorSpec(mesh, (Replicate(),) * nd, a.shape, a.dtype, order)
            pieces = mesh.comm.replicate(a, coords, range(nd))
        check_divisible(op.name, a.shape, target, mesh_shape, mesh.mesh_dim_names)
        pieces, spec = redistribute_locals(pieces, spec, target, order)
        per_input.append(pieces)
        specs.append(spec)
    if plan.compute is not None:
        outs = plan.compute(per_input, specs)
    else:
        local_attrs = attrs if plan.attrs is None else {**attrs, **plan.attrs}
        outs = {c: op(*[p[c] if isinstance(p, dict) else p for p in per_input], **local_attrs)
                for c in coords}
    first = outs[coords[0]]
    shape = list(first.shape)
    for m, p in enumerate(plan.out):
        if isinstance(p, Shard):
            shape[p.dim] *= mesh_shape[m]
    return DTensor._of(outs, DTensorSpec(mesh, plan.out, shape, first.dtype, order))


def _in_place_plan(op, inputs, args):
    from .ops import Plan
    target = inputs[op.writes]
    if not isinstance(target, DTensor):
        raise ValueError(f"{op.name}: writing a DTensor's values into a plain tensor "
                         f"({describe(target)}); write into a DTensor, or use "
                         f"dt.full_tensor() first")
    want = target._spec.placements
    # a 0-d factor (a learning rate read when a captured step runs) stays whole on every device
    return Plan([None if a is None else a.placements if a.ndim == 0 else want for a in args],
                want)


# operators and one-op methods through bind (Tensor's own skip it, for speed)
install_operators(DTensor, dispatch.bind)

_registered = []


def _register():
    """Let ``bind`` hand every op with a DTensor input to ``dispatch_op`` (from the first
    DTensor made on: until then ``bind`` pays nothing for it)."""
    if not _registered:
        dispatch.register_tensor_type(DTensor, dispatch_op)
        dispatch.register_tensor_type(DParameter, dispatch_op)
        _registered.append(True)
