"""Graph passes: each alone on small graphs (prune, constant folding, CSE, DCE, fusion, buffer
reuse), all of them together on random graphs against the raw graph, their history records and
switches, and the captured MLP training step: fewer nodes optimised than raw (both counts are
printed), and the same results with every pass on as with every pass off."""
import threading
import tracemalloc

import numpy as np
import pytest

import labkit as lk
from labkit.graph import passes
from labkit.graph.node import CONSTANT
from labkit.graph.passes.fusion import FusedProgram, fused, load_numexpr

needs_numexpr = pytest.mark.skipif(load_numexpr() is None, reason="numexpr is not installed")


@pytest.fixture(autouse=True)
def _default_switches():
    yield
    lk.config.enable_pass()
    lk.config.set_cpu_fusion("cost")


def constant(value, dtype=lk.float32):
    """A constant node of the graph being built, as a tensor."""
    g = lk.graph.capture.current_graph()
    arr = np.asarray(value, dtype=dtype.np)
    node = g.add_node(CONSTANT, None, (), {}, arr.shape, dtype, lk.devices.get_device("cpu:0"),
                      name="const")
    node.value = arr
    return lk.SymbolicTensor._of(node)


def names(graph):
    return [n.name for n in graph.nodes]


def op_names(graph):
    return [n.op_name for n in graph.nodes]


def run(graph, fetch, feeds):
    """Run ``fetch`` (a node name or list of names) of ``graph`` with feeds by name."""
    many = isinstance(fetch, list)
    nodes = [graph.node(f) for f in (fetch if many else [fetch])]
    out = graph.run(nodes, {graph.node(k): v for k, v in feeds.items()})
    out = [o.numpy() for o in out]
    return out if many else out[0]


# ---- prune ---------------------------------------------------------------------------------------
def test_prune_keeps_what_outputs_and_side_effects_need():
    v = lk.zeros(3)
    with lk.Graph() as g:
        x = lk.placeholder((3,), name="x")
        lk.placeholder((3,), name="unused_input")
        y = (x * 2.0).exp()
        (x + 1.0).tanh()                     # nobody fetches this branch
        v.assign_add(x)                      # a side effect: runs though not fetched
    opt = passes.prune(g, outputs=[y])
    assert set(names(g)) - set(names(opt)) == {"add", "tanh"}
    assert "unused_input" in names(opt) and "assign_add" in names(opt)
    assert opt.history[-1].removed == ["add", "tanh"]
    assert opt.history[-1].summary() == "prune: 8 -> 6 nodes; removed 2"
    feeds = {"x": np.arange(3, dtype=np.float32)}
    np.testing.assert_array_equal(run(opt, "exp", feeds), np.exp(feeds["x"] * 2))
    assert len(g) == 8                       # the input graph is left alone


def test_prune_without_outputs_keeps_everything():
    with lk.Graph() as g:
        x = lk.placeholder((3,), name="x")
        x.exp()
        x.tanh()
    assert names(passes.prune(g)) == names(g)


# ---- constant folding --------------------------------------------------------------------------
def test_constant_folding_folds_constant_subgraphs():
    with lk.Graph() as g:
        x = lk.placeholder((3,), name="x")
        c = constant([1.0, 2.0, 3.0])
        k = (c * 2.0).exp().sum()            # constants alone: folds to one value
        y = x * k + c
    opt = passes.constant_folding(g, outputs=[y])
    rec = opt.history[-1]
    assert rec.folded == ["mul", "exp", "sum"]
    assert op_names(opt).count("constant") == 2    # c (still used) and the folded sum
    assert opt.node("sum").kind == CONSTANT
    feeds = {"x": np.ones(3, np.float32)}
    np.testing.assert_allclose(run(opt, y.name, feeds), run(g, y.name, feeds), rtol=1e-6)
    assert opt.node("sum").value.dtype == np.float32


