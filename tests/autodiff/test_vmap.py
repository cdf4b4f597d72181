"""lk.vmap: per-example gradients, composition with grad / jvp / lk.function / itself, the
in_axes / out_axes forms, the fallback for ops without a batching rule, and its errors.

Every op's batching rule is checked against a loop by the op harness (tests/tensor/test_ops.py,
``test_vmap_*``); this file checks vmap as a transform."""
import warnings

import numpy as np
import pytest

import labkit as lk
from labkit.autodiff import BatchedTensor, VmapError, VmapFallbackWarning
from labkit.tensor.shape_rules import same_as_first


def _rand(rng, *shape, device="cpu:0"):
    return lk.tensor(rng.standard_normal(shape), device=device)


def _close(a, b, **kw):
    np.testing.assert_allclose(np.asarray(a.numpy()), np.asarray(b.numpy()), rtol=1e-10,
                               atol=1e-12, **kw)


def _loop(f, *args, in_axes):
    """``f`` over the examples one by one (each argument indexed along its axis), stacked."""
    n = next(a.shape[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = []
    for i in range(n):
        outs.append(f(*[a if ax is None else lk.tensor(np.take(a.numpy(), i, axis=ax))
                        for a, ax in zip(args, in_axes)]))
    return outs


# ---- per-example gradients of an MLP (what torch.func users write) ----------------------------
def _mlp(params, x):
    w1, b1, w2, b2 = params
    h = lk.tanh(x @ w1.T + b1)
    return h @ w2.T + b2


def _mlp_loss(params, x, y):
    return ((_mlp(params, x) - y) ** 2).mean()


def _mlp_params(rng):
    return (_rand(rng, 5, 3), _rand(rng, 5), _rand(rng, 2, 5), _rand(rng, 2))


def test_per_example_gradients_of_an_mlp_tuple_params(device):
    rng = np.random.default_rng(0)
    params = tuple(p.to(device) for p in _mlp_params(rng))
    xs, ys = _rand(rng, 6, 3, device=device), _rand(rng, 6, 2, device=device)
    got = lk.vmap(lk.grad(_mlp_loss), in_axes=(None, 0, 0))(params, xs, ys)
    assert isinstance(got, tuple) and len(got) == 4
    for i in range(6):
        want = lk.grad(_mlp_loss)(params, xs[i], ys[i])
        for g, w in zip(got, want):
            assert g.shape == (6,) + w.shape
            _close(g[i], w)


def test_per_example_gradients_dict_params_with_functional_call():
    model = lk.nn.Sequential(lk.nn.Linear(3, 4), lk.nn.ReLU(), lk.nn.Linear(4, 1))
    params = {k: v.detach() for k, v in model.named_parameters()}
    rng = np.random.default_rng(1)
    xs, ys = _rand(rng, 5, 3).float(), _rand(rng, 5, 1).float()

    def loss(params, x, y):
        return ((lk.func.functional_call(model, params, (x,)) - y) ** 2).sum()

    got = lk.func.vmap(lk.func.grad(loss), in_dims=(None, 0, 0))(params, xs, ys)
    assert set(got) == set(params)
    for i in range(5):
        want = lk.grad(loss)(params, xs[i], ys[i])
        for k in params:
            np.testing.assert_allclose(got[k][i].numpy(), want[k].numpy(), rtol=1e-5,
                                       atol=1e-6)
    # the model's own parameters are untouched and still its own
    assert all(p is q for p, q in zip(model.parameters(), dict(model.named_parameters()).values()))


def test_per_example_gradients_single_weight_against_torch():
    import torch
    rng = np.random.default_rng(2)
    w, xs, ys = rng.standard_normal((2, 3)), rng.standard_normal((4, 3)), rng.standard_normal((4, 2))

    def loss(w, x, y):
        return ((x @ w.T - y) ** 2).sum()

    got = lk.vmap(lk.grad(loss), in_axes=(None, 0, 0))(lk.tensor(w), lk.tensor(xs), lk.tensor(ys))
    want = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))(
        torch.tensor(w), torch.tensor(xs), torch.tensor(ys))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_per_example_gradients_through_cross_entropy_and_conv():
    rng = np.random.default_rng(3)
    w = _rand(rng, 2, 1, 3, 3)
    xs = _rand(rng, 4, 1, 5, 5)
    labels = lk.tensor([0, 1, 1, 0])

    def loss(w, x, label):
        logits = lk.conv2d(x[None], w).mean(dim=(2, 3))      # (1, 2)
        return lk.nn.functional.cross_entropy(logits, label[None])

    got = lk.vmap(lk.grad(loss), in_axes=(None, 0, 0))(w, xs, labels)
    for i in range(4):
        _close(got[i], lk.grad(loss)(w, xs[i], labels[i]))


