"""Each layer's output (and gradients where they are not plain ops) against a NumPy reference."""
import math

import numpy as np
import pytest

import labkit as lk
from labkit import nn


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


# ---- Linear --------------------------------------------------------------------------------------
def test_linear_matches_numpy(device):
    layer = nn.Linear(5, 3).to(device)
    x = np.random.default_rng(0).standard_normal((2, 4, 5)).astype(np.float32)
    out = layer(lk.tensor(x, device=device))
    w, b = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    np.testing.assert_allclose(out.detach().numpy(), x @ w.T + b, rtol=1e-5, atol=1e-6)
    out.sum().backward()
    np.testing.assert_allclose(layer.weight.grad.numpy(), np.ones((3, 8)) @ x.reshape(8, 5),
                               rtol=1e-5)
    np.testing.assert_allclose(layer.bias.grad.numpy(), np.full(3, 8.0))


def test_linear_without_bias_and_shape_error():
    layer = nn.Linear(4, 2, bias=False)
    assert [n for n, _ in layer.named_parameters()] == ["weight"]
    x = np.ones((3, 4), np.float32)
    np.testing.assert_allclose(layer(lk.tensor(x)).detach().numpy(), x @ layer.weight.detach().numpy().T,
                               rtol=1e-6)
    with pytest.raises(lk.ShapeError, match="in_features=4.*flatten"):
        layer(lk.ones(3, 5))


def test_default_init_is_pytorchs_and_seeded():
    lk.manual_seed(1)
    a = nn.Linear(100, 50)
    bound = 1 / math.sqrt(100)
    w = a.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.1 * bound      # uniform(-b, b) has std b/sqrt 3
    assert np.abs(a.bias.detach().numpy()).max() <= bound
    lk.manual_seed(1)
    b = nn.Linear(100, 50)
    np.testing.assert_array_equal(a.weight.detach().numpy(), b.weight.detach().numpy())
    conv = nn.Conv2d(3, 8, 3)
    conv_bound = 1 / math.sqrt(3 * 9)
    assert np.abs(conv.weight.detach().numpy()).max() <= conv_bound
    assert np.abs(conv.bias.detach().numpy()).max() <= conv_bound
    emb = nn.Embedding(1000, 8)
    assert abs(emb.weight.detach().numpy().std() - 1.0) < 0.05


def test_init_functions():
    t = nn.Parameter(lk.zeros(64, 32))
    nn.init.xavier_uniform_(t)
    assert np.abs(t.detach().numpy()).max() <= math.sqrt(6 / 96)
    nn.init.kaiming_normal_(t, nonlinearity="relu")
    assert abs(t.detach().numpy().std() - math.sqrt(2 / 32)) < 0.02
    nn.init.constant_(t, 0.5)
    assert set(np.unique(t.detach().numpy())) == {0.5}
    with pytest.raises(lk.ShapeError, match="fewer than 2 dimensions"):
        nn.init.kaiming_uniform_(nn.Parameter(lk.zeros(3)))
    with pytest.raises(ValueError, match="unknown nonlinearity"):
        nn.init.calculate_gain("swish")


# ---- Conv2d / MaxPool2d ------------------------------------------------------------------------
def conv2d_reference(x, w, b, stride, padding, dilation):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * stride[0]:i * stride[0] + dilation[0] * (kh - 1) + 1:dilation[0],
                       j * stride[1]:j * stride[1] + dilation[1] * (kw - 1) + 1:dilation[1]]
            out[:, :, i, j] = np.einsum("nckl,ockl->no", patch, w)
    return out + (b[None, :, None, None] if b is not None else 0)


@pytest.mark.parametrize("kernel,stride,padding,dilation,bias", [
    (3, 1, 1, 1, True), ((3, 2), 2, 0, 1, True), (3, (2, 1), (1, 2), 2, False)])
def test_conv2d_matches_numpy(kernel, stride, padding, dilation, bias, device):
    conv = nn.Conv2d(3, 4, kernel, stride=stride, padding=padding, dilation=dilation,
                     bias=bias).to(device)
    x = np.random.default_rng(0).standard_normal((2, 3, 9, 8)).astype(np.float32)
    out = conv(lk.tensor(x, device=device))
    ref = conv2d_reference(x, conv.weight.detach().numpy(), conv.bias.detach().numpy() if bias else None,
                           conv.stride, conv.padding, conv.dilation)
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-4, atol=1e-5)


def test_conv2d_gradients_and_errors():
    conv = nn.Conv2d(2, 3, 3, padding=1).double()
    x = lk.randn(1, 2, 4, 4, dtype=lk.float64)
    assert lk.gradcheck(lambda x, w, b: lk.nn.functional.conv2d(x, w, b, padding=1),
                        [x, conv.weight, conv.bias])
    assert conv(lk.randn(2, 4, 4, dtype=lk.float64)).shape == (3, 4, 4)   # unbatched
    with pytest.raises(lk.ShapeError, match=r"expects input \(N, 2, H, W\).*unsqueeze"):
        conv(lk.randn(5, 4, 4, 4, dtype=lk.float64))


