"""A weights-only ``lk.load`` of a pickled whole model, as PyTorch 2.6+'s ``torch.load``: it builds
the classes allowed with ``labkit.serialization.safe_globals`` / ``add_safe_globals`` (named by
``torch.nn.modules``' paths, ``labkit.nn.modules.rnn.LSTM``), and nothing else is ever imported
or called."""
import builtins
import io
import pickle
import posix
import sys
import types

import numpy as np
import pytest

import labkit as lk
from labkit import serialization


class RNNModel(lk.nn.Module):
    """word_language_model's model, in small."""

    def __init__(self):
        super().__init__()
        self.encoder = lk.nn.Embedding(7, 4)
        self.drop = lk.nn.Dropout(0.5)
        self.rnn = lk.nn.LSTM(4, 5, 2)
        self.decoder = lk.nn.Linear(5, 7)

    def forward(self, x):
        out, _ = self.rnn(self.drop(self.encoder(x)))
        return self.decoder(out)


M = lk.nn.modules
ALLOWED = [RNNModel, M.dropout.Dropout, M.linear.Linear, M.rnn.LSTM, M.sparse.Embedding]


@pytest.fixture(autouse=True)
def no_leftover_globals():
    serialization.clear_safe_globals()
    yield
    serialization.clear_safe_globals()


def saved(obj):
    buffer = io.BytesIO()
    lk.save(obj, buffer)
    return buffer.getvalue()


def test_a_pickled_model_loads_with_its_classes_allowed():
    model = RNNModel().eval()
    data = saved(model)
    with pytest.raises(lk.CheckpointError, match=rf"names {__name__}.RNNModel, which is not an "
                                                 rf"allowed global.*safe_globals\(\[RNNModel\]\)"
                                                 rf".*weights_only=False"):
        lk.load(io.BytesIO(data))
    with serialization.safe_globals(ALLOWED[:-1]):          # Embedding missing: named
        with pytest.raises(lk.CheckpointError, match="names labkit.nn.sparse.Embedding"):
            lk.load(io.BytesIO(data))
    with serialization.safe_globals(ALLOWED):
        back = lk.load(io.BytesIO(data))
    assert type(back) is RNNModel and type(back.rnn) is lk.nn.LSTM and not back.training
    assert isinstance(back.rnn.weight_ih_l0, lk.nn.Parameter)
    x = lk.tensor([[1, 2, 3]])
    np.testing.assert_array_equal(back(x).detach().numpy(), model(x).detach().numpy())
    with pytest.raises(lk.CheckpointError, match="not an allowed global"):
        lk.load(io.BytesIO(data))                           # the block's globals are gone


def test_add_get_and_clear_safe_globals():
    serialization.add_safe_globals([lk.nn.Linear])
    assert serialization.get_safe_globals() == [lk.nn.Linear]
    with serialization.safe_globals([lk.nn.ReLU]):
        assert set(serialization.get_safe_globals()) == {lk.nn.Linear, lk.nn.ReLU}
    assert serialization.get_safe_globals() == [lk.nn.Linear]
    with pytest.raises(RuntimeError), serialization.safe_globals([lk.nn.ReLU]):
        raise RuntimeError                                   # restored on an error too
    assert serialization.get_safe_globals() == [lk.nn.Linear]
    assert type(lk.load(io.BytesIO(saved(lk.nn.Linear(2, 2))))) is lk.nn.Linear
    serialization.add_safe_globals([(lk.nn.ReLU, "old_package.layers.ReLU")])   # saved elsewhere
    assert lk.nn.ReLU in serialization.get_safe_globals()
    serialization.clear_safe_globals()
    assert serialization.get_safe_globals() == []
    with pytest.raises(lk.CheckpointError, match="labkit.nn.linear.Linear"):
        lk.load(io.BytesIO(saved(lk.nn.Linear(2, 2))))
    for bad in ("labkit.nn.Linear", [3], [(lk.nn.ReLU, 3)]):
        with pytest.raises(TypeError, match="safe global"):
            serialization.add_safe_globals(bad)


class Payload:
    def __reduce__(self):
        return posix.system, ("true",)


def test_a_weights_only_load_never_calls_or_imports_what_the_file_names(monkeypatch):
    data = saved({"x": Payload()})                 # names posix.system, called with "true"
    calls = []
    monkeypatch.setattr(posix, "system", lambda command: calls.append(command))
    with pytest.raises(lk.CheckpointError, match="names posix.system"):
        lk.load(io.BytesIO(data))
    assert calls == []
    assert lk.load(io.BytesIO(data), weights_only=False)["x"] is None and calls == ["true"]

    hidden = types.ModuleType("lk_saved_elsewhere")     # a class whose module is gone at load
    exec("class Thing:\n    pass", vars(hidden))
    hidden.Thing.__module__ = hidden.__name__
    monkeypatch.setitem(sys.modules, hidden.__name__, hidden)
    data = saved([hidden.Thing()])
    monkeypatch.delitem(sys.modules, hidden.__name__)
    imports = []
    real_import = builtins.__import__
    monkeypatch.setattr(builtins, "__import__",
                        lambda name, *a, **k: imports.append(name) or real_import(name, *a, **k))
    with pytest.raises(lk.CheckpointError, match="names lk_saved_elsewhere.Thing"):
        lk.load(io.BytesIO(data))
    assert "lk_saved_elsewhere" not in imports and "lk_saved_elsewhere" not in sys.modules