def test_constant_folding_never_folds_captures():
    w = lk.tensor([1.0, 2.0])
    with lk.Graph() as g:
        x = lk.placeholder((2,), name="x")
        y = x * (w * 2.0).exp()              # w is read by reference at each run
    opt = passes.constant_folding(g, outputs=[y])
    assert opt.history[-1].folded == [] and CONSTANT not in op_names(opt)
    feeds = {"x": np.ones(2, np.float32)}
    before = run(opt, y.name, feeds)
    w._data[...] = [0.0, 0.0]                # an optimiser step would do this
    after = run(opt, y.name, feeds)
    np.testing.assert_allclose(before, np.exp([2.0, 4.0]), rtol=1e-6)
    np.testing.assert_allclose(after, [1.0, 1.0])


def test_constant_folding_leaves_stateful_ops_and_hands_out_copies():
    v = lk.zeros(2)
    with lk.Graph() as g:
        c = constant([1.0, 1.0])
        up = v.assign_add(c)                 # stateful: must run every time, never folded
        k = c * 3.0
    opt = passes.constant_folding(g, outputs=[up, k])
    assert opt.node("assign_add").kind == "op"
    first = opt.run(opt.outputs)
    first[1].numpy()[...] = -1               # the caller owns what it fetched
    second = opt.run(opt.outputs)
    np.testing.assert_array_equal(second[1].numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(v.numpy(), [2.0, 2.0])


# ---- CSE -----------------------------------------------------------------------------------------
def test_cse_merges_duplicates_including_commuted_ones():
    with lk.Graph() as g:
        x = lk.placeholder((3,), name="x")
        z = lk.placeholder((3,), name="z")
        a = x.exp() + x.exp()
        b = (x + z) * (z + x)                # add is commutative
        c = x * 2 + x * 2.0                  # 2 and 2.0 are different literals: kept apart
        d = x * 0.0 + x * -0.0               # and so are 0.0 and -0.0
    opt = passes.cse(g, outputs=[a, b, c, d])
    assert opt.history[-1].merged == [("exp_1", "exp"), ("add_2", "add_1")]
    feeds = {"x": np.array([1.0, -2.0, np.inf], np.float32), "z": np.ones(3, np.float32)}
    with np.errstate(invalid="ignore"):      # inf * 0
        for t in (a, b, c, d):
            np.testing.assert_array_equal(run(opt, t.name, feeds), run(g, t.name, feeds))


def test_cse_never_merges_side_effects_or_reads_across_them():
    p = lk.tensor([1.0, 2.0])

    @lk.function
    def f(x):
        before = p * 2.0
        p.assign_add(x)
        p.assign_add(x)                      # two updates, not one
        after = p * 2.0                      # reads p after the updates: another value
        again = p * 2.0                      # same epoch as `after`: merged
        return before, after, again

    x = lk.ones(2)
    opt = f.graph(x, passes=["cse"])
    assert opt.history[-1].merged == [("mul_2", "mul_1")]
    assert op_names(opt).count("assign_add") == 2
    out = f(x)
    np.testing.assert_array_equal(out[0].numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(out[1].numpy(), [6.0, 8.0])
    np.testing.assert_array_equal(out[2].numpy(), [6.0, 8.0])
    assert not np.shares_memory(out[1].numpy(), out[2].numpy())   # one value, two results
    np.testing.assert_array_equal(p.numpy(), [3.0, 4.0])


# ---- DCE -----------------------------------------------------------------------------------------
def test_dce_removes_unused_values_and_forwards_noops():
    v = lk.zeros(3)
    with lk.Graph() as g:
        x = lk.placeholder((3,), name="x")
        dead = (x * 3.0).exp()               # a chain nobody uses
        dead.tanh()
        y = x.detach().reshape((3,)).float() + 1.0
        m = lk.placeholder((2, 3), name="m")
        t = m.T.T * 2.0                      # a permute that undoes the one before
        v.assign(x)                          # unused result, but a side effect
    opt = passes.dce(g, outputs=[y, t])
    rec = opt.history[-1]
    assert rec.removed == ["mul", "exp", "tanh", "permute"]    # m.T: only m.T.T used it
    assert [a for a, _ in rec.forwarded] == ["stop_gradient", "reshape", "cast", "permute_1"]
    assert all(b in ("x", "m") for _, b in rec.forwarded)
    assert op_names(opt) == ["placeholder", "add", "placeholder", "mul", "capture", "assign"]
    feeds = {"x": np.arange(3, dtype=np.float32), "m": np.ones((2, 3), np.float32)}
    np.testing.assert_array_equal(run(opt, [y.name, t.name], feeds)[0], feeds["x"] + 1)


def test_dce_keeps_outputs_even_when_they_are_noops():
    with lk.Graph() as g:
        x = lk.placeholder((3,), name="x")
        y = x.detach()
    opt = passes.dce(g, outputs=[y])
    assert opt.outputs[0].name == "x"
    np.testing.assert_array_equal(opt.run(opt.outputs[0], {opt.node("x"): [1, 2, 3]}).numpy(),
                                  [1, 2, 3])


# ---- arithmetic ----------------------------------------------------------------------------------
def test_arithmetic_moves_a_scalar_factor_onto_the_smaller_matmul_operand():
    rng = np.random.default_rng(0)
    with lk.Graph() as g:
        h = lk.placeholder((32, 200), lk.float64, name="h")
        dz = lk.placeholder((32, 50), lk.float64, name="dz")
        step = (h.transpose() @ dz) * 0.01         # an optimiser's lr * (weight gradient)
        (step * 2.0).exp()                         # a user of the scaled result, not of matmul
    opt = passes.arithmetic(g)
    rec = opt.history[-1]
    assert rec.fused == [("matmul", ["matmul", "mul"])]
    mm = opt.node("matmul")
    assert mm.inputs[1].op_name == "mul" and mm.inputs[1].inputs[0].name == "dz"
    assert mm.inputs[1].shape == (32, 50)          # 1,600 values scaled instead of 10,000
    feeds = {"h": rng.standard_normal((32, 200)), "dz": rng.standard_normal((32, 50))}
    np.testing.assert_allclose(run(opt, "mul_1", feeds), run(g, "mul_1", feeds), rtol=1e-12,
                               atol=1e-15)


def test_arithmetic_leaves_matmuls_it_cannot_fold():
    with lk.Graph() as g:
        a = lk.placeholder((8, 100), name="a")
        b = lk.placeholder((100, 8), name="b")
        s = lk.placeholder((), name="s")
        big = a @ b                  # operands (800 values) larger than the result (64)
        used_twice = b @ a
        shared = (used_twice * 0.5) + used_twice
        by_tensor = (b @ a) * s      # the factor is a tensor, not a Python number
        fetched = b @ a
        outs = [big * 0.5, shared, by_tensor, fetched, fetched * 3.0]
    opt = passes.arithmetic(g, outputs=outs)
    assert opt.history[-1].fused == []
    assert len(opt) == len(g)


def test_captured_sgd_step_scales_the_small_operand_and_matches_eager():
    rng = np.random.default_rng(1)
    x = lk.tensor(rng.standard_normal((16, 64)))
    y = lk.tensor(rng.standard_normal((16, 32)))
    w0 = rng.standard_normal((64, 32)) * 0.1
    results = []
    for capture in (False, True):
        w = lk.tensor(w0.copy(), requires_grad=True)
        opt = lk.optim.SGD([w], lr=0.1)

        def step():
            loss = ((x @ w - y) ** 2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss
        f = lk.function(step) if capture else step
        losses = [f().item() for _ in range(3)]
        results.append((losses, w.detach().numpy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-12)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-12)
    fused = _record(f.graph(), "arithmetic").fused
    assert len(fused) == 1 and fused[0][1][1].startswith("SGD/")


def test_a_tensor_factor_moves_only_when_the_graph_does_not_write_it():
    h, dz = lk.tensor(np.ones((8, 40))), lk.tensor(np.ones((8, 30)))
    for written in (False, True):
        rate = lk.tensor(0.5, dtype=lk.float64)
        with lk.Graph() as g:
            x = lk.placeholder((8, 40), name="x", dtype=lk.float64)
            grad = x.transpose() @ dz
            fetches = [rate.assign(2.0)] if written else []   # a write between the two
            out = grad * rate
        opt = passes.run_passes(g, ["arithmetic"], outputs=[out] + fetches)
        assert len(opt.history[-1].fused) == (0 if written else 1)
        got = opt.run(list(opt.outputs), {opt.node("x"): h.numpy()})[0]
        np.testing.assert_allclose(got, (2.0 if written else 0.5) * 8.0)


# ---- fusion --------------------------------------------------------------------------------------
def every_fusable_op(x, y, b):
    """A chain over every fusable op, with broadcasting (b is a row)."""
    h = (x * 1.5 - y / 3.0 + b).tanh()
    h = lk.where(h > 0.1, h.exp(), -h) + lk.sqrt(y.abs() + 1.0).log()
    h = lk.maximum(lk.minimum(h, 2.0), -2.0).relu() + (-x).sigmoid()
    h = h ** 2.0 + lk.maximum(x, y) - lk.minimum(x, y)
    return h * (x <= y) + (x == y) + lk.where(x != y, h, x) + (x < b) * x - (x >= b) * y


def every_fusable_op_graph(dtype):
    """(graph, output) of ``every_fusable_op`` over placeholders x, y (4, 5) and b (5,)."""
    with lk.Graph() as g:
        x = lk.placeholder((4, 5), dtype, name="x")
        y = lk.placeholder((4, 5), dtype, name="y")
        b = lk.placeholder((5,), dtype, name="b")
        out = every_fusable_op(x, y, b)
    return g, out


@needs_numexpr
@pytest.mark.parametrize("dtype", [lk.float32, lk.float64])
def test_fusion_matches_unfused_with_fewer_nodes(dtype):
    lk.config.set_cpu_fusion("always")
    g, out = every_fusable_op_graph(dtype)
    opt = passes.fusion(g, outputs=[out])
    fused_nodes = [n for n in opt.nodes if n.op is fused]
    assert fused_nodes and len(opt) < len(g)
    ops_in = {s for n in fused_nodes for s in n.attrs["program"].ops}
    assert ops_in >= {"add", "sub", "mul", "div", "neg", "exp", "log", "sqrt", "tanh", "abs",
                      "maximum", "minimum", "where", "relu", "sigmoid", "pow", "eq", "ne",
                      "lt", "le", "gt", "ge"}
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal(s).astype(dtype.np) for k, s in
             (("x", (4, 5)), ("y", (4, 5)), ("b", (5,)))}
    feeds["y"][0, :2] = feeds["x"][0, :2]    # some equal elements for eq/ne
    want = run(g, out.name, feeds)
    got = run(opt, opt.outputs[0].name, feeds)
    assert got.dtype == dtype.np             # float32 stays float32 (numexpr would widen)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    print(f"\nfusion ({dtype.name}): {len(g)} nodes -> {len(opt)}, "
          f"{len(fused_nodes)} fused node(s)")


@needs_numexpr
def test_fused_nodes_propagate_nan_and_inf_like_numpy():
    lk.config.set_cpu_fusion("always")
    with lk.Graph() as g:
        x = lk.placeholder((6,), name="x")
        y = lk.placeholder((6,), name="y")
        out = (lk.maximum(x * 1.0, y) + lk.minimum(x * 1.0, y) + (x * 2.0).relu()) * 1.0
    opt = passes.fusion(g, outputs=[out])
    assert any(n.op is fused for n in opt.nodes)
    feeds = {"x": np.array([np.nan, 1, -1, np.inf, -np.inf, 0], np.float32),
             "y": np.array([0, np.nan, 2, 1, 1, -0.0], np.float32)}
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(run(opt, opt.outputs[0].name, feeds),
                                      run(g, out.name, feeds))


@needs_numexpr
def test_fusion_cost_model_leaves_large_cpu_chains_to_numpy():
    with lk.Graph() as g:
        small = lk.placeholder((8, 8), name="small")
        big = lk.placeholder((256, 256), name="big")
        a = ((small * 2.0 + 1.0).tanh() - 0.5).exp()
        b = ((big * 2.0 + 1.0).tanh() - 0.5).exp()
    opt = passes.fusion(g, outputs=[a, b])
    fused_names = [names for _, names in opt.history[-1].fused]
    assert fused_names == [["mul", "add", "tanh", "sub", "exp"]]
    assert "exp_1: 5 ops on 65536 elements left unfused" in opt.history[-1].notes[0]
    assert len(passes.fusion(g, outputs=[a, b], policy="always").history[-1].fused) == 2
    assert passes.fusion(g, outputs=[a, b], policy="never").history[-1].fused == []


@needs_numexpr
def test_fusion_respects_outputs_side_effects_and_single_naming():
    lk.config.set_cpu_fusion("always")
    p = lk.tensor([1.0, 2.0, 3.0])
    with lk.Graph() as g:
        x = lk.placeholder((3,), name="x")
        inner = (x * 2.0).exp()              # fetched: stays a node of its own
        outer = (inner + 1.0).tanh()
        read = (p * 2.0).tanh()              # reads p before the update...
        p.assign_add(x)
        late = (read + 1.0) * 3.0            # ...so it cannot move past it into this chain
        twice = (x * 3.0).relu() * 2.0       # relu names its argument twice in numexpr text
    opt = passes.fusion(g, outputs=[inner, outer, late, twice])
    fused_groups = opt.history[-1].fused
    members = [set(ns) for _, ns in fused_groups]
    assert {"mul", "exp"} in members and {"add", "tanh"} in members
    assert {"tanh_1", "add_1", "mul_2"} in members           # not mul_1, which reads p
    assert {"relu", "mul_4"} in members                       # mul_3 (x*3) stays an input
    feeds = {"x": np.ones(3, np.float32)}
    p._data[...] = [1.0, 2.0, 3.0]
    want = run(g, [inner.name, outer.name, late.name, twice.name], feeds)
    p._data[...] = [1.0, 2.0, 3.0]
    got = run(opt, [o.name for o in opt.outputs], feeds)
    for w, h in zip(want, got):
        np.testing.assert_allclose(h, w, rtol=1e-6)


@needs_numexpr
def test_reads_of_a_value_an_assign_changes_are_not_moved_past_it():
    lk.config.set_cpu_fusion("always")

    def f(x):
        h = x * 2.0
        a = (h + 1.0).tanh()                 # reads h before the assign changes it
        b = (h + 1.0).tanh()                 # the same value: CSE may merge a and b
        h.assign_add(x)
        c = (h + 1.0).tanh()                 # after: a different value
        return (a * 3.0).exp() + b + c + h

    fn = lk.function(f)
    x = lk.tensor([0.1, 0.2, 0.3])
    got = fn(x).numpy()
    lk.config.run_functions_eagerly(True)
    try:
        want = f(x).numpy()
    finally:
        lk.config.run_functions_eagerly(False)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    opt = fn.graph(x)
    assert [m for m, _ in opt.history[2].merged] == ["add_1", "tanh_1"]
    assert not any("add" in ns and "exp" in ns for _, ns in _record(opt, "fusion").fused)


def test_fused_program_cuda_source_is_one_statement_per_step():
    prog = FusedProgram((("mul", (("x", 0), ("c", 0.5, "float32")), "float32"),
                         ("gt", (("t", 0), ("x", 1)), "bool_"),
                         ("where", (("t", 1), ("t", 0), ("c", 0, "float32")), "float32")),
                        ("float32", "float32"))
    params, out, body = prog.cuda_source()
    assert params == "float32 x0, float32 x1, float32 k0, float32 k1"
    assert out == "float32 y"
    assert body.splitlines() == ["float t0 = (float)(x0 * k0);", "bool t1 = (bool)(t0 > x1);",
                                 "float t2 = (float)((t1 ? (float)t0 : (float)k1));",
                                 "y = t2;"]
    assert repr(prog) == "<where(x0 * 0.5 > x1, x0 * 0.5, 0)>"


@pytest.mark.gpu
@pytest.mark.cupy
def test_fused_kernel_on_gpu_matches_cpu():
    lk.config.set_cpu_fusion("always")

    def build(device):
        with lk.Graph() as g:
            x = lk.placeholder((64, 33), name="x", device=device)
            b = lk.placeholder((33,), name="b", device=device)
            out = every_fusable_op(x, x * 0.5 + 0.25, b)
        return g, out
    rng = np.random.default_rng(1)
    feeds = {"x": rng.standard_normal((64, 33)).astype(np.float32),
             "b": rng.standard_normal(33).astype(np.float32)}
    g, out = build("gpu:0")
    opt = passes.fusion(g, outputs=[out])
    assert any(n.op is fused for n in opt.nodes)
    got = run(opt, opt.outputs[0].name, feeds)
    gc, outc = build("cpu:0")
    np.testing.assert_allclose(got, run(gc, outc.name, feeds), rtol=1e-5, atol=1e-6)


# ---- buffer reuse --------------------------------------------------------------------------------
def chain_graph(shape, n_ops, extra=None):
    with lk.Graph() as g:
        x = lk.placeholder(shape, name="x")
        h = x
        for i in range(n_ops):
            h = h * 1.0001 + 0.0001 if i % 2 else (h - 0.5).tanh()
        outs = [h.sum()] + ([extra(x, h)] if extra else [])
    return g, outs


def test_buffer_reuse_gives_identical_results_and_fewer_allocations():
    g, outs = chain_graph((128, 128), 20)
    plain = passes.dce(g, outputs=outs)
    reused = passes.memory(plain)
    plan = reused.buffer_plan
    assert len(plan.slot_of) > 20 and len(plan.buffers) <= 2
    assert len(reused.history[-1].reused) >= 30
    feeds = {"x": np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32)}
    for _ in range(3):
        assert run(reused, outs[0].name, feeds) == run(plain, outs[0].name, feeds)

    def peak(graph):
        graph.run(graph.outputs, {graph.node("x"): feeds["x"]})        # warm-up
        tracemalloc.start()
        try:
            graph.run(graph.outputs, {graph.node("x"): feeds["x"]})
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    with_reuse, without = peak(reused), peak(plain)
    print(f"\nbuffer reuse: peak traced memory of one run {without} -> {with_reuse} bytes")
    assert with_reuse < 128 * 128 * 4 <= without
    stats = reused._plans[next(iter(reused._plans))].stats()
    assert stats["into_buffers"] == len(plan.slot_of) and stats["workspaces"] == 1