def test_maxpool_and_flatten_match_numpy():
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype(np.float32)
    out = nn.MaxPool2d(2)(lk.tensor(x))
    np.testing.assert_array_equal(out.numpy(), x.reshape(2, 3, 3, 2, 3, 2).max(axis=(3, 5)))
    out3 = nn.MaxPool2d(3, stride=1)(lk.tensor(x))
    ref = np.stack([np.stack([x[:, :, i:i + 3, j:j + 3].max(axis=(2, 3)) for j in range(4)], -1)
                    for i in range(4)], -2)
    np.testing.assert_array_equal(out3.numpy(), ref)
    t = lk.tensor(x, requires_grad=True)
    nn.MaxPool2d(2)(t).sum().backward()
    assert t.grad.numpy().sum() == 2 * 3 * 9                     # one winner per window
    assert nn.Flatten()(lk.tensor(x)).shape == (2, 108)
    assert nn.Flatten(0, 1)(lk.tensor(x)).shape == (6, 6, 6)
    np.testing.assert_array_equal(nn.ReLU()(lk.tensor(x)).numpy(), np.maximum(x, 0))
    np.testing.assert_allclose(nn.Sigmoid()(lk.tensor(x)).numpy(), sigmoid(x), rtol=1e-6)
    np.testing.assert_allclose(nn.Tanh()(lk.tensor(x)).numpy(), np.tanh(x), rtol=1e-6)


# ---- Embedding -----------------------------------------------------------------------------------
def test_embedding_matches_numpy_and_accumulates(device):
    emb = nn.Embedding(6, 3).to(device)
    idx = np.array([[1, 2, 1], [5, 0, 1]])
    out = emb(lk.tensor(idx, device=device))
    np.testing.assert_array_equal(out.detach().numpy(), emb.weight.detach().numpy()[idx])
    out.sum().backward()
    counts = np.bincount(idx.ravel(), minlength=6).astype(np.float32)
    np.testing.assert_array_equal(emb.weight.grad.numpy(), np.repeat(counts[:, None], 3, 1))


def test_embedding_padding_and_errors():
    emb = nn.Embedding(5, 2, padding_idx=0)
    assert emb.weight.detach().numpy()[0].tolist() == [0.0, 0.0]
    out = emb(lk.tensor([0, 3, 0]))
    (out * 2).sum().backward()
    assert emb.weight.grad.numpy()[0].tolist() == [0.0, 0.0]
    assert emb.weight.grad.numpy()[3].tolist() == [2.0, 2.0]
    with pytest.raises(lk.ShapeError, match="index 5 is out of range for 5 embeddings"):
        emb(lk.tensor([1, 5]))
    with pytest.raises(lk.DTypeError, match="integers"):
        emb(lk.tensor([1.0]))


# ---- RNN / LSTM ----------------------------------------------------------------------------------
def _weights(module, k):
    get = lambda n: getattr(module, f"{n}_l{k}").detach().numpy().astype(np.float64)  # noqa: E731
    return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh")


def rnn_reference(module, x, h0):
    """x: (L, N, in); h0: (layers, N, H). PyTorch's equations, in float64."""
    layer_in, hs = x, []
    for k in range(module.num_layers):
        w_ih, w_hh, b_ih, b_hh = _weights(module, k)
        h, outs = h0[k], []
        for t in range(layer_in.shape[0]):
            h = np.tanh(layer_in[t] @ w_ih.T + b_ih + h @ w_hh.T + b_hh)
            outs.append(h)
        layer_in = np.stack(outs)
        hs.append(h)
    return layer_in, np.stack(hs)


def lstm_reference(module, x, h0, c0):
    layer_in, hs, cs = x, [], []
    H = module.hidden_size
    for k in range(module.num_layers):
        w_ih, w_hh, b_ih, b_hh = _weights(module, k)
        h, c, outs = h0[k], c0[k], []
        for t in range(layer_in.shape[0]):
            z = layer_in[t] @ w_ih.T + b_ih + h @ w_hh.T + b_hh
            i, f, g, o = sigmoid(z[:, :H]), sigmoid(z[:, H:2 * H]), np.tanh(z[:, 2 * H:3 * H]), \
                sigmoid(z[:, 3 * H:])
            c = f * c + i * g
            h = o * np.tanh(c)
            outs.append(h)
        layer_in = np.stack(outs)
        hs.append(h)
        cs.append(c)
    return layer_in, np.stack(hs), np.stack(cs)