def test_torch_nn_modules_paths_name_labkits_classes():
    import labkit.nn.modules.rnn
    from labkit.nn.modules.linear import NonDynamicallyQuantizableLinear
    assert labkit.nn.modules.rnn.LSTM is lk.nn.LSTM
    assert lk.nn.modules.activation.MultiheadAttention is lk.nn.MultiheadAttention
    assert NonDynamicallyQuantizableLinear is lk.nn.MultiheadAttention(4, 2).out_proj.__class__
    assert lk.nn.modules.Linear is lk.nn.Linear
    assert issubclass(lk.nn.BatchNorm2d, lk.nn.modules.batchnorm._BatchNorm)
    assert lk.nn.modules.module.Module is lk.nn.Module


def test_torch_nn_modules_paths_hold_what_pytorchs_do():
    """Every class PyTorch keeps in torch.nn.modules.X that labkit.nn has is in
    labkit.nn.modules.X, as labkit.nn's own."""
    torch = pytest.importorskip("torch")
    checked = 0
    for name in lk.nn.modules._SOURCES:
        theirs = getattr(torch.nn.modules, name)
        for cls in getattr(theirs, "__all__", ()):
            if hasattr(lk.nn, cls):
                assert getattr(getattr(lk.nn.modules, name), cls) is getattr(lk.nn, cls), \
                    f"labkit.nn.modules.{name}.{cls}"
                checked += 1
    assert checked > 100


@pytest.mark.parametrize("library", ["torch", "labkit"])
def test_the_same_program_loads_a_whole_model_on_both(library):
    """word_language_model's save and load, as it is written, on PyTorch and on labkit."""
    torch = pytest.importorskip("torch") if library == "torch" else lk
    if library == "torch":
        import torch.serialization as serial
    else:
        serial = serialization
    model = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Dropout(0.1))
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    with serial.safe_globals([torch.nn.modules.container.Sequential,
                              torch.nn.modules.sparse.Embedding,
                              torch.nn.modules.dropout.Dropout]):
        back = torch.load(buffer)
    assert [type(m).__name__ for m in back] == ["Embedding", "Dropout"]


def test_public_functions_pickle_by_the_name_they_are_exported_under():
    """A model that holds F.relu (a TransformerEncoderLayer's activation) saves, and its load
    allows F.relu by the object itself, as PyTorch's word_language_model does."""
    F = lk.nn.functional
    for fn in (lk.arange, lk.cat, lk.matmul, F.relu, F.gelu, F.pad, lk.tanh, lk.exp, lk.gt):
        assert pickle.loads(pickle.dumps(fn)) is fn
    model = lk.nn.Sequential(lk.nn.Linear(2, 2))
    model.act = lk.tanh                      # a primitive op held by a model: loads as itself
    with serialization.safe_globals([lk.nn.Sequential, lk.nn.Linear]):
        assert lk.load(io.BytesIO(saved(model))).act is lk.tanh
    layer = lk.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=F.relu)
    data = saved(layer)
    with pytest.raises(lk.CheckpointError, match="names labkit.nn.functional.relu"):
        with serialization.safe_globals([type(layer), M.activation.MultiheadAttention,
                                         M.linear.Linear, M.linear.NonDynamicallyQuantizableLinear,
                                         M.dropout.Dropout, M.normalization.LayerNorm]):
            lk.load(io.BytesIO(data))
    with serialization.safe_globals([type(layer), M.activation.MultiheadAttention, F.relu,
                                     M.linear.Linear, M.linear.NonDynamicallyQuantizableLinear,
                                     M.dropout.Dropout, M.normalization.LayerNorm]):
        back = lk.load(io.BytesIO(data))
    assert back.activation is F.relu


def test_a_pickled_tensor_sets_only_the_slots_its_class_adds(monkeypatch):
    """The tensors inside a pickle are built by labkit: the file names an array, a class that
    must be a Tensor class, and values for the slots that class adds (a Parameter's name),
    never any other attribute (the tensor's own _data)."""
    from labkit.tensor import pickled
    place = {"cpu:0": lk.devices.get_device("cpu:0")}

    def decode(node, weights_only=True):
        return pickled.decode(node, lambda key: np.ones(2, np.float32), place,
                              lambda a, d, r: lk.Tensor._make(a, d, r), {}, "f", "obj",
                              weights_only)
    node = pickled.encode([lk.nn.Parameter(lk.ones(2))], lambda t: "w", "obj")
    assert isinstance(decode(node)[0], lk.nn.Parameter)
    with monkeypatch.context() as m:       # a file that sets the tensor's _data
        m.setattr(pickled, "_extra_slots", lambda cls: ["name", "_data"])
        crafted = pickled.encode([lk.nn.Parameter(lk.ones(2))], lambda t: "w", "obj")
    with pytest.raises(lk.CheckpointError, match="numpy"):     # its array is not allowed
        decode(crafted)
    with pytest.raises(pickle.UnpicklingError, match="slots Parameter adds"):
        decode(crafted, weights_only=False)               # nor _data, even then
