"""lk.save / lk.load: round trips, safetensors files that run no code on load, and atomic writes.

The file layout is spelled out here independently of the implementation (see ``_craft`` for
safetensors files and ``_craft_v1`` for labkit's first format, which still loads), so a change to
the on-disk format shows up as a failing test.
"""
import builtins
import collections
import hashlib
import io
import json
import math
import os
import pickle
import struct
import threading

import numpy as np
import pytest
import safetensors.numpy

import labkit as lk
from labkit.tensor import checkpoint

V1_MAGIC = b"\x89labkit\n"
V1_PREFIX = struct.Struct("<8sIQQ")   # magic, version, json_len, data_len; then json, data, sha256
# what numpy imports itself while loading: its own modules, and mmap and os.path (np.memmap)
NUMPY_OWN = ("numpy", "mmap", "os.path")


# ---- helpers -------------------------------------------------------------------------------
def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def _parts(path):
    """(safetensors header without __metadata__, metadata, data bytes) of a safetensors file."""
    blob = _read(path)
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    return header, header.pop("__metadata__", None), blob[8 + n:]


def _structure(path):
    return json.loads(_parts(path)[1]["labkit.structure"])


def _raw_safetensors(path, header, data=b""):
    """A safetensors file from a header (a dict, or JSON text as bytes) and the data bytes."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    _write(path, len(text).to_bytes(8, "little") + text + data)


def _checksum(structure, tensors):
    """labkit's checksum as the module docstring describes it: SHA-256 of the JSON list
    [format, version, structure, [[key, dtype, shape]...]] (keys sorted), then the bytes."""
    keys = sorted(tensors)
    table = [[k, tensors[k][0], list(tensors[k][1])] for k in keys]
    digest = hashlib.sha256(json.dumps(["labkit-checkpoint", "2", structure, table],
                                       separators=(",", ":")).encode())
    for k in keys:
        digest.update(tensors[k][2])
    return digest.hexdigest()


def _craft(path, root, tensors=None, metadata=None, raw_structure=None):
    """A labkit safetensors file with a *valid* checksum, so that only its content can be wrong.
    ``tensors``: key -> (safetensors dtype, shape, bytes)."""
    tensors = tensors or {}
    structure = raw_structure if raw_structure is not None else json.dumps(root)
    meta = {"format": "labkit-checkpoint", "labkit.version": "2",
            "labkit.structure": structure, "labkit.sha256": _checksum(structure, tensors)}
    meta.update(metadata or {})
    header, data = {"__metadata__": {k: v for k, v in meta.items() if v is not None}}, b""
    for key, (dtype, shape, raw) in tensors.items():
        header[key] = {"dtype": dtype, "shape": list(shape),
                       "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    _raw_safetensors(path, header, data)


def _craft_v1(path, header, data=b"", version=1, raw_json=None):
    """A file in labkit's first format with a *valid* checksum."""
    text = raw_json if raw_json is not None else json.dumps(header).encode()
    body = V1_PREFIX.pack(V1_MAGIC, version, len(text), len(data)) + text + data
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
    return str(tmp_path / "model.safetensors")


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
    np.testing.assert_array_equal(back["view"].detach().numpy(), w.detach().numpy().T)
    assert back["w"].requires_grad and back["w"].is_leaf and back["w"].grad is None
    assert back["y"].is_leaf     # history is never saved, only values
    (back["w"] * back["w"]).sum().backward()
    np.testing.assert_allclose(back["w"].grad.detach().numpy(), 2 * w.detach().numpy())


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


def _tensors_of(path):
    """key -> (dtype, shape, bytes) of a safetensors file, to craft a changed copy of it."""
    header, _, data = _parts(path)
    return {k: (e["dtype"], e["shape"], data[e["data_offsets"][0]:e["data_offsets"][1]])
            for k, e in header.items()}


