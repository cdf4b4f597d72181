"""Checkpoints: ``lk.save(obj, path)`` and ``lk.load(path)``, in a format that never runs code.

What can be saved: Tensors, NumPy arrays and scalars, and nested dicts / lists / tuples of those
together with str, int, float, bool and None; that covers the state dicts of modules and
optimisers. Tuples come back as tuples, dicts keep their key order, keys may be str, int, float,
bool or None. A tensor keeps its dtype, shape, device and ``requires_grad``; an object saved twice
(tied weights) is stored once and comes back as one object.

The file is, in order (all integers little-endian)::

    magic      8 bytes   b"\\x89labkit\\n"
    version    uint32    1
    json_len   uint64    length of the JSON description
    data_len   uint64    length of the array data
    json       json_len bytes: UTF-8 JSON {"format", "arrays", "root"}, padded with spaces
    data       data_len bytes: raw little-endian array bytes, each array at a 64-byte boundary
    sha256     32 bytes  SHA-256 of everything before it

``root`` describes the saved object: JSON null / true / false / numbers / strings stand for
themselves, JSON lists for Python lists, and an object with a ``"type"`` of ``tuple``, ``dict``,
``tensor``, ``ndarray``, ``npscalar`` or ``float`` (NaN and infinities) for the rest; arrays are
referred to by their index in ``arrays`` (dtype, shape, offset, nbytes). Loading checks the magic,
version, lengths and checksum before it reads the JSON, and checks the whole description against
this closed list before it builds anything; nothing in a file can name a class or a function.

Saving is atomic: the bytes go to a temporary file in the same directory, which is flushed,
fsync'ed and renamed over ``path``; on any failure the temporary file is removed and what was at
``path`` before is untouched.

>>> import os, tempfile, labkit as lk
>>> path = os.path.join(tempfile.mkdtemp(), "model.lk")
>>> lk.save({"w": lk.ones(2, 3), "step": 10, "sizes": (2, 3)}, path)
>>> state = lk.load(path)
>>> state["w"].shape, state["step"], state["sizes"]
((2, 3), 10, (2, 3))
"""
import errno
import hashlib
import hmac
import json
import math
import os
import secrets
import struct

import numpy as np

from ..devices import get_device
from ..devices import transfer as _transfer
from ..errors import CheckpointError, DeviceError
from .tensor import Tensor

MAGIC = b"\x89labkit\n"
VERSION = 1
FORMAT = "labkit-checkpoint"
_PREFIX = struct.Struct("<8sIQQ")      # magic, version, json_len, data_len
_DIGEST = 32                            # bytes of SHA-256
_ALIGN = 64
_MAX_DEPTH = 200                        # nesting deeper than this is refused (save and load)

