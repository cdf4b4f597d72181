"""The ``matmul_update`` pass: ``w -= (a @ b) * s`` becomes one ``assign_add_matmul``.

Where it applies (the captured SGD step, each placement of the factor, ``assign_add``), the
results equal those with the pass off; where it must not (the product is used elsewhere or
fetched, shapes broadcast, dtypes differ, an operand changes in between), the graph keeps its
matmul and the values are the unfused ones.
"""
import numpy as np
import pytest

import labkit as lk
from labkit.graph import passes
from labkit.tensor.ops import state


@pytest.fixture(autouse=True)
def _default_switches():
    yield
    lk.config.enable_pass()


def _ops(graph):
    return [n.op_name for n in graph.nodes if n.kind == "op"]


def _mlp_step(seed=0, steps=3, scheduled=False):
    """Parameters after ``steps`` captured SGD steps of a 2-layer MLP (with ``scheduled``, the
    rate changed by StepLR between steps), the losses, and the step's graph."""
    rng = np.random.default_rng(seed)
    params = [lk.tensor(rng.standard_normal(s).astype(np.float32) * 0.1, requires_grad=True)
              for s in [(64, 200), (200,), (200, 10), (10,)]]
    x = lk.tensor(rng.standard_normal((32, 64)).astype(np.float32))
    y = lk.tensor(rng.integers(0, 10, 32))
    opt = lk.optim.SGD(params, lr=0.1)
    sched = lk.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.3)

    @lk.function
    def step(x, y):
        w1, b1, w2, b2 = params
        loss = lk.nn.functional.cross_entropy(lk.relu(x @ w1 + b1) @ w2 + b2, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    losses = []
    for _ in range(steps):
        losses.append(step(x, y).item())
        if scheduled:
            sched.step()
    return [p.detach().numpy() for p in params], losses, step.graph(x, y)


def test_sgd_step_updates_as_with_the_pass_off():
    fused, fused_losses, graph = _mlp_step()
    assert _ops(graph).count("assign_add_matmul") == 2          # both weights
    assert "assign_add_matmul" not in [n.op_name for n in graph.nodes
                                       if n.shape in [(200,), (10,)]]
    lk.config.disable_pass("matmul_update")
    plain, plain_losses, graph = _mlp_step()
    assert "assign_add_matmul" not in _ops(graph)
    np.testing.assert_allclose(fused_losses, plain_losses, rtol=1e-5)
    assert fused_losses[-1] < fused_losses[0]
    for a, b in zip(fused, plain):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_blas_and_numpy_paths_of_the_op_agree(monkeypatch):
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((300, 200)).astype(np.float32)
    a = lk.tensor(rng.standard_normal((300, 16)).astype(np.float32))
    b = lk.tensor(rng.standard_normal((16, 200)).astype(np.float32))
    results = []
    for min_size in (0, 10 ** 9):                  # BLAS where it is found; NumPy always
        monkeypatch.setattr(state, "_BLAS_MIN_SIZE", min_size)
        w = lk.tensor(w0.copy())
        out = state.assign_add_matmul(w, a, b, alpha=-0.25)
        assert out.numpy() is w.numpy() or np.shares_memory(out.numpy(), w.numpy())
        results.append(w.numpy())
    want = w0 - 0.25 * (a.numpy() @ b.numpy())
    for r in results:
        np.testing.assert_allclose(r, want, rtol=1e-5, atol=1e-5)


def test_a_scale_input_multiplies_the_update_on_both_paths(monkeypatch):
    rng = np.random.default_rng(4)
    w0 = rng.standard_normal((300, 200))
    a, b = lk.tensor(rng.standard_normal((300, 16))), lk.tensor(rng.standard_normal((16, 200)))
    scale = lk.tensor(0.3, dtype=lk.float64)
    for min_size in (0, 10 ** 9):
        monkeypatch.setattr(state, "_BLAS_MIN_SIZE", min_size)
        w = lk.tensor(w0.copy())
        state.assign_add_matmul(w, a, b, scale, alpha=-1.0)
        np.testing.assert_allclose(w.numpy(), w0 - 0.3 * (a.numpy() @ b.numpy()), rtol=1e-10,
                                   atol=1e-12)
    with pytest.raises(lk.ShapeError, match="one 0-d tensor"):
        state.assign_add_matmul(lk.tensor(w0), a, b, lk.ones(2, dtype=lk.float64))


def test_a_learning_rate_tensor_folds_in_as_the_scale():
    """SGD's captured update reads its rate from a 0-d tensor (so a scheduler can change it):
    the pass still makes one assign_add_matmul, which reads the rate when it runs."""
    w = lk.zeros((40, 30))
    rate = lk.tensor(0.1, dtype=lk.float64)
    with lk.Graph() as g:
        h = lk.placeholder((8, 40), name="h")
        dz = lk.placeholder((8, 30), name="dz")
        w.assign_sub((h.transpose() @ dz) * rate)
    opt = passes.matmul_update(g)
    fused = [n for n in opt.nodes if n.op_name == "assign_add_matmul"]
    assert len(fused) == 1 and fused[0].attrs["alpha"] == -1.0 and len(fused[0].inputs) == 4
    feeds = {opt.node("h"): np.ones((8, 40), np.float32), opt.node("dz"): np.ones((8, 30),
                                                                               np.float32)}
    opt.run([fused[0]], feeds)
    np.testing.assert_allclose(w.numpy(), -0.8, rtol=1e-6)
    rate._data[...] = 1.0                   # a new rate, the same graph
    opt.run([fused[0]], feeds)
    np.testing.assert_allclose(w.numpy(), -8.8, rtol=1e-6)


def test_scheduled_sgd_step_fuses_and_matches_the_pass_off():
    fused, fused_losses, graph = _mlp_step(steps=6, scheduled=True)
    assert _ops(graph).count("assign_add_matmul") == 2
    lk.config.disable_pass("matmul_update")
    plain, plain_losses, _ = _mlp_step(steps=6, scheduled=True)
    np.testing.assert_allclose(fused_losses, plain_losses, rtol=1e-5)
    for a, b in zip(fused, plain):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _run_update(build, shapes, arith=True):
    """Run ``build(w, *placeholders)`` in a graph with and without the pass; return the op names
    after the pass and w's value each way."""
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal(shapes[0]).astype(np.float32)
    feeds = [rng.standard_normal(s).astype(np.float32) for s in shapes[1:]]
    out = {}
    for on in (True, False):
        w = lk.tensor(w0.copy())
        with lk.Graph() as g:
            ph = [lk.placeholder(s, name=f"p{i}") for i, s in enumerate(shapes[1:])]
            fetch = build(w, *ph)
        names = ["prune"] + ["arithmetic"] * arith + ["matmul_update"] * on
        opt = passes.run_passes(g, names, outputs=[fetch])
        opt.run([opt.outputs[0]], {opt.node(f"p{i}"): f for i, f in enumerate(feeds)})
        out[on] = (_ops(opt), w.numpy().copy())
    np.testing.assert_allclose(out[True][1], out[False][1], rtol=1e-5, atol=1e-5)
    assert not np.array_equal(out[False][1], w0)
    return out[True][0]


@pytest.mark.parametrize("form", ["operand", "left operand", "product", "none", "add"])
def test_each_place_of_the_factor_folds_into_alpha(form):
    build = {
        "operand": lambda w, h, dz: w.assign_sub(h.transpose() @ (dz * 0.1)),
        "left operand": lambda w, h, dz: w.assign_sub((0.1 * h.transpose()) @ dz),
        "product": lambda w, h, dz: w.assign_sub((h.transpose() @ dz) * 0.1),
        "none": lambda w, h, dz: w.assign_sub(h.transpose() @ dz),
        "add": lambda w, h, dz: w.assign_add(h.transpose() @ dz * 0.1),
    }[form]
    ops = _run_update(build, [(40, 30), (8, 40), (8, 30)], arith=False)
    assert ops == ["permute", "assign_add_matmul"]


def test_alpha_is_the_factor_with_the_update_sign():
    w = lk.zeros((4, 3))
    with lk.Graph() as g:
        a = lk.placeholder((4, 2), name="a")
        b = lk.placeholder((2, 3), name="b")
        w.assign_add((a @ b) * 0.5)
        w.assign_sub(a @ (b * 2.0))
    opt = passes.matmul_update(g)
    assert [n.attrs["alpha"] for n in opt.nodes if n.op_name == "assign_add_matmul"] == [0.5, -2.0]
    assert [r for r in opt.history[-1].fused] == [
        ("assign_add", ["assign_add", "mul", "matmul"]),
        ("assign_sub", ["assign_sub", "matmul_1", "mul_1"])]


@pytest.mark.parametrize("case", ["product used twice", "product fetched", "broadcast into w",
                                  "batched", "float64 product"])
def test_leaves_what_it_must_not_fuse(case):
    rng = np.random.default_rng(2)
    w0 = rng.standard_normal((6, 5)).astype(np.float32)
    w = lk.tensor(w0.copy())
    with lk.Graph() as g:
        a = lk.placeholder((6, 3), name="a")
        b = lk.placeholder((3, 5), name="b")
        p = a @ b
        if case == "product used twice":
            w.assign_sub(p)
            fetch = p.sum()
        elif case == "product fetched":
            w.assign_sub(p)
            fetch = p
        elif case == "broadcast into w":
            fetch = w.assign_sub(a[:1] @ b)
        elif case == "batched":
            w3 = lk.tensor(np.zeros((2, 6, 5), np.float32))
            fetch = w3.assign_sub(lk.stack([a, a]) @ b)
        else:
            fetch = w.assign_sub((a.double() @ b.double()))
    opt = passes.run_passes(g, ["matmul_update"], outputs=[fetch])
    assert "assign_add_matmul" not in _ops(opt)
    assert opt.history[-1].fused == []


def test_an_operand_changed_in_between_keeps_the_matmul():
    # v is read by the product before v changes; a fused update would read the changed v
    v = lk.tensor(np.eye(4, dtype=np.float32))
    w = lk.zeros((4, 4))
    with lk.Graph() as g:
        x = lk.placeholder((4, 4), name="x")
        p = v @ x
        v.assign_add(1.0)
        step = w.assign_sub(p)
    opt = passes.run_passes(g, ["matmul_update"], outputs=[step])
    assert "assign_add_matmul" not in _ops(opt)
    feed = np.arange(16, dtype=np.float32).reshape(4, 4)
    opt.run([opt.outputs[0]], {opt.node("x"): feed})
    np.testing.assert_allclose(w.numpy(), -feed)


def test_a_stateful_node_a_pass_adds_runs():
    # Rewriter.add marks nodes of stateful ops stateful, so plans run them though nothing uses
    # their result
    fused, _, graph = _mlp_step(steps=1)
    assert all(n.stateful for n in graph.nodes if n.op_name == "assign_add_matmul")