def test_gpu_checkpoint_loads_on_cpu_with_device_cpu(ckpt):
    lk.save({"w": lk.ones(2, 3)}, ckpt)
    root = _structure(ckpt)
    root["items"][0][1]["device"] = "gpu:0"   # as if saved on a GPU
    _craft(ckpt, root, _tensors_of(ckpt))
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
    np.testing.assert_array_equal(back.detach().numpy(), t.detach().numpy())
    assert lk.load(ckpt, device="gpu:0")["t"].device.name == "gpu:0"
    safetensors.numpy.save_file({"x": np.arange(6, dtype=np.float32).reshape(2, 3)}, ckpt)
    x = lk.load(ckpt, device="gpu:0")["x"]
    assert x.device.name == "gpu:0" and x.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_format_on_disk(ckpt):
    lk.save({"w": lk.tensor([1.0, 2.0]), "n": np.arange(3, dtype=np.int16),
             "opt": {"state": {0: {"m": lk.zeros(1)}}, "lr": 0.5}}, ckpt)
    blob = _read(ckpt)
    n = int.from_bytes(blob[:8], "little")
    assert blob[8:9] == b"{" and (8 + n) % 8 == 0
    header, meta, data = _parts(ckpt)
    assert header == {
        "w": {"dtype": "F32", "shape": [2], "data_offsets": header["w"]["data_offsets"]},
        "n": {"dtype": "I16", "shape": [3], "data_offsets": header["n"]["data_offsets"]},
        "opt.state.0.m": {"dtype": "F32", "shape": [1],
                          "data_offsets": header["opt.state.0.m"]["data_offsets"]}}
    w0, w1 = header["w"]["data_offsets"]
    n0, n1 = header["n"]["data_offsets"]
    assert data[w0:w1] == np.array([1.0, 2.0], "<f4").tobytes()
    assert data[n0:n1] == np.arange(3, dtype="<i2").tobytes()
    assert set(meta) == {"format", "labkit.version", "labkit.structure", "labkit.sha256"}
    assert meta["format"] == "labkit-checkpoint" and meta["labkit.version"] == "2"
    assert meta["labkit.sha256"] == _checksum(meta["labkit.structure"], _tensors_of(ckpt))
    root = json.loads(meta["labkit.structure"])
    assert root["items"][0] == ["w", {"type": "tensor", "array": "w", "device": "cpu:0",
                                      "requires_grad": False}]
    assert root["items"][1] == ["n", {"type": "ndarray", "array": "n"}]


def test_state_dict_reads_with_safetensors(ckpt):
    model = lk.nn.Sequential(lk.nn.Linear(3, 4), lk.nn.ReLU(), lk.nn.Linear(4, 2))
    state = model.state_dict()
    lk.save(state, ckpt)
    back = safetensors.numpy.load_file(ckpt)
    assert sorted(back) == sorted(state)
    for key, t in state.items():
        np.testing.assert_array_equal(back[key], t.numpy())
        assert back[key].dtype == t.numpy().dtype
    nested = {"model": state, "also": state["0.weight"], "a.b": lk.ones(1), "a": {"b": lk.zeros(1)}}
    lk.save(nested, ckpt)
    keys = sorted(safetensors.numpy.load_file(ckpt))
    assert keys == sorted(["a.b", "a.b.1"] + [f"model.{k}" for k in state])   # tied: stored once
    back = lk.load(ckpt)
    assert back["also"] is back["model"]["0.weight"]
    assert back["a.b"].item() == 1 and back["a"]["b"].item() == 0


def test_files_of_other_tools_load(ckpt):
    arrays = {"emb": np.arange(12, dtype=np.float32).reshape(3, 4), "ids": np.arange(3),
              "mask": np.array([True, False]), "h": np.ones(2, np.float16),
              "b": np.arange(4, dtype=np.uint8), "s": np.array(2.5)}
    safetensors.numpy.save_file(arrays, ckpt)
    back = lk.load(ckpt)
    assert type(back) is dict and sorted(back) == sorted(arrays)
    for key, a in arrays.items():
        assert isinstance(back[key], lk.Tensor) and back[key].device.name == "cpu:0"
        assert back[key].numpy().dtype == a.dtype and back[key].shape == a.shape
        np.testing.assert_array_equal(back[key].numpy(), a)
    assert lk.load(ckpt, device="cpu:0")["emb"].shape == (3, 4)


def test_torch_files_load(ckpt):
    torch = pytest.importorskip("torch")
    import safetensors.torch
    tensors = {"layer.weight": torch.randn(3, 2), "layer.bias": torch.zeros(3),
               "steps": torch.tensor([1, 2], dtype=torch.int64)}
    safetensors.torch.save_file(tensors, ckpt)
    back = lk.load(ckpt)
    assert sorted(back) == sorted(tensors)
    for key, t in tensors.items():
        np.testing.assert_array_equal(back[key].numpy(), t.numpy())
    # bfloat16 is labkit's too (ml_dtypes): PyTorch's bf16 weights load as they are
    w = torch.tensor([1.5, -2.25, 3e-3], dtype=torch.bfloat16)
    safetensors.torch.save_file({"ok": torch.ones(2), "w": w}, ckpt)
    back = lk.load(ckpt)
    assert back["w"].dtype is lk.bfloat16
    assert back["w"].tolist() == w.tolist()


