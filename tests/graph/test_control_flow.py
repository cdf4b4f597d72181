"""lk.cond, lk.while_loop and lk.scan: eager equals captured, the untaken branch does not run,
run-time iteration counts, nesting, gradients in the graph equal eager ones (and central
differences), the variable-length RNN, and errors that name the nodes."""
import numpy as np
import pytest

import labkit as lk
from labkit.autodiff import gradients as eager_gradients
from labkit.autodiff import numerical_vjp


def t64(data, device="cpu:0", requires_grad=False):
    return lk.tensor(np.asarray(data, dtype=np.float64), device=device,
                     requires_grad=requires_grad)


def close(a, b, **kw):
    np.testing.assert_allclose(np.asarray(a.detach().numpy()), np.asarray(b.detach().numpy()), rtol=1e-10,
                               atol=1e-12, **kw)


@pytest.fixture
def eager_and_function():
    """Run a function eagerly and through lk.function; return both results."""
    def run(fn, *args):
        f = lk.function(fn)
        lk.config.run_functions_eagerly(True)
        try:
            eager = f(*args)
        finally:
            lk.config.run_functions_eagerly(False)
        return eager, f(*args), f
    return run


# ---- forward: eager equals captured --------------------------------------------------------------
def test_cond_eager_equals_captured(device, eager_and_function):
    w = lk.tensor([0.5, -1.0, 2.0], device=device)

    def f(x, k):
        # operands, a closure over an outside tensor, and a structured result
        return lk.cond(x.sum() > k, lambda a: {"y": (a * w).tanh(), "n": a.sum()},
                       lambda a: {"y": a - w, "n": a.max()}, x)

    for data in ([1.0, 2.0, 3.0], [-1.0, 0.0, -3.0]):
        x = lk.tensor(data, device=device)
        for k in (0.0, 10.0):
            eager, captured, fn = eager_and_function(f, x, k)
            assert set(captured) == {"y", "n"}
            close(eager["y"], captured["y"])
            close(eager["n"], captured["n"])
    assert "cond" in [n.op_name for n in fn.graph(x, 0.0).nodes]


def test_cond_untaken_branch_side_effect_does_not_happen(device):
    v = lk.zeros((), device=device)
    w = lk.zeros((), device=device)

    @lk.function
    def f(x):
        def yes(a):
            v.assign_add(1.0)
            return a * 2.0

        def no(a):
            w.assign_add(1.0)
            return a * 3.0
        return lk.cond(x.sum() > 0, yes, no, x)

    pos, neg = lk.ones(2, device=device), -lk.ones(2, device=device)
    assert f(pos).tolist() == [2.0, 2.0] and (v.item(), w.item()) == (1.0, 0.0)
    assert f(neg).tolist() == [-3.0, -3.0] and (v.item(), w.item()) == (1.0, 1.0)
    assert f(neg).tolist() == [-3.0, -3.0] and (v.item(), w.item()) == (1.0, 2.0)
    assert len(f.traces) == 1
    # a branch with a side effect runs even when nothing fetches its result
    @lk.function
    def g(x):
        lk.cond(x.sum() > 0, lambda: v.assign_add(10.0), lambda: w)
        return x
    g(pos)
    assert v.item() == 11.0


def test_cond_python_bool_is_decided_at_trace_time():
    @lk.function
    def f(x, flag):
        return lk.cond(flag, lambda: x + 1.0, lambda: x - 1.0)
    assert f(lk.tensor(1.0), True).item() == 2.0
    assert f(lk.tensor(1.0), False).item() == 0.0
    assert "cond" not in [n.op_name for n in f.graph(lk.tensor(1.0), True).nodes]


def test_while_iterations_decided_at_run_time():
    with lk.Graph() as g:
        n = lk.placeholder((), lk.int64, name="n")
        x0 = lk.placeholder((2,), lk.float32, name="x0")
        i, x = lk.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x * 2.0), (0, x0))
        _, capped = lk.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x + 1.0),
                                  [lk.tensor(0), x0], max_iterations=3)
    for steps in (0, 1, 5):
        iv, xv, cv = g.run([i, x, capped], {n: steps, x0: [1.0, 3.0]})
        assert iv.item() == steps
        assert xv.tolist() == [2.0 ** steps, 3 * 2.0 ** steps]
        assert cv.tolist() == [1.0 + min(steps, 3), 3.0 + min(steps, 3)]
    ops = [node.op_name for node in g.nodes]
    assert ops.count("while") == 2