# ---- composition ------------------------------------------------------------------------------
def test_grad_of_vmap():
    rng = np.random.default_rng(4)
    w, xs = _rand(rng, 3), _rand(rng, 5, 3)

    def total(w):
        return lk.vmap(lambda x: lk.tanh((x * w).sum()), in_axes=0)(xs).sum()
    _close(lk.grad(total)(w), lk.grad(lambda w: lk.tanh((xs * w).sum(dim=1)).sum())(w))
    assert lk.gradcheck(total, [w])


def test_vmap_of_grad_of_grad_and_grad_of_vmap_of_grad():
    xs = lk.tensor([0.5, 1.0, 2.0], dtype="float64")
    second = lk.vmap(lk.grad(lk.grad(lambda x: x ** 3)))(xs)
    _close(second, 6 * xs)
    w = lk.tensor(2.0, dtype="float64")
    # d/dw sum_i d/dx (w x^2) = d/dw sum_i 2 w x = sum_i 2 x
    out = lk.grad(lambda w: lk.vmap(lk.grad(lambda x: w * x ** 2))(xs).sum())(w)
    assert out.item() == pytest.approx(float(2 * xs.sum().item()))


def test_gradients_through_per_example_gradients_and_jacobians():
    """grad of vmap of grad (and of jacobians): the per-example transforms keep the batch's own
    history, so an outer gradient differentiates through them."""
    ws = _rand(np.random.default_rng(12), 4, 3)
    inner = lk.grad(lambda w: (lk.tanh(w) ** 2).sum())
    got = lk.grad(lambda ws: lk.vmap(inner)(ws).sum())(ws)
    for i in range(4):
        _close(got[i], lk.grad(lambda w: inner(w).sum())(ws[i]))
    assert lk.gradcheck(lambda ws: lk.vmap(inner)(ws), [ws])
    assert lk.gradcheck(lambda ws: lk.vmap(lk.hessian(lambda w: (lk.tanh(w) ** 3).sum()))(ws),
                        [ws])
    assert lk.gradcheck(lambda ws: lk.jacrev(lambda w: lk.vmap(lambda v: lk.tanh(v * w).sum())(
        ws))(ws[0]), [ws])


def test_vmap_of_jvp_and_vjp():
    rng = np.random.default_rng(5)
    x, vs = _rand(rng, 3), _rand(rng, 4, 3)
    f = lambda x: lk.tanh(x) * x   # noqa: E731
    got = lk.vmap(lambda v: lk.jvp(f, (x,), (v,))[1])(vs)
    for i in range(4):
        _close(got[i], lk.jvp(f, (x,), (vs[i],))[1])
    _, pull = lk.vjp(f, x)
    got = lk.vmap(lambda u: pull(u)[0])(vs)
    for i in range(4):
        _close(got[i], pull(vs[i])[0])


def test_nested_vmap_matches_a_double_loop():
    rng = np.random.default_rng(6)
    a, b = _rand(rng, 3, 4, 2), _rand(rng, 4, 2, 5)
    got = lk.vmap(lk.vmap(lambda x, y: lk.softmax(x @ y, dim=0), in_axes=(0, None)),
                  in_axes=(1, 0), out_axes=1)(a, b)
    assert got.shape == (3, 4, 5)
    for i in range(3):
        for j in range(4):
            _close(got[i, j], lk.softmax(a[i, j] @ b[j], dim=0))


