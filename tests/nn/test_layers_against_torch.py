"""Layers and nn.functional against PyTorch beyond the module harness: activations at their
kinks, the functional forms' argument variants, BatchNorm over several training steps (eagerly
and captured), modules captured equal eager, default initialisation and nn.init distributions,
dropout statistics, reprs, and errors."""
import importlib
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import labkit as lk
import labkit.nn.functional as F
from labkit import nn

from .torch_check import against_torch

KINKS = np.array([-30.0, -20.5, -20.0, -6.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0, 19.9,
                  20.0, 20.5, 30.0, 100.0])

ACTIVATIONS = [("relu", {}), ("relu6", {}), ("elu", {}), ("elu", {"alpha": 0.5}), ("selu", {}),
               ("celu", {"alpha": 2.0}), ("gelu", {}), ("gelu", {"approximate": "tanh"}),
               ("silu", {}), ("mish", {}), ("softplus", {}),
               ("softplus", {"beta": 2.0, "threshold": 6.0}), ("softsign", {}),
               ("hardtanh", {}), ("hardtanh", {"min_val": -3.0, "max_val": 6.0}),
               ("hardsigmoid", {}), ("hardswish", {}), ("logsigmoid", {}), ("tanhshrink", {}),
               ("softshrink", {"lambd": 1.0}), ("hardshrink", {"lambd": 3.0}),
               ("leaky_relu", {"negative_slope": 0.2}), ("threshold", {"threshold": 1.0,
                                                                       "value": -2.0}),
               ("sigmoid", {}), ("tanh", {})]


@pytest.mark.parametrize("name,kwargs", ACTIVATIONS, ids=lambda v: str(v))
def test_activation_values_and_gradients_at_the_kinks(name, kwargs):
    against_torch(getattr(F, name), getattr(TF, name), KINKS, **kwargs)
    against_torch(getattr(F, name), getattr(TF, name), KINKS.astype(np.float32), rtol=1e-6,
                  atol=1e-6, **kwargs)


def test_activations_keep_nan_and_accept_inplace():
    x = np.array([np.nan, -1.0, 2.0])
    for name in ("relu", "hardtanh", "relu6", "elu", "threshold", "leaky_relu", "hardshrink",
                 "softshrink", "softplus", "hardswish"):
        args = (0.0, 0.0) if name == "threshold" else ()
        ours = getattr(F, name)(lk.tensor(x), *args).numpy()
        theirs = getattr(TF, name)(torch.tensor(x), *args).numpy()
        np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs), err_msg=name)
    x = lk.tensor([-1.0, 2.0])
    assert F.relu(x, inplace=True) is x and x.tolist() == [0.0, 2.0]   # written in place
    x = lk.tensor([-1.0, 2.0])
    assert F.leaky_relu(x, 0.5, True) is x and x.tolist() == [-0.5, 2.0]


def test_softmax_family_prelu_glu():
    rng = np.random.default_rng(0)
    for name in ("softmax", "log_softmax", "softmin"):
        against_torch(getattr(F, name), getattr(TF, name), rng.standard_normal((3, 4, 5)), dim=1)
        against_torch(lambda x: getattr(F, name)(x, -1, dtype=lk.float64),
                      lambda x: getattr(TF, name)(x, -1, dtype=torch.float64),
                      rng.standard_normal((3, 4)).astype(np.float32))
    with pytest.warns(UserWarning, match="Implicit dimension"):
        F.softmax(lk.ones(2, 3))
    against_torch(F.glu, TF.glu, rng.standard_normal((3, 4, 2)), dim=1)
    against_torch(F.prelu, TF.prelu, rng.standard_normal((2, 3, 4)), np.array([0.1, -0.2, 0.3]))
    against_torch(F.prelu, TF.prelu, KINKS, np.array([0.25]))
    with pytest.raises(lk.ShapeError, match="odd size"):
        F.glu(lk.ones(3))
    with pytest.raises(lk.ShapeError, match="slopes do not match"):
        F.prelu(lk.ones(2, 3), lk.ones(4))


