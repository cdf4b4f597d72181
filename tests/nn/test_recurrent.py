"""Recurrent layers and ``nn.utils.rnn`` against PyTorch: packing and padding (values, indices,
gradients), the layers' errors and reprs, dropout between layers, initialisation, and captured
(``lk.function``) forward and backward equal to eager. Outputs of every configuration against
PyTorch's are the ModuleCases of ``tests/nn/cases/recurrent.py``."""
import warnings

import numpy as np
import pytest
import torch

import labkit as lk
from labkit import nn
from labkit.nn.utils import rnn as lrnn
from torch.nn.utils import rnn as trnn


def pair(a):
    """The same float64 values as a labkit and a torch leaf that require grad."""
    return lk.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def close(ours, theirs, **kw):
    theirs = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else theirs
    np.testing.assert_allclose(ours.detach().numpy() if hasattr(ours, "numpy") else ours, theirs,
                               rtol=kw.get("rtol", 1e-12), atol=kw.get("atol", 1e-12))


def backward_both(ours, theirs, rng):
    cot = rng.standard_normal(tuple(theirs.shape))
    (ours * lk.tensor(cot)).sum().backward()
    (theirs * torch.tensor(cot)).sum().backward()


# ---- pad_sequence / pack / unpack against torch ------------------------------------------------
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence_matches_torch(batch_first, side):
    rng = np.random.default_rng(0)
    seqs = [pair(rng.standard_normal((n, 2, 3))) for n in (3, 5, 1)]
    ours = lrnn.pad_sequence([a for a, _ in seqs], batch_first, -1.5, side)
    theirs = trnn.pad_sequence([b for _, b in seqs], batch_first, -1.5, side)
    close(ours, theirs)
    backward_both(ours, theirs, rng)
    for a, b in seqs:
        close(a.grad, b.grad)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("lengths,enforce_sorted", [([5, 3, 3, 1], True), ([2, 5, 1, 4], False),
                                                    ([4, 2, 4, 4], False), ([3], True)])
def test_pack_and_unpack_match_torch(batch_first, lengths, enforce_sorted):
    rng = np.random.default_rng(1)
    shape = (len(lengths), 5, 3) if batch_first else (5, len(lengths), 3)
    x, tx = pair(rng.standard_normal(shape))
    ours = lrnn.pack_padded_sequence(x, lengths, batch_first, enforce_sorted)
    theirs = trnn.pack_padded_sequence(tx, lengths, batch_first, enforce_sorted)
    assert isinstance(ours, lrnn.PackedSequence) and isinstance(ours, tuple)
    close(ours.data, theirs.data)
    assert ours.batch_sizes.tolist() == theirs.batch_sizes.tolist()
    assert ours.batch_sizes.dtype == lk.int64 and ours.batch_sizes.device.type == "cpu"
    for name in ("sorted_indices", "unsorted_indices"):
        mine, ref = getattr(ours, name), getattr(theirs, name)
        assert (mine is None) == (ref is None)
        if ref is not None and len(set(lengths)) == len(lengths):   # ties: any order is right
            assert mine.tolist() == ref.tolist()
    padded, lens = lrnn.pad_packed_sequence(ours, batch_first, padding_value=7.0, total_length=6)
    tpadded, tlens = trnn.pad_packed_sequence(theirs, batch_first, padding_value=7.0,
                                              total_length=6)
    close(padded, tpadded)
    assert lens.tolist() == tlens.tolist() == lengths and lens.dtype == lk.int64
    backward_both(padded, tpadded, rng)
    close(x.grad, tx.grad)
    # and unpacked as a list
    for a, b in zip(lrnn.unpack_sequence(ours), trnn.unpack_sequence(theirs)):
        close(a, b)
    for a, b in zip(lrnn.unpad_sequence(padded, lk.tensor(lengths), batch_first),
                    trnn.unpad_sequence(tpadded, torch.tensor(lengths), batch_first)):
        close(a, b)


def test_pack_sequence_matches_torch():
    rng = np.random.default_rng(2)
    seqs = [rng.standard_normal((n, 2)) for n in (2, 4, 1)]
    ours = lrnn.pack_sequence([lk.tensor(s) for s in seqs], enforce_sorted=False)
    theirs = trnn.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    close(ours.data, theirs.data)
    assert ours.batch_sizes.tolist() == theirs.batch_sizes.tolist()
    assert ours.sorted_indices.tolist() == theirs.sorted_indices.tolist()
    with pytest.raises(lk.ShapeError, match="sorted in decreasing order"):
        lrnn.pack_sequence([lk.tensor(s) for s in seqs])


