"""Whole Python objects in a checkpoint: ``lk.save(model, path)``, as ``torch.save(model, path)``.

A checkpoint's structure holds tensors, arrays, numbers, strings and containers, and loading it
runs no code. An object outside that list (a whole ``nn.Module``, an optimiser, your own class)
is stored as a *pickle node*: the object pickled, its tensors taken out and stored as the
file's arrays like any other (so safetensors readers still see the weights), the pickle's bytes
in the header.

Unpickling can run any code the file names, so ``lk.load`` reads a pickle node, as PyTorch
2.6+'s ``torch.load`` does, with a restricted unpickler unless told ``weights_only=False``: the
only classes and functions it hands out are the *safe globals*, a few by default (tensors,
``collections.OrderedDict``, ``set``...) and the ones you allow (``add_safe_globals``, or the
``safe_globals`` context manager; ``labkit.serialization`` spells them as
``torch.serialization``). Nothing else is ever imported or called; a class that is not allowed
is named in the error, which says how to allow it. ``weights_only=False`` unpickles anything:
pass it only for files from a source you trust.

>>> import os, tempfile, labkit as lk
>>> path = os.path.join(tempfile.mkdtemp(), "model.pt")
>>> lk.save(lk.nn.Linear(2, 3), path)
>>> lk.load(path, weights_only=False)
Linear(in_features=2, out_features=3, bias=True)
>>> with safe_globals([lk.nn.Linear]):
...     lk.load(path)
Linear(in_features=2, out_features=3, bias=True)
"""
import base64
import builtins
import collections
import contextlib
import io
import pickle

from ..devices import get_device
from ..errors import CheckpointError
from .dtypes import as_dtype
from .op import registered
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


# ---- safe globals: what a weights-only load may hand out ---------------------------------------
def _full_name(obj):
    return f"{obj.__module__}.{obj.__qualname__}"


# what every weights-only load allows, as PyTorch's: containers, tensors, dtypes and devices
# (their pickles call as_dtype / get_device with a name), and labkit's ops (``lk.tanh`` held by
# a model: ``registered`` looks one up by name, running nothing); labkit's tensor subclasses
# add themselves through allow_by_default; any other global must be allowed by the caller
_DEFAULT = {_full_name(o): o for o in (
    collections.OrderedDict, collections.Counter, collections.defaultdict, builtins.set,
    builtins.frozenset, builtins.complex, builtins.slice, builtins.range, builtins.bytearray,
    Tensor, as_dtype, get_device, registered)}
_ALLOWED = {}           # full name -> object, from add_safe_globals / safe_globals


def allow_by_default(*objects):
    """Let every weights-only load hand out ``objects`` (for labkit's tensor subclasses)."""
    _DEFAULT.update((_full_name(o), o) for o in objects)


def _entries(objects):
    if isinstance(objects, (str, bytes)) or not hasattr(objects, "__iter__"):
        raise TypeError(f"safe globals are a list of classes or functions (or (object, "
                        f"'module.name') pairs), not {type(objects).__name__}")
    out = {}
    for entry in objects:
        if isinstance(entry, tuple):
            if len(entry) != 2 or not isinstance(entry[1], str):
                raise TypeError(f"a safe global pair is (object, 'module.name'), not {entry!r}")
            out[entry[1]] = entry[0]
        elif hasattr(entry, "__module__") and hasattr(entry, "__qualname__"):
            out[_full_name(entry)] = entry
        else:
            raise TypeError(f"a safe global is a class or function (something with a module and "
                            f"a name), not {entry!r}")
    return out


def add_safe_globals(safe_globals):
    """Allow the classes and functions in ``safe_globals`` in every weights-only ``lk.load``,
    as ``torch.serialization.add_safe_globals``. An entry may be an ``(object, 'module.name')``
    pair, for an object saved under another name."""
    _ALLOWED.update(_entries(safe_globals))


def get_safe_globals():
    """The globals allowed with ``add_safe_globals`` (or a ``safe_globals`` block now open)."""
    return list(_ALLOWED.values())


def clear_safe_globals():
    """Forget every global allowed with ``add_safe_globals``."""
    _ALLOWED.clear()


@contextlib.contextmanager
def safe_globals(safe_globals):
    """Allow the classes and functions in ``safe_globals`` in weights-only loads inside the
    ``with`` block only, as ``torch.serialization.safe_globals``.

    >>> import io, labkit as lk
    >>> buffer = io.BytesIO()
    >>> lk.save(lk.nn.Dropout(0.25), buffer)
    >>> with safe_globals([lk.nn.Dropout]):
    ...     lk.load(io.BytesIO(buffer.getvalue()))
    Dropout(p=0.25, inplace=False)
    """
    entries = _entries(safe_globals)
    before = dict(_ALLOWED)
    _ALLOWED.update(entries)
    try:
        yield
    finally:
        _ALLOWED.clear()
        _ALLOWED.update(before)


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, tensor):
        super().__init__(file)
        self.tensor = tensor

    def persistent_load(self, pid):
        if type(pid) is not tuple or len(pid) != 6 or pid[0] != "tensor":
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")
        _, key, device, requires_grad, cls, extra = pid
        return self.tensor(key, device, requires_grad, cls, extra)


class _WeightsOnlyUnpickler(_Unpickler):
    """Hands out only the safe globals: every class or function a pickle can call or build comes
    through ``find_class``, which here looks the name up and never imports anything."""

    def __init__(self, file, tensor, path, where):
        super().__init__(file, tensor)
        self.path, self.where = path, where

    def find_class(self, module, name):
        full = f"{module}.{name}"
        found = _ALLOWED.get(full, _DEFAULT.get(full))
        if found is None:
            short = name.rsplit(".", 1)[-1]
            raise CheckpointError(
                f"lk.load: {self.path!r} holds a pickled object at {self.where} that names "
                f"{full}, which is not an allowed global. With weights_only=True (the default, "
                f"as PyTorch 2.6+) lk.load unpickles only allowed classes and never imports or "
                f"calls anything else. If you trust {full}, allow it: "
                f"`with labkit.serialization.safe_globals([{short}]): lk.load(...)` or "
                f"labkit.serialization.add_safe_globals([{short}]); if you trust the whole "
                f"file, lk.load(path, weights_only=False); or save and load model.state_dict() "
                f"instead.")
        return found


def decode(node, host_array, placement, to_tensor, built, path, where, weights_only):
    """The object of a pickle node: unpickled, its tensors made from the file's arrays on the
    devices ``placement`` maps their saved devices to (one object per array and class); with
    ``weights_only``, by the restricted unpickler."""
    allowed = {key for key, _ in node["tensors"]}

    def tensor(key, device, requires_grad, cls, extra):
        if key not in allowed or not (isinstance(cls, type) and issubclass(cls, Tensor)):
            raise pickle.UnpicklingError(f"the pickle refers to array {key!r} as {cls!r}")
        if type(extra) is not dict or not set(extra) <= set(_extra_slots(cls)):
            raise pickle.UnpicklingError(f"the pickle sets {extra!r} on array {key!r}, not "
                                         f"only the slots {cls.__name__} adds to Tensor")
        hit = built.get((TAG, key, cls))
        if hit is None:
            base = to_tensor(host_array(key), placement[device], requires_grad)
            hit = cls._make(base._data, base._device, requires_grad)
            for name, value in extra.items():
                setattr(hit, name, value)
            built[(TAG, key, cls)] = hit
        return hit
    data = io.BytesIO(base64.b64decode(node["data"]))
    if weights_only:
        return _WeightsOnlyUnpickler(data, tensor, path, where).load()
    return _Unpickler(data, tensor).load()
