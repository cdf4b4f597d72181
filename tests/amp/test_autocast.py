"""Autocast against PyTorch's CPU autocast: which ops run in which dtype, eagerly and captured;
gradients through the casts; nesting, the decorator form, traces keyed by the autocast state;
and the GPU lists on a (simulated) GPU."""
import numpy as np
import pytest

import labkit as lk
import labkit.nn.functional as F
from labkit.tensor import autocast as autocast_mode

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _ce(fw, mod):
    return lambda a: fw.cross_entropy(a, mod.tensor([0, 1]))


def _nll(fw, mod):
    return lambda a: fw.nll_loss(a, mod.tensor([0, 1]))


# name -> (labkit function, PyTorch function, input shapes): PyTorch's CPU lists decide
CASES = {
    "matmul": (lambda a, b: a @ b, lambda a, b: a @ b, [(3, 4), (4, 5)]),
    "mm": (lk.mm, torch.mm, [(3, 4), (4, 5)]),
    "bmm": (lk.bmm, torch.bmm, [(2, 3, 4), (2, 4, 5)]),
    "baddbmm": (lk.baddbmm, torch.baddbmm, [(2, 3, 5), (2, 3, 4), (2, 4, 5)]),
    "addmm": (lk.addmm, torch.addmm, [(3, 5), (3, 4), (4, 5)]),
    "einsum": (lambda a, b: lk.einsum("ij,jk->ik", a, b),
               lambda a, b: torch.einsum("ij,jk->ik", a, b), [(3, 4), (4, 5)]),
    "tensordot": (lambda a, b: lk.tensordot(a, b, 1), lambda a, b: torch.tensordot(a, b, 1),
                  [(3, 4), (4, 5)]),
    "linear": (F.linear, TF.linear, [(3, 4), (5, 4), (5,)]),
    "conv1d": (F.conv1d, TF.conv1d, [(1, 2, 5), (3, 2, 3), (3,)]),
    "conv2d": (F.conv2d, TF.conv2d, [(1, 2, 5, 5), (3, 2, 3, 3), (3,)]),
    "conv_transpose2d": (F.conv_transpose2d, TF.conv_transpose2d,
                         [(1, 2, 5, 5), (2, 3, 3, 3), (3,)]),
    "prelu": (F.prelu, TF.prelu, [(3,), (1,)]),
    "sdpa": (F.scaled_dot_product_attention, TF.scaled_dot_product_attention,
             [(1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4)]),
    "mv": (lk.mv, torch.mv, [(3, 4), (4,)]),
    "dot": (lk.dot, torch.dot, [(3,), (3,)]),
    "bilinear": (F.bilinear, TF.bilinear, [(2, 3), (2, 4), (5, 3, 4)]),
    "exp": (lk.exp, torch.exp, [(3,)]),
    "log": (lk.log, torch.log, [(3,)]),
    "pow": (lambda a: a ** 2, lambda a: a ** 2, [(3,)]),
    "sum": (lk.sum, torch.sum, [(3,)]),
    "mean": (lk.mean, torch.mean, [(3,)]),
    "cumsum": (lambda a: lk.cumsum(a, 0), lambda a: torch.cumsum(a, 0), [(3,)]),
    "prod": (lk.prod, torch.prod, [(3,)]),
    "softmax": (lambda a: F.softmax(a, -1), lambda a: TF.softmax(a, -1), [(3,)]),
    "log_softmax": (lambda a: F.log_softmax(a, -1), lambda a: TF.log_softmax(a, -1), [(3,)]),
    "logsumexp": (lambda a: lk.logsumexp(a, 0), lambda a: torch.logsumexp(a, 0), [(3,)]),
    "layer_norm": (lambda a: F.layer_norm(a, (3,)), lambda a: TF.layer_norm(a, (3,)), [(2, 3)]),
    "group_norm": (lambda a: F.group_norm(a, 1), lambda a: TF.group_norm(a, 1), [(2, 2, 3)]),
    "norm": (lk.norm, torch.norm, [(3,)]),
    "mse_loss": (F.mse_loss, TF.mse_loss, [(3,), (3,)]),
    "l1_loss": (F.l1_loss, TF.l1_loss, [(3,), (3,)]),
    "smooth_l1_loss": (F.smooth_l1_loss, TF.smooth_l1_loss, [(3,), (3,)]),
    "kl_div": (lambda a, b: F.kl_div(a, b, reduction="batchmean"),
               lambda a, b: TF.kl_div(a, b, reduction="batchmean"), [(2, 3), (2, 3)]),
    "cross_entropy": (_ce(F, lk), _ce(TF, torch), [(2, 3)]),
    "nll_loss": (_nll(F, lk), _nll(TF, torch), [(2, 3)]),
    "binary_cross_entropy": (F.binary_cross_entropy, TF.binary_cross_entropy, [(3,), (3,)]),
    "bce_with_logits": (F.binary_cross_entropy_with_logits,
                        TF.binary_cross_entropy_with_logits, [(3,), (3,)]),
    "cosine_similarity": (lambda a, b: F.cosine_similarity(a, b, dim=0),
                          lambda a, b: TF.cosine_similarity(a, b, dim=0), [(3,), (3,)]),
    "inverse": (lk.inverse, torch.inverse, [(3, 3)]),
    "add": (lk.add, torch.add, [(3,), (3,)]),
    "relu": (F.relu, TF.relu, [(3,)]),
    "gelu": (F.gelu, TF.gelu, [(3,)]),
    "tanh": (lk.tanh, torch.tanh, [(3,)]),
    "cat": (lambda a, b: lk.cat([a, b]), lambda a, b: torch.cat([a, b]), [(3,), (3,)]),
    "max_pool2d": (lambda a: F.max_pool2d(a, 2), lambda a: TF.max_pool2d(a, 2), [(1, 1, 4, 4)]),
    "embedding": (lambda w: F.embedding(lk.tensor([0, 1]), w),
                  lambda w: TF.embedding(torch.tensor([0, 1]), w), [(3, 4)]),
}
# input dtypes: all float32, all bfloat16, all float16, and float32 mixed with bfloat16
MIXES = {"float32": lambda i: "float32", "bfloat16": lambda i: "bfloat16",
         "float16": lambda i: "float16", "mixed": lambda i: ("float32", "bfloat16")[i % 2]}


