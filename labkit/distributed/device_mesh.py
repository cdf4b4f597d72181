"""Device meshes: devices laid out in a grid whose dimensions have names (``"dp"``, ``"tp"``),
PyTorch's ``init_device_mesh`` / ``DeviceMesh``.

In one process a mesh is made of this process's devices: ``init_device_mesh("cpu", (4,))``
after ``lk.devices.configure(cpus=4)`` is the virtual devices ``cpu:0`` .. ``cpu:3``, and the
one process holds every device's share of each distributed tensor. In a launched MPI world
(``lk.dist.launch``, ``python -m labkit.dist.run``) a mesh is made of the ranks, one device
each, and each rank holds its own share: the same program runs on both.

Indexing by name gives a sub-mesh: ``mesh["tp"]`` of a ("dp", "tp") mesh is its "tp"
dimension, over every "dp" row at once. A tensor distributed over a sub-mesh lives on the
whole mesh, replicated along the other dimensions.

>>> import labkit as lk
>>> from labkit.distributed.device_mesh import init_device_mesh
>>> lk.devices.configure(cpus=4)
>>> mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
>>> mesh
DeviceMesh('cpu', [[0, 1], [2, 3]], mesh_dim_names=('dp', 'tp'))
>>> mesh["tp"].size(), mesh.device((1, 0))
(2, Device('cpu:2'))
>>> lk.devices.configure(cpus=1)
"""
import math

import numpy as np

from ..devices import devices as _devices
from ..devices import get_device
from ..errors import DeviceError


def _world():
    """``(rank, size)`` of the MPI world this process belongs to, or None outside one."""
    from ..dist import runtime
    g = runtime.group()
    return None if g is None or g.size == 1 else (g.rank, g.size)