def test_while_single_loop_var_and_eager(eager_and_function):
    def f(x):
        return lk.while_loop(lambda v: v.sum() < 100.0, lambda v: v * 3.0, x)
    eager, captured, _ = eager_and_function(f, lk.tensor([1.0, 2.0]))
    close(eager, captured)
    assert captured.tolist() == [81.0, 162.0]


def collatz_steps(x):
    """Steps of the Collatz map until 1: a cond nested in a while, with a counter."""
    def body(x, steps):
        half = (x / 2).to(dtype=lk.int64)
        x = lk.cond(half * 2 == x, lambda: half, lambda: 3 * x + 1)
        return x, steps + 1
    return lk.while_loop(lambda x, steps: x > 1, body, (x, 0))[1]


def test_nested_cond_inside_while(eager_and_function):
    f = lk.function(collatz_steps)
    for start, expected in ((1, 0), (6, 8), (27, 111)):
        assert collatz_steps(lk.tensor(start)).item() == expected     # eager
        assert f(lk.tensor(start)).item() == expected
    assert len(f.traces) == 1
    text = str(f.graph(lk.tensor(6)))
    # sub-graphs print indented under their node, with their nodes' scoped names
    assert "while/body/cond/true" in text and "while/cond" in text
    assert "\n        while/body (" in text


def test_nested_while_in_while_and_cond_in_cond():
    def f(n):
        def outer(i, total):
            _, row = lk.while_loop(lambda j, s: j < i, lambda j, s: (j + 1, s + j), (0, 0))
            return i + 1, total + lk.cond(row > 3, lambda: lk.cond(row > 6, lambda: row * 100,
                                                                   lambda: row * 10),
                                          lambda: row)
        return lk.while_loop(lambda i, total: i < n, outer, (0, 0))[1]
    expected = f(lk.tensor(6)).item()     # eager
    assert expected == 0 + 0 + 1 + 3 + 60 + 1000
    assert lk.function(f)(lk.tensor(6)).item() == expected


def test_scan_eager_equals_captured(device, eager_and_function):
    def f(xs, ws):
        def step(carry, x):
            h, count = carry
            h = (h * 0.5 + x["a"] * ws).tanh()
            return (h, count + 1), (h.sum(), h * x["b"])
        return lk.scan(step, (lk.zeros(3, device=device), 0), xs)

    xs = {"a": lk.randn(5, 3, device=device), "b": lk.randn(5, 1, device=device)}
    ws = lk.randn(3, device=device)
    (eager, captured, fn) = eager_and_function(f, xs, ws)
    (eh, ec), (es, ey) = eager
    (ch, cc), (cs, cy) = captured
    close(eh, ch)
    close(es, cs)
    close(ey, cy)
    assert ec.item() == cc.item() == 5
    assert cs.shape == (5,) and cy.shape == (5, 3)
    assert "scan" in [n.op_name for n in fn.graph(xs, ws).nodes]


def test_scan_zero_steps_in_graph():
    with lk.Graph() as g:
        xs = lk.placeholder((0, 2), lk.float32, name="xs")
        c, ys = lk.scan(lambda c, x: (c + x.sum(), x * 2.0), lk.tensor(1.0), xs)
    cv, yv = g.run([c, ys], {xs: np.zeros((0, 2), np.float32)})
    assert cv.item() == 1.0 and yv.shape == (0, 2)
    # no xs: length= steps, x is None, and y may be None
    double = lk.function(lambda c: lk.scan(lambda c, x: (c * 2.0, None), c, None, length=4))
    assert double(lk.tensor(1.0))[0].item() == 16.0 and double(lk.tensor(1.0))[1] is None