def test_vmap_of_a_captured_function_and_capture_of_a_vmapped_one():
    rng = np.random.default_rng(7)
    w, xs = _rand(rng, 3, 2), _rand(rng, 6, 3)

    def per_example(x, w):
        return lk.relu(x @ w).sum() + x.max()

    eager = lk.vmap(per_example, in_axes=(0, None))(xs, w)
    captured = lk.function(per_example)
    np.testing.assert_allclose(lk.vmap(captured, in_axes=(0, None))(xs, w).numpy(),
                               eager.numpy(), rtol=1e-12)
    assert len(captured._batched) == 1
    inner = next(iter(captured._batched.values()))
    assert len(inner.traces) == 1 and inner.traces[0].graph is not None
    lk.vmap(captured, in_axes=(0, None))(xs * 2.0, w)          # no new trace
    assert len(inner.traces) == 1
    of_vmap = lk.function(lk.vmap(per_example, in_axes=(0, None)))
    np.testing.assert_allclose(of_vmap(xs, w).numpy(), eager.numpy(), rtol=1e-12)
    assert len(of_vmap.traces) == 1
    # per-example gradients, captured
    grads = lk.function(lk.vmap(lk.grad(per_example, argnums=1), in_axes=(0, None)))(xs, w)
    want = lk.vmap(lk.grad(per_example, argnums=1), in_axes=(0, None))(xs, w)
    np.testing.assert_allclose(grads.numpy(), want.numpy(), rtol=1e-12)


def test_jacobians_inside_vmap():
    rng = np.random.default_rng(8)
    xs = _rand(rng, 4, 3)
    f = lambda x: lk.tanh(x) * x.sum()   # noqa: E731
    got = lk.vmap(lk.jacrev(f))(xs)
    assert got.shape == (4, 3, 3)
    for i in range(4):
        _close(got[i], lk.jacfwd(f)(xs[i]))


# ---- in_axes / out_axes ----------------------------------------------------------------------
@pytest.mark.parametrize("in_axes,out_axes", [(0, 0), (1, 0), (-1, -1), ((0, None), 1),
                                              ((-2, None), -2), ([1, None], 0)])
def test_in_and_out_axes_forms(in_axes, out_axes):
    rng = np.random.default_rng(9)
    x, y = _rand(rng, 3, 3), _rand(rng, 3, 3)
    f = lambda a, b: lk.exp(a) * b + a.sum()   # noqa: E731
    got = lk.vmap(f, in_axes=in_axes, out_axes=out_axes)(x, y)
    axes = (in_axes, in_axes) if isinstance(in_axes, int) else tuple(in_axes)
    outs = [o.numpy() for o in _loop(f, x, y, in_axes=axes)]
    np.testing.assert_allclose(got.numpy(), np.stack(outs, axis=out_axes), rtol=1e-12)


def test_nested_in_axes_and_tuple_outputs():
    rng = np.random.default_rng(10)
    params = {"w": _rand(rng, 2, 4), "scale": _rand(rng)}
    xs = _rand(rng, 3, 4)

    def f(p, x):
        return p["w"] @ x * p["scale"], {"norm": (x * x).sum()}

    out, extra = lk.vmap(f, in_axes=({"w": None, "scale": None}, 0), out_axes=(1, 0))(params, xs)
    assert out.shape == (2, 3) and extra["norm"].shape == (3,)
    for i in range(3):
        _close(out[:, i], params["w"] @ xs[i] * params["scale"])
    # a prefix that does not match the argument's structure is refused, naming it
    with pytest.raises(ValueError, match="in_axes"):
        lk.vmap(f, in_axes=((None, None), 0))(params, xs)


def test_batch_size_one_and_unbatched_outputs():
    x = lk.tensor([[1.0, 2.0]])
    out = lk.vmap(lambda v: (v * 2.0, lk.ones(3)))(x)
    assert out[0].tolist() == [[2.0, 4.0]]
    assert out[1].tolist() == [[1.0, 1.0, 1.0]]      # the same for every example: repeated
    ones = lk.vmap(lambda v: lk.ones(2), in_axes=None, axis_size=3)(x)
    assert ones.shape == (3, 2)


def test_mismatched_batch_sizes_name_the_sizes():
    with pytest.raises(lk.ShapeError) as info:
        lk.vmap(lambda a, b: a + b)(lk.ones(3, 2), lk.ones(4, 2))
    msg = str(info.value)
    assert "a has size 3" in msg and "b has size 4" in msg


