"""Whole Python objects in a checkpoint: ``lk.save(model, path)``, as ``torch.save(model, path)``.

A checkpoint's structure holds tensors, arrays, numbers, strings and containers, and loading it
runs no code. An object outside that list (a whole ``nn.Module``, an optimiser, your own class)
is stored as a *pickle node*: the object pickled, its tensors taken out and stored as the
file's arrays like any other (so safetensors readers still see the weights), the pickle's bytes
in the header. Unpickling runs code named in the file, so ``lk.load`` refuses such a node
unless told ``weights_only=False``, and says why, as PyTorch 2.6+'s ``torch.load`` does: pass it
only for files from a source you trust.

>>> import os, tempfile, labkit as lk
>>> path = os.path.join(tempfile.mkdtemp(), "model.pt")
>>> lk.save(lk.nn.Linear(2, 3), path)
>>> lk.load(path, weights_only=False)
Linear(in_features=2, out_features=3, bias=True)
"""
import base64
import io
import pickle

from ..errors import CheckpointError
from .tensor import Tensor

TAG = "pickle"
FIELDS = {"data", "tensors"}


def _extra_slots(cls):
    """The slots a Tensor subclass adds (a Parameter's ``name``)."""
    return [s for c in cls.__mro__ if c is not Tensor and issubclass(c, Tensor)
            for s in getattr(c, "__slots__", ())]


class _Pickler(pickle.Pickler):
    def __init__(self, file, store):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.store = store
        self.tensors = {}

    def persistent_id(self, obj):
        if not isinstance(obj, Tensor):
            return None
        if obj._data is None:
            raise CheckpointError(f"lk.save: cannot store {obj!r}: it is a symbolic tensor of "
                                  f"a graph being built, which has no value")
        key = self.store(obj)
        self.tensors[key] = obj.device.name
        cls = type(obj)
        extra = {s: getattr(obj, s) for s in _extra_slots(cls) if hasattr(obj, s)}
        return ("tensor", key, obj.device.name, bool(obj.requires_grad), cls, extra)


def encode(obj, store, where):
    """The pickle node of ``obj``; ``store(tensor)`` stores a tensor's array and gives its key."""
    buffer = io.BytesIO()
    pickler = _Pickler(buffer, store)
    try:
        pickler.dump(obj)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"lk.save: cannot store {where} of type {type(obj).__name__}: "
                              f"it is not a tensor, array, number, string or container, and "
                              f"pickling it failed ({exc}). Save its state dict instead.") from None
    return {"type": TAG, "data": base64.b64encode(buffer.getvalue()).decode("ascii"),
            "tensors": sorted([key, device] for key, device in pickler.tensors.items())}


def check(node, where, arrays, bad):
    """Check a pickle node's fields (not its bytes: they are only read when allowed); the
    devices its tensors were saved on."""
    tensors = node["tensors"]
    if type(node["data"]) is not str or type(tensors) is not list or any(
            type(t) is not list or len(t) != 2 or type(t[0]) is not str or t[0] not in arrays
            or type(t[1]) is not str for t in tensors):
        raise bad(f"{where}: a pickle node holds its bytes as text and a list of [array key, "
                  f"device] pairs of arrays the file has")
    return {device for _, device in tensors}


def refusal(path, where, node):
    return CheckpointError(
        f"lk.load: {path!r} holds a pickled Python object at {where} (a whole module or other "
        f"object saved with lk.save / torch.save, {len(node['tensors'])} tensors in it). "
        f"Unpickling can run any code the file names, so lk.load only reads weights unless told "
        f"otherwise (weights_only=True, PyTorch's default since 2.6). If you trust the file's "
        f"source, load it with lk.load(path, weights_only=False); better, save and load "
        f"model.state_dict() instead.")


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, tensor):
        super().__init__(file)
        self.tensor = tensor

    def persistent_load(self, pid):
        if type(pid) is not tuple or len(pid) != 6 or pid[0] != "tensor":
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")
        _, key, device, requires_grad, cls, extra = pid
        return self.tensor(key, device, requires_grad, cls, extra)


def decode(node, host_array, placement, to_tensor, built):
    """The object of a pickle node: unpickled, its tensors made from the file's arrays on the
    devices ``placement`` maps their saved devices to (one object per array and class)."""
    allowed = {key for key, _ in node["tensors"]}

    def tensor(key, device, requires_grad, cls, extra):
        if key not in allowed or not (isinstance(cls, type) and issubclass(cls, Tensor)):
            raise pickle.UnpicklingError(f"the pickle refers to array {key!r} as {cls!r}")
        hit = built.get((TAG, key, cls))
        if hit is None:
            base = to_tensor(host_array(key), placement[device], requires_grad)
            hit = cls._make(base._data, base._device, requires_grad)
            for name, value in extra.items():
                setattr(hit, name, value)
            built[(TAG, key, cls)] = hit
        return hit
    return _Unpickler(io.BytesIO(base64.b64decode(node["data"])), tensor).load()
