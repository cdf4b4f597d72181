"""lk.save / lk.load: round trips, a format that runs no code on load, and atomic writes.

The file layout is spelled out here independently of the implementation (see ``_craft``), so a
change to the on-disk format shows up as a failing test.
"""
import builtins
import collections
import hashlib
import json
import math
import os
import pickle
import struct

import numpy as np
import pytest

import labkit as lk
from labkit.tensor import checkpoint

MAGIC = b"\x89labkit\n"
PREFIX = struct.Struct("<8sIQQ")   # magic, version, json_len, data_len; then json, data, sha256


# ---- helpers -------------------------------------------------------------------------------
def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def _parts(path):
    """(version, header dict, data bytes) of a checkpoint written by lk.save."""
    blob = _read(path)
    magic, version, json_len, data_len = PREFIX.unpack_from(blob)
    assert magic == MAGIC
    header = json.loads(blob[PREFIX.size:PREFIX.size + json_len])
    data = blob[PREFIX.size + json_len:PREFIX.size + json_len + data_len]
    return version, header, data


def _craft(path, header, data=b"", version=1, raw_json=None):
    """Write a file with a *valid* checksum, so that only its content can be wrong."""
    text = raw_json if raw_json is not None else json.dumps(header).encode()
    body = PREFIX.pack(MAGIC, version, len(text), len(data)) + text + data
    with open(path, "wb") as f:
        f.write(body + hashlib.sha256(body).digest())


def _same(a, b):
    """Tensors / arrays equal in type, dtype, shape, device and every bit of their values."""
    if isinstance(a, lk.Tensor):
        assert isinstance(b, lk.Tensor)
        assert (a.dtype, a.shape, a.device, a.requires_grad) == \
            (b.dtype, b.shape, b.device, b.requires_grad)
        a, b = a.numpy(), b.numpy()
    assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


def _random(dtype, shape, device="cpu:0"):
    rng = np.random.default_rng(0)
    dt = lk.as_dtype(dtype)
    if dt.is_floating:
        host = rng.standard_normal(shape).astype(dt.np)
    elif dt is lk.bool_:
        host = rng.random(shape) > 0.5
    else:
        host = rng.integers(-2**31, 2**31 - 1, size=shape).astype(dt.np)
    return lk.tensor(host, device=device)


@pytest.fixture
def ckpt(tmp_path):
    return str(tmp_path / "model.lk")


@pytest.fixture
def small(ckpt):
    """A small valid checkpoint on disk, and what it holds."""
    obj = {"w": lk.tensor([[1.0, 2.0], [3.0, 4.0]]), "step": 7, "names": ("a", "b")}
    lk.save(obj, ckpt)
    return ckpt, obj


# ---- round trips ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "int64", "bool_"])
def test_round_trip_every_dtype(ckpt, device, dtype):
    for shape in [(3, 4), (), (0,), (2, 0, 3), (1,)]:
        t = _random(dtype, shape, device)
        lk.save(t, ckpt)
        back = lk.load(ckpt)
        _same(t, back)
        assert back.device is lk.devices.get_device(device)


def test_round_trip_special_float_values(ckpt):
    t = lk.tensor([math.nan, math.inf, -math.inf, -0.0, 1e-45, 3.4e38])
    lk.save(t, ckpt)
    _same(t, lk.load(ckpt))


def test_non_contiguous_and_requires_grad(ckpt):
    w = lk.randn(3, 4, requires_grad=True)
    lk.save({"view": w.detach().T, "w": w, "y": w * 2}, ckpt)
    back = lk.load(ckpt)
    assert back["view"].shape == (4, 3)
    np.testing.assert_array_equal(back["view"].numpy(), w.numpy().T)
    assert back["w"].requires_grad and back["w"].is_leaf and back["w"].grad is None
    assert back["y"].is_leaf     # history is never saved, only values
    (back["w"] * back["w"]).sum().backward()
    np.testing.assert_allclose(back["w"].grad.numpy(), 2 * w.numpy())


