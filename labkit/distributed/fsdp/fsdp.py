"""``fully_shard``: FSDP2's per-module sharding of parameters, gradients and optimiser state.

Each call makes one *unit* of the module's parameters that no inner unit holds. At rest a
unit's parameters are ``DParameter`` s split along one mesh dimension (``Shard(0)`` by
default): each device stores ``1/N`` of them, receives ``1/N`` of their gradients, and the
optimiser (which sees each device's piece) keeps ``1/N`` of its state there: ZeRO-3.

- Before the unit's forward its parameters are all-gathered (``redistribute`` to
  ``Replicate()`` along the mesh dimension) and the module computes with the whole values;
  the next unit's gather is issued at the same time (prefetch, in the order the first forward
  ran the units).
- The gradient of an all-gather is a reduce-scatter: the backward pass leaves each device
  the sum over devices of its piece's gradient, with no extra step.
- ``reshard_after_forward=True`` (ZeRO-3): after the unit's forward the gathered values are
  released, and gathered again when the backward pass reaches the unit. ``False`` (ZeRO-2):
  they stay until backward is done with them, one gather per step instead of two. The
  outermost unit (the root) keeps its own, as FSDP2 does: backward needs them first.
- The root unit lays out plain tensor inputs split along dim 0 over the mesh: in one process
  an input is the whole batch, on an MPI rank that rank's part of it.

A parameter that is already a DTensor (tensor parallelism on another mesh dimension) gets the
FSDP split on top, nested inside the other: the 2-d FSDP + TP recipe.
"""
import threading
import weakref

import numpy as np

from ...autodiff import no_grad
from ...tensor import dispatch
from ...tensor.op import op
from ...tensor.shape_rules import same_as_first
from ...tensor.tensor import Tensor
from ..device_mesh import DeviceMesh, init_device_mesh
from ..tensor.dtensor import DParameter, DTensor, distribute_tensor
from ..tensor.module import parameters_with_owners, to_mesh
from ..tensor.placement_types import Replicate, Shard, check_divisible, placements_text
from ..tensor.redistribute import redistribute_locals

_running = threading.local()      # .units: the units whose forward is running, innermost last
_classes = {}


class FSDPModule:
    """What a module gets from ``fully_shard`` (its class becomes ``FSDP<Class>``):
    ``unshard()`` / ``reshard()`` by hand, ``set_reshard_after_forward(flag)``, and
    ``fsdp_unit`` (the unit's state)."""

    def unshard(self):
        """Gather this unit's parameters now (they stay gathered until ``reshard()``)."""
        self.fsdp_unit.unshard()
        self.fsdp_unit.install()

    def reshard(self):
        """Back to the sharded parameters (drop the gathered values this unit holds)."""
        self.fsdp_unit.restore()
        self.fsdp_unit.gathered = None

    def set_reshard_after_forward(self, reshard_after_forward):
        self.fsdp_unit.reshard = bool(reshard_after_forward)


class _Released(np.ndarray):
    """The array of a gathered parameter released after forward: its shape and dtype, no
    memory. Any computation on it is an error (the backward pass gathers it again first)."""

    def __array_ufunc__(self, *args, **kwargs):
        raise RuntimeError(_RELEASED)

    def __array_function__(self, *args, **kwargs):
        raise RuntimeError(_RELEASED)


_RELEASED = ("a parameter that FSDP gathered for a forward pass and released after it "
             "(reshard_after_forward=True) was read before the backward pass gathered it "
             "again; call module.unshard() first, or use reshard_after_forward=False")


def _released_like(array):
    if isinstance(array, np.ndarray):
        return np.broadcast_to(np.zeros((), array.dtype), array.shape).view(_Released)
    xp = __import__("cupy")
    return xp.broadcast_to(xp.full((), float("nan"), array.dtype), array.shape)


