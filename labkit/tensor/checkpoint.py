"""Checkpoints: ``lk.save(obj, path)`` and ``lk.load(path)``, as safetensors files that run no code.

What can be saved: Tensors, NumPy arrays and scalars, and nested dicts / lists / tuples of those
together with str, int, float, bool and None; that covers the state dicts of modules and
optimisers and a generator's state. Any other object (a whole module: ``torch.save(model,
path)``) is pickled with its tensors stored as arrays (``labkit.tensor.pickled``), and loads, as
in PyTorch 2.6+, only with ``lk.load(path, weights_only=False)`` or when every class it names is
an allowed safe global (``labkit.serialization.safe_globals``). Tuples come back as tuples, dicts
keep their key order, keys may be str, int, float, bool or None. A tensor keeps its dtype, shape, device and
``requires_grad``; an object saved twice (tied weights) is stored once and comes back as one object.

The file is a `safetensors <https://github.com/huggingface/safetensors>`_ file, so every tool that
reads safetensors reads the tensors of a labkit checkpoint::

    header_len  uint64 little-endian
    header      header_len bytes of UTF-8 JSON, padded with spaces:
                {"__metadata__": {str: str}, key: {"dtype", "shape", "data_offsets"}, ...}
    data        the tensors' raw little-endian bytes, back to back

Each array is stored under a flat dotted key: a state dict's own keys (``"fc.weight"``), nested
paths joined with ``"."`` (``"optim.state.0.exp_avg"``), made unique with a ``".1"``, ``".2"``...
suffix if two collide; a bare tensor is stored as ``"obj"``. ``__metadata__`` holds four strings:

    format             "labkit-checkpoint"
    labkit.version     "2"
    labkit.structure   JSON describing the saved object (below)
    labkit.sha256      hex SHA-256 of the JSON list [format, version, structure,
                       [[key, dtype, shape], ...]] (compact separators, keys sorted), followed by
                       every tensor's bytes in that key order

The structure: JSON null / true / false / numbers / strings stand for themselves, JSON lists for
Python lists, and an object with a ``"type"`` of ``tuple``, ``dict``, ``tensor``, ``ndarray``,
``npscalar``, ``float`` (NaN and infinities) or ``pickle`` (an object pickled, read only when
``weights_only=False``) for the rest; arrays are referred to by their key
(``{"type": "tensor", "array": "fc.weight", "device": "cpu:0", "requires_grad": true}``).
safetensors has no complex128, so such a NumPy array is stored as float64 with a trailing
dimension of 2 (real, imaginary) and its node (an ndarray, a scalar or a tensor) says
``"dtype": "complex128"``.

Loading parses the header itself and checks every entry (dtype, shape, offsets inside the file,
consistent with dtype and shape, no gaps or overlaps), then the checksum, then the whole structure
against the closed list above before it builds anything; nothing in a file can name a class or a
function, except a pickle node's classes, which must be safe globals the caller allowed (or
anything, with ``weights_only=False``). The file is read into
memory once (its tensors do not change when the file does); with ``mmap=True`` its arrays are
views of a copy-on-write memory map of the file instead (``np.memmap(mode="c")``), read as they
are touched, so they follow later changes of the file. A safetensors file written by another tool
(``safetensors.numpy.save_file``, ``safetensors.torch.save_file``) loads as a dict key -> Tensor.
Files in labkit's first format (which start with ``b"\\x89labkit\\n"``) still load.

Saving to a path is atomic: the bytes go to a temporary file in the same directory, which is
flushed, fsync'ed and renamed over ``path``; on any failure the temporary file is removed and what
was at ``path`` before is untouched. A save ended by SIGTERM or SIGHUP removes its temporary file too;
one ended by SIGKILL leaves it, and the next save into that folder removes it
(``labkit.tensor.atomic_file``). Saving to an open binary file object instead (as
``torch.save(obj, f)``, also an ``io.BytesIO``) writes the bytes at its position, with no rename;
``lk.load(f)`` reads them back.

>>> import os, tempfile, labkit as lk
>>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
>>> lk.save({"w": lk.ones(2, 3), "step": 10, "sizes": (2, 3)}, path)
>>> state = lk.load(path)
>>> state["w"].shape, state["step"], state["sizes"]
((2, 3), 10, (2, 3))
>>> import safetensors.numpy
>>> list(safetensors.numpy.load_file(path))
['w']
"""
import hashlib
import hmac
import io
import json
import math
import os
import struct
import sys

import numpy as np

from ..devices import get_device
from ..devices import transfer as _transfer
from ..devices.device import canonical_name
from ..errors import CheckpointError, DeviceError
from . import pickled
from .atomic_file import write_atomically
from .dtypes import ALL as _LABKIT_DTYPES
from .dtypes import bfloat16 as _bfloat16
from .dtypes import kind_of as _kind_of
from .tensor import Tensor