def test_nested_structure_round_trips_exactly(ckpt):
    obj = {
        "model": collections.OrderedDict([("layer.2.weight", lk.ones(2, 2)),
                                          ("layer.1.bias", lk.zeros(2))]),
        "optim": {"state": {0: {"momentum": lk.full((2,), 0.5), "step": 3},
                            1: {"momentum": None, "step": 0}},
                  "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "params": [0, 1],
                                    "nesterov": False}]},
        "z_first": "key order is kept, not sorted",
        "a_last": [(), [], {}, ((1,), [2.5, -0.0])],
        "floats": [math.inf, -math.inf, 1e300, 5e-324],
        "text": "π ≈ 3.14, \"quoted\", \n newline, \x00 nul",
        "big": 2**100, "neg": -7, "flag": True, "nothing": None,
        "arrays": [np.arange(6, dtype=np.uint8).reshape(2, 3), np.array([1 + 2j], np.complex64),
                   np.arange(3, dtype=">i4"), np.zeros((0, 2)), np.array(3.5)],
        "scalars": [np.float32(1.5), np.int16(-3), np.bool_(True)],
        None: "None key", 2.5: "float key", True: "bool key", -1: "int key",
    }
    lk.save(obj, ckpt)
    back = lk.load(ckpt)
    assert type(back) is dict and list(back) == list(obj)
    assert list(back["model"]) == ["layer.2.weight", "layer.1.bias"]
    assert type(back["model"]) is dict
    assert list(back["optim"]["state"]) == [0, 1]        # int keys stay ints
    assert back["optim"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert type(back["optim"]["param_groups"][0]["betas"]) is tuple
    assert back["a_last"] == [(), [], {}, ((1,), [2.5, -0.0])]
    assert type(back["a_last"][3][0]) is tuple and type(back["a_last"][3][1]) is list
    assert math.copysign(1, back["a_last"][3][1][1]) == -1
    assert back["floats"] == obj["floats"]
    for key in ("text", "big", "neg", "flag", "nothing", None, 2.5, True, -1):
        assert back[key] == obj[key] and type(back[key]) is type(obj[key])
    for a, b in zip(obj["arrays"], back["arrays"]):
        assert b.dtype == a.dtype.newbyteorder("=") and b.shape == a.shape
        np.testing.assert_array_equal(a, b)
        assert b.flags.writeable
    for a, b in zip(obj["scalars"], back["scalars"]):
        assert type(a) is type(b) and a == b
    _same(obj["optim"]["state"][0]["momentum"], back["optim"]["state"][0]["momentum"])


def test_nan_float_and_key(ckpt):
    lk.save({"x": math.nan, math.nan: 1}, ckpt)
    back = lk.load(ckpt)
    assert math.isnan(back["x"]) and math.isnan(next(k for k in back if k != "x"))


def test_shared_objects_are_stored_once_and_come_back_shared(ckpt, tmp_path):
    w = lk.randn(64, 64)
    lk.save({"encoder": w, "decoder": w}, ckpt)
    lk.save({"encoder": w}, str(tmp_path / "one.lk"))
    assert os.path.getsize(ckpt) - os.path.getsize(tmp_path / "one.lk") < 200
    back = lk.load(ckpt)
    assert back["encoder"] is back["decoder"]


def test_load_returns_fresh_memory(ckpt):
    t = lk.ones(3)
    lk.save(t, ckpt)
    a, b = lk.load(ckpt), lk.load(ckpt)
    np.asarray(a)[0] = 5
    assert b[0].item() == 1 and t[0].item() == 1


def test_load_onto_another_device(ckpt, device):
    lk.save({"w": lk.ones(2, device=device), "a": np.ones(2)}, ckpt)
    back = lk.load(ckpt, device="cpu")
    assert back["w"].device is lk.devices.get_device("cpu:0")
    assert isinstance(back["a"], np.ndarray)        # NumPy arrays stay NumPy arrays


def test_virtual_device_checkpoint_needs_device_argument(ckpt):
    lk.devices.configure(cpus=2)
    try:
        lk.save({"w": lk.ones(2, device="cpu:1")}, ckpt)
        assert lk.load(ckpt)["w"].device.name == "cpu:1"
    finally:
        lk.devices.configure(cpus=1)
    with pytest.raises(lk.DeviceError) as info:
        lk.load(ckpt)
    msg = str(info.value)
    assert ckpt in msg and "cpu:1" in msg and "device='cpu'" in msg
    assert lk.load(ckpt, device="cpu")["w"].device.name == "cpu:0"


def test_gpu_checkpoint_loads_on_cpu_with_device_cpu(ckpt):
    lk.save({"w": lk.ones(2, 3)}, ckpt)
    _, header, data = _parts(ckpt)
    header["root"]["items"][0][1]["device"] = "gpu:0"   # as if saved on a GPU
    _craft(ckpt, header, data)
    back = lk.load(ckpt, device="cpu")
    assert back["w"].device.name == "cpu:0" and back["w"].tolist() == [[1.0] * 3] * 2
    if lk.devices.gpu_count() == 0:
        with pytest.raises(lk.DeviceError, match="device='cpu'"):
            lk.load(ckpt)


@pytest.mark.gpu
def test_gpu_tensor_comes_back_on_its_gpu(ckpt):
    t = lk.randn(3, 3, device="gpu:0", requires_grad=True)
    lk.save({"t": t}, ckpt)
    back = lk.load(ckpt)["t"]
    assert back.device.name == "gpu:0" and back.requires_grad
    np.testing.assert_array_equal(back.numpy(), t.numpy())
    assert lk.load(ckpt, device="gpu:0")["t"].device.name == "gpu:0"


def test_format_on_disk(ckpt):
    lk.save({"w": lk.tensor([1.0, 2.0]), "n": np.arange(3, dtype=np.int16)}, ckpt)
    blob = _read(ckpt)
    version, header, data = _parts(ckpt)
    assert version == 1 and header["format"] == "labkit-checkpoint"
    assert (PREFIX.size + len(json.dumps(header, separators=(",", ":")))) <= \
        len(blob) - len(data) - 32
    assert blob[-32:] == hashlib.sha256(blob[:-32]).digest()
    w, n = header["arrays"]
    assert w == {"dtype": "float32", "shape": [2], "offset": 0, "nbytes": 8}
    assert n["dtype"] == "int16" and n["offset"] % 64 == 0
    assert data[:8] == np.array([1.0, 2.0], "<f4").tobytes()
    assert data[n["offset"]:n["offset"] + 6] == np.arange(3, dtype="<i2").tobytes()
    assert (PREFIX.size + len(blob[PREFIX.size:]) - len(data) - 32) % 64 == 0  # aligned data
    assert header["root"]["items"][0] == ["w", {"type": "tensor", "array": 0,
                                                "device": "cpu:0", "requires_grad": False}]


# ---- damaged files -------------------------------------------------------------------------
def test_truncated_files(small):
    path, _ = small
    blob = _read(path)
    json_len = PREFIX.unpack_from(blob)[2]
    for cut in [1, 5, 8, 12, 27, 28, PREFIX.size + json_len // 2, PREFIX.size + json_len + 3,
                len(blob) - 32, len(blob) - 1]:
        _write(path, blob[:cut])
        with pytest.raises(lk.CheckpointError, match="truncated at byte") as info:
            lk.load(path)
        assert path in str(info.value) and f"byte {cut} of" in str(info.value)
    _write(path, blob[:PREFIX.size + 3])
    with pytest.raises(lk.CheckpointError, match=f"byte {PREFIX.size + 3} of {len(blob)}"):
        lk.load(path)
    _write(path, b"")
    with pytest.raises(lk.CheckpointError, match="empty"):
        lk.load(path)


def test_every_flipped_byte_is_caught(small):
    path, _ = small
    blob = _read(path)
    for i in range(len(blob)):
        bad = bytearray(blob)
        bad[i] ^= 1 << (i % 8)           # every bit position, spread over the bytes
        _write(path, bad)
        with pytest.raises(lk.CheckpointError) as info:
            lk.load(path)
        assert path in str(info.value)


def test_checksum_mismatch_message(small):
    path, _ = small
    bad = bytearray(_read(path))
    bad[-40] ^= 0xFF     # in the array data
    _write(path, bad)
    with pytest.raises(lk.CheckpointError, match="checksum") as info:
        lk.load(path)
    assert path in str(info.value) and "corrupted" in str(info.value)


def test_trailing_bytes(small):
    path, _ = small
    with open(path, "ab") as f:
        f.write(b"\x00")
    with pytest.raises(lk.CheckpointError, match="1 unexpected bytes after its end"):
        lk.load(path)


@pytest.mark.parametrize("content", [
    b"hello, world\n" * 10,
    pickle.dumps({"w": [1.0, 2.0]}),
    b"PK\x03\x04" + bytes(60),              # a zip file (torch.save's format)
    b"\x93NUMPY" + bytes(60),               # an .npy file
    b"\x89labkix\n" + bytes(60),
])
def test_not_a_checkpoint(ckpt, content):
    _write(ckpt, content)
    with pytest.raises(lk.CheckpointError, match="not a labkit checkpoint") as info:
        lk.load(ckpt)
    assert ckpt in str(info.value)


@pytest.mark.parametrize("version", [0, 2, 2**32 - 1])
def test_unsupported_version(ckpt, version):
    _craft(ckpt, {"format": "labkit-checkpoint", "arrays": [], "root": 1}, version=version)
    with pytest.raises(lk.CheckpointError, match=f"unsupported checkpoint format version "
                                                 f"{version}") as info:
        lk.load(ckpt)
    assert ckpt in str(info.value)
    assert ("upgrade labkit" in str(info.value)) == (version > 1)


def test_load_errors_are_value_errors_and_labkit_errors(small):
    path, _ = small
    _write(path, b"nope")
    with pytest.raises(ValueError):
        lk.load(path)
    with pytest.raises(lk.LabkitError):
        lk.load(path)


# ---- crafted files: loading never imports or calls anything --------------------------------
def _header(root, arrays=()):
    return {"format": "labkit-checkpoint", "arrays": list(arrays), "root": root}


_F32 = {"dtype": "float32", "shape": [2], "offset": 0, "nbytes": 8}
CRAFTED = {
    "class node": _header({"type": "class", "module": "os", "name": "system"}),
    "reduce node": _header([{"__reduce__": ["os.system", ["echo pwned"]]}]),
    "object hook": _header({"__class__": "collections.OrderedDict", "items": []}),
    "python expression": _header({"type": "float", "value": "__import__('os').getpid()"}),
    "extra field": _header({"type": "tuple", "items": [], "factory": "os.system"}),
    "dtype object": _header({"type": "ndarray", "array": 0},
                            [{"dtype": "object", "shape": [1], "offset": 0, "nbytes": 8}]),
    "dtype as class path": _header({"type": "ndarray", "array": 0},
                                   [{"dtype": "numpy.float32", "shape": [2], "offset": 0,
                                     "nbytes": 8}]),
    "missing array": _header({"type": "tensor", "array": 3, "device": "cpu:0",
                              "requires_grad": False}, [_F32]),
    "array past the data": _header({"type": "ndarray", "array": 0},
                                   [dict(_F32, offset=4)]),
    "nbytes disagrees with shape": _header({"type": "ndarray", "array": 0},
                                           [dict(_F32, shape=[3])]),
    "negative shape": _header({"type": "ndarray", "array": 0},
                              [dict(_F32, shape=[-2], nbytes=-8)]),
    "huge shape": _header({"type": "ndarray", "array": 0},
                          [dict(_F32, shape=[2**40, 2**40])]),
    "integer requires grad": _header({"type": "tensor", "array": 0, "device": "cpu:0",
                                      "requires_grad": True},
                                     [dict(_F32, dtype="int32")]),
    "device not a name": _header({"type": "tensor", "array": 0, "device": {"type": "class"},
                                  "requires_grad": False}, [_F32]),
    "uint8 tensor": _header({"type": "tensor", "array": 0, "device": "cpu:0",
                             "requires_grad": False},
                            [dict(_F32, dtype="uint8", shape=[8])]),
    "duplicate key": _header({"type": "dict", "items": [["a", 1], ["a", 2]]}),
    "int and bool key clash": _header({"type": "dict", "items": [[1, 1], [True, 2]]}),
    "key is a list": _header({"type": "dict", "items": [[["a"], 1]]}),
    "dict item not a pair": _header({"type": "dict", "items": [["a", 1, 2]]}),
    "wrong format name": {"format": "pickle", "arrays": [], "root": None},
    "missing root": {"format": "labkit-checkpoint", "arrays": []},
    "deep nesting": _header(json.loads("[" * 300 + "]" * 300)),
}


@pytest.mark.parametrize("name", list(CRAFTED))
def test_crafted_description_is_rejected_without_importing(ckpt, name, monkeypatch):
    _craft(ckpt, CRAFTED[name], data=np.array([1.0, 2.0], "<f4").tobytes())
    imports = []
    real_import = builtins.__import__

    def spy(module, *args, **kwargs):
        imports.append(module)
        return real_import(module, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", spy)
    with pytest.raises(lk.CheckpointError) as info:
        lk.load(ckpt)
    monkeypatch.undo()
    assert ckpt in str(info.value) and "not a valid labkit checkpoint" in str(info.value)
    assert [m for m in imports if not m.startswith("numpy")] == []   # numpy's own internals


@pytest.mark.parametrize("raw", [b"{not json", b'{"format": NaN}', b"\xff\xfe", b"[" * 5000])
def test_description_that_is_not_json(ckpt, raw):
    _craft(ckpt, None, raw_json=raw)
    with pytest.raises(lk.CheckpointError, match="not valid JSON"):
        lk.load(ckpt)


def test_valid_load_imports_nothing(small, monkeypatch):
    path, obj = small

    imports = []
    real_import = builtins.__import__

    def spy(module, *args, **kwargs):
        imports.append(module)
        return real_import(module, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", spy)
    back = lk.load(path)
    monkeypatch.undo()
    assert [m for m in imports if not m.startswith("numpy")] == []
    assert back["step"] == 7 and back["names"] == ("a", "b")


def test_pickle_payload_in_array_data_is_just_bytes(ckpt):
    payload = pickle.dumps(print)
    payload += bytes(-len(payload) % 8)
    arrays = [{"dtype": "uint8", "shape": [len(payload)], "offset": 0, "nbytes": len(payload)}]
    _craft(ckpt, _header({"type": "ndarray", "array": 0}, arrays), data=payload)
    back = lk.load(ckpt)
    assert back.dtype == np.uint8 and back.tobytes() == payload


# ---- what cannot be saved, and atomic writes ----------------------------------------------
class Opaque:
    pass


@pytest.mark.parametrize("obj, where, kind", [
    ({"layers": [lk.ones(1), {"w": 1}, Opaque()]}, "obj['layers'][2]", "Opaque"),
    ({"fn": print}, "obj['fn']", "builtin_function_or_method"),
    ([{1, 2}], "obj[0]", "set"),
    ({"a": (1, b"raw")}, "obj['a'][1]", "bytes"),
    ({"a": np.array(["s"])}, "obj['a']", "ndarray"),
    ({"a": np.array([None], dtype=object)}, "obj['a']", "ndarray"),
    ({"p": collections.namedtuple("P", "x y")(1, 2)}, "obj['p']", "P"),
    ({"k": {(1, 2): 3}}, "obj['k']", "tuple"),
    (lk.devices.get_device("cpu:0"), "obj", "Device"),
])
def test_unsupported_objects_name_the_key_path_and_type(ckpt, obj, where, kind):
    with pytest.raises(lk.CheckpointError) as info:
        lk.save(obj, ckpt)
    msg = str(info.value)
    assert where in msg and kind in msg, msg
    assert not os.path.exists(ckpt)
    assert os.listdir(os.path.dirname(ckpt)) == []


def test_reference_cycle_and_depth_are_refused(ckpt):
    loop = {"a": []}
    loop["a"].append(loop)
    with pytest.raises(lk.CheckpointError, match=r"obj\['a'\]\[0\].*contains itself"):
        lk.save(loop, ckpt)
    deep = []
    for _ in range(500):
        deep = [deep]
    with pytest.raises(lk.CheckpointError, match="nested more than"):
        lk.save(deep, ckpt)
    shared = [1]
    lk.save([shared, shared], ckpt)             # shared, but not a cycle
    assert lk.load(ckpt) == [[1], [1]]


def test_save_needs_a_path(ckpt):
    with open(ckpt, "wb") as f, pytest.raises(TypeError, match="file path"):
        lk.save(lk.ones(2), f)


def _assert_untouched(path, before):
    assert _read(path) == before
    assert os.listdir(os.path.dirname(path)) == [os.path.basename(path)]


def test_failed_replace_leaves_previous_file(small, monkeypatch):
    path, _ = small
    before = _read(path)

    def broken_replace(src, dst):
        raise OSError("disk on fire")
    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk on fire"):
        lk.save({"w": lk.zeros(1000)}, path)
    monkeypatch.undo()
    _assert_untouched(path, before)
    assert lk.load(path)["step"] == 7


@pytest.mark.parametrize("exc", [OSError("no space left on device"), KeyboardInterrupt()])
def test_failure_midway_through_writing_leaves_previous_file(small, monkeypatch, exc):
    path, _ = small
    before = _read(path)
    calls = []
    real_write = checkpoint._write

    def flaky(f, digest, data):
        calls.append(len(data))
        if len(calls) == 3:            # after the prefix and the description
            raise exc
        real_write(f, digest, data)
    monkeypatch.setattr(checkpoint, "_write", flaky)
    with pytest.raises(type(exc)):
        lk.save({"a": lk.ones(10), "b": lk.ones(10)}, path)
    monkeypatch.undo()
    assert len(calls) == 3
    _assert_untouched(path, before)


def test_failed_fsync_leaves_previous_file(small, monkeypatch):
    path, _ = small
    before = _read(path)

    def broken_fsync(fd):
        raise OSError("I/O error")
    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="I/O error"):
        lk.save([1, 2, 3], path)
    monkeypatch.undo()
    _assert_untouched(path, before)


def test_unsupported_object_leaves_previous_file(small):
    path, _ = small
    before = _read(path)
    with pytest.raises(lk.CheckpointError):
        lk.save({"w": lk.ones(3), "bad": Opaque()}, path)
    _assert_untouched(path, before)


def test_successful_save_replaces_and_syncs(small, monkeypatch):
    path, _ = small
    synced = []
    real_fsync = os.fsync

    def spy(fd):
        synced.append(fd)
        real_fsync(fd)
    monkeypatch.setattr(os, "fsync", spy)
    lk.save({"new": True}, path)
    monkeypatch.undo()
    assert len(synced) == 2          # the file, then its directory
    assert lk.load(path) == {"new": True}
    assert os.listdir(os.path.dirname(path)) == [os.path.basename(path)]


def test_save_and_load_take_path_objects(tmp_path):
    path = tmp_path / "p.lk"
    lk.save((1, "two"), path)
    assert lk.load(path) == (1, "two")
