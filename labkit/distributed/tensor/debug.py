"""``CommDebugMode``: which collectives a block of DTensor code ran, and the bytes each moved,
PyTorch's ``torch.distributed.tensor.debug.CommDebugMode``.

Counted where the collectives are made: eagerly, each call; inside ``lk.function``, each
collective of the trace (what every later run of the captured function runs again). These are
the collectives the code asks for; the backward pass moves their transposes (a reduce-scatter
for an all-gather), which ``bytes_sent(profile)`` counts with every other message.

>>> import labkit as lk
>>> from labkit.distributed.tensor import Replicate, Shard, distribute_tensor, init_device_mesh
>>> lk.devices.configure(cpus=4)
>>> x = distribute_tensor(lk.ones(8, 4), init_device_mesh("cpu", (4,)), [Shard(0)])
>>> with CommDebugMode() as comm:
...     _ = x.redistribute(placements=[Replicate()])
>>> comm.get_comm_counts(), comm.bytes_per_device()
({'all_gather': 1}, {'all_gather': 96})
>>> lk.devices.configure(cpus=1)
"""
from .. import mesh_comm


class CommDebugMode:
    """Count the collectives run inside the block: ``get_comm_counts()`` (calls per kind),
    ``get_total_counts()``, ``bytes_per_device()`` (bytes each device sent, per kind: the
    ring algorithms' ``(n-1)/n`` of the tensor for an all-gather or a reduce-scatter, twice
    that for an all-reduce) and ``records`` (kind, mesh dimension, devices, bytes), in order."""

    def __init__(self):
        self.records = []

    def _record(self, kind, mesh_dim, devices, bytes_per_device):
        self.records.append((kind, mesh_dim, devices, bytes_per_device))

    def __enter__(self):
        self.records = []
        mesh_comm._counters.append(self._record)
        return self

    def __exit__(self, *exc):
        mesh_comm._counters.remove(self._record)
        return False

    def get_comm_counts(self):
        out = {}
        for kind, *_ in self.records:
            out[kind] = out.get(kind, 0) + 1
        return out

    def get_total_counts(self):
        return len(self.records)

    def bytes_per_device(self, mesh_dim=None):
        """Bytes each device sent, per kind of collective (along ``mesh_dim`` only, if given:
        its name or index)."""
        out = {}
        for kind, dim, _, nbytes in self.records:
            if mesh_dim is None or dim == mesh_dim:
                out[kind] = out.get(kind, 0) + nbytes
        return out

    def __repr__(self):
        return f"<CommDebugMode: {self.get_comm_counts()}>"


def bytes_sent(prof, steps=None):
    """Bytes each device sent in a profile's messages (eager moves between devices and a
    captured graph's Send/Recv pairs), ``{device: bytes}``; ``steps``: only those steps.
    What the collectives of both passes moved, backward included (an all-gather's gradient is
    a reduce-scatter of the same bytes), and any plain tensor copied to the mesh's devices."""
    out = {}
    for e in prof.events:
        if e.op == "send" and (steps is None or e.step in steps):
            out[e.device] = out.get(e.device, 0) + e.bytes_in
    return out


def _pieces(t):
    from .dtensor import DTensor
    return list(t._locals.values()) if isinstance(t, DTensor) else [t]


def memory_per_device(module, optimizer=None):
    """Bytes of ``module``'s parameters, their gradients and ``optimizer``'s state on each
    device: ``{device: {"parameters": b, "gradients": b, "optimizer": b}}`` (each piece of a
    distributed parameter counted on its own device; a tied parameter once).

    >>> import labkit as lk
    >>> memory_per_device(lk.nn.Linear(3, 2))
    {'cpu:0': {'parameters': 32, 'gradients': 0, 'optimizer': 0}}
    """
    out = {}

    def add(device, kind, nbytes):
        row = out.setdefault(device.name, {"parameters": 0, "gradients": 0, "optimizer": 0})
        row[kind] += nbytes

    seen = set()
    for p in module.parameters():
        for x in _pieces(p):
            if id(x) in seen or x._data is None:
                continue
            seen.add(id(x))
            add(x.device, "parameters", x._data.nbytes)
            if x._grad is not None and x._grad._data is not None:
                add(x.device, "gradients", x._grad._data.nbytes)
    if optimizer is not None:
        for slots in optimizer.state.values():
            for v in slots.values():
                if hasattr(v, "_data") and v._data is not None:
                    add(v.device, "optimizer", v._data.nbytes)
    return out