def test_axis_errors_are_clear():
    with pytest.raises(lk.ShapeError, match=r"in_axes=2 for x .*out of range"):
        lk.vmap(lambda x: x, in_axes=2)(lk.ones(3, 2))
    with pytest.raises(ValueError, match="2 entries.*1 positional"):
        lk.vmap(lambda x: x, in_axes=(0, 0))(lk.ones(3))
    with pytest.raises(ValueError, match="maps no argument"):
        lk.vmap(lambda x: x, in_axes=None)(lk.ones(3))
    with pytest.raises(ValueError, match="not a tensor"):
        lk.vmap(lambda x, n: x * n)(lk.ones(3), 2.0)
    assert lk.vmap(lambda x, n: x * n, in_axes=(0, None))(lk.ones(3), 2.0).tolist() == [2.0] * 3
    with pytest.raises(lk.ShapeError, match="out_axes=3"):
        lk.vmap(lambda x: x, out_axes=3)(lk.ones(3, 2))
    with pytest.raises(VmapError, match="out_axes is None"):
        lk.vmap(lambda x: x, out_axes=None)(lk.ones(3, 2))


def test_shape_errors_inside_vmap_name_one_examples_shapes():
    with pytest.raises(lk.ShapeError) as info:
        lk.vmap(lambda x: x @ lk.ones(3, 2))(lk.ones(5, 4))
    assert "(4,)" in str(info.value) and "matmul" in str(info.value)


# ---- reading one example's value is an error ---------------------------------------------------
@pytest.mark.parametrize("what,call", [("item", lambda x: x.item()),
                                       ("bool", lambda x: x if (x > 0).all() else -x),
                                       ("numpy", lambda x: x.numpy()),
                                       ("float", lambda x: float(x))])
def test_reading_a_value_inside_vmap_is_a_clear_error(what, call):
    with pytest.raises(VmapError) as info:
        lk.vmap(call)(lk.ones(3, 2))
    msg = str(info.value)
    assert "lk.vmap" in msg and "3 examples" in msg
    if what != "bool":
        assert "(2,)" in msg
    else:
        assert "lk.where" in msg


def test_inside_vmap_tensors_have_one_examples_shape():
    seen = {}

    def f(x):
        seen["shape"], seen["len"], seen["type"] = x.shape, len(x), type(x)
        seen["repr"] = repr(x)
        return x

    lk.vmap(f, in_axes=1)(lk.ones(2, 5, 3))
    assert seen["shape"] == (2, 3) and seen["len"] == 2 and seen["type"] is BatchedTensor
    assert "bdim=1" in seen["repr"]


def test_backward_inside_vmap_is_refused_with_the_remedy():
    w = lk.ones(2, requires_grad=True)
    with pytest.raises(lk.GradError, match="lk.grad"):
        lk.vmap(lambda x: (x * w).sum().backward())(lk.ones(3, 2))


def test_a_batched_tensor_kept_after_vmap_is_named():
    kept = []
    lk.vmap(lambda x: kept.append(x) or x)(lk.ones(3, 2))
    with pytest.raises(lk.LabkitError, match="batched tensor of an lk.vmap call"):
        kept[0] + 1.0


# ---- an op without a batching rule: one example at a time, with one warning ---------------------
def test_op_without_a_rule_runs_per_example_and_warns_once():
    calls = []

    def kernel(xp, x, k):
        calls.append(x.shape)
        return xp.cumsum(x, axis=-1) * k

    op = lk.op("test_cumsum_no_rule", shape=same_as_first, register=False, vjp=None)(kernel)
    xs = lk.tensor(np.arange(12.0).reshape(3, 4))
    with pytest.warns(VmapFallbackWarning, match="test_cumsum_no_rule.*3 examples"):
        out = lk.vmap(lambda x: op(x, k=2.0))(xs)
    np.testing.assert_allclose(out.numpy(), np.cumsum(xs.numpy(), axis=1) * 2.0)
    assert calls == [(4,)] * 3
    with warnings.catch_warnings():
        warnings.simplefilter("error", VmapFallbackWarning)
        lk.vmap(lambda x: op(x, k=1.0))(xs)               # said once per op
    # gradients through the fallback: grad of vmap and vmap of grad
    square = lk.op("test_square_no_rule", shape=same_as_first, register=False,
                   vjp=lambda g, out, x: (g * 2.0 * x,))(lambda xp, x: x * x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VmapFallbackWarning)
        _close(lk.vmap(lk.grad(lambda x: square(x).sum()))(xs), 2 * xs)
        _close(lk.grad(lambda x: lk.vmap(square)(x).sum())(xs), 2 * xs)
        empty = lk.vmap(square)(lk.ones(0, 4))
    assert empty.shape == (0, 4)