# ---- gradients in the graph equal eager gradients ------------------------------------------------
def graph_and_eager_grads(build, feeds, params):
    """Gradients of ``build(*inputs)`` w.r.t. inputs and params: through lk.gradients in a graph,
    and eagerly through the tape. ``feeds`` are float64 arrays; returns (graph, eager) lists."""
    with lk.Graph() as g:
        phs = [lk.placeholder(a.shape, lk.float64, name=f"in{i}") for i, a in enumerate(feeds)]
        y = build(*phs)
        grads = lk.gradients(y, phs + params)
    got = g.run([y] + grads, dict(zip(phs, feeds)))
    xs = [t64(a, requires_grad=True) for a in feeds]
    y_e = build(*xs)
    want = [y_e] + eager_gradients(y_e, xs + params)
    return got, want, g


def check_against_numeric(build, feeds, got_grads):
    """The graph's gradients for the fed inputs against central differences."""
    xs = [t64(a) for a in feeds]
    numeric = numerical_vjp(build, xs, t64(1.0))
    for a, n in zip(got_grads, numeric):
        np.testing.assert_allclose(a.numpy(), n, rtol=1e-6, atol=1e-7)


def test_cond_gradients_match_eager():
    lk.manual_seed(1)
    W = lk.randn(3, 3, dtype=lk.float64, requires_grad=True)

    def build(x, k):
        return lk.cond(k.sum() > 0, lambda a: (a @ W).tanh().sum() * k.sum(),
                       lambda a: (a * a).sum() * W.sum(), x)

    for kv in ([1.0], [-1.0]):
        feeds = [np.array([0.3, -0.2, 0.5]), np.array(kv)]
        got, want, g = graph_and_eager_grads(build, feeds, [W])
        for a, b in zip(got, want):
            close(a, b)
        check_against_numeric(build, feeds, got[1:3])
    # the gradient is itself a cond over the branches' vjps
    assert [n.op_name for n in g.nodes].count("cond") == 2


def test_while_gradients_match_eager():
    lk.manual_seed(2)
    A = lk.randn(3, 3, dtype=lk.float64, requires_grad=True)

    def build(x, scale):
        def body(i, h, acc):
            h = (h @ A * scale).tanh() + x
            return i + 1, h, acc + (h * h).sum()
        return lk.while_loop(lambda i, h, acc: i < 4, body, (0, x, t64(0.0)))[2]

    feeds = [np.array([0.1, -0.4, 0.3]), np.array(0.7)]
    got, want, g = graph_and_eager_grads(build, feeds, [A])
    for a, b in zip(got, want):
        close(a, b)
    check_against_numeric(build, feeds, got[1:3])
    assert "while_grad" in [n.op_name for n in g.nodes]


def test_scan_gradients_match_eager():
    lk.manual_seed(3)
    U = lk.randn(2, 2, dtype=lk.float64, requires_grad=True)

    def build(xs, h0):
        def step(h, x):
            h = (h @ U + x).tanh()
            return h, (h * x).sum()
        h, ys = lk.scan(step, h0, xs)
        return (ys * ys).sum() + h.sum()

    feeds = [np.random.default_rng(0).standard_normal((5, 2)), np.array([0.2, -0.1])]
    got, want, g = graph_and_eager_grads(build, feeds, [U])
    for a, b in zip(got, want):
        close(a, b)
    check_against_numeric(build, feeds, got[1:3])
    assert "scan_grad" in [n.op_name for n in g.nodes]


def test_gradients_through_cond_nested_in_while():
    lk.manual_seed(4)
    w = lk.randn(3, dtype=lk.float64, requires_grad=True)

    def build(x):
        def body(i, h):
            h = lk.cond(h.sum() > 0, lambda: (h * w).tanh(), lambda: h * h + w)
            return i + 1, h
        return lk.while_loop(lambda i, h: i < 5, body, (0, x))[1].sum()

    feeds = [np.array([0.5, -0.3, 0.8])]
    got, want, _ = graph_and_eager_grads(build, feeds, [w])
    for a, b in zip(got, want):
        close(a, b)
    check_against_numeric(build, feeds, got[1:2])