# The array dtypes a checkpoint may hold, by the name stored in the file; always little-endian.
_DTYPES = {name: np.dtype(name).newbyteorder("<") for name in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128")}
_TENSOR_DTYPES = ("bool", "int32", "int64", "float16", "float32", "float64")
_NODE_KEYS = {"tuple": {"items"}, "dict": {"items"}, "float": {"value"}, "ndarray": {"array"},
              "npscalar": {"array"}, "tensor": {"array", "device", "requires_grad"}}
_SPECIAL_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


# ---- save ------------------------------------------------------------------------------------
class _Encoder:
    """Turns a Python object into the JSON description plus a list of host arrays."""

    def __init__(self):
        self.arrays = []      # host arrays, C-contiguous little-endian
        self.entries = []     # their JSON descriptions
        self.by_id = {}       # id(object) -> array index (objects saved twice are stored once)
        self.keep = []        # keeps every object whose id is in by_id alive while saving
        self.offset = 0

    def fail(self, where, obj, why):
        return CheckpointError(f"lk.save: cannot store {where} of type {type(obj).__name__}: "
                               f"{why}")

    def array(self, obj, host, where):
        index = self.by_id.get(id(obj))
        if index is not None:
            return index
        name = host.dtype.name
        if host.dtype.kind not in "biufc" or name not in _DTYPES:
            raise self.fail(where, obj, f"arrays of dtype {host.dtype} cannot be stored (a "
                                        f"checkpoint holds {', '.join(_DTYPES)}); convert it first,"
                                        f" e.g. with .astype('float32')")
        host = np.ascontiguousarray(host, dtype=_DTYPES[name]).reshape(host.shape)
        self.offset = -(-self.offset // _ALIGN) * _ALIGN
        self.entries.append({"dtype": name, "shape": list(host.shape), "offset": self.offset,
                             "nbytes": host.nbytes})
        self.arrays.append((self.offset, host))
        self.offset += host.nbytes
        index = len(self.entries) - 1
        self.by_id[id(obj)] = index
        self.keep.append(obj)
        return index

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

    def encode(self, obj, where, depth, active):
        if depth > _MAX_DEPTH:
            raise self.fail(where, obj, f"the structure is nested more than {_MAX_DEPTH} levels "
                                        f"deep")
        kind = type(obj)
        if obj is None or kind in (bool, int, float, str):
            return self.scalar(obj)
        if isinstance(obj, Tensor):
            if obj.dtype.np.name not in _TENSOR_DTYPES:
                raise self.fail(where, obj, f"tensors of dtype {obj.dtype} cannot be stored")
            index = self.by_id.get(id(obj))     # a tensor saved twice is copied to the host once
            if index is None:
                index = self.array(obj, obj.numpy(), where)
            return {"type": "tensor", "array": index, "device": obj.device.name,
                    "requires_grad": bool(obj.requires_grad)}
        if isinstance(obj, np.ndarray):
            return {"type": "ndarray", "array": self.array(obj, obj, where)}
        if isinstance(obj, np.generic):
            return {"type": "npscalar", "array": self.array(obj, np.asarray(obj), where)}
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
                        items.append([self.scalar(key),
                                      self.encode(value, at, depth + 1, active)])
                    return {"type": "dict", "items": items}
                items = [self.encode(v, f"{where}[{i}]", depth + 1, active)
                         for i, v in enumerate(obj)]
                return items if kind is list else {"type": "tuple", "items": items}
            finally:
                active.discard(id(obj))
        base = next((b for b in (list, tuple, bool, int, float, str) if isinstance(obj, b)), None)
        if base is not None:
            why = (f"it is a subclass of {base.__name__}, which would not come back as itself; "
                   f"convert it with {base.__name__}(...) first")
        else:
            why = ("a checkpoint holds Tensors, NumPy arrays and scalars, dict/list/tuple, str, "
                   "int, float, bool and None (never arbitrary objects, so that loading runs no "
                   "code); save this object's state dict or its fields instead")
        raise self.fail(where, obj, why)


def _fsync_directory(directory):
    """Make the rename durable. Skipped where directories cannot be opened (Windows) or synced
    (EINVAL: some network file systems)."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)


def _write(f, digest, data):
    digest.update(data)
    f.write(data)


def save(obj, path):
    """Write ``obj`` to the file ``path`` as a labkit checkpoint, atomically.

    ``obj`` may be a Tensor, a NumPy array, or nested dicts / lists / tuples of those plus str,
    int, float, bool and None (a state dict). GPU tensors are saved from host copies and come back
    on their device. Anything else raises CheckpointError naming where it is (e.g.
    ``obj['layers'][2]``) before anything is written. If writing fails, the file that was at
    ``path`` is left as it was and no temporary file remains.

    >>> import os, tempfile, labkit as lk
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.lk")
    >>> lk.save({"step": 3, "w": lk.zeros(2)}, path)
    >>> lk.load(path)["step"]
    3
    """
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"lk.save writes to a file path (str or os.PathLike), got "
                        f"{type(path).__name__}; saving to open file objects is not supported "
                        f"because the write could not be atomic")
    path = os.fsdecode(path)
    encoder = _Encoder()
    root = encoder.encode(obj, "obj", 0, set())
    text = json.dumps({"format": FORMAT, "arrays": encoder.entries, "root": root},
                      allow_nan=False, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(_PREFIX.size + len(text)) % _ALIGN)
    data_len = encoder.offset

    directory = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    while True:
        tmp = os.path.join(directory, f".{base}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                         0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            digest = hashlib.sha256()
            _write(f, digest, _PREFIX.pack(MAGIC, VERSION, len(text), data_len))
            _write(f, digest, text)
            position = 0
            for offset, host in encoder.arrays:
                if offset > position:
                    _write(f, digest, bytes(offset - position))
                _write(f, digest, host.reshape(-1).view(np.uint8))
                position = offset + host.nbytes
            if data_len > position:
                _write(f, digest, bytes(data_len - position))
            f.write(digest.digest())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_directory(directory)


# ---- load ------------------------------------------------------------------------------------
class _Decoder:
    """Checks a parsed JSON description completely, then builds the Python object from it."""

    def __init__(self, path, blob, data_start, data_len):
        self.path = path
        self.blob = blob
        self.data_start = data_start
        self.data_len = data_len
        self.arrays = []
        self.devices = set()
        self.built = {}

    def bad(self, what):
        return CheckpointError(f"lk.load: {self.path!r} is not a valid labkit checkpoint: "
                               f"{what}. The file is corrupted or was not written by lk.save.")

    def check_header(self, header):
        if type(header) is not dict or set(header) != {"format", "arrays", "root"} \
                or header["format"] != FORMAT:
            raise self.bad("its description does not have the expected fields")
        arrays = header["arrays"]
        if type(arrays) is not list:
            raise self.bad("'arrays' is not a list")
        for i, entry in enumerate(arrays):
            if type(entry) is not dict or set(entry) != {"dtype", "shape", "offset", "nbytes"}:
                raise self.bad(f"array {i} is not described by dtype, shape, offset, nbytes")
            dtype, shape = entry["dtype"], entry["shape"]
            offset, nbytes = entry["offset"], entry["nbytes"]
            if type(dtype) is not str or dtype not in _DTYPES:
                raise self.bad(f"array {i} has the unknown dtype {dtype!r}")
            if type(shape) is not list or any(type(s) is not int or s < 0 for s in shape):
                raise self.bad(f"array {i} has the invalid shape {shape!r}")
            if type(offset) is not int or type(nbytes) is not int or offset < 0 or \
                    nbytes != math.prod(shape) * _DTYPES[dtype].itemsize or \
                    offset + nbytes > self.data_len:
                raise self.bad(f"array {i} (dtype {dtype}, shape {tuple(shape)}) does not fit "
                               f"the {self.data_len} data bytes (offset {offset!r}, nbytes "
                               f"{nbytes!r})")
            self.arrays.append((_DTYPES[dtype], tuple(shape), offset, nbytes, dtype))
        self.check(header["root"], "obj", 0)

    def check_index(self, node, where):
        index = node["array"]
        if type(index) is not int or not 0 <= index < len(self.arrays):
            raise self.bad(f"{where} refers to array {index!r}, which does not exist")
        return index

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
        if set(node) != _NODE_KEYS[tag] | {"type"}:
            raise self.bad(f"{where}: a {tag} node must have exactly the fields "
                           f"{sorted(_NODE_KEYS[tag] | {'type'})}, not {sorted(node)}")
        if tag == "float":
            if node["value"] not in _SPECIAL_FLOATS:
                raise self.bad(f"{where} is the float {node['value']!r}")
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
            index = self.check_index(node, where)
            dtype, shape = self.arrays[index][:2]
            name = self.arrays[index][4]
            if tag == "npscalar" and shape:
                raise self.bad(f"{where}: a NumPy scalar must refer to a 0-d array")
            if tag == "tensor":
                if name not in _TENSOR_DTYPES:
                    raise self.bad(f"{where}: a tensor cannot have dtype {name}")
                if type(node["requires_grad"]) is not bool or (
                        node["requires_grad"] and dtype.kind != "f"):
                    raise self.bad(f"{where}: requires_grad must be true or false, and true "
                                   f"only for a floating-point tensor")
                if type(node["device"]) is not str:
                    raise self.bad(f"{where}: the device must be a name such as 'cpu:0'")
                self.devices.add(node["device"])

    @staticmethod
    def scalar_key(node):
        return _SPECIAL_FLOATS[node["value"]]

    def host_array(self, index):
        dtype, shape, offset, nbytes, _ = self.arrays[index]
        start = self.data_start + offset
        raw = np.frombuffer(self.blob, dtype=dtype, count=math.prod(shape), offset=start) \
            if nbytes else np.zeros(0, dtype=dtype)
        if dtype.kind == "b":
            array = raw.view(np.uint8) != 0
        else:
            array = raw.astype(dtype.newbyteorder("="), copy=True)
        return array.reshape(shape)

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
        key = (tag, node["array"], node.get("device"), node.get("requires_grad"))
        if key in self.built:
            return self.built[key]
        array = self.host_array(node["array"])
        if tag == "ndarray":
            out = array
        elif tag == "npscalar":
            out = array[()]
        else:
            dev = placement[node["device"]]
            if dev.type != "cpu":
                array = _transfer(array, get_device("cpu:0"), dev)
            out = Tensor._make(array, dev, node["requires_grad"])
        self.built[key] = out
        return out


def _parse_constant(name):
    raise ValueError(f"the JSON holds the non-standard constant {name}")


def load(path, device=None):
    """Read a checkpoint written by ``lk.save`` and return the object it holds.

    Tensors come back on the device they were saved from, or all on ``device`` if given (e.g.
    ``device='cpu'`` to open a GPU checkpoint on a machine without a GPU). The whole file is
    checked (magic, version, lengths, SHA-256, structure) before anything is built; a file that
    fails a check raises CheckpointError naming the file and what is wrong. Loading never
    imports or calls anything named in the file.

    >>> import os, tempfile, labkit as lk
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.lk")
    >>> lk.save([lk.arange(3), 1.5, None], path)
    >>> lk.load(path, device="cpu")
    [tensor([0, 1, 2]), 1.5, None]
    """
    path = os.fsdecode(path)
    target = get_device(device) if device is not None else None
    with open(path, "rb") as f:
        blob = f.read()
    size = len(blob)

    def fail(what):
        return CheckpointError(f"lk.load: {path!r} {what}")

    if size < len(MAGIC) and MAGIC.startswith(blob):
        if not size:
            raise fail("is empty (0 bytes), not a labkit checkpoint. Was the save interrupted?")
        raise fail(f"is truncated at byte {size} of at least {_PREFIX.size + _DIGEST}: it holds "
                   f"only the start of a labkit checkpoint. Copy it again or save it again.")
    if blob[:len(MAGIC)] != MAGIC:
        raise fail(f"is not a labkit checkpoint: it starts with {blob[:len(MAGIC)]!r}, not "
                   f"{MAGIC!r}. lk.load reads only files written by lk.save (it never unpickles).")
    if size < _PREFIX.size:
        raise fail(f"is truncated at byte {size} of at least {_PREFIX.size + _DIGEST}: the "
                   f"header is incomplete. Copy it again or save it again.")
    _, version, json_len, data_len = _PREFIX.unpack_from(blob)
    if version != VERSION:
        newer = " (written by a newer labkit: upgrade labkit to read it)" \
            if version > VERSION else ""
        raise fail(f"has the unsupported checkpoint format version {version}; this labkit "
                   f"reads version {VERSION}{newer}.")
    expected = _PREFIX.size + json_len + data_len + _DIGEST
    if size < expected:
        raise fail(f"is truncated at byte {size} of {expected} (its header says it is {expected} "
                   f"bytes long). The file was cut short, e.g. by an interrupted copy: copy it "
                   f"again or save it again.")
    if size > expected:
        raise fail(f"has {size - expected} unexpected bytes after its end (it is {size} bytes, "
                   f"its header says {expected}): the file is corrupted.")
    body = memoryview(blob)[:expected - _DIGEST]
    if not hmac.compare_digest(hashlib.sha256(body).digest(), blob[expected - _DIGEST:]):
        raise fail(f"failed its SHA-256 checksum ({size} bytes): the file is corrupted (a "
                   f"changed byte, a bad disk or transfer). Use another copy of it.")

    data_start = _PREFIX.size + json_len
    decoder = _Decoder(path, blob, data_start, data_len)
    try:
        header = json.loads(bytes(body[_PREFIX.size:data_start]).decode("utf-8"),
                            parse_constant=_parse_constant)
    except (ValueError, RecursionError) as exc:
        raise decoder.bad(f"its description is not valid JSON ({exc})") from None
    decoder.check_header(header)

    placement = {}
    for name in sorted(decoder.devices):
        if target is not None:
            placement[name] = target
            continue
        try:
            placement[name] = get_device(name)
        except DeviceError as exc:
            raise DeviceError(f"lk.load: {path!r} holds tensors saved on {name}, which this "
                              f"process cannot use ({exc}). Pass device='cpu' (or another "
                              f"device) to lk.load to put them there.") from None
    return decoder.build(header["root"], placement)