def test_a_declared_rule_is_used():
    def rule(inputs, bdims):
        return double(inputs[0]), bdims[0]
    double = lk.op("test_double_ruled", shape=same_as_first, register=False, batch=rule,
                   vjp=lambda g, out, x: (g * 2.0,))(lambda xp, x: x * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", VmapFallbackWarning)
        assert lk.vmap(double, in_axes=1)(lk.ones(2, 3)).tolist() == [[2.0, 2.0]] * 3


def test_custom_vjp_under_vmap_uses_its_rule():
    @lk.custom_vjp
    def clipped(x):
        return x * 1.0
    clipped.defvjp(lambda x: (x * 1.0, None), lambda res, g: (g.clip(-1.0, 1.0),))
    xs = lk.tensor([[1.0, -2.0], [3.0, 0.5]], dtype="float64")

    def loss(x):
        return (clipped(x) * lk.tensor([5.0, 0.2], dtype="float64")).sum()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VmapFallbackWarning)
        per_example = lk.vmap(lk.grad(loss))(xs)
        batch = lk.grad(lambda x: lk.vmap(loss)(x).sum())(xs)
    assert per_example.tolist() == [[1.0, 0.2], [1.0, 0.2]]
    assert batch.tolist() == [[1.0, 0.2], [1.0, 0.2]]


# ---- results whose size depends on the values: refused, as PyTorch's vmap refuses them -----------
@pytest.mark.parametrize("name, f", [
    ("nonzero", lambda x: lk.nonzero(x)),
    ("unique", lambda x: lk.unique(x)),
    ("getitem", lambda x: x[x > 0]),
    ("getitem", lambda x: lk.masked_select(x, x > 0)),
    ("index_put", lambda x: x.index_put((x > 0,), lk.tensor(1))),
    ("repeat_interleave", lambda x: lk.repeat_interleave(x)),
    ("repeat_interleave", lambda x: lk.arange(2).repeat_interleave(x, output_size=3)),
    ("one_hot", lambda x: lk.nn.functional.one_hot(x)),
])
def test_data_dependent_sizes_are_refused_naming_the_op(name, f):
    xs = lk.tensor([[1, 2], [0, 1]])       # each example's result would have its own size
    with pytest.raises(lk.autodiff.DataDependentShapeError) as info:
        lk.vmap(f)(xs)
    assert info.value.op == name and isinstance(info.value, VmapError)
    assert f"lk.vmap cannot batch {name}" in str(info.value) and "PyTorch" in str(info.value)


def test_data_dependent_ops_on_values_shared_by_the_examples_are_batched():
    xs = lk.tensor(np.arange(12.0).reshape(2, 2, 3))
    mask = lk.tensor([True, False, True])
    with warnings.catch_warnings():
        warnings.simplefilter("error", VmapFallbackWarning)
        _close(lk.vmap(lambda x: x[:, mask])(xs), xs[:, :, mask])
        # a shared mask beside a batched index: indexed by its True positions
        rows = lk.tensor([1, 0])
        _close(lk.vmap(lambda x, i: x[i, mask])(xs, rows),
               lk.stack([xs[0, 1, mask], xs[1, 0, mask]]))
        _close(lk.vmap(lambda x: x.repeat_interleave(lk.tensor([2, 0, 1]), dim=1))(xs),
               xs.repeat_interleave(lk.tensor([2, 0, 1]), dim=2))
        assert lk.vmap(lambda i: lk.nn.functional.one_hot(i, 3))(
            lk.tensor([[0, 2], [1, 1]])).tolist() == [[[1, 0, 0], [0, 0, 1]],
                                                    [[0, 1, 0], [0, 1, 0]]]