def test_bfloat16_checkpoints_round_trip_and_torch_reads_them(ckpt):
    torch = pytest.importorskip("torch")
    import safetensors.torch
    t = lk.tensor([[1.5, -2.0], [1e-3, 65504.0]], dtype=lk.bfloat16)
    lk.save({"w": t}, ckpt)
    back = lk.load(ckpt)["w"]
    assert back.dtype is lk.bfloat16 and back.tolist() == t.tolist()
    lk.save(lk.nn.Linear(2, 2).to(lk.bfloat16).state_dict(), ckpt)   # a plain tensor dict
    theirs = safetensors.torch.load_file(ckpt)
    assert theirs["weight"].dtype == torch.bfloat16


def test_foreign_dtype_labkit_cannot_hold_is_named(ckpt):
    torch = pytest.importorskip("torch")
    import safetensors.torch
    safetensors.torch.save_file({"x": torch.zeros(3, dtype=torch.float8_e4m3fn)}, ckpt)
    with pytest.raises(lk.CheckpointError, match=r"'x' of dtype F8_E4M3"):
        lk.load(ckpt)


def test_optimizer_state_round_trips_exactly(ckpt):
    lk.manual_seed(0)
    model = lk.nn.Linear(3, 2)
    opt = lk.optim.Adam(model.parameters(), lr=0.1, betas=(0.8, 0.99))
    for _ in range(3):
        opt.zero_grad()
        model(lk.randn(4, 3)).pow(2).sum().backward()
        opt.step()
    state = {"model": model.state_dict(), "optim": opt.state_dict(), "epoch": 2}
    lk.save(state, ckpt)
    back = lk.load(ckpt)
    assert back["optim"]["param_groups"] == state["optim"]["param_groups"]
    assert type(back["optim"]["param_groups"][0]["betas"]) is tuple
    assert list(back["optim"]["state"]) == list(state["optim"]["state"]) == [0, 1]
    for i in (0, 1):
        for key, value in state["optim"]["state"][i].items():
            _same(value, back["optim"]["state"][i][key])
    # training resumed from the checkpoint goes on exactly as the original
    model2 = lk.nn.Linear(3, 2)
    model2.load_state_dict(back["model"])
    opt2 = lk.optim.Adam(model2.parameters(), lr=0.5)
    opt2.load_state_dict(back["optim"])
    x = lk.randn(4, 3)
    for m, o in ((model, opt), (model2, opt2)):
        o.zero_grad()
        m(x).pow(2).sum().backward()
        o.step()
    for a, b in zip(model.parameters(), model2.parameters()):
        assert a.detach().numpy().tobytes() == b.detach().numpy().tobytes()


def test_generator_state_round_trips_exactly(ckpt):
    g = lk.Generator()
    g.manual_seed(5)
    lk.randn(7, generator=g)
    lk.save({"rng": g.get_state()}, ckpt)
    expected = lk.randn(5, generator=g).numpy()
    g2 = lk.Generator()
    g2.set_state(lk.load(ckpt)["rng"])
    assert lk.randn(5, generator=g2).numpy().tobytes() == expected.tobytes()


def test_complex128_arrays_round_trip(ckpt):
    obj = {"c": np.array([[1 + 2j, -3.5j]]), "s": np.complex128(1 - 1j), "z": np.zeros(0, complex)}
    lk.save(obj, ckpt)
    back = lk.load(ckpt)
    for key in ("c", "z"):
        assert back[key].dtype == np.complex128 and back[key].shape == obj[key].shape
        np.testing.assert_array_equal(back[key], obj[key])
    assert type(back["s"]) is np.complex128 and back["s"] == obj["s"]
    raw = safetensors.numpy.load_file(ckpt)
    assert raw["c"].dtype == np.float64 and raw["c"].shape == (1, 2, 2)
    assert _structure(ckpt)["items"][0][1] == {"type": "ndarray", "array": "c",
                                               "dtype": "complex128"}


def _memmapped(array):
    while array is not None:
        if isinstance(array, np.memmap):
            return True
        array = array.base
    return False