def test_buffer_reuse_never_writes_over_views_fetches_or_captures():
    w = lk.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))

    def extra(x, h):
        return h

    with lk.Graph() as g:
        x = lk.placeholder((3, 4), name="x")
        a = x * 2.0
        view = a.T                       # shares a's memory
        b = (a + 1.0).exp()              # a dies here, but its view lives on
        c = b * 3.0 + w                  # w is captured: never written into
        d = view.T + c                   # the view is read after b and c were computed
        kept = d * 1.0                   # fetched: handed out, never reused
        e = (kept + 1.0).sum()
    opt = passes.memory(passes.dce(g, outputs=[kept, e]))
    feeds = {opt.node("x"): np.ones((3, 4), np.float32)}
    first = opt.run(opt.outputs, feeds)
    kept0 = first[0].numpy().copy()
    second = opt.run(opt.outputs, feeds)
    np.testing.assert_array_equal(first[0].numpy(), kept0)       # not overwritten by run 2
    np.testing.assert_array_equal(second[0].numpy(), kept0)
    np.testing.assert_array_equal(w.numpy(), np.arange(12).reshape(3, 4))
    want = 2 + (np.exp(3.0) * 3 + np.arange(12).reshape(3, 4))
    np.testing.assert_allclose(kept0, want, rtol=1e-6)