# ---- memory the gathered parameters hold -----------------------------------------------------
class GatheredMemory:
    """Bytes of gathered parameters alive on each device, sampled at every unit's gather and
    release: ``peak`` (per device) and ``samples`` ((time, {device: bytes}), for a memory
    view). Eager runs only: a captured step's buffers are the executor's."""

    def __init__(self):
        self.arrays = []           # (weak reference to an array, device name, bytes)
        self.peak = {}
        self.samples = []

    def track(self, tensor):
        if tensor._data is not None and not isinstance(tensor._data, _Released):
            self.arrays.append((weakref.ref(tensor._data), tensor.device.name,
                                tensor._data.nbytes))

    def live(self):
        out = {}
        alive = []
        for ref, device, nbytes in self.arrays:
            a = ref()
            if a is not None and not isinstance(a, _Released):
                out[device] = out.get(device, 0) + nbytes
                alive.append((ref, device, nbytes))
        self.arrays = alive
        return out

    def sample(self):
        from ...profiler.events import now_ns
        now = self.live()
        for d, b in now.items():
            self.peak[d] = max(self.peak.get(d, 0), b)
        self.samples.append((now_ns(), now))

    def reset(self):
        self.peak, self.samples = {}, []


gathered_memory = GatheredMemory()


# ---- the unit ------------------------------------------------------------------------------------
def _pre_backward_vjp(g, out, x, unit):
    unit.regather()
    return (g,)


# identity going forward; in backward, the unit's released parameters are gathered again
# before any gradient inside the unit is computed
_before_backward = op("fsdp_pre_backward", shape=lambda x, unit: (x.shape, x.dtype),
                      vjp=_pre_backward_vjp, register=False)(lambda xp, x, unit: x)


# identity, but stateful: the backward pass's gather reads the stored shards again here, so
# that a captured graph's passes never merge it with the forward's (nor move it earlier)
_read_again = op("fsdp_read_shard", shape=lambda x: (x.shape, x.dtype), vjp=None,
                 register=False, stateful=True)(lambda xp, x: x)