@pytest.mark.parametrize("batch_first", [False, True])
def test_rnn_matches_numpy(batch_first):
    rnn = nn.RNN(3, 4, num_layers=2, batch_first=batch_first)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 2, 3)).astype(np.float32)       # (L, N, in)
    h0 = rng.standard_normal((2, 2, 4)).astype(np.float32)
    inp = x.transpose(1, 0, 2) if batch_first else x
    out, h = rnn(lk.tensor(inp), lk.tensor(h0))
    ref_out, ref_h = rnn_reference(rnn, x.astype(np.float64), h0.astype(np.float64))
    if batch_first:
        ref_out = ref_out.transpose(1, 0, 2)
    np.testing.assert_allclose(out.detach().numpy(), ref_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h.detach().numpy(), ref_h, rtol=1e-5, atol=1e-6)
    out0, h_zero = rnn(lk.tensor(inp))                           # default h0 = zeros
    ref0, _ = rnn_reference(rnn, x.astype(np.float64), np.zeros((2, 2, 4)))
    np.testing.assert_allclose(out0.detach().numpy(), ref0.transpose(1, 0, 2) if batch_first else ref0,
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("batch_first", [False, True])
def test_lstm_matches_numpy(batch_first, device):
    lstm = nn.LSTM(3, 4, num_layers=2, batch_first=batch_first).to(device)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 2, 3)).astype(np.float32)
    h0 = rng.standard_normal((2, 2, 4)).astype(np.float32)
    c0 = rng.standard_normal((2, 2, 4)).astype(np.float32)
    inp = x.transpose(1, 0, 2) if batch_first else x
    out, (h, c) = lstm(lk.tensor(inp, device=device),
                       (lk.tensor(h0, device=device), lk.tensor(c0, device=device)))
    ref_out, ref_h, ref_c = lstm_reference(lstm, x.astype(np.float64), h0, c0)
    if batch_first:
        ref_out = ref_out.transpose(1, 0, 2)
    np.testing.assert_allclose(out.detach().numpy(), ref_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h.detach().numpy(), ref_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c.detach().numpy(), ref_c, rtol=1e-5, atol=1e-6)


def check_parameter_gradients(model, loss_fn, eps=1e-6):
    """Every parameter's .grad after backward against central differences of ``loss_fn``."""
    model.zero_grad()
    loss_fn().backward()
    for name, p in model.named_parameters():
        numeric = np.zeros(p.shape)
        flat = p._data.reshape(-1)
        for j in range(flat.size):
            old = flat[j]
            flat[j] = old + eps
            with lk.no_grad():
                up = loss_fn().item()
            flat[j] = old - eps
            with lk.no_grad():
                down = loss_fn().item()
            flat[j] = old
            numeric.reshape(-1)[j] = (up - down) / (2 * eps)
        np.testing.assert_allclose(p.grad.numpy(), numeric, rtol=1e-5, atol=1e-7, err_msg=name)


def test_recurrent_gradients_by_finite_differences():
    model = nn.ModuleList([nn.LSTM(2, 3, num_layers=2), nn.RNN(3, 2, nonlinearity="relu")])
    model.double()
    x = lk.randn(4, 2, 2, dtype=lk.float64)
    cot = lk.randn(4, 2, 2, dtype=lk.float64)

    def loss():
        out, (h, c) = model[0](x)
        out, h2 = model[1](out)
        return (out * cot).sum() + (h * h).sum() + c.sum() + h2.sum()
    check_parameter_gradients(model, loss)
    assert lk.gradcheck(lambda x: model[1](model[0](x)[0])[0], [x])     # and the input's


def test_unbatched_input_and_shape_errors():
    lstm = nn.LSTM(3, 4)
    out, (h, c) = lstm(lk.randn(5, 3))
    assert out.shape == (5, 4) and h.shape == (1, 4) and c.shape == (1, 4)
    batched, _ = lstm(lk.tensor(np.zeros((5, 1, 3), np.float32)))
    assert batched.shape == (5, 1, 4)
    rnn = nn.RNN(3, 4, batch_first=True)
    with pytest.raises(lk.ShapeError, match="input_size=3"):
        rnn(lk.randn(2, 5, 4))
    with pytest.raises(lk.ShapeError, match=r"must have shape \(1, 2, 4\)"):
        rnn(lk.randn(2, 5, 3), lk.zeros(1, 3, 4))
    with pytest.raises(TypeError, match="pair"):
        lstm(lk.randn(5, 2, 3), lk.zeros(1, 2, 4))
    assert [n for n, _ in nn.LSTM(3, 4, bias=False).named_parameters()] == \
        ["weight_ih_l0", "weight_hh_l0"]
    assert nn.LSTM(3, 4).weight_ih_l0.shape == (16, 3)


# ---- Dropout -------------------------------------------------------------------------------------
def test_dropout_statistics_and_modes():
    drop = nn.Dropout(0.25)
    x = lk.ones(200, 200)
    y = drop(x).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.01
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    lk.manual_seed(3)
    a = drop(x).numpy()
    lk.manual_seed(3)
    np.testing.assert_array_equal(a, drop(x).numpy())              # seeded masks
    drop.eval()
    assert drop(x) is x
    t = lk.ones(4, requires_grad=True)
    lk.nn.functional.dropout(t, 1.0).sum().backward()
    assert t.grad.tolist() == [0.0] * 4
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)