def test_buffer_reuse_is_safe_for_concurrent_runs():
    g, outs = chain_graph((32, 32), 10)
    opt = passes.memory(passes.dce(g, outputs=outs))
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((32, 32)).astype(np.float32) for _ in range(4)]
    want = [run(g, outs[0].name, {"x": a}) for a in inputs]
    errors = []

    def worker(i):
        for _ in range(50):
            got = run(opt, outs[0].name, {"x": inputs[i]})
            if got != want[i]:
                errors.append((i, got, want[i]))
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# ---- all passes together on random graphs ----------------------------------------------------------
def random_graph(rng, n_ops=24):
    """A random graph of elementwise ops, views and reductions on (6, 6) values, several outputs."""
    unary = [lambda a: a.tanh(), lambda a: a.sigmoid(), lambda a: a.relu(), lambda a: -a,
             lambda a: a.abs(), lambda a: (a.abs() + 1.0).sqrt(), lambda a: (a.abs() + 1.0).log(),
             lambda a: a.tanh().exp(), lambda a: a * 0.5, lambda a: a.T, lambda a: a ** 2.0,
             lambda a: a.reshape((-1,)).reshape(a.shape), lambda a: a.sum(dim=0, keepdim=True)]
    binary = [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b,
              lambda a, b: a / (b.abs() + 1.0), lambda a, b: lk.maximum(a, b),
              lambda a, b: lk.minimum(a, b), lambda a, b: lk.where(a > b, a, b * 0.25)]
    with lk.Graph() as g:
        vals = [lk.placeholder((6, 6), name="x"), lk.placeholder((6, 6), name="y")]
        for _ in range(n_ops):
            if rng.random() < 0.5:
                v = unary[rng.integers(len(unary))](vals[rng.integers(len(vals))])
            else:
                a, b = (vals[i] for i in rng.integers(len(vals), size=2))
                v = binary[rng.integers(len(binary))](a, b)
            vals.append(v)
        outs = [vals[-1]] + [vals[i] for i in rng.choice(range(2, len(vals)), 3, replace=False)]
    return g, outs