# ---- convolution, pooling, resizing --------------------------------------------------------------
CONVS = [dict(stride=2, padding=1), dict(padding="same", dilation=2), dict(padding="valid"),
         dict(groups=2, stride=(2, 1), padding=(0, 1))]


@pytest.mark.parametrize("kw", CONVS, ids=str)
def test_conv_forms(kw):
    rng = np.random.default_rng(1)
    g = kw.get("groups", 1)
    x, b = rng.standard_normal((2, 4, 7, 6)), rng.standard_normal(6)
    against_torch(F.conv2d, TF.conv2d, x, rng.standard_normal((6, 4 // g, 3, 2)), b, **kw)
    against_torch(F.conv2d, TF.conv2d, x[0], rng.standard_normal((6, 4 // g, 3, 2)), **kw)
    kw1 = {k: (v[0] if isinstance(v, tuple) else v) for k, v in kw.items()}
    against_torch(F.conv1d, TF.conv1d, x[:, :, 0], rng.standard_normal((6, 4 // g, 3)), b, **kw1)


@pytest.mark.parametrize("kw", [dict(stride=2), dict(stride=2, padding=1, output_padding=1),
                                dict(stride=3, padding=2, output_padding=2, groups=2),
                                dict(dilation=3, padding=1, output_padding=2)], ids=str)
def test_conv_transpose_forms(kw):
    rng = np.random.default_rng(2)
    g = kw.get("groups", 1)
    x, b = rng.standard_normal((2, 4, 4, 5)), rng.standard_normal(6)
    against_torch(F.conv_transpose2d, TF.conv_transpose2d, x,
                  rng.standard_normal((4, 6 // g, 3, 2)), b, **kw)
    against_torch(F.conv_transpose1d, TF.conv_transpose1d, x[:, :, 0],
                  rng.standard_normal((4, 6 // g, 3)), b, **kw)


def test_max_pool_gradient_goes_to_the_first_of_tied_maxima():
    x = np.zeros((1, 1, 4, 4))
    x[0, 0, 0, 0] = -1.0            # after relu, windows of zeros tie
    for pool in (lambda f, x: f.max_pool2d(f.relu(x), 2, 1, ceil_mode=True),
                 lambda f, x: f.adaptive_max_pool2d(f.relu(x), 3),
                 lambda f, x: f.max_pool1d(f.relu(x[0]), 3, 2, 1)):
        against_torch(lambda x: pool(F, x), lambda x: pool(TF, x), x)
    out, idx = F.max_pool2d(lk.tensor(x), 2, return_indices=True)
    assert idx.tolist() == TF.max_pool2d(torch.tensor(x), 2, return_indices=True)[1].tolist()


@pytest.mark.parametrize("kw", [dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                     count_include_pad=False),
                                dict(kernel_size=(2, 3), stride=(3, 2), ceil_mode=True),
                                dict(kernel_size=2, divisor_override=5)], ids=str)
def test_avg_pool_forms(kw):
    x = np.random.default_rng(3).standard_normal((2, 2, 7, 8))
    against_torch(F.avg_pool2d, TF.avg_pool2d, x, **kw)
    if "divisor_override" not in kw and not isinstance(kw["kernel_size"], tuple):
        against_torch(F.avg_pool1d, TF.avg_pool1d, x[:, :, 0], **kw)


@pytest.mark.parametrize("size", [1, (3, 4), (7, 8), (4, None), (9, 11)], ids=str)
def test_adaptive_pools(size):
    x = np.random.default_rng(4).standard_normal((2, 3, 7, 8))
    against_torch(F.adaptive_avg_pool2d, TF.adaptive_avg_pool2d, x, size)
    against_torch(lambda x: F.adaptive_max_pool2d(x, size, True),
                  lambda x: TF.adaptive_max_pool2d(x, size, True), x)
    against_torch(F.adaptive_avg_pool2d, TF.adaptive_avg_pool2d, x[0], size)


INTERPOLATIONS = [dict(scale_factor=2), dict(size=(7, 3)), dict(scale_factor=1.7),
                  dict(scale_factor=(0.6, 2.3)), dict(scale_factor=1.7, mode="nearest-exact"),
                  dict(size=(9, 4), mode="bilinear"),
                  dict(size=(9, 4), mode="bilinear", align_corners=True),
                  dict(scale_factor=1.3, mode="bilinear"),
                  dict(scale_factor=1.3, mode="bilinear", recompute_scale_factor=True),
                  dict(scale_factor=0.5, mode="bilinear"), dict(size=(3, 3), mode="area")]


@pytest.mark.parametrize("kw", INTERPOLATIONS, ids=str)
def test_interpolate(kw):
    x = np.random.default_rng(5).standard_normal((2, 3, 5, 7))
    against_torch(F.interpolate, TF.interpolate, x, **kw)
    against_torch(F.interpolate, TF.interpolate, x.astype(np.float32), rtol=1e-5, atol=1e-6,
                  **kw)


def test_interpolate_1d_3d_and_errors():
    rng = np.random.default_rng(6)
    against_torch(F.interpolate, TF.interpolate, rng.standard_normal((2, 3, 5)),
                  scale_factor=2.5, mode="linear")
    against_torch(F.interpolate, TF.interpolate, rng.standard_normal((1, 2, 3, 4, 2)),
                  size=(4, 5, 3), mode="trilinear", align_corners=True)
    with pytest.raises(lk.ShapeError, match="'bilinear' needs a 4-d"):
        F.interpolate(lk.ones(1, 2, 3), scale_factor=2, mode="bilinear")
    with pytest.raises(ValueError, match="bicubic is not implemented"):
        F.interpolate(lk.ones(1, 2, 3, 3), scale_factor=2, mode="bicubic")
    with pytest.raises(ValueError, match="exactly one of size and scale_factor"):
        F.interpolate(lk.ones(1, 2, 3, 3))


# ---- normalisation, distances, lookups -----------------------------------------------------------
def test_normalisation_functions():
    r = np.random.default_rng(7).standard_normal
    against_torch(F.layer_norm, TF.layer_norm, r((2, 3, 4)), (3, 4), r((3, 4)), r((3, 4)))
    against_torch(F.rms_norm, TF.rms_norm, r((2, 3, 4)), (4,), r(4))
    against_torch(F.rms_norm, TF.rms_norm, r((2, 3, 4)).astype(np.float32) * 1e-4, (4,),
                  rtol=1e-5, atol=1e-6)
    against_torch(F.group_norm, TF.group_norm, r((2, 6, 4, 3)), 3, r(6), r(6), eps=1e-3)
    against_torch(F.instance_norm, TF.instance_norm, r((2, 3, 5)))
    against_torch(F.normalize, TF.normalize, r((3, 4)), p=1.5, dim=0)
    against_torch(F.normalize, TF.normalize, np.array([[0.0, 0, 0], [1e-13, 0, 0], [1, 2, 3]]))
    with pytest.raises(lk.ShapeError, match="normalized_shape=\\[5\\]"):
        F.layer_norm(lk.ones(2, 4), [5])
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(lk.ones(1, 3), None, None, training=True)


@pytest.mark.parametrize("call", [
    lambda f, lib: f.layer_norm(lib.ones(2, 4), (4,), weight=lib.ones(1)),
    lambda f, lib: f.layer_norm(lib.ones(2, 4), (4,), lib.ones(4), bias=lib.ones(2)),
    lambda f, lib: f.group_norm(lib.ones(2, 4, 3), 2, weight=lib.ones(1)),
    lambda f, lib: f.batch_norm(lib.ones(2, 4), None, None, lib.ones(1), training=True),
    lambda f, lib: f.batch_norm(lib.ones(2, 4), lib.zeros(1), lib.ones(4), training=False)])
def test_a_weight_or_statistic_of_the_wrong_shape_is_refused_as_in_pytorch(call):
    # NumPy would broadcast a (1,) weight over the normalised dimensions without a word
    import torch
    import torch.nn.functional as TF
    with pytest.raises(RuntimeError):
        call(TF, torch)
    with pytest.raises(lk.ShapeError, match="must have shape"):
        call(F, lk)


@pytest.mark.parametrize("norm", ["batch_norm", "batch_norm_eval", "instance_norm", "rms_norm"])
def test_a_normalised_output_may_change_in_place(norm):
    # PyTorch's normalisations do not save their output for the backward pass, so a residual
    # ``out += x`` after one without affine parameters is allowed (labkit's divided by the
    # standard deviation, whose gradient read the output)
    r = np.random.default_rng(3).standard_normal
    stats = (r(3), np.abs(r(3)) + 0.5)
    forms = {"batch_norm": lambda f, x, lib: f.batch_norm(x, None, None, training=True),
             "batch_norm_eval": lambda f, x, lib: f.batch_norm(
                 x, *(lib.tensor(s) for s in stats), training=False),
             "instance_norm": lambda f, x, lib: f.instance_norm(x),
             "rms_norm": lambda f, x, lib: f.rms_norm(x, (5,))}

    def residual(f, lib):
        def run(x, w):
            out = forms[norm](f, x * w, lib)
            out += x
            return out
        return run
    against_torch(residual(F, lk), residual(TF, torch), r((4, 3, 5)), r((3, 1)))


def test_distances():
    r = np.random.default_rng(8).standard_normal
    against_torch(F.cosine_similarity, TF.cosine_similarity, r((3, 4)), r((1, 4)))
    against_torch(F.cosine_similarity, TF.cosine_similarity,
                  np.array([[0.0, 0, 0], [1e-9, 0, 0], [1, 2, 3]]), r((3, 3)), dim=1)
    against_torch(F.pairwise_distance, TF.pairwise_distance, r((3, 4)), r((3, 4)), p=3.0,
                  keepdim=True)
    against_torch(F.bilinear, TF.bilinear, r((2, 3, 4)), r((2, 3, 5)), r((6, 4, 5)), r(6))


def test_embedding_options():
    rng = np.random.default_rng(9)
    idx = np.array([[1, 2, 0, 2], [0, 0, 3, 1]])
    w = rng.standard_normal((5, 3)) * 3
    for kw in (dict(padding_idx=0), dict(padding_idx=-1, scale_grad_by_freq=True),
               dict(scale_grad_by_freq=True)):
        against_torch(lambda w: F.embedding(lk.tensor(idx), w, **kw),
                      lambda w: TF.embedding(torch.tensor(idx), w, **kw), w)
    ours, theirs = lk.tensor(w.copy()), torch.tensor(w.copy())
    a = F.embedding(lk.tensor(idx), ours, max_norm=1.0, norm_type=1.0)
    b = TF.embedding(torch.tensor(idx), theirs, max_norm=1.0, norm_type=1.0)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)  # renormalised in place
    # the padding row's value is passed through (only its gradient is cut), as in PyTorch
    w[0] = 7.0
    against_torch(lambda w: F.embedding(lk.tensor(idx), w, padding_idx=0),
                  lambda w: TF.embedding(torch.tensor(idx), w, padding_idx=0), w)
    with pytest.raises(lk.ShapeError, match="out of range for 5 embeddings"):
        F.embedding(lk.tensor([5]), lk.tensor(w))
    with pytest.raises(lk.DTypeError, match="x.long"):
        F.embedding(lk.tensor([1.0]), lk.tensor(w))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag_forms(mode, padding_idx):
    rng = np.random.default_rng(10)
    w = rng.standard_normal((5, 3))
    flat, offsets = np.array([1, 2, 4, 4, 3, 0, 2]), np.array([0, 2, 2, 5])
    for inp, off, last in ((flat, offsets, False), (flat, np.append(offsets, 7), True),
                           (np.array([[1, 2, 2], [0, 2, 3]]), None, False)):
        def run(lib, f, w):
            return f.embedding_bag(lib.tensor(inp), w, None if off is None else lib.tensor(off),
                                   mode=mode, padding_idx=padding_idx, include_last_offset=last)
        against_torch(lambda w: run(lk, F, w), lambda w: run(torch, TF, w), w)


# ---- BatchNorm over several steps, eagerly and captured ------------------------------------------
def _bn_net(lib, momentum):
    return lib.Sequential(lib.Conv2d(2, 4, 3, padding=1), lib.BatchNorm2d(4, momentum=momentum),
                          lib.ReLU(), lib.Flatten(), lib.Linear(4 * 5 * 5, 3),
                          lib.BatchNorm1d(3, momentum=momentum))


@pytest.mark.parametrize("momentum", [0.1, None], ids=["momentum", "cumulative"])
def test_batchnorm_running_stats_over_training_steps_eager_and_captured(momentum):
    torch.manual_seed(0)
    theirs = _bn_net(torch.nn, momentum).double()
    state = {k: lk.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}
    eager, captured = _bn_net(nn, momentum).double(), _bn_net(nn, momentum).double()
    eager.load_state_dict(state)
    captured.load_state_dict(state)
    t_opt = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    e_opt = lk.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    c_opt = lk.optim.SGD(captured.parameters(), lr=0.1, momentum=0.9)

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss
    captured_step = lk.function(lambda x, y: step(captured, c_opt, x, y))
    rng = np.random.default_rng(11)
    for _ in range(5):
        x, y = rng.standard_normal((6, 2, 5, 5)) * 2 + 1, rng.standard_normal((6, 3))
        t_opt.zero_grad()
        t_loss = TF.mse_loss(theirs(torch.tensor(x)), torch.tensor(y))
        t_loss.backward()
        t_opt.step()
        e_loss = step(eager, e_opt, lk.tensor(x), lk.tensor(y))
        c_loss = captured_step(lk.tensor(x), lk.tensor(y))
        np.testing.assert_allclose(e_loss.item(), t_loss.item(), rtol=1e-9)
        np.testing.assert_allclose(c_loss.item(), t_loss.item(), rtol=1e-9)
    assert len(captured_step.traces) == 1
    for model in (eager, captured):
        for key, value in theirs.state_dict().items():
            np.testing.assert_allclose(model.state_dict()[key].numpy(), value.numpy(),
                                       rtol=1e-8, atol=1e-10, err_msg=key)
        assert int(model[1].num_batches_tracked) == 5
    theirs.eval()
    x = rng.standard_normal((3, 2, 5, 5))
    for model in (eager.eval(), captured.eval()):
        np.testing.assert_allclose(model(lk.tensor(x)).detach().numpy(),
                                   theirs(torch.tensor(x)).detach().numpy(), rtol=1e-8)


# ---- modules captured equal eager ----------------------------------------------------------------
CAPTURED = [
    ("conv_bn_pool", lambda: nn.Sequential(nn.Conv2d(3, 4, 3, padding="same",
                                                     padding_mode="reflect"),
                                           nn.BatchNorm2d(4), nn.Hardswish(),
                                           nn.MaxPool2d(2, ceil_mode=True),
                                           nn.AdaptiveAvgPool2d(2)),
     lambda: lk.randn(2, 3, 5, 5)),
    ("transpose_upsample", lambda: nn.Sequential(nn.ConvTranspose2d(3, 2, 3, stride=2),
                                                 nn.Upsample(scale_factor=1.5, mode="bilinear"),
                                                 nn.GroupNorm(1, 2), nn.Mish()),
     lambda: lk.randn(1, 3, 4, 4)),
    ("norms_activations", lambda: nn.Sequential(nn.LayerNorm(6), nn.GELU(approximate="tanh"),
                                                nn.Linear(6, 6), nn.RMSNorm(6), nn.SiLU(),
                                                nn.Softplus(beta=2.0), nn.LogSoftmax(-1)),
     lambda: lk.randn(4, 6)),
    ("conv1d_pool1d", lambda: nn.Sequential(nn.Conv1d(2, 3, 3, groups=1, padding=1),
                                            nn.InstanceNorm1d(3, affine=True), nn.ELU(),
                                            nn.AvgPool1d(2, ceil_mode=True),
                                            nn.AdaptiveMaxPool1d(2)),
     lambda: lk.randn(2, 2, 7)),
]


@pytest.mark.parametrize("name,build,data", CAPTURED, ids=[c[0] for c in CAPTURED])
def test_modules_captured_equal_eager(name, build, data):
    lk.manual_seed(0)
    model = build()
    x = data()

    def run(x):
        out = model(x)
        (out * out).sum().backward()
        return out
    model.zero_grad()
    eager = run(x).detach().numpy()
    eager_grads = [p.grad.numpy().copy() for p in model.parameters()]
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    model.load_state_dict({k: lk.tensor(v) for k, v in state.items()})
    model.zero_grad()
    captured = lk.function(run)
    if any(isinstance(m, nn.BatchNorm2d) for m in model.modules()):
        model.load_state_dict(_before(build, x))   # the eager call moved the running stats
    out = captured(x).numpy()
    np.testing.assert_allclose(out, eager, rtol=1e-5, atol=1e-6)
    for p, g in zip(model.parameters(), eager_grads):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-4, atol=1e-5)


def _before(build, x):
    lk.manual_seed(0)
    return build().state_dict()


def test_embeddings_captured_equal_eager():
    lk.manual_seed(0)
    emb, bag = nn.Embedding(6, 3, padding_idx=0), nn.EmbeddingBag(6, 3, mode="max")
    idx, off = lk.tensor([[0, 2, 5], [1, 1, 4]]), lk.tensor([0, 2])

    def run(idx, flat, off):
        out = emb(idx).sum() + bag(flat, off).sum()
        out.backward()
        return out
    eager = run(idx, idx.reshape(-1), off).item()
    grads = (emb.weight.grad.numpy().copy(), bag.weight.grad.numpy().copy())
    emb.zero_grad()
    bag.zero_grad()
    np.testing.assert_allclose(lk.function(run)(idx, idx.reshape(-1), off).item(), eager,
                               rtol=1e-6)
    np.testing.assert_allclose(emb.weight.grad.numpy(), grads[0], rtol=1e-6)
    np.testing.assert_allclose(bag.weight.grad.numpy(), grads[1], rtol=1e-6)
    assert not emb.weight.grad.numpy()[0].any()


# ---- initialisation ------------------------------------------------------------------------------
LAYERS = [lambda nn: nn.Linear(300, 200), lambda nn: nn.Conv1d(40, 60, 5),
          lambda nn: nn.Conv2d(16, 64, 3, groups=4), lambda nn: nn.ConvTranspose2d(30, 40, 4),
          lambda nn: nn.Bilinear(30, 20, 50), lambda nn: nn.Embedding(2000, 30, padding_idx=3),
          lambda nn: nn.EmbeddingBag(2000, 30), lambda nn: nn.PReLU(7),
          lambda nn: nn.BatchNorm2d(9), lambda nn: nn.LayerNorm(9), lambda nn: nn.GroupNorm(3, 9),
          lambda nn: nn.RMSNorm(9), lambda nn: nn.InstanceNorm2d(5, affine=True)]


@pytest.mark.parametrize("build", LAYERS, ids=range(len(LAYERS)))
def test_default_initialisation_is_pytorchs(build):
    lk.manual_seed(0)
    torch.manual_seed(0)
    ours, theirs = build(nn).state_dict(), build(torch.nn).state_dict()
    assert list(ours) == list(theirs)
    for key, t in theirs.items():
        a, b = ours[key].numpy().astype(np.float64), t.numpy().astype(np.float64)
        assert a.shape == b.shape and ours[key].dtype.name == str(t.dtype).split(".")[1], key
        if b.std() == 0:                           # ones, zeros, constants, running statistics
            np.testing.assert_array_equal(a, b, err_msg=key)
            continue
        np.testing.assert_array_equal(a == 0, b == 0, err_msg=key)     # e.g. a padding row
        bound = np.abs(b).max()
        assert np.abs(a).max() <= bound * 1.1 + 1e-6, key
        assert abs(a.mean() - b.mean()) < 4 * b.std() / math.sqrt(b.size) + 1e-9, key
        assert abs(a.std() - b.std()) < 5 / math.sqrt(b.size) * b.std(), key


def test_init_functions_match_pytorchs_distributions():
    shape = (400, 300)
    cases = [("uniform_", dict(a=-0.3, b=0.7)), ("normal_", dict(mean=0.5, std=2.0)),
             ("trunc_normal_", dict(mean=0.1, std=0.5, a=-0.2, b=0.6)),
             ("trunc_normal_", dict(std=0.02)), ("xavier_uniform_", dict(gain=2.0)),
             ("xavier_normal_", {}), ("kaiming_uniform_", dict(a=0.1, mode="fan_out")),
             ("kaiming_normal_", dict(nonlinearity="relu")),
             ("kaiming_uniform_", dict(nonlinearity="selu")), ("orthogonal_", dict(gain=3.0))]
    for name, kw in cases:
        a = getattr(nn.init, name)(nn.Parameter(lk.zeros(*shape)), **kw).detach().numpy()
        b = getattr(torch.nn.init, name)(torch.empty(*shape), **kw).numpy()
        bounded = "uniform" in name or "a" in kw and "trunc" in name   # extremes: the bounds
        for stat in (np.mean, np.std) + ((np.min, np.max) if bounded else ()):
            np.testing.assert_allclose(stat(a), stat(b), atol=0.04 * b.std(), rtol=0.03,
                                       err_msg=f"{name} {kw} {stat.__name__}")
    w = nn.init.orthogonal_(nn.Parameter(lk.zeros(6, 2, 5))).detach().numpy().reshape(6, 10)
    np.testing.assert_allclose(w.T @ w if w.shape[0] > w.shape[1] else w @ w.T, np.eye(6),
                               atol=1e-5)
    for name, args in (("eye_", ()), ("dirac_", ()), ("dirac_", (2,)), ("zeros_", ()),
                       ("ones_", ()), ("constant_", (0.3,))):
        shape = (4, 5) if name == "eye_" else (4, 3, 3, 2)
        a = getattr(nn.init, name)(nn.Parameter(lk.zeros(*shape)), *args).detach().numpy()
        b = getattr(torch.nn.init, name)(torch.empty(*shape), *args).numpy()
        np.testing.assert_array_equal(a, b, err_msg=name)


def test_init_takes_a_generator():
    g = lk.Generator().manual_seed(3)
    a = nn.init.normal_(nn.Parameter(lk.zeros(5)), generator=g).detach().numpy()
    lk.manual_seed(0)
    b = nn.init.normal_(nn.Parameter(lk.zeros(5)), generator=g.manual_seed(3)).detach().numpy()
    np.testing.assert_array_equal(a, b)


def test_calculate_gain_and_fans_are_pytorchs():
    for name in ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                 "conv_transpose3d", "sigmoid", "tanh", "relu", "leaky_relu", "selu"):
        assert nn.init.calculate_gain(name) == torch.nn.init.calculate_gain(name)
    assert nn.init.calculate_gain("leaky_relu", 0.2) == torch.nn.init.calculate_gain(
        "leaky_relu", 0.2)
    for shape in ((3, 4), (5, 2, 3), (6, 4, 3, 2)):
        assert nn.init._calculate_fan_in_and_fan_out(lk.zeros(*shape)) == \
            torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(*shape))
    with pytest.raises(ValueError, match="unknown nonlinearity"):
        nn.init.calculate_gain("swish")
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.xavier_uniform_(nn.Parameter(lk.zeros(3)))


# ---- dropout ------------------------------------------------------------------------------------
def test_dropout_statistics_and_structure():
    lk.manual_seed(0)
    x = lk.ones(200, 50, 4)
    y = F.dropout(x, 0.3).numpy()
    assert set(np.unique(y)) == {0.0, np.float32(1 / 0.7)}
    assert abs((y == 0).mean() - 0.3) < 0.01
    y = F.dropout1d(x, 0.3).numpy()
    assert (y.min(-1) == y.max(-1)).all() and abs((y[..., 0] == 0).mean() - 0.3) < 0.02
    y = F.dropout2d(lk.ones(100, 40, 3, 3), 0.4).numpy()
    assert (y.reshape(100, 40, 9).std(-1) == 0).all() and abs((y == 0).mean() - 0.4) < 0.02
    assert F.dropout2d(lk.ones(4, 3, 3), 0.5).shape == (4, 3, 3)         # unbatched
    z = lk.randn(200000)
    y = F.alpha_dropout(z, 0.2, training=True).numpy()
    theirs = TF.alpha_dropout(torch.randn(200000), 0.2, training=True).numpy()
    assert abs(y.mean() - theirs.mean()) < 0.01 and abs(y.std() - theirs.std()) < 0.01
    assert np.isclose(_most_common(y), _most_common(theirs))                 # the dropped value
    y = F.feature_alpha_dropout(lk.randn(300, 40, 5), 0.5, training=True).numpy()
    dropped = (y == y[..., :1]).all(-1)
    assert abs(dropped.mean() - 0.5) < 0.03
    m = nn.Dropout(0.5)
    assert m(x) is not x and m.eval()(x) is x
    assert F.dropout(x, 1.0).numpy().sum() == 0
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout2d(1.5)


def _most_common(values):
    unique, counts = np.unique(values, return_counts=True)
    return unique[counts.argmax()]


# ---- reprs and errors ----------------------------------------------------------------------------
FAMILIES = ["activation", "linear", "container", "conv", "pooling", "normalization", "dropout",
            "sparse", "upsampling", "distance", "padding"]


def _family_cases():
    for family in FAMILIES:
        yield from importlib.import_module(f"{__package__}.cases.{family}").MODULE_CASES


@pytest.mark.parametrize("case", list(_family_cases()), ids=repr)
def test_repr_is_pytorchs(case):
    assert repr(case.build(nn)) == repr(case.build(torch.nn)).replace("torch.", "lk.")


def test_layer_errors_explain_the_fix():
    with pytest.raises(lk.ShapeError, match=r"expects input \(N, 3, H, W\).*unsqueeze\(1\)"):
        nn.Conv2d(3, 4, 3)(lk.ones(2, 5, 5))
    with pytest.raises(ValueError, match="groups=3 must be positive and divide"):
        nn.Conv2d(4, 6, 3, groups=3)
    with pytest.raises(ValueError, match="not supported for strided"):
        nn.Conv2d(4, 6, 3, padding="same", stride=2)
    with pytest.raises(ValueError, match="padding_mode='mirror'"):
        nn.Conv1d(2, 2, 3, padding_mode="mirror")
    with pytest.raises(lk.ShapeError, match="expected 4D input"):
        nn.BatchNorm2d(3)(lk.ones(2, 3))
    with pytest.raises(lk.ShapeError, match="has 2 channels"):
        nn.BatchNorm1d(3)(lk.ones(4, 2))
    with pytest.raises(ValueError, match="num_groups=4"):
        nn.GroupNorm(4, 6)
    with pytest.raises(lk.ShapeError, match="cannot be split"):
        nn.Unflatten(1, (3, 3))(lk.ones(2, 8))
    with pytest.raises(ValueError, match="output size .* not reachable"):
        nn.ConvTranspose2d(2, 2, 3, stride=2)(lk.ones(1, 2, 3, 3), output_size=(20, 20))
    with pytest.raises(ValueError, match="padding_idx=7 is outside"):
        nn.Embedding(5, 2, padding_idx=7)
    with pytest.raises(ValueError, match="per_sample_weights need mode='sum'"):
        nn.EmbeddingBag(5, 2)(lk.tensor([1, 2]), lk.tensor([0]), lk.ones(2))