# ---- acceptance: an RNN over sequences of different lengths --------------------------------------
def test_variable_length_rnn_gradients_match_unrolled_eager():
    lk.manual_seed(5)
    D, H, T = 3, 4, 6
    Wx = lk.randn(D, H, dtype=lk.float64, requires_grad=True)
    Wh = (lk.randn(H, H, dtype=lk.float64) * 0.5).requires_grad_()
    v = lk.randn(H, dtype=lk.float64, requires_grad=True)
    params = [Wx, Wh, v]

    with lk.Graph() as g:
        xs = lk.placeholder((T, D), lk.float64, name="xs")     # padded to T steps
        n = lk.placeholder((), lk.int64, name="length")       # the real length, fed per run

        def body(t, h, loss):
            h = (xs[t] @ Wx + h @ Wh).tanh()
            return t + 1, h, loss + (h * v).sum()
        _, h, loss = lk.while_loop(lambda t, h, loss: t < n, body,
                                   (0, lk.zeros(H, dtype=lk.float64), t64(0.0)))
        grads = lk.gradients(loss, [xs] + params)

    rng = np.random.default_rng(0)
    for length in (1, 4, 6, 0):
        data = rng.standard_normal((T, D))
        got = g.run([loss] + grads, {xs: data, n: length})
        # the unrolled eager version: a Python loop over the real length
        x_e = t64(data, requires_grad=True)
        h_e, loss_e = lk.zeros(H, dtype=lk.float64), t64(0.0)
        for step in range(length):
            h_e = (x_e[step] @ Wx + h_e @ Wh).tanh()
            loss_e = loss_e + (h_e * v).sum()
        if length == 0:
            assert got[0].item() == 0.0
            assert all(not np.any(gr.numpy()) for gr in got[1:])
            continue
        want = [loss_e] + eager_gradients(loss_e, [x_e] + params)
        for a, b in zip(got, want):
            close(a, b)
        assert not np.any(got[1].numpy()[length:])      # padding gets no gradient


def test_rnn_in_function_backward_sets_parameter_grads():
    lk.manual_seed(6)
    W = lk.randn(2, 2, dtype=lk.float64, requires_grad=True)

    def loss_fn(xs, n):
        def body(t, h, loss):
            h = (xs[t] + h @ W).tanh()
            return t + 1, h, loss + h.sum()
        return lk.while_loop(lambda t, h, loss: t < n, body,
                             (0, lk.zeros(2, dtype=lk.float64), t64(0.0)))[2]

    @lk.function
    def step(xs, n):
        loss = loss_fn(xs, n)
        loss.backward()
        return loss

    xs = t64(np.random.default_rng(1).standard_normal((5, 2)))
    for length in (2, 5):
        W.grad = None
        loss = step(xs, lk.tensor(length))
        graph_grad = W.grad.numpy().copy()
        W.grad = None
        loss_e = loss_fn(xs, lk.tensor(length))
        loss_e.backward()
        close(loss, loss_e)
        np.testing.assert_allclose(graph_grad, W.grad.numpy(), rtol=1e-10)
    assert len(step.traces) == 1


# ---- errors name the nodes, shapes and dtypes ----------------------------------------------------
def test_cond_branches_with_different_shapes_name_the_nodes():
    with lk.Graph():
        x = lk.placeholder((2, 3), lk.float32, name="x")
        with pytest.raises(lk.ShapeError) as info:
            lk.cond(x.sum() > 0, lambda: x * 2.0, lambda: x.sum(dim=0))
    msg = str(info.value)
    assert "lk.cond 'cond'" in msg and "output 0" in msg
    assert "'cond/true/mul'" in msg and "float32[2, 3]" in msg
    assert "'cond/false/sum'" in msg and "float32[3]" in msg


def test_cond_branches_with_different_dtypes_or_structures():
    with lk.Graph():
        x = lk.placeholder((2,), lk.float32, name="x")
        with pytest.raises(lk.DTypeError, match=r"different dtypes.*'cond/true/mul'.*float32\[2\]"
                                                r".*'cond/false/cast'.*float64\[2\]"):
            lk.cond(x.sum() > 0, lambda: x * 2.0, lambda: x.to(dtype=lk.float64))
        with pytest.raises(lk.GraphError, match=r"different structures.*\(tensor, tensor\)"):
            lk.cond(x.sum() > 0, lambda: (x, x), lambda: x)
        with pytest.raises(lk.ShapeError, match="pred must be a single value"):
            lk.cond(x > 0, lambda: x, lambda: x)