def test_packed_sequence_object():
    p = lrnn.pack_padded_sequence(lk.ones(3, 2), lk.tensor([3, 1]))
    data, sizes, sorted_indices, unsorted_indices = p           # a namedtuple, as PyTorch's
    assert sorted_indices is None and unsorted_indices is None
    assert p.double().data.dtype == lk.float64 and p.double().batch_sizes is p.batch_sizes
    q = lrnn.PackedSequence(p.data, [2, 1, 1], lk.tensor([1, 0]))
    assert q.unsorted_indices.tolist() == [1, 0] and q.batch_sizes.dtype == lk.int64
    assert not p.is_cuda


def test_packing_errors_say_what_to_do():
    x = lk.zeros(4, 3, 2)
    with pytest.raises(lk.ShapeError, match=r"enforce_sorted=False"):
        lrnn.pack_padded_sequence(x, [1, 4, 2])
    with pytest.raises(lk.ShapeError, match=r"greater than 0"):
        lrnn.pack_padded_sequence(x, [4, 2, 0])
    with pytest.raises(lk.ShapeError, match=r"len\(lengths\).*got 2 \(batch_size=3\).*batch_f"):
        lrnn.pack_padded_sequence(x, [4, 2])
    with pytest.raises(lk.ShapeError, match=r"length of 5 does not fit.*4 steps"):
        lrnn.pack_padded_sequence(x, [5, 2, 1])
    with pytest.raises(ValueError, match=r"longest.*total_length=2.*being 4"):
        lrnn.pad_packed_sequence(lrnn.pack_padded_sequence(x, [4, 2, 1]), total_length=2)
    with pytest.raises(lk.ShapeError, match="empty list"):
        lrnn.pad_sequence([])
    with pytest.raises(lk.ShapeError, match="same trailing"):
        lrnn.pad_sequence([lk.ones(2, 3), lk.ones(2, 4)])

    @lk.function
    def packs(x, lengths):
        return lrnn.pack_padded_sequence(x, lengths).data
    with pytest.raises(lk.ShapeError, match=r"symbolic.*Python list"):
        packs(x, lk.tensor([4, 2, 1]))
    assert packs(x, [4, 2, 1]).shape == (7, 2)          # a list of lengths traces fine


# ---- the layers ---------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda nn: nn.RNN(3, 4, nonlinearity="relu", bidirectional=True),
    lambda nn: nn.LSTM(3, 4, 2, proj_size=2, bias=False, batch_first=True, dropout=0.5),
    lambda nn: nn.GRU(3, 4),
    lambda nn: nn.RNNCell(3, 4, bias=False, nonlinearity="relu"),
    lambda nn: nn.LSTMCell(3, 4), lambda nn: nn.GRUCell(3, 4, bias=False),
])
def test_repr_state_dict_and_weights_as_torch(make):
    ours, theirs = make(nn), make(torch.nn)
    assert repr(ours) == repr(theirs)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    if hasattr(theirs, "all_weights"):
        assert [[tuple(p.shape) for p in w] for w in ours.all_weights] == \
            [[tuple(p.shape) for p in w] for w in theirs.all_weights]
        ours.flatten_parameters()


def test_initialisation_is_uniform_in_one_over_sqrt_hidden():
    lk.manual_seed(0)
    for p in nn.GRU(8, 16, bidirectional=True).parameters():
        values = p.detach().numpy()
        assert np.abs(values).max() <= 0.25 and np.abs(values).max() > 0.2
    big = nn.LSTM(50, 100).weight_ih_l0.detach().numpy()
    assert abs(big.mean()) < 0.005 and abs(big.std() - 0.1 / np.sqrt(3)) < 0.002


def test_dropout_between_layers_but_not_after_the_last():
    torch.manual_seed(0)
    theirs = torch.nn.GRU(3, 4, num_layers=2, dropout=1.0).double()
    ours = nn.GRU(3, 4, num_layers=2, dropout=1.0)
    ours.load_state_dict({k: lk.tensor(v.detach().numpy()) for k, v in
                          theirs.state_dict().items()})
    x = np.random.default_rng(3).standard_normal((5, 2, 3))
    out, h = ours(lk.tensor(x))                       # train mode: layer 2 sees zeros
    tout, th = theirs(torch.tensor(x))
    close(out, tout)
    close(h, th)
    ours.eval()
    assert not np.allclose(ours(lk.tensor(x))[0].detach().numpy(), out.detach().numpy())
    lk.manual_seed(1)
    ours.train()
    ours.dropout = 0.5
    a = ours(lk.tensor(x))[0].detach().numpy()
    lk.manual_seed(1)
    np.testing.assert_array_equal(a, ours(lk.tensor(x))[0].detach().numpy())      # seeded masks