class Unit:
    """One ``fully_shard`` call's state: its parameters (sharded), where they are registered,
    the gathered values while unsharded, and its place in the forward order."""

    def __init__(self, module, mesh, reshard, placement_fn):
        self.module = module
        self.mesh = mesh                      # the (sub-)mesh FSDP shards over, 1-d
        self.root_mesh = mesh.root
        self.dim = mesh.dims[0]               # its dimension in the whole mesh
        self.reshard = reshard
        self.params = []                      # (storage DParameter, compute placements)
        self.gathered = None                  # {id(storage): gathered DTensor}
        self.saved = None                     # [(storage, gathered)] released until backward
        self.next = None
        self.order = None                     # (root) the units in forward order
        self.is_root = False
        self._shard_params(placement_fn)

    def __repr__(self):
        return (f"<FSDP unit {type(self.module).__name__}: {len(self.params)} parameters, "
                f"{'ZeRO-3' if self.reshard else 'ZeRO-2'}>")

    # ---- sharding -------------------------------------------------------------------------
    def _shard_params(self, placement_fn):
        done = {}
        for qual, owner, name, p in parameters_with_owners(self.module):
            if id(p) in done:
                owner._parameters[name] = done[id(p)]
                continue
            if getattr(p, "_fsdp_unit", None) is not None:
                continue                      # an inner unit holds it
            placement = placement_fn(p) if placement_fn is not None else Shard(0)
            new = self._shard(qual, p, placement)
            new._fsdp_unit = self
            new.name = getattr(p, "name", None)
            done[id(p)] = new
            owner._parameters[name] = new
            compute = tuple(Replicate() if i == self.dim else q
                            for i, q in enumerate(new._spec.placements))
            self.params.append((new, compute))

    def _shard(self, qual, p, placement):
        m = self.dim
        if isinstance(p, DTensor):
            spec = p._spec
            if spec.mesh is not self.root_mesh:
                raise ValueError(f"fully_shard: parameter {qual} lives on another mesh "
                                 f"({spec.mesh!r}); use sub-meshes of one mesh")
            if not spec.placements[m].is_replicate():
                raise ValueError(f"fully_shard: parameter {qual} is already split along mesh "
                                 f"dimension {m} ({placements_text(spec.placements)})")
            placements = list(spec.placements)
            placements[m] = Shard(placement.dim % max(p.ndim, 1))
            order = [d for d in spec.order if d != m] + [m]
            check_divisible(f"fully_shard({qual})", p.shape, placements,
                            self.root_mesh.mesh.shape, self.root_mesh.mesh_dim_names)
            with no_grad():
                pieces, new_spec = redistribute_locals(p._locals, spec, tuple(placements),
                                                       order)
            return DParameter.of(DTensor._of(pieces, new_spec), requires_grad=p.requires_grad)
        placements = [Replicate()] * self.root_mesh.mesh.ndim
        placements[m] = Shard(placement.dim % max(p.ndim, 1))
        check_divisible(f"fully_shard({qual})", p.shape, placements, self.root_mesh.mesh.shape,
                        self.root_mesh.mesh_dim_names)
        return DParameter.of(distribute_tensor(p.detach(), self.mesh, [placement]),
                             requires_grad=p.requires_grad)

    # ---- gathering --------------------------------------------------------------------------
    def unshard(self):
        if self.gathered is not None:
            return
        self.gathered = {id(p): p.redistribute(placements=compute)
                         for p, compute in self.params}
        for g in self.gathered.values():
            for piece in g._locals.values():
                gathered_memory.track(piece)
        gathered_memory.sample()

    def _places(self):
        for _, owner, name, p in parameters_with_owners(self.module):
            if getattr(p, "_fsdp_unit", None) is self:
                yield owner, name, p

    def install(self):
        for owner, name, p in list(self._places()):
            owner._parameters[name] = self.gathered[id(p)]

    def restore(self):
        for _, owner, name, value in parameters_with_owners(self.module):
            storage = self._storage_of(value)
            if storage is not None:
                owner._parameters[name] = storage

    def _storage_of(self, value):
        if getattr(value, "_fsdp_unit", None) is self:
            return value
        for p, _ in self.params:
            if self.gathered is not None and self.gathered.get(id(p)) is value:
                return p
        return None

    def release(self):
        """Free the gathered values (eagerly: their arrays; captured, the executor frees a
        node's buffer after its last use, and backward reads nodes made again)."""
        keep = {id(x) for p, _ in self.params for x in p._locals.values()}
        self.saved = [(p, self.gathered[id(p)]) for p, _ in self.params]
        for _, g in self.saved:
            for piece in g._locals.values():
                _release_chain(piece, keep)
        gathered_memory.sample()

    def regather(self):
        """Gather the released values again, into the tensors the backward pass saved."""
        saved, self.saved = self.saved, None
        if saved is None:
            return
        mode = dispatch.current_mode()
        with no_grad():
            for p, g in saved:
                compute = tuple(g._spec.placements)
                fresh = DTensor._of({c: _read_again(x) for c, x in p._locals.items()}, p._spec)
                again = fresh.redistribute(placements=compute)
                for c, piece in g._locals.items():
                    mode.rematerialize(piece, again._locals[c])
                    gathered_memory.track(piece)
        gathered_memory.sample()

    # ---- the hooks --------------------------------------------------------------------------
    def pre_forward(self, module, args, kwargs):
        units = getattr(_running, "units", None)
        if units is None:
            units = _running.units = []
        self.is_root = not units
        if self.is_root:
            args = tuple(self._to_mesh(a) for a in args)
            kwargs = {k: self._to_mesh(v) for k, v in kwargs.items()}
            self.order = [self]
        else:
            root = units[0]
            if root.order is not None and self not in root.order:
                root.order.append(self)
        units.append(self)
        self.unshard()
        self.install()
        if self.next is not None:
            self.next.unshard()              # prefetch the next unit's parameters
        return args, kwargs

    def _to_mesh(self, a):
        if isinstance(a, Tensor) and not isinstance(a, DTensor):
            return to_mesh(a, self.mesh, 0)
        return a

    def post_forward(self, module, args, kwargs, output):
        _running.units.pop()
        self.restore()
        if self.is_root:
            order, self.order = self.order, None
            for a, b in zip(order, order[1:] + [None]):
                a.next = b
        if self.reshard and not self.is_root and _requires_grad(output):
            self.release()
            output = _mark(output, self)
        elif self.reshard and not self.is_root:
            self.saved = None
        self.gathered = None
        return output