def _inputs(shapes, mix, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(0.1, 0.9, s).astype(np.float32) for s in shapes]
    if len(shapes) == 2 and shapes[0] == shapes[1] == (3, 3):
        arrays[0] += np.eye(3, dtype=np.float32)
    dtypes = [MIXES[mix](i) for i in range(len(shapes))]
    lk_args = [lk.tensor(a).to(getattr(lk, d)) for a, d in zip(arrays, dtypes)]
    torch_args = [torch.from_numpy(a).to(getattr(torch, d)) for a, d in zip(arrays, dtypes)]
    return lk_args, torch_args


def _torch_dtype(fn, args, dtype):
    try:
        with torch.autocast("cpu", dtype=getattr(torch, dtype)):
            return str(fn(*args).dtype).replace("torch.", "")
    except RuntimeError:
        return None      # PyTorch has no kernel for it (cat of float16 under autocast...)


@pytest.mark.parametrize("autocast_dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("mix", sorted(MIXES))
@pytest.mark.parametrize("name", sorted(CASES))
def test_op_runs_in_the_dtype_pytorch_cpu_autocast_gives(name, mix, autocast_dtype):
    lk_fn, torch_fn, shapes = CASES[name]
    lk_args, torch_args = _inputs(shapes, mix)
    expected = _torch_dtype(torch_fn, torch_args, autocast_dtype)
    if expected is None:
        pytest.skip(f"PyTorch refuses {name} on {mix} under {autocast_dtype} autocast")
    with lk.autocast("cpu", dtype=getattr(lk, autocast_dtype)):
        eager = lk_fn(*lk_args)
        captured = lk.function(lambda *xs: lk_fn(*xs))(*lk_args)
    assert eager.dtype.name == expected, \
        f"{name} on {mix}: labkit {eager.dtype}, PyTorch {expected}"
    assert captured.dtype.name == expected, f"{name} on {mix}, captured: {captured.dtype}"
    with torch.autocast("cpu", dtype=getattr(torch, autocast_dtype)):
        want = torch_fn(*torch_args).float().detach().numpy()
    got = eager.float().numpy()
    tol = 2e-2 if autocast_dtype == "bfloat16" or mix != "float32" else 5e-3
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)
    np.testing.assert_allclose(captured.float().numpy(), got, rtol=1e-6, atol=1e-6 * scale)