def test_constructor_errors_as_torch():
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="only supported for LSTM"):
        nn.RNNBase("GRU", 3, 4, proj_size=2)
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nn.GRU(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="hidden_size must be greater than zero"):
        nn.RNN(3, 0)
    with pytest.raises(ValueError, match="num_layers must be greater than zero"):
        nn.GRU(3, 4, num_layers=0)
    with pytest.raises(ValueError, match="Select from 'tanh' or 'relu'"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="'tanh' or 'relu'"):
        nn.RNNCell(3, 4, nonlinearity="sigmoid")
    with pytest.raises(TypeError, match="hidden_size should be of type int"):
        nn.LSTM(3, 4.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nn.LSTM(3, 4, dropout=0.2)
    assert "num_layers greater than 1" in str(caught[0].message)


def test_call_errors_name_shapes_and_layout():
    gru = nn.GRU(3, 4, num_layers=2, bidirectional=True, batch_first=True)
    with pytest.raises(lk.ShapeError, match=r"input_size=3.*\(N, L, input_size\); batch_first"):
        gru(lk.zeros(2, 5, 4))
    with pytest.raises(lk.ShapeError, match=r"must have shape \(4, 2, 4\).*got.*\(2, 2, 4\)"):
        gru(lk.zeros(2, 5, 3), lk.zeros(2, 2, 4))
    with pytest.raises(lk.ShapeError, match="2-D .* or 3-D"):
        gru(lk.zeros(1, 2, 5, 3))
    with pytest.raises(lk.ShapeError, match="unbatched 2-D input.*2-D"):
        gru(lk.zeros(5, 3), lk.zeros(4, 1, 4))
    lstm = nn.LSTM(3, 6, proj_size=2)
    with pytest.raises(lk.ShapeError, match=r"h_0 must have shape \(1, 2, 2\).*proj_size"):
        lstm(lk.zeros(5, 2, 3), (lk.zeros(1, 2, 6), lk.zeros(1, 2, 6)))
    with pytest.raises(TypeError, match=r"pair \(h_0, c_0\)"):
        lstm(lk.zeros(5, 2, 3), lk.zeros(1, 2, 2))
    with pytest.raises(lk.ShapeError, match="sequence is empty"):
        lstm(lk.zeros(0, 2, 3))
    cell = nn.GRUCell(3, 4)
    with pytest.raises(lk.ShapeError, match=r"input_size=3"):
        cell(lk.zeros(2, 5))
    with pytest.raises(lk.ShapeError, match=r"state must have shape \(2, 4\)"):
        cell(lk.zeros(2, 3), lk.zeros(3, 4))
    with pytest.raises(lk.ShapeError, match="1-D"):
        cell(lk.zeros(3), lk.zeros(1, 4))


def test_final_state_is_each_sequences_last_real_step():
    lk.manual_seed(4)
    gru = nn.GRU(2, 3, dtype=lk.float64)
    x = lk.randn(6, 3, 2, dtype=lk.float64)
    lengths = [2, 6, 4]
    out, h = gru(lrnn.pack_padded_sequence(x, lengths, enforce_sorted=False))
    padded, _ = lrnn.pad_packed_sequence(out)
    for b, n in enumerate(lengths):
        alone, h_alone = gru(x[:n, b])                   # the sequence by itself
        close(padded[:n, b], alone.detach().numpy())
        close(h[0, b], h_alone[0].detach().numpy())
        assert not np.any(padded[n:, b].detach().numpy())            # zeros past its length


def _loss_and_grads(model, run):
    model.zero_grad()
    loss = run()
    loss.backward()
    return loss.item(), [p.grad.numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("batch_first", [False, True])
def test_padded_lstm_is_one_op_per_layer_and_direction_as_the_step_loop(batch_first):
    # padded input runs each layer and direction as one lstm_layer op; a packed sequence
    # runs the loop step by step (lstm_cell): the same values and gradients, in float64
    lk.manual_seed(7)
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=batch_first,
                   dtype=lk.float64)
    x = lk.randn(*((2, 6, 3) if batch_first else (6, 2, 3)), dtype=lk.float64)
    h0 = (lk.randn(4, 2, 4, dtype=lk.float64), lk.randn(4, 2, 4, dtype=lk.float64))

    def loss(out, h, c):
        return (out * out).sum() + (h * h).sum() + c.sum()

    def padded():
        out, (h, c) = lstm(x, h0)
        return loss(out, h, c)

    def packed():
        seq = lrnn.pack_padded_sequence(x, [6, 6], batch_first=batch_first)
        out, (h, c) = lstm(seq, h0)
        return loss(lrnn.pad_packed_sequence(out, batch_first=batch_first)[0], h, c)
    with lk.profile() as prof:
        ours = _loss_and_grads(lstm, padded)
    ops = [e.op for e in prof.events]
    assert ops.count("lstm_layer") == ops.count("lstm_layer_backward") == 4
    assert "lstm_cell" not in ops
    steps = _loss_and_grads(lstm, packed)
    np.testing.assert_allclose(ours[0], steps[0], rtol=1e-12)
    for a, b in zip(ours[1], steps[1]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


# ---- captured equals eager ---------------------------------------------------------------------
def _captured_and_eager(model, loss_fn, *inputs):
    """(loss, parameter gradients) eagerly, then from one lk.function step (forward and
    backward), which must agree."""
    params = list(model.parameters())

    def step(*xs):
        loss = loss_fn(*xs)
        loss.backward()
        return loss
    results = []
    for run in (step, lk.function(step)):
        model.zero_grad()
        loss = run(*inputs)
        results.append((loss.item(), [p.grad.numpy().copy() for p in params]))
    (eager_loss, eager_grads), (graph_loss, graph_grads) = results
    np.testing.assert_allclose(graph_loss, eager_loss, rtol=1e-12)
    for a, b in zip(graph_grads, eager_grads):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_captured_lstm_equals_eager():
    lk.manual_seed(5)
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True, proj_size=2, batch_first=True,
                   dtype=lk.float64)
    x = lk.randn(2, 11, 3, dtype=lk.float64)
    h0 = (lk.randn(4, 2, 2, dtype=lk.float64), lk.randn(4, 2, 4, dtype=lk.float64))

    def loss(x, h, c):
        out, (h_n, c_n) = lstm(x, (h, c))
        return (out * out).sum() + h_n.sum() + (c_n * c_n).sum()
    _captured_and_eager(lstm, loss, x, *h0)


def test_captured_lstm_over_padded_input_equals_eager():
    lk.manual_seed(8)
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True, dtype=lk.float64)
    x = lk.randn(2, 7, 3, dtype=lk.float64)

    def loss(x):
        out, (h_n, c_n) = lstm(x)
        return (out * out).sum() + h_n.sum() + (c_n * c_n).sum()
    _captured_and_eager(lstm, loss, x)