def test_load_with_mmap_maps_the_file_and_never_writes_it(ckpt, monkeypatch):
    lk.save({"w": lk.ones(1000), "n": np.arange(5)}, ckpt)
    before = _read(ckpt)
    reads = []
    real_open = builtins.open

    def spy(*args, **kwargs):          # lk.load reads the header, never the data
        f = real_open(*args, **kwargs)
        real_read, real_readinto = f.read, f.readinto
        f.read = lambda n=-1: reads.append(n) or real_read(n)
        f.readinto = lambda b: reads.append(len(b)) or real_readinto(b)
        return f
    monkeypatch.setattr(builtins, "open", spy)
    back = lk.load(ckpt, mmap=True)
    monkeypatch.undo()
    assert all(0 <= n < 1000 for n in reads), reads
    w = back["w"]
    assert _memmapped(np.asarray(w)) and _memmapped(back["n"])
    w.add_(1)
    np.asarray(w)[0] = 7
    back["n"][:] = -1
    assert w[0].item() == 7 and w[1].item() == 2
    assert _read(ckpt) == before
    again = lk.load(ckpt)
    assert again["w"][0].item() == 1 and again["n"].tolist() == [0, 1, 2, 3, 4]


def test_loaded_tensors_keep_their_values_when_the_file_is_overwritten_or_cut(ckpt, tmp_path):
    other = str(tmp_path / "other.safetensors")
    lk.save({"w": lk.ones(1000)}, ckpt)
    lk.save({"w": lk.full((1000,), 5.0)}, other)
    back = lk.load(ckpt)
    model = lk.nn.Linear(1000, 1)
    model.load_state_dict({"weight": lk.load(ckpt)["w"].reshape(1, 1000),
                           "bias": lk.zeros(1)}, assign=True)
    assert not _memmapped(np.asarray(back["w"]))
    _write(ckpt, _read(other))                  # `cp other ck` overwrites the file in place
    assert back["w"].sum().item() == 1000 and model.weight.sum().item() == 1000
    with open(ckpt, "r+b") as f:                # truncating it does not touch them either
        f.truncate(100)
    assert back["w"].sum().item() == 1000 and model.weight.sum().item() == 1000


def test_tensors_loaded_with_mmap_follow_the_file(ckpt, tmp_path):
    other = str(tmp_path / "other.safetensors")
    lk.save({"w": lk.ones(1000)}, ckpt)
    lk.save({"w": lk.full((1000,), 5.0)}, other)
    back = lk.load(ckpt, mmap=True)
    _write(ckpt, _read(other))
    assert back["w"].sum().item() == 5000       # as documented: mmap=True follows the file


def test_a_file_changed_while_it_loads_is_refused(ckpt, monkeypatch):
    lk.save({"w": lk.ones(10)}, ckpt)
    real = checkpoint._read_whole

    def replaced_meanwhile(path, size, head, fail):
        lk.save({"v": lk.zeros(10)}, path)
        return real(path, size, head, fail)
    monkeypatch.setattr(checkpoint, "_read_whole", replaced_meanwhile)
    with pytest.raises(lk.CheckpointError, match="changed while it was being loaded"):
        lk.load(ckpt)


def test_first_format_still_loads(ckpt):
    arrays = [{"dtype": "float32", "shape": [2], "offset": 0, "nbytes": 8},
              {"dtype": "complex128", "shape": [1], "offset": 64, "nbytes": 16},
              {"dtype": "bool", "shape": [2], "offset": 128, "nbytes": 2}]
    data = np.array([1.0, 2.0], "<f4").tobytes() + bytes(56) + \
        np.array([1 + 2j], "<c16").tobytes() + bytes(48) + b"\x01\x00"
    root = {"type": "dict", "items": [
        ["w", {"type": "tensor", "array": 0, "device": "cpu:0", "requires_grad": True}],
        ["tied", {"type": "tensor", "array": 0, "device": "cpu:0", "requires_grad": True}],
        ["c", {"type": "ndarray", "array": 1}], ["m", {"type": "ndarray", "array": 2}],
        ["step", 7], ["betas", {"type": "tuple", "items": [0.9, {"type": "float",
                                                                  "value": "inf"}]}]]}
    _craft_v1(ckpt, _header(root, arrays), data=data)
    back = lk.load(ckpt)
    assert back["w"].tolist() == [1.0, 2.0] and back["w"].requires_grad
    assert back["tied"] is back["w"]
    assert back["c"].tolist() == [1 + 2j] and back["m"].tolist() == [True, False]
    assert back["step"] == 7 and back["betas"] == (0.9, math.inf)