def test_outside_autocast_nothing_is_cast():
    a, w = lk.ones(2, 3), lk.ones(3, 4)
    with lk.autocast("cpu"):
        assert (a @ w).dtype is lk.bfloat16
    assert (a @ w).dtype is lk.float32 and not autocast_mode.active()


def test_nested_regions_and_the_decorator_form():
    a, w = lk.ones(2, 3), lk.ones(3, 4)
    with lk.autocast("cpu", dtype=lk.bfloat16):
        with lk.autocast("cpu", enabled=False):
            assert (a @ w).dtype is lk.float32
            with lk.autocast("cpu", dtype=lk.float16):
                assert (a @ w).dtype is lk.float16
        assert (a @ w).dtype is lk.bfloat16
        assert lk.is_autocast_enabled("cpu") and lk.get_autocast_dtype("cpu") is lk.bfloat16
    assert not lk.is_autocast_enabled("cpu")

    @lk.amp.autocast("cpu")
    def forward(x):
        return x @ w
    assert forward(a).dtype is lk.bfloat16 and (a @ w).dtype is lk.float32
    with lk.cpu.amp.autocast():
        assert (a @ w).dtype is lk.bfloat16
    if lk.cuda.is_available():
        with lk.cuda.amp.autocast():       # a GPU autocast leaves CPU tensors alone
            assert (a @ w).dtype is lk.float32 and lk.is_autocast_enabled("cuda")
    else:
        with pytest.warns(UserWarning, match="no GPU"):    # as PyTorch: warns, disabled
            region = lk.cuda.amp.autocast()
        with region:
            assert (a @ w).dtype is lk.float32 and not lk.is_autocast_enabled("cuda")
    for library in (lk, torch):     # another dtype: warns and is disabled, as PyTorch's
        for dtype in (library.float32, library.float64):
            with pytest.warns(UserWarning, match="not supported|bfloat16 or lk.float16"):
                region = library.autocast("cpu", dtype=dtype)
            with region:
                assert not library.is_autocast_enabled("cpu")
    with pytest.raises(ValueError, match="device_type"):
        lk.autocast("tpu")


def test_float64_is_never_cast():
    a = lk.ones(2, 3, dtype=lk.float64)
    with lk.autocast("cpu"):
        assert (a @ a.T).dtype is lk.float64
        assert F.mse_loss(a, a).dtype is lk.float64


def test_gradients_come_back_in_the_inputs_dtype_and_match_torch():
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((4, 3), (5, 3), (5,)))
    target = rng.standard_normal((4, 5)).astype(np.float32)
    lx, lw, lb = (lk.tensor(v, requires_grad=True) for v in (x, w, b))
    tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
    with lk.autocast("cpu"):
        y = F.linear(lx, lw, lb)
        loss = F.mse_loss(y, lk.tensor(target))
    loss.backward()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ty = TF.linear(tx, tw, tb)
        tloss = TF.mse_loss(ty, torch.tensor(target))
    tloss.backward()
    assert y.dtype is lk.bfloat16 and loss.dtype is lk.float32
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-3)
    for mine, theirs in ((lx, tx), (lw, tw), (lb, tb)):
        assert mine.grad.dtype is lk.float32
        np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=2e-2,
                                   atol=2e-2)


def test_backward_inside_the_region_keeps_the_forward_dtypes():
    w = lk.ones(3, 3, requires_grad=True)
    with lk.autocast("cpu"):
        h = (lk.ones(2, 3) @ w).float()
        loss = lk.nn.functional.softmax(h, -1).sum()
        loss.backward()                    # its matmuls are not cast again
    assert w.grad.dtype is lk.float32


def test_a_parameter_is_cast_once_per_region():
    model = lk.nn.Linear(3, 3)

    @lk.function
    def twice(x):
        with lk.autocast("cpu"):
            return model(model(x).float())

    twice(lk.ones(2, 3))
    casts = [n for n in twice.traces[0].raw_graph.nodes if n.kind == "op" and n.op.name == "cast"
             and n.attrs["dtype"] == "bfloat16"]
    # the input, the first result, the weight and the bias once each (not twice)
    assert len(casts) == 4, [str(n) for n in casts]
    with lk.autocast("cpu"):
        first = model.weight is not None and model(lk.ones(1, 3))
        assert len(autocast_mode._state.cache) == 2       # weight and bias, cast once
        model(lk.ones(1, 3))
        assert len(autocast_mode._state.cache) == 2
    assert first.dtype is lk.bfloat16 and not autocast_mode._state.cache