FORMAT = "labkit-checkpoint"
VERSION = 2
_META_KEYS = ("format", "labkit.version", "labkit.structure", "labkit.sha256")
_MAX_DEPTH = 200                        # nesting deeper than this is refused (save and load)
_MAX_HEADER = 100_000_000               # safetensors' own limit on the header's length

# safetensors' dtype names and the NumPy dtypes they are (always little-endian; BF16 is
# ml_dtypes' bfloat16, labkit's).
_ST_DTYPES = {name: np.dtype(np_name).newbyteorder("<") for name, np_name in (
    ("BOOL", "bool"), ("U8", "uint8"), ("I8", "int8"), ("I16", "int16"), ("U16", "uint16"),
    ("I32", "int32"), ("U32", "uint32"), ("I64", "int64"), ("U64", "uint64"),
    ("F16", "float16"), ("F32", "float32"), ("F64", "float64"), ("C64", "complex64"))}
_ST_DTYPES["BF16"] = _bfloat16.np
_ST_NAMES = {dtype.name: name for name, dtype in _ST_DTYPES.items()}
# safetensors dtypes that labkit has no type for
_ST_FOREIGN = ("F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C128")
_TENSOR_DTYPES = tuple(np.dtype(d.np).name for d in _LABKIT_DTYPES)
_NODE_KEYS = {"tuple": {"items"}, "dict": {"items"}, "float": {"value"}, "ndarray": {"array"},
              "npscalar": {"array"}, "tensor": {"array", "device", "requires_grad"},
              pickled.TAG: pickled.FIELDS}
_SPECIAL_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _digest(structure, tensors):
    """The checksum of a labkit file: ``tensors`` is a list of (key, dtype, shape, bytes)."""
    tensors = sorted(tensors, key=lambda t: t[0])
    table = [[key, dtype, list(shape)] for key, dtype, shape, _ in tensors]
    digest = hashlib.sha256(json.dumps([FORMAT, str(VERSION), structure, table],
                                       separators=(",", ":")).encode("utf-8"))
    for *_, data in tensors:
        digest.update(data)
    return digest.hexdigest()


# ---- save ------------------------------------------------------------------------------------
class _Encoder:
    """Turns a Python object into the JSON structure plus the arrays under their flat keys."""

    def __init__(self):
        self.arrays = {}      # flat key -> host array, C-contiguous little-endian
        self.by_id = {}       # id(object) -> its key (objects saved twice are stored once)
        self.keep = []        # keeps every object whose id is in by_id alive while saving

    def fail(self, where, obj, why):
        return CheckpointError(f"lk.save: cannot store {where} of type {type(obj).__name__}: "
                               f"{why}")

    def array(self, obj, host, where, path):
        """The key ``obj`` is stored under, and the dtype its node marks (complex128 or None)."""
        known = self.by_id.get(id(obj))
        if known is not None:
            return known
        name = host.dtype.name
        if _kind_of(host.dtype) not in "biufc" or (name not in _ST_NAMES and
                                                    name != "complex128"):
            stored = ", ".join(sorted(set(_ST_NAMES) | {"complex128"}))
            raise self.fail(where, obj, f"arrays of dtype {host.dtype} cannot be stored (a "
                                        f"checkpoint holds {stored}); convert it first, e.g. "
                                        f"with .astype('float32')")
        marked = None
        shape = host.shape
        host = np.ascontiguousarray(host, dtype=host.dtype.newbyteorder("<")).reshape(shape)
        if name == "complex128":      # safetensors has no complex128: (..., 2) float64
            host = host.reshape(-1).view("<f8").reshape(shape + (2,))
            marked = "complex128"
        key = ".".join(path) or "obj"
        if key in self.arrays:
            n = 1
            while f"{key}.{n}" in self.arrays:
                n += 1
            key = f"{key}.{n}"
        self.arrays[key] = host
        self.by_id[id(obj)] = (key, marked)
        self.keep.append(obj)
        return key, marked

    @staticmethod
    def scalar(obj):
        kind = type(obj)
        if obj is None or kind is bool or kind is int or kind is str:
            return obj
        if kind is float:
            if math.isfinite(obj):
                return obj
            return {"type": "float", "value": "nan" if obj != obj else repr(obj)}
        return None

    def encode(self, obj, where, path, depth, active):
        if depth > _MAX_DEPTH:
            raise self.fail(where, obj, f"the structure is nested more than {_MAX_DEPTH} levels "
                                        f"deep")
        kind = type(obj)
        if obj is None or kind in (bool, int, float, str):
            return self.scalar(obj)
        if isinstance(obj, Tensor):
            if obj.dtype.np.name not in _TENSOR_DTYPES:
                raise self.fail(where, obj, f"tensors of dtype {obj.dtype} cannot be stored")
            known = self.by_id.get(id(obj))     # a tensor saved twice is copied to the host once
            key, marked = known if known else self.array(obj, obj.numpy(force=True), where, path)
            node = {"type": "tensor", "array": key, "device": obj.device.name,
                    "requires_grad": bool(obj.requires_grad)}
            if marked:
                node["dtype"] = marked
            return node
        if isinstance(obj, (np.ndarray, np.generic)):
            tag = "ndarray" if isinstance(obj, np.ndarray) else "npscalar"
            key, marked = self.array(obj, np.asarray(obj), where, path)
            node = {"type": tag, "array": key}
            if marked:
                node["dtype"] = marked
            return node
        if kind in (list, tuple) or isinstance(obj, dict):
            if id(obj) in active:
                raise self.fail(where, obj, "it contains itself (a reference cycle)")
            active.add(id(obj))
            try:
                if isinstance(obj, dict):
                    items = []
                    for key, value in obj.items():
                        at = f"{where}[{key!r}]"
                        if key is not None and type(key) not in (bool, int, float, str):
                            raise CheckpointError(
                                f"lk.save: cannot store the key {key!r} of {where}: dict keys "
                                f"must be str, int, float, bool or None, not "
                                f"{type(key).__name__}")
                        items.append([self.scalar(key), self.encode(
                            value, at, path + [str(key)], depth + 1, active)])
                    return {"type": "dict", "items": items}
                items = [self.encode(v, f"{where}[{i}]", path + [str(i)], depth + 1, active)
                         for i, v in enumerate(obj)]
                return items if kind is list else {"type": "tuple", "items": items}
            finally:
                active.discard(id(obj))
        base = next((b for b in (list, tuple, bool, int, float, str) if isinstance(obj, b)), None)
        if base is not None:
            raise self.fail(where, obj, f"it is a subclass of {base.__name__}, which would not "
                                        f"come back as itself; convert it with "
                                        f"{base.__name__}(...) first")
        # any other object (a whole module): pickled, its tensors stored as arrays, named by
        # its state dict where it has one; loading it needs weights_only=False (pickled.py)
        names = _state_names(obj)

        def store(t):
            known = self.by_id.get(id(t))
            if known:
                return known[0]
            name = names.get(id(t._data))
            return self.array(t, t.numpy(force=True), where, path + (name.split(".") if name else
                                                             [str(len(self.arrays))]))[0]
        return pickled.encode(obj, store, where)