# ---- damaged files -------------------------------------------------------------------------
def test_truncated_files(small):
    path, _ = small
    blob = _read(path)
    n = int.from_bytes(blob[:8], "little")
    for cut in [1, 5, 8, 12, 27, 8 + n // 2, 8 + n - 1, 8 + n, 8 + n + 3, len(blob) - 1]:
        _write(path, blob[:cut])
        with pytest.raises(lk.CheckpointError, match="truncated at byte") as info:
            lk.load(path)
        assert path in str(info.value) and f"byte {cut} of" in str(info.value)
    _write(path, blob[:8 + n + 3])
    with pytest.raises(lk.CheckpointError, match=f"byte {8 + n + 3} of {len(blob)}"):
        lk.load(path)
    _write(path, blob[:20])
    with pytest.raises(lk.CheckpointError, match=f"byte 20 of at least {8 + n}"):
        lk.load(path)
    _write(path, b"")
    with pytest.raises(lk.CheckpointError, match="empty"):
        lk.load(path)


def test_truncated_first_format_file(ckpt):
    _craft_v1(ckpt, _header([1, 2]))
    blob = _read(ckpt)
    for cut in [1, 5, 8, 12, 27, 28, len(blob) - 32, len(blob) - 1]:
        _write(ckpt, blob[:cut])
        with pytest.raises(lk.CheckpointError, match=f"truncated at byte {cut} of"):
            lk.load(ckpt)


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
    bad[-3] ^= 0xFF      # in the array data
    _write(path, bad)
    with pytest.raises(lk.CheckpointError, match="checksum") as info:
        lk.load(path)
    assert path in str(info.value) and "corrupted" in str(info.value)


@pytest.mark.parametrize("value", ["é" * 64, "", "0" * 64])
def test_checksum_that_does_not_match(ckpt, value):
    _craft(ckpt, [1], metadata={"labkit.sha256": value})
    with pytest.raises(lk.CheckpointError, match="SHA-256 checksum"):
        lk.load(ckpt)


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


@pytest.mark.parametrize("version", ["1", "3", "x"])
def test_unsupported_version(ckpt, version):
    _craft(ckpt, 1, metadata={"labkit.version": version})
    with pytest.raises(lk.CheckpointError, match=f"unsupported checkpoint format version "
                                                 f"'{version}'") as info:
        lk.load(ckpt)
    assert ckpt in str(info.value)
    assert ("upgrade labkit" in str(info.value)) == (version == "3")


@pytest.mark.parametrize("version", [0, 2, 2**32 - 1])
def test_unsupported_first_format_version(ckpt, version):
    _craft_v1(ckpt, {"format": "labkit-checkpoint", "arrays": [], "root": 1}, version=version)
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
    "duplicate key": _header({"type": "dict", "items": [["a", 1], ["a", 2]]}),
    "int and bool key clash": _header({"type": "dict", "items": [[1, 1], [True, 2]]}),
    "key is a list": _header({"type": "dict", "items": [[["a"], 1]]}),
    "dict item not a pair": _header({"type": "dict", "items": [["a", 1, 2]]}),
    "wrong format name": {"format": "pickle", "arrays": [], "root": None},
    "missing root": {"format": "labkit-checkpoint", "arrays": []},
    "deep nesting": _header(json.loads("[" * 300 + "]" * 300)),
}