def test_cached_casts_stay_in_the_graph_or_eager_run_that_made_them():
    model, x = lk.nn.Linear(3, 3), lk.ones(2, 3)
    with lk.autocast("cpu"):
        first = lk.function(lambda x: model(x))(x)
        eager = model(x)                         # not the first trace's symbolic cast
        second = lk.function(lambda x: model(x) * 2)(x)
    np.testing.assert_array_equal(first.float().detach().numpy(), eager.float().detach().numpy())
    np.testing.assert_array_equal(second.float().detach().numpy(),
                                  2 * eager.float().detach().numpy())


def test_traces_are_keyed_by_the_autocast_state():
    w = lk.ones(3, 4)

    @lk.function
    def f(x):
        return x @ w

    x = lk.ones(2, 3)
    assert f(x).dtype is lk.float32
    with lk.autocast("cpu"):
        assert f(x).dtype is lk.bfloat16
        assert f(x).dtype is lk.bfloat16
    assert f(x).dtype is lk.float32
    assert len(f.traces) == 2
    assert f.traces[1].reason == "autocast changed: off -> bfloat16 on cpu"


def test_autocast_inside_a_captured_function_and_a_training_step_match_eager():
    lk.manual_seed(0)
    model = lk.nn.Sequential(lk.nn.Linear(4, 8), lk.nn.GELU(), lk.nn.Linear(8, 3))
    opt = lk.optim.SGD(model.parameters(), lr=0.1)
    x, y = lk.randn(16, 4), lk.tensor(np.arange(16) % 3)

    def step(x, y):
        opt.zero_grad()
        with lk.autocast("cpu"):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    state = {k: v.clone() for k, v in model.state_dict().items()}
    eager = [step(x, y).item() for _ in range(3)]
    model.load_state_dict(state)
    captured_step = lk.function(step)
    captured = [captured_step(x, y).item() for _ in range(3)]
    np.testing.assert_allclose(captured, eager, rtol=1e-6)
    assert len(captured_step.traces) == 1


def test_autocast_composes_with_vmap_grad_and_profile():
    a, w = lk.ones(2, 3), lk.ones(3, 4)
    with lk.autocast("cpu"):
        assert lk.vmap(lambda x: x @ w)(lk.ones(5, 3)).dtype is lk.bfloat16
        assert lk.vmap(lk.grad(lambda x: (x @ w).float().sum()))(lk.ones(5, 3)).dtype \
            is lk.float32
        with lk.profile():
            assert (a @ w).dtype is lk.bfloat16
        with lk.no_grad():
            assert (a @ w).dtype is lk.bfloat16
    g = lk.grad(lambda w: lk.autocast("cpu")(lambda: a @ w)().float().sum())(w)
    assert g.dtype is lk.float32 and g.tolist() == [[2.0] * 4] * 3


@pytest.mark.gpu
def test_the_gpu_lists_apply_to_gpu_tensors():
    """PyTorch's CUDA lists: exp, softmax, sum, layer_norm... in float32 as well, mv and dot in
    the low precision; CPU tensors in the same region are left alone."""
    h = lk.ones(2, 3, dtype=lk.float16, device="gpu:0")
    v = lk.ones(3, dtype=lk.float16, device="gpu:0")
    with lk.autocast("cuda"):
        assert (h @ h.T).dtype is lk.float16
        assert lk.exp(h).dtype is lk.float32 and lk.sum(h).dtype is lk.float32
        assert F.softmax(h, -1).dtype is lk.float32
        assert F.layer_norm(h, (3,)).dtype is lk.float32
        assert (h + 1).dtype is lk.float16                    # not listed: as it is
        assert lk.mv(h.float(), v.float()).dtype is lk.float16
        assert lk.exp(lk.ones(2, dtype=lk.float16)).dtype is lk.float16   # a CPU tensor