def _state_names(obj):
    """id(array) -> the name of the tensor holding it in ``obj.state_dict()``, where ``obj`` has
    one (a module; its state dict's tensors share the parameters' memory)."""
    try:
        state = obj.state_dict()
    except Exception:
        return {}
    return {id(v._data): str(k) for k, v in state.items() if isinstance(v, Tensor)} \
        if isinstance(state, dict) else {}


def save(obj, path):
    """Write ``obj`` to the file ``path`` as a labkit checkpoint (a safetensors file), atomically.

    ``path`` may also be an open binary file object (``open(name, 'wb')``, ``io.BytesIO``), as
    for ``torch.save(obj, f)``: the bytes are written at its position, with no atomic rename.

    ``obj`` may be a Tensor, a NumPy array, or nested dicts / lists / tuples of those plus str,
    int, float, bool and None (a state dict). Its arrays are stored under flat dotted keys (a
    state dict's own keys), so any safetensors reader sees them; the rest of ``obj`` is described
    in the header. GPU tensors are saved from host copies and come back on their device. Any
    other object (a whole module, as ``torch.save(model, path)``) is pickled, its tensors still
    stored as arrays; loading it then needs its classes allowed as safe globals, or
    ``lk.load(path, weights_only=False)`` (``labkit.tensor.pickled``). What cannot be stored raises CheckpointError naming where it is
    (e.g. ``obj['layers'][2]``) before anything is written. If writing fails, the file that was
    at ``path`` is left as it was and no temporary file remains.

    >>> import os, tempfile, labkit as lk, safetensors.numpy
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.safetensors")
    >>> lk.save({"step": 3, "model": {"fc.bias": lk.zeros(2)}}, path)
    >>> lk.load(path)["step"]
    3
    >>> safetensors.numpy.load_file(path)
    {'model.fc.bias': array([0., 0.], dtype=float32)}
    """
    to_file = _is_file(path, "write")
    if not to_file:
        if not isinstance(path, (str, bytes, os.PathLike)):
            raise TypeError(f"lk.save writes to a file path (str or os.PathLike) or an open "
                            f"binary file object (with .write), got {type(path).__name__}")
        path = os.fsdecode(path)
    encoder = _Encoder()
    root = encoder.encode(obj, "obj", [], 0, set())
    structure = json.dumps(root, allow_nan=False, separators=(",", ":"))
    tensors = [(key, _ST_NAMES[host.dtype.name], host.shape, host.reshape(-1).view(np.uint8))
               for key, host in encoder.arrays.items()]
    metadata = {"format": FORMAT, "labkit.version": str(VERSION), "labkit.structure": structure,
                "labkit.sha256": _digest(structure, tensors)}

    if to_file:                # PyTorch's torch.save(obj, f): the bytes, at f's position
        _write_safetensors(path, encoder.arrays, metadata)
    else:
        write_atomically(path, lambda tmp: _write_safetensors(tmp, encoder.arrays, metadata))