@pytest.mark.parametrize("policy", [pytest.param("always", marks=needs_numexpr), "cost"])
def test_every_pass_together_matches_the_raw_graph_on_random_graphs(policy):
    lk.config.set_cpu_fusion(policy)
    rng = np.random.default_rng(7)
    fused_total = reused_total = 0
    for trial in range(25):
        g, outs = random_graph(rng)
        opt = passes.run_passes(g, outputs=outs)
        fused_total += len(_record(opt, "fusion").fused)
        reused_total += len(_record(opt, "memory").reused)
        feeds = {"x": rng.standard_normal((6, 6)).astype(np.float32),
                 "y": rng.standard_normal((6, 6)).astype(np.float32)}
        want = g.run(outs, {g.node(k): v for k, v in feeds.items()})
        for _ in range(2):          # twice: the second run reuses the first run's buffers
            got = opt.run(opt.outputs, {opt.node(k): v for k, v in feeds.items()})
            for w, h in zip(want, got):
                assert h.dtype is w.dtype and h.shape == w.shape
                np.testing.assert_allclose(h.numpy(), w.numpy(), rtol=2e-5, atol=1e-6,
                                           err_msg=f"trial {trial}\n{g}\n{opt}")
    print(f"\nrandom graphs ({policy}): {fused_total} fused nodes, {reused_total} reused buffers")
    assert reused_total > 20 and fused_total > 20