class DeviceMesh:
    """Devices in an n-dimensional grid. ``mesh`` holds device indices (virtual devices of this
    process) or ranks (an MPI world), e.g. ``[[0, 1], [2, 3]]``.

    ``shape``, ``ndim``, ``size(dim)``, ``mesh_dim_names``, ``mesh[name]`` (a sub-mesh),
    ``device(coordinate)``; ``coordinates()`` lists the coordinates this process holds (all of
    them on virtual devices, its own on an MPI rank), ``get_coordinate()`` this rank's.
    """

    def __init__(self, device_type, mesh, *, mesh_dim_names=None, _root=None, _dims=None):
        self.device_type = "gpu" if device_type in ("cuda", "gpu") else device_type
        self._root = _root
        self._dims = _dims
        if _root is not None:
            self.mesh = _root.mesh
            self.mesh_dim_names = tuple(_root.mesh_dim_names[d] for d in _dims) \
                if _root.mesh_dim_names else None
            return
        self.mesh = np.asarray(mesh, dtype=np.int64)
        if self.mesh.ndim == 0:
            self.mesh = self.mesh.reshape(1)
        if mesh_dim_names is not None:
            mesh_dim_names = tuple(mesh_dim_names)
            if len(mesh_dim_names) != self.mesh.ndim or len(set(mesh_dim_names)) != len(
                    mesh_dim_names):
                raise ValueError(f"DeviceMesh: mesh_dim_names {mesh_dim_names} must name each "
                                 f"of the {self.mesh.ndim} mesh dimensions once")
        self.mesh_dim_names = mesh_dim_names
        ids = sorted(self.mesh.reshape(-1).tolist())
        if ids != list(range(len(ids))):
            raise ValueError(f"DeviceMesh: the mesh must hold each of 0..{len(ids) - 1} once; "
                             f"got {self.mesh.tolist()}")
        world = _world()
        if world is None:
            from .mesh_comm import VirtualComm
            have = [d for d in _devices() if d.type == self.device_type]
            if len(ids) > len(have):
                raise DeviceError(
                    f"DeviceMesh('{device_type}', shape {self.mesh.shape}) needs {len(ids)} "
                    f"{self.device_type} devices, but this process has {len(have)} "
                    f"({', '.join(d.name for d in have) or 'none'}). "
                    + (f"Split the host into more virtual devices first: "
                       f"lk.devices.configure(cpus={len(ids)}), or make a smaller mesh."
                       if self.device_type == "cpu" else "Make a smaller mesh."))
            self.comm = VirtualComm(self)
        else:
            from .mesh_comm import MpiComm
            rank, size = world
            if len(ids) != size:
                raise DeviceError(
                    f"DeviceMesh('{device_type}', shape {self.mesh.shape}) holds {len(ids)} "
                    f"ranks, but this MPI world has {size}: make a mesh of exactly "
                    f"{size} (one device per rank), e.g. init_device_mesh('{device_type}', "
                    f"({size},))")
            self.comm = MpiComm(self, rank)

    # ---- shape -------------------------------------------------------------------------------
    @property
    def root(self):
        """The whole mesh this one is a part of (itself when it is not a sub-mesh)."""
        return self if self._root is None else self._root

    @property
    def dims(self):
        """Which dimensions of ``root`` this mesh is (all of them when it is not a sub-mesh)."""
        return tuple(range(self.mesh.ndim)) if self._root is None else self._dims

    @property
    def shape(self):
        full = self.root.mesh.shape
        return tuple(full[d] for d in self.dims)

    @property
    def ndim(self):
        return len(self.dims)

    def size(self, mesh_dim=None):
        """How many devices the mesh has (along ``mesh_dim``, an index or a name)."""
        if mesh_dim is None:
            return math.prod(self.shape)
        return self.shape[self._dim_index(mesh_dim)]

    def _dim_index(self, mesh_dim):
        if isinstance(mesh_dim, str):
            names = self.mesh_dim_names or ()
            if mesh_dim not in names:
                raise KeyError(f"mesh dimension {mesh_dim!r} is not one of this mesh's "
                               f"{names or '(unnamed)'}: name them with mesh_dim_names=...")
            return names.index(mesh_dim)
        d = int(mesh_dim)
        if not -self.ndim <= d < self.ndim:
            raise IndexError(f"mesh dimension {mesh_dim} of a {self.ndim}-d mesh")
        return d % self.ndim

    def __getitem__(self, names):
        """The sub-mesh of the named dimension(s): ``mesh["tp"]``, ``mesh["dp", "tp"]``."""
        if isinstance(names, str):
            names = (names,)
        root = self.root
        dims = tuple(self.dims[self._dim_index(n)] for n in names)
        if len(set(dims)) != len(dims):
            raise ValueError(f"mesh[{names}]: a dimension is named twice")
        if dims == tuple(range(root.mesh.ndim)):
            return root
        return DeviceMesh(self.device_type, None, _root=root, _dims=dims)

    # ---- devices -------------------------------------------------------------------------------
    def coordinates(self):
        """The mesh coordinates (tuples over ``root``'s dimensions) whose shares this process
        holds: every one on virtual devices, its own on an MPI rank."""
        return self.root.comm.coordinates()

    def device(self, coord):
        """The device at mesh coordinate ``coord`` (a tuple over ``root``'s dimensions)."""
        return self.root.comm.device(tuple(coord))

    def get_coordinate(self):
        """This rank's coordinate in the mesh (None in one process, which holds them all)."""
        coords = self.coordinates()
        if len(coords) != 1:
            return None
        return tuple(coords[0][d] for d in self.dims)

    def get_local_rank(self, mesh_dim=None):
        """This rank's index along ``mesh_dim`` (MPI ranks only)."""
        coord = self.get_coordinate()
        if coord is None:
            raise RuntimeError("get_local_rank: one process holds every device of a mesh of "
                               "virtual devices, so it has no single rank; use coordinates()")
        if mesh_dim is None:
            if self.ndim != 1:
                raise ValueError("get_local_rank: name the mesh dimension of a multi-dim mesh")
            return coord[0]
        return coord[self._dim_index(mesh_dim)]

    def __repr__(self):
        names = f", mesh_dim_names={self.mesh_dim_names}" if self.mesh_dim_names else ""
        if self._root is not None:
            return f"DeviceMesh('{self.device_type}', sub-mesh {self.dims} of {self._root!r})"
        return f"DeviceMesh('{self.device_type}', {self.mesh.tolist()}{names})"

    def __reduce__(self):
        raise TypeError("a DeviceMesh cannot be pickled: make it again where it is needed "
                        "(init_device_mesh)")


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None):
    """A mesh of ``prod(mesh_shape)`` devices laid out in ``mesh_shape``, PyTorch's spelling.

    ``device_type``: "cpu", or "cuda"/"gpu". In one process the devices are this process's
    (virtual CPUs from ``lk.devices.configure(cpus=N)``, or GPUs); in an MPI world the ranks,
    one device each, and ``prod(mesh_shape)`` must be the world size.

    >>> import labkit as lk
    >>> lk.devices.configure(cpus=2)
    >>> init_device_mesh("cpu", (2,), mesh_dim_names=("dp",)).size()
    2
    >>> lk.devices.configure(cpus=1)
    """
    mesh_shape = tuple(int(s) for s in (mesh_shape if isinstance(mesh_shape, (tuple, list))
                                        else (mesh_shape,)))
    if not mesh_shape or any(s < 1 for s in mesh_shape):
        raise ValueError(f"init_device_mesh: mesh_shape {mesh_shape} must be positive sizes")
    n = math.prod(mesh_shape)
    return DeviceMesh(device_type, np.arange(n).reshape(mesh_shape),
                      mesh_dim_names=mesh_dim_names)


__all__ = ["DeviceMesh", "init_device_mesh"]