_W = {"w": ("F32", [2], np.array([1.0, 2.0], "<f4").tobytes())}
_I = {"i": ("I32", [2], np.array([1, 2], "<i4").tobytes())}
_TENSOR = {"type": "tensor", "array": "w", "device": "cpu:0", "requires_grad": False}
CRAFTED_V2 = {      # (structure, tensors, metadata): each with a valid checksum
    "class node": ({"type": "class", "module": "os", "name": "system"}, _W, None),
    "reduce node": ([{"__reduce__": ["os.system", ["echo pwned"]]}], _W, None),
    "object hook": ({"__class__": "collections.OrderedDict", "items": []}, _W, None),
    "python expression": ({"type": "float", "value": "__import__('os').getpid()"}, _W, None),
    "extra field": ({"type": "tuple", "items": [], "factory": "os.system"}, _W, None),
    "missing array": (dict(_TENSOR, array="v"), _W, None),
    "array by index": (dict(_TENSOR, array=0), _W, None),
    "integer requires grad": (dict(_TENSOR, array="i", requires_grad=True), _I, None),
    "device not a name": (dict(_TENSOR, device={"type": "class"}), _W, None),
    "complex mark on float32": ({"type": "ndarray", "array": "w", "dtype": "complex128"}, _W,
                                None),
    "complex mark on a tensor": (dict(_TENSOR, dtype="complex128"), _W, None),
    "other dtype mark": ({"type": "ndarray", "array": "w", "dtype": "object"}, _W, None),
    "npscalar of a vector": ({"type": "npscalar", "array": "w"}, _W, None),
    "duplicate key": ({"type": "dict", "items": [["a", 1], ["a", 2]]}, {}, None),
    "int and bool key clash": ({"type": "dict", "items": [[1, 1], [True, 2]]}, {}, None),
    "key is a list": ({"type": "dict", "items": [[["a"], 1]]}, {}, None),
    "dict item not a pair": ({"type": "dict", "items": [["a", 1, 2]]}, {}, None),
    "deep nesting": (json.loads("[" * 300 + "]" * 300), {}, None),
    "wrong format name": (1, {}, {"format": "pickle"}),
    "missing structure": (1, {}, {"labkit.structure": None}),
    "extra metadata": (1, {}, {"labkit.loader": "os.system"}),
    "bool bytes other than 0 and 1": ({"type": "ndarray", "array": "b"},
                                      {"b": ("BOOL", [2], b"\x01\x02")}, None),
}