def _record(graph, name):
    """The record of pass ``name`` in ``graph.history``."""
    return next(r for r in graph.history if r.name == name)


# ---- history, the pipeline, lk.function and switches -------------------------------------------
@needs_numexpr
def test_history_records_every_pass_in_order():
    with lk.Graph() as g:
        x = lk.placeholder((4,), name="x")
        y = ((x * 2.0).exp() + 1.0).tanh() * (x * 2.0)
    steps = passes.stages(g, outputs=[y])
    assert [name for name, _ in steps] == passes.PIPELINE
    final = steps[-1][1]
    assert [r.name for r in final.history] == passes.PIPELINE
    assert [len(s) for _, s in steps] == [7, 7, 6, 6, 6, 6, 3, 3]
    assert final.history[2].merged == [("mul_1", "mul")]
    assert _record(final, "fusion").fused == [("fused", ["exp", "add", "tanh", "mul_2"])]
    text = passes.history_text(final)
    assert "fused    fused = exp + add + tanh + mul_2" in text
    assert g.history == [] and len(g) == 7


@needs_numexpr
def test_function_keeps_raw_and_optimised_graphs_and_switches():
    @lk.function
    def f(x):
        return ((x.exp() + x.exp()) * 2.0 + 1.0).tanh()

    x = lk.ones(4)
    raw, opt = f.graph(x, passes=[]), f.graph(x)
    assert raw.history == [] and [r.name for r in opt.history] == passes.PIPELINE
    assert len(opt) < len(raw)
    assert [r.name for r in f.graph(x, passes=["cse"]).history] == ["cse"]
    assert "fused" in op_names(opt)
    np.testing.assert_allclose(f(x).numpy(), np.tanh(np.exp(1.0) * 4 + 1), rtol=1e-6)

    lk.config.disable_pass("fusion", "cse")
    assert "fusion" not in [r.name for r in f.graph(x).history]
    assert "fused" not in op_names(f.traces[0].graph)      # re-optimised, not retraced
    np.testing.assert_allclose(f(x).numpy(), np.tanh(np.exp(1.0) * 4 + 1), rtol=1e-6)
    assert len(f.traces) == 1
    lk.config.enable_pass("fusion")
    assert sorted(lk.config.disabled_passes()) == ["cse"]
    with pytest.raises(ValueError, match="unknown graph pass"):
        lk.config.disable_pass("fuse")
    with pytest.raises(ValueError, match="unknown graph pass"):
        f.graph(x, passes=["nope"])