def _is_file(f, method):
    """Whether ``f`` is an open file object (one with ``.read`` / ``.write``), not a path."""
    return not isinstance(f, (str, bytes, os.PathLike)) and callable(getattr(f, method, None))


def _file_name(f):
    """How messages name an open file object: its name where it has one."""
    name = getattr(f, "name", None)
    return os.fsdecode(name) if isinstance(name, (str, bytes)) else f"<{type(f).__name__}>"


_CHUNK = 1 << 24          # bytes per write call: a termination signal is handled between them


def _write_safetensors(path, arrays, metadata):
    """Write a safetensors file (to ``path``, or to an open binary file object): arrays by
    descending item size (each aligned to its item size after the 8-byte aligned header), then
    by key."""
    order = sorted(arrays, key=lambda k: (-arrays[k].dtype.itemsize, k))
    header, offset = {"__metadata__": metadata}, 0
    for key in order:
        array = arrays[key]
        header[key] = {"dtype": _ST_NAMES[array.dtype.name], "shape": list(array.shape),
                       "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    if _is_file(path, "write"):
        _write_parts(path, text, order, arrays)
    else:
        with open(path, "wb") as f:
            _write_parts(f, text, order, arrays)


def _write_parts(f, text, order, arrays):
    f.write(len(text).to_bytes(8, "little"))
    f.write(text)
    for key in order:
        data = memoryview(arrays[key].reshape(-1).view(np.uint8))
        for start in range(0, len(data), _CHUNK):
            f.write(data[start:start + _CHUNK])


# ---- load ------------------------------------------------------------------------------------
class _Decoder:
    """Checks a parsed structure completely, then builds the Python object from it.

    ``arrays`` maps each array reference (a key; an index in the first format) to
    (NumPy dtype, shape); ``host_array(ref)`` gives the array itself."""

    def __init__(self, path, arrays, host_array, ref_type, marks=False, unpickle=False):
        self.path = path
        self.unpickle = unpickle    # whether pickle nodes may name anything (weights_only=False)
        self.arrays = arrays
        self.host_array = host_array
        self.ref_type = ref_type
        self.marks = marks          # whether nodes may say "dtype": "complex128" (format 2)
        self.devices = set()
        self.built = {}
        self.places = {}            # id(pickle node) -> where it is in the structure

    def bad(self, what):
        return CheckpointError(f"lk.load: {self.path!r} is not a valid labkit checkpoint: "
                               f"{what}. The file is corrupted or was not written by lk.save.")

    def check(self, node, where, depth):
        if depth > _MAX_DEPTH:
            raise self.bad(f"{where} is nested more than {_MAX_DEPTH} levels deep")
        kind = type(node)
        if node is None or kind in (bool, int, float, str):
            return
        if kind is list:
            for i, item in enumerate(node):
                self.check(item, f"{where}[{i}]", depth + 1)
            return
        if kind is not dict:
            raise self.bad(f"{where} is a JSON {kind.__name__}")
        tag = node.get("type")
        if type(tag) is not str or tag not in _NODE_KEYS:
            raise self.bad(f"{where} has the unknown node type {tag!r} (a checkpoint holds only "
                           f"{', '.join(_NODE_KEYS)} nodes; it never names classes or code)")
        fields = _NODE_KEYS[tag] | {"type"}
        if self.marks and tag in ("ndarray", "npscalar", "tensor") and "dtype" in node:
            fields = fields | {"dtype"}
        if set(node) != fields:
            raise self.bad(f"{where}: a {tag} node must have exactly the fields "
                           f"{sorted(fields)}, not {sorted(node)}")
        if tag == "float":
            if node["value"] not in _SPECIAL_FLOATS:
                raise self.bad(f"{where} is the float {node['value']!r}")
        elif tag == pickled.TAG:
            self.devices |= pickled.check(node, where, self.arrays, self.bad)
            self.places[id(node)] = where     # for the restricted unpickler's messages
        elif tag in ("tuple", "dict"):
            items = node["items"]
            if type(items) is not list:
                raise self.bad(f"{where}: the items of a {tag} must be a list")
            if tag == "tuple":
                for i, item in enumerate(items):
                    self.check(item, f"{where}[{i}]", depth + 1)
                return
            keys = set()
            for pair in items:
                if type(pair) is not list or len(pair) != 2:
                    raise self.bad(f"{where}: each dict item must be a [key, value] pair")
                key = pair[0]
                if type(key) is dict:
                    self.check(key, f"a key of {where}", depth + 1)
                    if key.get("type") != "float":
                        raise self.bad(f"{where} has a key that is not a str, int, float, bool "
                                       f"or None")
                    key = self.scalar_key(key)
                elif key is not None and type(key) not in (bool, int, float, str):
                    raise self.bad(f"{where} has a key that is not a str, int, float, bool or "
                                   f"None")
                if key in keys and key == key:
                    raise self.bad(f"{where} has the key {key!r} twice")
                keys.add(key)
                self.check(pair[1], f"{where}[{key!r}]", depth + 1)
        else:
            ref = node["array"]
            if type(ref) is not self.ref_type or ref not in self.arrays:
                raise self.bad(f"{where} refers to array {ref!r}, which does not exist")
            dtype, shape = self.arrays[ref]
            if "dtype" in node:
                if node["dtype"] != "complex128" or dtype.name != "float64" or \
                        not shape or shape[-1] != 2:
                    raise self.bad(f"{where}: only a float64 array of shape (..., 2) can be "
                                   f"read as dtype complex128, not {dtype.name} {shape} as "
                                   f"{node['dtype']!r}")
                shape = shape[:-1]
            if tag == "npscalar" and shape:
                raise self.bad(f"{where}: a NumPy scalar must refer to a 0-d array")
            if tag == "tensor":
                if dtype.name not in _TENSOR_DTYPES:
                    raise self.bad(f"{where}: a tensor cannot have dtype {dtype.name}")
                if type(node["requires_grad"]) is not bool or (
                        node["requires_grad"] and _kind_of(dtype) not in "fc"):
                    raise self.bad(f"{where}: requires_grad must be true or false, and true "
                                   f"only for a floating-point or complex tensor")
                if type(node["device"]) is not str:
                    raise self.bad(f"{where}: the device must be a name such as 'cpu:0'")
                self.devices.add(node["device"])

    @staticmethod
    def scalar_key(node):
        return _SPECIAL_FLOATS[node["value"]]

    def build(self, node, placement):
        kind = type(node)
        if kind is list:
            return [self.build(item, placement) for item in node]
        if kind is not dict:
            return node
        tag = node["type"]
        if tag == "float":
            return _SPECIAL_FLOATS[node["value"]]
        if tag == "tuple":
            return tuple(self.build(item, placement) for item in node["items"])
        if tag == "dict":
            return {self.scalar_key(k) if type(k) is dict else k: self.build(v, placement)
                    for k, v in node["items"]}
        if tag == pickled.TAG:
            return pickled.decode(node, self.host_array, placement, _to_tensor, self.built,
                                  self.path, self.places[id(node)],
                                  weights_only=not self.unpickle)
        key = (tag, node["array"], node.get("device"), node.get("requires_grad"),
               node.get("dtype"))
        if key in self.built:
            return self.built[key]
        array = self.host_array(node["array"])
        if "dtype" in node:               # complex128 stored as (..., 2) float64
            array = array.view(np.complex128).reshape(array.shape[:-1])
        if tag == "ndarray":
            out = array
        elif tag == "npscalar":
            out = array[()]
        else:
            out = _to_tensor(array, placement[node["device"]], node["requires_grad"])
        self.built[key] = out
        return out


def _to_tensor(array, device, requires_grad):
    if device.type != "cpu":
        array = _transfer(array, get_device("cpu:0"), device)
    return Tensor._make(array, device, requires_grad)


def _parse_constant(name):
    raise ValueError(f"the JSON holds the non-standard constant {name}")


def _no_duplicates(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key!r} appears twice")
        out[key] = value
    return out


def _placement(path, devices, target):
    placement = {}
    for name in sorted(devices):
        if isinstance(target, dict):          # map_location={'cuda:0': 'cpu'}
            placement[name] = get_device(target.get(name, name))
            continue
        if target is not None:
            placement[name] = target
            continue
        try:
            placement[name] = get_device(name)
        except DeviceError as exc:
            raise DeviceError(f"lk.load: {path!r} holds tensors saved on {name}, which this "
                              f"process cannot use ({exc}). Pass device='cpu' (or another "
                              f"device) to lk.load to put them there.") from None
    return placement


def load(path, device=None, *, map_location=None, weights_only=True, mmap=False):
    """Read a checkpoint written by ``lk.save``, or any safetensors file, and return what it holds.

    ``path`` is a file path or, as for ``torch.load``, an open binary file object (a file
    opened with ``'rb'``, an ``io.BytesIO``), read from its position to its end.

    For a file written by ``lk.save`` this is the saved object; tensors come back on the device
    they were saved from, or all on ``device`` if given (e.g. ``device='cpu'`` to open a GPU
    checkpoint on a machine without a GPU). ``map_location`` is PyTorch's name for it: a device
    ('cpu', 'cuda', ``lk.device(...)``), or a dict from saved device names to devices
    (``{'cuda:0': 'cpu'}``). A safetensors file written by another tool
    (``safetensors.torch.save_file``...) comes back as a dict key -> Tensor on ``device`` (the CPU
    by default). Files in labkit's first checkpoint format load too.

    A file holding a pickled object (a whole module saved with ``lk.save(model, path)``) loads,
    as with PyTorch 2.6+'s ``torch.load``, by a restricted unpickler that hands out only the
    safe globals (``labkit.serialization.safe_globals([MyModel, lk.nn.Linear])``), and names a
    class that is not allowed; ``weights_only=False`` unpickles anything (code the file names
    runs: only for files you trust).

    The file is read into memory once: the tensors loaded are the process's own, whatever
    happens to the file afterwards. ``mmap=True`` (as ``torch.load``'s) memory-maps it instead:
    loading costs no copy and the tensors' pages are read from the file when first touched, so
    they *follow the file*: overwriting the file in place later changes loaded tensors you have
    not written to, and truncating it can end the process (SIGBUS). Writing to a loaded tensor
    never changes the file either way (the mapping is copy-on-write). The header (every entry's
    dtype, shape and offsets), the SHA-256 checksum and the structure are checked before
    anything is built, either way; a file that fails a check raises CheckpointError naming the
    file and what is wrong. Unless ``weights_only=False``, loading never imports or calls
    anything named in the file but the safe globals.

    >>> import os, tempfile, labkit as lk
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.safetensors")
    >>> lk.save([lk.arange(3), 1.5, None], path)
    >>> lk.load(path, device="cpu")
    [tensor([0, 1, 2]), 1.5, None]
    """
    blob = None
    if _is_file(path, "read"):      # torch.load(f): what f holds from its position on
        if mmap:
            raise ValueError("lk.load: mmap=True maps a file by its path; give the path, not "
                             "an open file object")
        blob = path.read()
        if not isinstance(blob, (bytes, bytearray)):
            raise TypeError(f"lk.load: the file object gave {type(blob).__name__}, not bytes: "
                            f"open it in binary mode ('rb')")
        path = _file_name(path)
    else:
        path = os.fsdecode(path)
    if device is not None and map_location is not None:
        raise TypeError("lk.load: give device= or map_location= (PyTorch's name), not both")
    target = _target(device if device is not None else map_location)

    def fail(what):
        return CheckpointError(f"lk.load: {path!r} {what}")

    with open(path, "rb") if blob is None else io.BytesIO(blob) as f:
        size = os.fstat(f.fileno()).st_size if blob is None else len(blob)
        head = f.read(8)
        if not size:
            raise fail("is empty (0 bytes), not a labkit checkpoint. Was the save interrupted?")
        if head == _V1_MAGIC or (size < 8 and _V1_MAGIC.startswith(head)):
            return _load_v1(path, head + f.read(), target, fail)
        if size < 8:
            raise fail(f"is truncated at byte {size} of at least 8 (a safetensors file starts "
                       f"with the 8-byte length of its header), or is not a checkpoint.")
        header_len = int.from_bytes(head, "little")
        first = f.read(1)
        if not 2 <= header_len <= _MAX_HEADER or first not in (b"{", b""):
            raise fail(f"is not a labkit checkpoint or safetensors file: it starts with "
                       f"{head + first!r}. lk.load reads safetensors files (lk.save writes "
                       f"them) and labkit's first checkpoint format, not PyTorch's zip files.")
        if size < 8 + header_len:
            raise fail(f"is truncated at byte {size} of at least {8 + header_len} (its header "
                       f"alone is {header_len} bytes). The file was cut short, e.g. by an "
                       f"interrupted copy: copy it again or save it again.")
        text = first + f.read(header_len - 1)
    try:
        header = json.loads(text.decode("utf-8"), parse_constant=_parse_constant,
                            object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError) as exc:
        raise fail(f"is not a valid checkpoint: its safetensors header is not valid JSON "
                   f"({exc}). The file is corrupted.") from None
    if type(header) is not dict:
        raise fail("is not a valid checkpoint: its safetensors header is not a JSON object. "
                   "The file is corrupted.")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and (type(metadata) is not dict or any(
            type(k) is not str or type(v) is not str for k, v in metadata.items())):
        raise fail("is not a valid checkpoint: its __metadata__ is not a map of strings to "
                   "strings. The file is corrupted.")
    ours = metadata is not None and (metadata.get("format") == FORMAT or any(
        key in metadata for key in _META_KEYS[1:]))
    entries = _check_entries(header, size, 8 + header_len, fail, ours)
    if blob is not None:
        mapped = np.frombuffer(bytearray(blob), dtype=np.uint8)
    else:
        mapped = np.memmap(path, mode="c", dtype=np.uint8) if mmap else \
            _read_whole(path, size, head + text, fail)
    start = 8 + header_len

    def raw(key):
        _, _, begin, end = entries[key]
        return mapped[start + begin:start + end]

    def host_array(key):
        dtype, shape, begin, _ = entries[key]
        array = np.ndarray(shape, dtype=dtype, buffer=mapped, offset=start + begin)
        if dtype.kind == "b" and array.size and raw(key).max() > 1:
            raise fail(f"is not a valid checkpoint: the bool tensor {key!r} holds bytes other "
                       f"than 0 and 1. The file is corrupted.")
        if dtype.byteorder == "<" and sys.byteorder != "little":
            array = array.astype(dtype.newbyteorder("="))
        return array

    if not ours:
        out = {}
        for key, (dtype, _, _, _) in entries.items():
            if dtype.name not in _TENSOR_DTYPES:
                raise fail(f"holds the tensor {key!r} of dtype {_ST_NAMES[dtype.name]}, which "
                           f"labkit tensors cannot hold (they are "
                           f"{', '.join(_ST_NAMES.get(n, n) for n in _TENSOR_DTYPES)}).")
        device = _placement(path, {"cpu:0"}, target)["cpu:0"]
        for key in entries:
            out[key] = _to_tensor(host_array(key), device, False)
        return out

    if set(metadata) != set(_META_KEYS) or metadata["format"] != FORMAT:
        raise fail(f"is not a valid labkit checkpoint: its __metadata__ must hold exactly "
                   f"{', '.join(_META_KEYS)} with format {FORMAT!r}, not {sorted(metadata)}. "
                   f"The file is corrupted or was not written by lk.save.")
    version = metadata["labkit.version"]
    if version != str(VERSION):
        newer = " (written by a newer labkit: upgrade labkit to read it)" \
            if version.isdigit() and int(version) > VERSION else ""
        raise fail(f"has the unsupported checkpoint format version {version!r}; this labkit "
                   f"reads version {VERSION}{newer}.")
    structure = metadata["labkit.structure"]
    table = [(key, _ST_NAMES[dtype.name], shape, raw(key))
             for key, (dtype, shape, _, _) in entries.items()]
    if not hmac.compare_digest(_digest(structure, table).encode("utf-8"),
                               metadata["labkit.sha256"].encode("utf-8")):
        raise _checksum_failed(size, fail)
    decoder = _Decoder(path, {key: entry[:2] for key, entry in entries.items()}, host_array,
                       str, marks=True, unpickle=not weights_only)
    try:
        root = json.loads(structure, parse_constant=_parse_constant)
    except (ValueError, RecursionError) as exc:
        raise decoder.bad(f"its structure is not valid JSON ({exc})") from None
    decoder.check(root, "obj", 0)
    return decoder.build(root, _placement(path, decoder.devices, target))


def _target(where):
    """Where loaded tensors go: None (where they were saved), a Device, or a dict from saved
    device names to Devices (``map_location={'cuda:0': 'cpu'}``)."""
    if where is None:
        return None
    if isinstance(where, dict):
        return {canonical_name(k): get_device(canonical_name(v)) for k, v in where.items()}
    if callable(where) and not isinstance(where, str):
        raise TypeError("lk.load: map_location as a function (PyTorch's storage, location "
                        "form) is not supported: pass a device ('cpu', 'cuda') or a dict "
                        "{'cuda:0': 'cpu'}")
    return get_device(canonical_name(where))


def _read_whole(path, size, head, fail):
    """The file's ``size`` bytes in a writable array of their own, whose start must be
    ``head`` (the header already checked: the file must not have changed in between)."""
    data = np.empty(size, dtype=np.uint8)
    with open(path, "rb") as f:
        view, done = memoryview(data), 0
        while done < size:
            n = f.readinto(view[done:])
            if not n:
                break
            done += n
    if done < size or data[:len(head)].tobytes() != head:
        raise fail("changed while it was being loaded (it was replaced or cut short): load it "
                   "again once it is complete.")
    return data


def _check_entries(header, size, data_start, fail, ours):
    """Check every tensor entry of a safetensors header; key -> (dtype, shape, begin, end)."""
    def bad(what):
        kind = "labkit checkpoint" if ours else "safetensors file"
        return fail(f"is not a valid {kind}: {what}. The file is corrupted.")

    entries = {}
    for key, entry in header.items():
        if type(entry) is not dict or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise bad(f"the entry of {key!r} is not described by dtype, shape, data_offsets")
        name, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if name in _ST_FOREIGN:
            raise fail(f"holds the tensor {key!r} of dtype {name}, which labkit cannot hold; "
                       f"convert it before saving, e.g. to F32 or BF16.")
        if type(name) is not str or name not in _ST_DTYPES:
            raise bad(f"the tensor {key!r} has the unknown dtype {name!r}")
        if type(shape) is not list or any(type(s) is not int or s < 0 for s in shape):
            raise bad(f"the tensor {key!r} has the invalid shape {shape!r}")
        dtype = _ST_DTYPES[name]
        if type(offsets) is not list or len(offsets) != 2 or \
                any(type(o) is not int for o in offsets) or \
                not 0 <= offsets[0] <= offsets[1] or \
                offsets[1] - offsets[0] != math.prod(shape) * dtype.itemsize:
            raise bad(f"the tensor {key!r} (dtype {name}, shape {tuple(shape)}) has the data "
                      f"offsets {offsets!r}, which do not hold its "
                      f"{math.prod(shape) * dtype.itemsize} bytes")
        entries[key] = (dtype, tuple(shape), offsets[0], offsets[1])
    end = 0
    for key, (_, _, begin, stop) in sorted(entries.items(), key=lambda e: e[1][2:]):
        if begin != end:
            raise bad(f"the tensor {key!r} starts at data byte {begin}, not {end} (tensors "
                      f"must follow each other with no gap or overlap)")
        end = stop
    _check_length(size, data_start + end, fail)
    return entries


def _check_length(size, expected, fail):
    """A file of ``size`` bytes whose header says it is ``expected`` bytes long."""
    if size < expected:
        raise fail(f"is truncated at byte {size} of {expected} (its header says it is "
                   f"{expected} bytes long). The file was cut short, e.g. by an interrupted "
                   f"copy: copy it again or save it again.")
    if size > expected:
        raise fail(f"has {size - expected} unexpected bytes after its end (it is {size} bytes, "
                   f"its header says {expected}): the file is corrupted.")


def _checksum_failed(size, fail):
    return fail(f"failed its SHA-256 checksum ({size} bytes): the file is corrupted (a "
                f"changed byte, a bad disk or transfer). Use another copy of it.")


# ---- labkit's first format (read only) -------------------------------------------------------
# magic b"\x89labkit\n", uint32 version 1, uint64 json_len, uint64 data_len, the JSON description
# {"format", "arrays", "root"}, the array data (each array at a 64-byte boundary), then the
# SHA-256 of everything before it. ``root`` is the structure above, its arrays referred to by
# their index in ``arrays`` (dtype as NumPy names it, shape, offset, nbytes).
_V1_MAGIC = b"\x89labkit\n"
_V1_PREFIX = struct.Struct("<8sIQQ")    # magic, version, json_len, data_len
_V1_DIGEST = 32
_V1_DTYPES = {name: np.dtype(name).newbyteorder("<") for name in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128")}


def _load_v1(path, blob, target, fail):
    size = len(blob)
    if size < _V1_PREFIX.size:
        raise fail(f"is truncated at byte {size} of at least {_V1_PREFIX.size + _V1_DIGEST}: "
                   f"it holds only the start of a labkit checkpoint. Copy it again or save it "
                   f"again.")
    _, version, json_len, data_len = _V1_PREFIX.unpack_from(blob)
    if version != 1:
        newer = " (written by a newer labkit: upgrade labkit to read it)" \
            if version > 1 else ""
        raise fail(f"has the unsupported checkpoint format version {version}; this labkit "
                   f"reads version 1 of this format{newer}.")
    expected = _V1_PREFIX.size + json_len + data_len + _V1_DIGEST
    _check_length(size, expected, fail)
    body = memoryview(blob)[:expected - _V1_DIGEST]
    if not hmac.compare_digest(hashlib.sha256(body).digest(), blob[expected - _V1_DIGEST:]):
        raise _checksum_failed(size, fail)

    data_start = _V1_PREFIX.size + json_len
    arrays = {}
    decoder = _Decoder(path, arrays, None, int)
    try:
        header = json.loads(bytes(body[_V1_PREFIX.size:data_start]).decode("utf-8"),
                            parse_constant=_parse_constant)
    except (ValueError, RecursionError) as exc:
        raise decoder.bad(f"its description is not valid JSON ({exc})") from None
    if type(header) is not dict or set(header) != {"format", "arrays", "root"} \
            or header["format"] != FORMAT:
        raise decoder.bad("its description does not have the expected fields")
    if type(header["arrays"]) is not list:
        raise decoder.bad("'arrays' is not a list")
    places = []
    for i, entry in enumerate(header["arrays"]):
        if type(entry) is not dict or set(entry) != {"dtype", "shape", "offset", "nbytes"}:
            raise decoder.bad(f"array {i} is not described by dtype, shape, offset, nbytes")
        dtype, shape = entry["dtype"], entry["shape"]
        offset, nbytes = entry["offset"], entry["nbytes"]
        if type(dtype) is not str or dtype not in _V1_DTYPES:
            raise decoder.bad(f"array {i} has the unknown dtype {dtype!r}")
        if type(shape) is not list or any(type(s) is not int or s < 0 for s in shape):
            raise decoder.bad(f"array {i} has the invalid shape {shape!r}")
        if type(offset) is not int or type(nbytes) is not int or offset < 0 or \
                nbytes != math.prod(shape) * _V1_DTYPES[dtype].itemsize or \
                offset + nbytes > data_len:
            raise decoder.bad(f"array {i} (dtype {dtype}, shape {tuple(shape)}) does not fit "
                              f"the {data_len} data bytes (offset {offset!r}, nbytes "
                              f"{nbytes!r})")
        arrays[i] = (_V1_DTYPES[dtype], tuple(shape))
        places.append(data_start + offset)

    def host_array(index):
        dtype, shape = arrays[index]
        count = math.prod(shape)
        raw = np.frombuffer(blob, dtype=dtype, count=count, offset=places[index]) \
            if count else np.zeros(0, dtype=dtype)
        if dtype.kind == "b":
            array = raw.view(np.uint8) != 0
        else:
            array = raw.astype(dtype.newbyteorder("="), copy=True)
        return array.reshape(shape)

    decoder.host_array = host_array
    decoder.check(header["root"], "obj", 0)
    return decoder.build(header["root"], _placement(path, decoder.devices, target))