def _load_noting_imports(path, monkeypatch):
    """(what lk.load(path) returns or raises, the modules it imports beyond numpy's own)."""
    imports = []
    real_import = builtins.__import__

    def spy(module, *args, **kwargs):
        imports.append(module)
        return real_import(module, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", spy)
    try:
        result = lk.load(path)
    except lk.CheckpointError as exc:
        result = exc
    finally:
        monkeypatch.undo()
    return result, [m for m in imports if not m.startswith(NUMPY_OWN)]


@pytest.mark.parametrize("name", list(CRAFTED_V2))
def test_crafted_structure_is_rejected_without_importing(ckpt, name, monkeypatch):
    root, tensors, metadata = CRAFTED_V2[name]
    _craft(ckpt, root, tensors, metadata)
    error, imports = _load_noting_imports(ckpt, monkeypatch)
    assert isinstance(error, lk.CheckpointError)
    msg = str(error)
    assert ckpt in msg and ("not a valid labkit checkpoint" in msg or
                            "not a valid checkpoint" in msg), msg
    assert imports == []


_E = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
_META = {"format": "labkit-checkpoint"}
CRAFTED_HEADERS = {      # safetensors headers, of labkit files (the metadata says so) or not
    "dtype object": {"x": dict(_E, dtype="object")},
    "dtype as class path": {"__metadata__": _META, "x": dict(_E, dtype="numpy.float32")},
    "offsets past the data": {"x": dict(_E, data_offsets=[4, 12])},
    "offsets disagree with shape": {"__metadata__": _META, "x": dict(_E, shape=[3])},
    "negative shape": {"x": dict(_E, shape=[-2])},
    "huge shape": {"x": dict(_E, shape=[2**40, 2**40])},
    "offsets reversed": {"x": dict(_E, data_offsets=[8, 0])},
    "overlap": {"x": dict(_E, shape=[1], data_offsets=[0, 4]),
                "y": dict(_E, shape=[1], data_offsets=[0, 4])},
    "gap": {"x": dict(_E, shape=[1], data_offsets=[4, 8])},
    "extra entry field": {"x": dict(_E, hook="os.system")},
    "entry not an object": {"x": [0, 8]},
    "metadata not strings": {"__metadata__": {"format": 1}, "x": _E},
    "header a list": [_E],
}


@pytest.mark.parametrize("name", list(CRAFTED_HEADERS))
def test_crafted_header_is_rejected(ckpt, name):
    _raw_safetensors(ckpt, CRAFTED_HEADERS[name], np.array([1.0, 2.0], "<f4").tobytes())
    with pytest.raises(lk.CheckpointError, match="not a valid|not a labkit checkpoint") as info:
        lk.load(ckpt)
    assert ckpt in str(info.value)


@pytest.mark.parametrize("raw", [b"{not json", b'{"x": NaN}', b"{\xff\xfe}",
                                 b'{"x": 1, "x": 2}', b'{"x": ' + b"[" * 5000])
def test_header_that_is_not_json(ckpt, raw):
    _raw_safetensors(ckpt, raw)
    with pytest.raises(lk.CheckpointError, match="not valid JSON"):
        lk.load(ckpt)


@pytest.mark.parametrize("raw", ["{not json", '{"type": NaN}', "[" * 5000])
def test_structure_that_is_not_json(ckpt, raw):
    _craft(ckpt, None, raw_structure=raw)
    with pytest.raises(lk.CheckpointError, match="not valid JSON"):
        lk.load(ckpt)


@pytest.mark.parametrize("name", list(CRAFTED))
def test_crafted_first_format_file_is_rejected_without_importing(ckpt, name, monkeypatch):
    _craft_v1(ckpt, CRAFTED[name], data=np.array([1.0, 2.0], "<f4").tobytes())
    error, imports = _load_noting_imports(ckpt, monkeypatch)
    assert isinstance(error, lk.CheckpointError)
    assert ckpt in str(error) and "not a valid labkit checkpoint" in str(error)
    assert imports == []


@pytest.mark.parametrize("raw", [b"{not json", b'{"format": NaN}', b"\xff\xfe", b"[" * 5000])
def test_first_format_description_that_is_not_json(ckpt, raw):
    _craft_v1(ckpt, None, raw_json=raw)
    with pytest.raises(lk.CheckpointError, match="not valid JSON"):
        lk.load(ckpt)


def test_valid_load_imports_nothing(small, monkeypatch):
    path, obj = small
    back, imports = _load_noting_imports(path, monkeypatch)
    assert imports == []
    assert back["step"] == 7 and back["names"] == ("a", "b")


def test_pickle_payload_in_array_data_is_just_bytes(ckpt):
    payload = pickle.dumps(print)
    payload += bytes(-len(payload) % 8)
    arrays = [{"dtype": "uint8", "shape": [len(payload)], "offset": 0, "nbytes": len(payload)}]
    _craft_v1(ckpt, _header({"type": "ndarray", "array": 0}, arrays), data=payload)
    back = lk.load(ckpt)
    assert back.dtype == np.uint8 and back.tobytes() == payload
    _craft(ckpt, {"type": "ndarray", "array": "p"}, {"p": ("U8", [len(payload)], payload)})
    back = lk.load(ckpt)
    assert back.dtype == np.uint8 and back.tobytes() == payload


# ---- what cannot be saved, and atomic writes ----------------------------------------------
class Opaque:
    pass


@pytest.mark.parametrize("obj, where, kind", [
    ({"layers": [lk.ones(1), {"w": 1}, lambda: 0]}, "obj['layers'][2]", "function"),
    ({"lock": threading.Lock()}, "obj['lock']", "lock"),
    ({"a": np.array(["s"])}, "obj['a']", "ndarray"),
    ({"a": np.array([None], dtype=object)}, "obj['a']", "ndarray"),
    ({"p": collections.namedtuple("P", "x y")(1, 2)}, "obj['p']", "P"),
    ({"k": {(1, 2): 3}}, "obj['k']", "tuple"),
])
def test_unsupported_objects_name_the_key_path_and_type(ckpt, obj, where, kind):
    with pytest.raises(lk.CheckpointError) as info:
        lk.save(obj, ckpt)
    msg = str(info.value)
    assert where in msg and kind in msg, msg
    assert not os.path.exists(ckpt)
    assert os.listdir(os.path.dirname(ckpt)) == []


@pytest.mark.parametrize("obj, names", [
    ({"layers": [lk.ones(1), {"w": 1}, Opaque()]}, f"{__name__}.Opaque"),
    ({"fn": print}, "builtins.print"),
    ([{1, 2}], None), ({"a": (1, b"raw")}, None), (lk.devices.get_device("cpu:0"), None),
    ([lk.nn.Parameter(lk.ones(2)), lk.bfloat16, collections.Counter("aab")], None)])
def test_other_objects_are_pickled_and_load_weights_only_when_allowed(ckpt, obj, names):
    lk.save(obj, ckpt)                   # as torch.save: anything picklable
    if names:                            # PyTorch 2.6+: only allowed globals unless told otherwise
        with pytest.raises(lk.CheckpointError, match=rf"names {names}, which is not an allowed"
                                                     rf".*safe_globals.*weights_only=False"):
            lk.load(ckpt)
    else:                                # containers, tensors, dtypes, devices: allowed
        assert type(lk.load(ckpt)) is type(obj)
    back = lk.load(ckpt, weights_only=False)
    assert type(back) is type(obj)


def test_a_whole_module_saves_and_loads_as_torch_save_does(ckpt):
    model = lk.nn.Sequential(lk.nn.Linear(3, 4), lk.nn.ReLU(), lk.nn.Linear(4, 3))
    model[2].weight = lk.nn.Parameter(model[0].weight.T.clone())
    model.tied = model[0].weight                     # the same tensor twice: stored once
    lk.save(model, ckpt)
    assert sorted(safetensors.numpy.load_file(ckpt)) == ["0.bias", "0.weight", "2.bias",
                                                         "2.weight"]
    with pytest.raises(lk.CheckpointError, match=r"pickled.*weights_only=False"):
        lk.load(ckpt)
    back = lk.load(ckpt, weights_only=False, map_location="cpu")
    x = lk.randn(5, 3)
    assert type(back) is lk.nn.Sequential and back.tied is back[0].weight
    assert isinstance(back[0].weight, lk.nn.Parameter) and back[0].weight.requires_grad
    np.testing.assert_array_equal(back(x).detach().numpy(), model(x).detach().numpy())
    state = lk.load(ckpt, weights_only=False, map_location={"cuda:0": "cpu"})
    assert [n for n, _ in state.named_parameters()] == [n for n, _ in model.named_parameters()]
    with pytest.raises(TypeError, match="map_location"):
        lk.load(ckpt, map_location=lambda storage, loc: storage)


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


def test_save_and_load_take_open_file_objects_as_torch_does(ckpt):
    obj = {"w": lk.arange(6.0).reshape(2, 3), "step": 4, "model": lk.nn.Linear(2, 1)}
    with open(ckpt, "wb") as f:
        lk.save(obj, f)
    with open(ckpt, "rb") as f:
        back = lk.load(f, weights_only=False)
    assert lk.load(ckpt, weights_only=False)["step"] == 4          # the same bytes as a path
    np.testing.assert_array_equal(back["w"].numpy(), obj["w"].numpy())
    assert back["step"] == 4 and type(back["model"]) is lk.nn.Linear
    buffer = io.BytesIO(b"prefix")
    buffer.seek(6)
    lk.save([lk.ones(2, dtype=lk.bfloat16), None], buffer)        # written at the position
    assert buffer.getvalue()[:6] == b"prefix"
    buffer.seek(6)
    tensor, none = lk.load(buffer)                                   # read from the position
    assert tensor.dtype == lk.bfloat16 and none is None
    with pytest.raises(lk.CheckpointError, match="BytesIO"):         # errors name the object
        lk.load(io.BytesIO(b"\x00" * 9))
    with open(ckpt, "rb") as f, pytest.raises(ValueError, match="mmap"):
        lk.load(f, mmap=True)
    with open(ckpt, "r", encoding="latin-1") as f, pytest.raises(TypeError, match="'rb'"):
        lk.load(f)
    with pytest.raises(TypeError, match="file path.*file object"):
        lk.save(lk.ones(2), 3)


def test_a_file_object_save_matches_torch(ckpt):
    """torch.save(obj, f) and torch.load(f): the spelling programs use."""
    torch = pytest.importorskip("torch")
    for library in (torch, lk):
        with open(ckpt, "wb") as f:
            library.save({"x": library.ones(3)}, f)
        with open(ckpt, "rb") as f:
            assert library.load(f)["x"].tolist() == [1.0, 1.0, 1.0]


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

    def flaky(filename, tensors, metadata):          # writes half a file, then fails
        calls.append(filename)
        data = safetensors.numpy.save(tensors, metadata=metadata)
        with open(filename, "wb") as f:
            f.write(data[:len(data) // 2])
        raise exc
    monkeypatch.setattr(checkpoint, "_write_safetensors", flaky)
    with pytest.raises(type(exc)):
        lk.save({"a": lk.ones(10), "b": lk.ones(10)}, path)
    monkeypatch.undo()
    assert len(calls) == 1 and os.path.dirname(calls[0]) == os.path.dirname(path)
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
        lk.save({"w": lk.ones(3), "bad": threading.Lock()}, path)
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