def test_while_body_changing_a_carried_shape_is_an_error():
    with lk.Graph():
        x = lk.placeholder((3,), lk.float32, name="x")
        with pytest.raises(lk.ShapeError) as info:
            lk.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, lk.concat(v, v)), (0, x))
        with pytest.raises(lk.DTypeError, match=r"dtype of loop variable 1 from float32\[3\] to "
                                                r"float64\[3\]"):
            lk.while_loop(lambda i, v: i < 3,
                          lambda i, v: (i + 1, v.to(dtype=lk.float64)), (0, x))
        with pytest.raises(lk.ShapeError, match=r"cond_fn's result must be a single value"):
            lk.while_loop(lambda v: v > 0, lambda v: v - 1.0, x)
        with pytest.raises(lk.GraphError, match="body_fn returns"):
            lk.while_loop(lambda i, v: i < 3, lambda i, v: i + 1, (0, x))
    msg = str(info.value)
    assert "lk.while_loop 'while'" in msg and "loop variable 1" in msg
    assert "float32[3] to float32[6]" in msg and "'while/body/concat'" in msg
    # eagerly too, the first iteration that changes it
    with pytest.raises(lk.ShapeError, match=r"float32\[3\] to float32\[6\]"):
        lk.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, lk.concat(v, v)),
                      (0, lk.zeros(3)))


def test_scan_carry_shape_change_is_an_error():
    with lk.Graph():
        xs = lk.placeholder((4, 2), lk.float32, name="xs")
        with pytest.raises(lk.ShapeError, match=r"lk.scan 'scan'.*float32\[2\] to float32\[4\]"):
            lk.scan(lambda c, x: (lk.concat(c, x), x), lk.zeros(2), xs)


def test_gradient_through_a_stateful_carried_value_is_refused():
    counter = lk.zeros((), dtype=lk.float64)
    with lk.Graph():
        x = lk.placeholder((), lk.float64, name="x")
        _, y = lk.while_loop(lambda i, v: i < 2,
                             lambda i, v: (i + 1, v * counter.assign_add(1.0)), (0, x))
        with pytest.raises(lk.GraphError, match="stateful node .* 'while/body/assign_add'"):
            lk.gradients(y, [x])


def test_second_order_through_cond_and_a_clear_error_through_loops():
    with lk.Graph() as g:
        x = lk.placeholder((), lk.float64, name="x")
        y = lk.cond(x > 0, lambda: x * x * x, lambda: x * x)
        (d1,) = lk.gradients(y, [x])
        (d2,) = lk.gradients(d1, [x])
        _, z = lk.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * x), (0, t64(1.0)))
        (dz,) = lk.gradients(z, [x])
        with pytest.raises(lk.GradError, match="second-order gradients through lk.while_loop"):
            lk.gradients(dz, [x])
    assert [v.item() for v in g.run([y, d1, d2, dz], {x: 2.0})] == [8.0, 12.0, 12.0, 12.0]
    assert [v.item() for v in g.run([y, d1, d2], {x: -2.0})] == [4.0, -4.0, 2.0]


def test_a_scan_gradient_reads_what_the_forward_loop_kept(monkeypatch):
    # the forward loop keeps each step's carry and the values the body's gradient reads, so
    # the backward loop neither runs the forward again nor recomputes them: 3 products a step
    # (forward, and two in the backward), not 5
    from labkit.tensor.ops import linalg
    T = 7
    w = lk.tensor(np.random.default_rng(5).standard_normal((3, 3)) * 0.5, requires_grad=True)

    def run(xs):
        h, _ = lk.scan(lambda h, x: ((h @ w + x).tanh(), None), lk.zeros(2, 3, dtype=lk.float64),
                       xs)
        loss = (h * h).sum()
        loss.backward()
        return loss
    step = lk.function(run)
    xs = lk.tensor(np.random.default_rng(6).standard_normal((T, 2, 3)))
    run(xs)
    eager_w = w.grad.numpy().copy()
    w.grad = None
    step(xs)                  # traced
    w.grad = None
    calls = []
    kernel = linalg._product
    monkeypatch.setattr(linalg, "_product", lambda *a, **k: calls.append(1) or kernel(*a, **k))
    step(xs)
    assert len(calls) == 3 * T
    np.testing.assert_allclose(w.grad.numpy(), eager_w, rtol=1e-12)