@pytest.mark.parametrize("f", [
    lambda x, i: x[0, :, i],                  # an int apart from a tensor: PyTorch's layout
    lambda x, i: x[i, :, 1],
    lambda x, i: x[:, i, ..., i],             # ... standing for no dimension
    lambda x, i: x[None, i, :, i],
    lambda x, i: x[i[:, None], 1:, i[None]],
])
def test_indexing_under_vmap_has_pytorchs_layout(f):
    import torch
    rng = np.random.default_rng(5)
    x, i = rng.standard_normal((3, 2, 4, 2)), rng.integers(0, 2, (3, 2))
    for in_dims in ((0, 0), (0, None), (None, 0)):
        xb = x if in_dims[0] is not None else x[0]
        ib = i if in_dims[1] is not None else i[0]
        want = torch.func.vmap(f, in_dims=in_dims)(torch.from_numpy(xb), torch.from_numpy(ib))
        got = lk.vmap(f, in_axes=in_dims)(lk.tensor(xb), lk.tensor(ib))
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_vmap_costs_nothing_when_unused():
    from labkit.tensor import dispatch
    from labkit.tensor.eager import EagerMode
    assert isinstance(dispatch.current_mode(), EagerMode)
    lk.vmap(lambda x: x * 2)(lk.ones(3))
    assert isinstance(dispatch.current_mode(), EagerMode)
    assert len(dispatch._state.stack) == 1


# ---- lk.func -----------------------------------------------------------------------------------
def test_func_names_and_signatures():
    rng = np.random.default_rng(11)
    x = _rand(rng, 3)
    f = lambda x: (x ** 3).sum()   # noqa: E731
    g, v = lk.func.grad_and_value(f)(x)
    _close(g, 3 * x ** 2)
    assert v.item() == pytest.approx(f(x).item())
    (g, (v, aux)) = lk.func.grad_and_value(lambda x: (f(x), x * 2), has_aux=True)(x)
    _close(aux, x * 2)
    out, pull, aux = lk.func.vjp(lambda x: (x * 2, x.sum()), x, has_aux=True)
    _close(pull(lk.ones(3))[0], lk.full((3,), 2.0, dtype="float64"))
    out, tangent = lk.func.jvp(lambda x: x * x, (x,), (lk.ones(3, dtype="float64"),))
    _close(tangent, 2 * x)
    _close(lk.func.hessian(f)(x), lk.hessian(f)(x))
    _close(lk.func.jacrev(lambda x: x * x)(x), lk.func.jacfwd(lambda x: x * x)(x))
    with pytest.raises(VmapError, match="randomness='different'"):
        lk.func.vmap(f, randomness="different")
    # torch.vmap's spellings work on lk.vmap too
    xs = lk.ones(3, 2)
    assert lk.vmap(lambda x: x.sum(), in_dims=1, out_dims=0, randomness="same",
                   chunk_size=2)(xs).shape == (2,)
    with pytest.raises(ValueError, match="in_dims=2"):
        lk.vmap(lambda x: x, in_dims=2)(xs)
    with pytest.raises(TypeError, match="both in_axes= and in_dims="):
        lk.vmap(f, in_axes=1, in_dims=1)


def test_ensemble_with_stack_module_state():
    models = [lk.nn.Linear(3, 2) for _ in range(4)]
    params, buffers = lk.func.stack_module_state(models)
    x = lk.randn(5, 3)

    def run(params, buffers, x):
        return lk.func.functional_call(models[0], (params, buffers), (x,))

    out = lk.func.vmap(run, in_dims=(0, 0, None))(params, buffers, x)
    assert out.shape == (4, 5, 2)
    for i, m in enumerate(models):
        np.testing.assert_allclose(out[i].detach().numpy(), m(x).detach().numpy(), rtol=1e-6)


def test_functional_call_errors():
    lin = lk.nn.Linear(2, 1)
    with pytest.raises(ValueError, match="unexpected key.*'w'"):
        lk.func.functional_call(lin, {"w": lk.ones(1, 2)}, (lk.ones(2),))
    with pytest.raises(ValueError, match="missing key.*'bias'"):
        lk.func.functional_call(lin, {"weight": lk.ones(1, 2)}, (lk.ones(2),), strict=True)