def test_function_results_that_share_a_value_do_not_share_memory():
    @lk.function
    def f(x):
        y = x * 2.0
        return y, y, x * 2.0

    a, b, c = f(lk.ones(2))
    a.numpy()[...] = 0.0
    np.testing.assert_array_equal(b.numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(c.numpy(), [2.0, 2.0])


def test_control_flow_nodes_are_left_alone():
    w = lk.tensor([0.5, -1.0, 2.0])

    def f(x, k):
        y = lk.cond(x.sum() > k, lambda a: (a * w).tanh() * 2.0, lambda a: a - w, x)
        return (y * 2.0 + 1.0).exp() + (y * 2.0 + 1.0).exp()

    fn = lk.function(f)
    x = lk.tensor([1.0, 2.0, 3.0])
    for k in (0.0, 10.0):
        lk.config.run_functions_eagerly(True)
        try:
            eager = f(x, k).numpy()
        finally:
            lk.config.run_functions_eagerly(False)
        np.testing.assert_allclose(fn(x, k).numpy(), eager, rtol=1e-6)
        opt = fn.graph(x, k)
        assert "cond" in op_names(opt) and len(opt) < len(fn.graph(x, k, passes=[]))


# ---- the captured MLP training step --------------------------------------------------------------
def make_mlp(seed, sizes=(20, 32, 32, 5)):
    lk.manual_seed(seed)
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [lk.nn.Linear(a, b), lk.nn.ReLU()]
    model = lk.nn.Sequential(*layers[:-1])
    params = list(model.parameters())

    def step(x, y, lr):
        loss = lk.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        with lk.no_grad():
            for p in params:                     # SGD with L2 weight decay
                p.assign_sub((p.grad + p * 1e-4) * lr)
        return loss
    return lk.function(step), params


def test_mlp_training_step_optimised_is_smaller_and_equal(capsys):
    rng = np.random.default_rng(0)
    xs = [lk.tensor(rng.standard_normal((16, 20)).astype(np.float32))] * 4   # one batch,
    ys = [lk.tensor(rng.integers(0, 5, 16))] * 4                              # four steps
    on, params_on = make_mlp(0)
    off, params_off = make_mlp(0)
    raw = on.graph(xs[0], ys[0], 0.1, passes=[])
    opt = on.graph(xs[0], ys[0], 0.1)
    with capsys.disabled():
        print(f"\nMLP training step: raw graph {len(raw)} nodes, optimised {len(opt)} nodes")
        for record in opt.history:
            print("  " + record.summary())
    assert len(opt) < len(raw)
    assert op_names(opt).count("assign_sub") == op_names(raw).count("assign_sub") == 6
    stateful = [n.name for n in opt.nodes if n.stateful]
    assert stateful == [n.name for n in raw.nodes if n.stateful]     # same updates, same order

    lk.config.disable_pass(*passes.PIPELINE)
    losses_off = [off(x, y, 0.1).item() for x, y in zip(xs, ys)]
    grads_off = [p.grad.numpy() for p in params_off]
    lk.config.enable_pass()
    losses_on = [on(x, y, 0.1).item() for x, y in zip(xs, ys)]
    assert len(off.traces[0].graph) == len(off.traces[0].raw_graph)
    np.testing.assert_allclose(losses_on, losses_off, rtol=1e-5)
    for p_on, p_off, g_off in zip(params_on, params_off, grads_off):
        np.testing.assert_allclose(p_on.detach().numpy(), p_off.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(p_on.grad.numpy(), g_off, rtol=1e-5, atol=1e-6)
    assert losses_on[-1] < losses_on[0]