def test_captured_packed_gru_equals_eager():
    lk.manual_seed(6)
    emb = nn.Embedding(10, 3, dtype=lk.float64)
    gru = nn.GRU(3, 4, num_layers=2, bidirectional=True, batch_first=True, dtype=lk.float64)
    model = nn.ModuleList([emb, gru])
    tokens = lk.randint(0, 10, (3, 12))
    lengths = [12, 5, 9]

    def loss(tokens):
        packed = lrnn.pack_padded_sequence(emb(tokens), lengths, batch_first=True,
                                           enforce_sorted=False)
        out, h = gru(packed)
        padded, _ = lrnn.pad_packed_sequence(out, batch_first=True)
        return (padded * padded).sum() + h.sum()
    _captured_and_eager(model, loss, tokens)


def test_lstm_under_autocast_runs_in_bfloat16_as_torch():
    # PyTorch's CPU autocast runs the LSTM in the low precision: outputs and states bfloat16
    lk.manual_seed(9)
    lstm = nn.LSTM(3, 4, num_layers=2, batch_first=True)
    t_lstm = torch.nn.LSTM(3, 4, num_layers=2, batch_first=True)
    t_lstm.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                            for k, v in lstm.state_dict().items()})
    x = lk.randn(2, 5, 3)
    full, _ = lstm(x)
    with lk.autocast("cpu", dtype=lk.bfloat16):
        out, (h, c) = lstm(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t_out, (t_h, t_c) = t_lstm(torch.from_numpy(x.numpy()))
    assert (out.dtype, h.dtype, c.dtype) == (lk.bfloat16,) * 3
    assert (t_out.dtype, t_h.dtype, t_c.dtype) == (torch.bfloat16,) * 3
    np.testing.assert_allclose(out.float().detach().numpy(), t_out.float().detach().numpy(),
                               atol=2e-2)
    np.testing.assert_allclose(out.float().detach().numpy(), full.detach().numpy(), atol=2e-2)
    out.float().sum().backward()
    assert lstm.weight_hh_l0.grad.dtype is lk.float32
    assert np.isfinite(lstm.weight_hh_l0.grad.numpy()).all()