def _requires_grad(out):
    if isinstance(out, Tensor):
        return out.requires_grad
    if isinstance(out, (tuple, list)):
        return any(_requires_grad(o) for o in out)
    return False


def _mark(out, unit):
    """``out`` with every tensor passed through the pre-backward marker of ``unit``."""
    if isinstance(out, DTensor):
        if not out.requires_grad:
            return out
        return DTensor._of({c: _before_backward(x, unit=unit) for c, x in out._locals.items()},
                           out._spec)
    if isinstance(out, Tensor):
        return _before_backward(out, unit=unit) if out.requires_grad else out
    if isinstance(out, (tuple, list)):
        return type(out)(_mark(o, unit) for o in out)
    return out


def _release_chain(piece, keep):
    """Release the arrays a gathered piece holds: its own and those of the pieces received
    on the way (on a GPU each is a copy), but never a device's stored shard (``keep``)."""
    stack = [piece]
    while stack:
        t = stack.pop()
        if id(t) in keep or t._data is None or isinstance(t._data, _Released):
            continue
        array = t._data
        t._data = _released_like(array)
        node = t._node
        if node is not None:
            if node.out is array:
                node.out = t._data
            if node.op.name in ("concat", "to_device") and node.inputs is not None:
                stack.extend(i for i in node.inputs if isinstance(i, Tensor))


def fully_shard(module, *, mesh=None, reshard_after_forward=True, shard_placement_fn=None,
                mp_policy=None, offload_policy=None, ignored_params=None):
    """Shard ``module``'s parameters (those no inner ``fully_shard`` holds) over ``mesh`` (a
    1-d mesh, or a named dimension of one: ``mesh["dp"]``; default: every device of this
    process, or every rank). Call it on each block first, then on the whole model, as with
    PyTorch's FSDP2. Returns the module, whose class becomes ``FSDP<Class>``.

    >>> import labkit as lk
    >>> from labkit.distributed.device_mesh import init_device_mesh
    >>> lk.devices.configure(cpus=2)
    >>> model = fully_shard(lk.nn.Linear(4, 2), mesh=init_device_mesh("cpu", (2,)))
    >>> type(model).__name__, model.weight.placements, model.weight.to_local((1,)).shape
    ('FSDPLinear', (Shard(dim=0),), (1, 4))
    >>> model(lk.ones(6, 4)).shape
    (6, 2)
    >>> lk.devices.configure(cpus=1)
    """
    if mp_policy is not None or offload_policy is not None:
        raise NotImplementedError("fully_shard: mixed precision and offload policies are not "
                                  "implemented in labkit; leave mp_policy / offload_policy "
                                  "unset")
    if ignored_params:
        raise NotImplementedError("fully_shard: ignored_params is not implemented")
    if isinstance(module, (list, tuple)):
        raise NotImplementedError("fully_shard of a list of modules: call it on each")
    if mesh is None:
        from ..device_mesh import _world
        from ...devices import devices
        world = _world()
        mesh = init_device_mesh("cpu", ((world[1] if world else
                                         len([d for d in devices() if d.type == "cpu"])),))
    if not isinstance(mesh, DeviceMesh):
        raise TypeError(f"fully_shard: mesh must be a DeviceMesh, got {type(mesh).__name__}")
    if mesh.ndim != 1:
        raise ValueError(f"fully_shard: give a 1-d mesh, or one named dimension of a bigger one "
                         f"(mesh['dp']); got a {mesh.ndim}-d mesh (HSDP is not implemented)")
    unit = Unit(module, mesh, bool(reshard_after_forward), shard_placement_fn)
    module.__dict__["fsdp_unit"] = unit
    module.register_forward_pre_hook(unit.pre_forward, with_kwargs=True)
    module.register_forward_hook(unit.post_forward, with_kwargs=True)
    cls = type(module)
    if not isinstance(module, FSDPModule):
        new = _classes.get(cls)
        if new is None:
            new = _classes[cls] = type(f"FSDP{cls.__name__}", (FSDPModule, cls), {})
        module.__class__ = new
    return module
