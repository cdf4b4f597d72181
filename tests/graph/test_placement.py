"""Devices in graphs: placement (explicit requests, colocation, the heuristic), partition into
Send/Recv pairs, and multi-device execution on one worker thread per device."""
import gc
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import labkit as lk
from labkit.devices import get_device, workers
from labkit.graph import passes
from labkit.graph.passes import PlacementError
from labkit.graph.rendezvous import Rendezvous, RendezvousAborted
from labkit.tensor.shape_rules import same_as_first

HAVE_GPU = lk.devices.gpu_count() > 0


@pytest.fixture
def cpus():
    """Two virtual CPU devices (and back to one afterwards)."""
    lk.devices.configure(cpus=2)
    yield get_device("cpu:0"), get_device("cpu:1")
    lk.devices.configure(cpus=1)


def op_names(graph):
    return [n.op_name for n in graph.nodes]


def crossing_edges(graph):
    """(value, reader's device) for every edge of a placed graph between two devices."""
    out = set()
    for n in graph.nodes:
        for a in n.inputs:
            if isinstance(a, lk.graph.Node) and a.device.name != n.device.name:
                out.add((a.name, n.device.name))
    return out


# ---- explicit requests, partition, execution -----------------------------------------------
def two_device_graph(with_gpu=False):
    w1 = lk.Variable(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), name="w1")
    with lk.Graph("two") as g:
        x = lk.placeholder((2, 4), name="x")                 # cpu:0
        h = (x * 2.0).tanh()                                 # cpu:0: follows x
        with lk.device("cpu:1"):
            a = h @ w1                                       # cpu:1: crossings h, w1
            b = a.relu() + 1.0                               # cpu:1
        far = "gpu:0" if with_gpu else "cpu:1"
        with lk.device(far):
            c = (b * b).exp()                                # gpu:0 (crossing b) or cpu:1
        with lk.device("cpu:0"):
            out = c.sum() + h.sum()                          # cpu:0: crossing c
    return g, x, out, w1


def numpy_two(xv, w):
    h = np.tanh(xv * 2.0)
    b = np.maximum(h @ w, 0) + 1.0
    return np.exp(b * b).sum() + h.sum()


def test_explicit_requests_place_nodes_and_send_recv_sit_exactly_on_crossing_edges(cpus):
    g, x, out, w1 = two_device_graph()
    placed = passes.placement(g)
    report = placed.placement()
    assert report["tanh"].device == "cpu:0"
    assert report["matmul"].device == "cpu:1"
    assert report["matmul"].reason == "explicit: lk.device('cpu:1')"
    assert report["relu"].device == "cpu:1"
    assert report["sum"].device == "cpu:0"
    crossing = crossing_edges(placed)
    assert crossing == {("tanh", "cpu:1"), ("w1", "cpu:1"), ("exp", "cpu:0")}
    part = passes.partition(placed)
    sends = [n for n in part.nodes if n.op_name == "send"]
    recvs = [n for n in part.nodes if n.op_name == "recv"]
    assert len(sends) == len(recvs) == len(crossing) == 3
    assert {(s.inputs[0].name, s.attrs["dst"]) for s in sends} == crossing
    for r in recvs:        # every recv is on its reader's device, every send on its value's
        assert r.device.name == r.attrs["dst"] and r.inputs[0].device.name == r.attrs["src"]
    assert crossing_edges(part) == {(s.name, s.attrs["dst"]) for s in sends}  # only the pairs
    part.lint()
    xv = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    got = g.run(out, {x: xv}).item()
    np.testing.assert_allclose(got, numpy_two(xv, w1.detach().numpy()), rtol=1e-5)


@pytest.mark.gpu
def test_a_graph_over_two_cpus_and_a_gpu():
    lk.devices.configure(cpus=2)
    try:
        g, x, out, w1 = two_device_graph(with_gpu=True)
        placed = passes.placement(g)
        assert placed.placement()["exp"].device == "gpu:0"
        part = passes.partition(placed)
        crossing = crossing_edges(placed)
        assert sum(n.op_name == "send" for n in part.nodes) == len(crossing) == 4
        xv = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
        for _ in range(3):
            got = g.run(out, {x: xv}).item()
            np.testing.assert_allclose(got, numpy_two(xv, w1.detach().numpy()), rtol=1e-4)
        stats = lk.devices.memory_stats("gpu:0")
        assert stats["bytes_reserved"] >= stats["bytes_in_use"] >= 0
        assert stats["peak_bytes_in_use"] >= stats["bytes_in_use"]
    finally:
        lk.devices.configure(cpus=1)


def test_a_function_over_two_devices_matches_eager_and_runs_on_both_workers(cpus):
    seen = set()

    @lk.op("where_am_i", shape=same_as_first, register=False)
    def where_am_i(xp, x):
        seen.add(threading.current_thread().name)
        return x

    def f(x):
        h = where_am_i(x * 2.0)
        with lk.device("cpu:1"):
            y = where_am_i(h.exp()) + 1.0
        return (y * h).sum(), y

    fn = lk.function(f)
    x = lk.tensor([0.1, 0.2, 0.3])
    want = f(x)[0].item()
    seen.clear()
    for _ in range(3):          # again: buffers of the first run are reused
        got_sum, got_y = fn(x)
        np.testing.assert_allclose(got_sum.item(), want, rtol=1e-6)
        np.testing.assert_allclose(got_y.numpy(), np.exp([0.2, 0.4, 0.6]) + 1.0, rtol=1e-6)
    assert got_y.device.name == "cpu:1"            # the value lives where it was computed
    assert seen == {"labkit-cpu:0", "labkit-cpu:1"}
    plan = fn.traces[0].plan
    assert plan.stats()["devices"] == ["cpu:0", "cpu:1"] and plan.stats()["send_recv"] == 2
    opt = fn.graph(x)
    assert opt.history[0].name == "placement"        # placed before the pipeline
    assert [r.name for r in opt.history[1:]] == passes.PIPELINE
    assert "send" not in op_names(opt)                # partitioned when the plan is compiled


def test_to_becomes_the_send_recv_pair(cpus):
    with lk.Graph() as g:
        x = lk.placeholder((3,), name="x")
        y = (x * 2.0).to("cpu:1").exp()
    part = passes.partition(g)
    assert op_names(part) == ["placeholder", "mul", "send", "recv", "exp"]
    assert part.history[-1].forwarded == [("to_device", "recv_mul")]
    got = g.run(y, {x: [0.0, 1.0, 2.0]})
    assert got.device.name == "cpu:1"
    np.testing.assert_allclose(got.numpy(), np.exp([0.0, 2.0, 4.0]), rtol=1e-6)
    eager = lk.tensor([1.0, 2.0]).to("cpu:1")          # eager .to: the same transfer layer
    assert eager.device.name == "cpu:1"


def test_one_pair_per_value_and_device_and_a_new_one_after_a_side_effect(cpus):
    v = lk.Variable([1.0, 2.0], name="v")

    @lk.function
    def f(x):
        with lk.device("cpu:1"):
            a = x * 1.0
            b = x * 2.0           # the same x: the same pair
            before = v * 1.0
        v.assign_add(x)            # cpu:0, with v
        with lk.device("cpu:1"):
            after = v * 1.0       # v changed: a new pair, a snapshot
        return a + b, before, after

    s, before, after = f(lk.tensor([1.0, 1.0]))
    np.testing.assert_allclose(s.numpy(), [3.0, 3.0])
    np.testing.assert_allclose(before.numpy(), [1.0, 2.0])
    np.testing.assert_allclose(after.numpy(), [2.0, 3.0])
    part = passes.partition(f.graph(lk.tensor([1.0, 1.0])))
    sends = {n.inputs[0].name: n for n in part.nodes if n.op_name == "send"}
    assert sorted(n.inputs[0].name for n in part.nodes if n.op_name == "send") == ["v", "v", "x"]
    assert all(n.attrs["copy"] for n in part.nodes if n.op_name == "send"
               and n.inputs[0].name == "v")
    assert not sends["x"].attrs["copy"]


def test_stateful_order_holds_across_devices_on_every_run(cpus):
    counter = lk.Variable(0.0, name="counter")

    @lk.function
    def tick():
        with lk.device("cpu:1"):
            seen = counter * 1.0
        counter.assign_add(1.0)
        with lk.device("cpu:1"):
            now = counter * 1.0
        return seen, now

    for i in range(20):
        seen, now = tick()
        assert (seen.item(), now.item()) == (float(i), float(i + 1))


def test_concurrent_calls_of_a_multi_device_function(cpus):
    @lk.function
    def f(x):
        with lk.device("cpu:1"):
            y = (x @ x.T).tanh()
        return (y.sum(1) + x.sum(1)) * 0.5

    xs = [lk.tensor(np.full((8, 8), i / 10, np.float32)) for i in range(8)]
    want = [((np.tanh(x.numpy() @ x.numpy().T)).sum(1) + x.numpy().sum(1)) * 0.5 for x in xs]
    f(xs[0])
    errors = []

    def worker(k):
        try:
            for _ in range(30):
                np.testing.assert_allclose(f(xs[k]).numpy(), want[k], rtol=1e-5)
        except Exception as exc:         # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and not any(t.is_alive() for t in threads)
    assert f.traces[0].plan._rendezvous.pending() == 0


def test_an_error_on_one_device_stops_the_other_and_is_the_one_raised(cpus):
    @lk.op("fails", shape=same_as_first, register=False)
    def fails(xp, x):
        raise ValueError("kernel failed on purpose")

    @lk.function
    def f(x):
        with lk.device("cpu:1"):
            y = fails(x * 2.0)
        return y + x           # cpu:0 waits for y: it must not wait forever

    with pytest.raises(ValueError, match="on purpose"):
        f(lk.ones(3))
    assert f.traces[0].plan._rendezvous.pending() == 0


# ---- colocation -----------------------------------------------------------------------------
def test_a_variable_and_all_its_assigns_share_a_device_even_when_asked_elsewhere(cpus):
    w = lk.Variable([1.0, 2.0, 3.0], name="w")                     # cpu:0
    u = lk.Variable([0.0, 0.0, 0.0], name="u", device="cpu:1")     # cpu:1

    @lk.function
    def step(x):
        with lk.device("cpu:1"):                 # not forced: colocation wins for the assigns
            g = x * 2.0
            w.assign_sub(g)
            w[0:2].assign_add(g[1:])             # through a view of w
            u.assign_add(g.to("cpu:1"))
        w.assign(w * 0.5)                        # no request: with w anyway
        return w * 1.0

    for _ in range(2):
        step(lk.tensor([1.0, 1.0, 1.0]))
    np.testing.assert_allclose(w.detach().numpy(), [0.25, 0.5, -0.75], rtol=1e-6)
    np.testing.assert_allclose(u.detach().numpy(), [4.0, 4.0, 4.0])
    graph = step.graph(lk.tensor([1.0, 1.0, 1.0]))
    report = graph.placement()
    groups = {"w": [], "u": []}
    for n in graph.nodes:
        if n.op_name.startswith("assign"):
            target = n.inputs[0]
            while target.kind == "op":        # through the view
                target = target.inputs[0]
            groups[target.name].append(n.device.name)
    assert groups == {"w": ["cpu:0"] * 3, "u": ["cpu:1"]}
    assert report["w"].device == "cpu:0" and report["u"].device == "cpu:1"
    asked = report["assign_sub"]
    assert asked.reason.startswith("colocated with w (an assign runs where its variable lives)")
    assert "lk.device('cpu:1') gave way: it was not forced" in asked.reason
    assert report["getitem"].device == "cpu:0"          # the view it writes through
    assert report["mul"].device == "cpu:1" and report["mul"].reason.startswith("explicit")


def test_a_forced_request_against_colocation_is_a_clear_error(cpus):
    w = lk.Variable([1.0, 2.0], name="w")

    @lk.function
    def step(x):
        with lk.device("cpu:1", force=True):
            w.assign_add(x)
        return x

    with pytest.raises(PlacementError) as info:
        step(lk.ones(2))
    text = str(info.value)
    for part in ("assign_add", "forced onto cpu:1", "force=True", "w", "cpu:0",
                 "Drop force=True"):
        assert part in text
    assert isinstance(info.value, lk.DeviceError)


def test_colocating_things_tied_to_two_devices_is_a_clear_error(cpus):
    a = lk.Variable([1.0], name="a")
    b = lk.Variable([1.0], name="b", device="cpu:1")
    with lk.Graph() as g:
        with lk.colocate_with(b):
            a.assign_add(1.0)
    with pytest.raises(PlacementError, match="tied to different ones.*a on cpu:0.*b on cpu:1"):
        passes.placement(g)


def test_a_request_for_a_device_without_a_kernel_is_a_clear_error(cpus):
    gpu_only = lk.op("gpu_only", shape=same_as_first, register=False)(lambda xp, x: x)
    passes.set_kernel_devices(gpu_only, "gpu")
    with lk.Graph() as g:
        x = lk.placeholder((2,), name="x")
        with lk.device("cpu:1"):
            gpu_only(x)
    with pytest.raises(PlacementError) as info:
        passes.placement(g)
    text = str(info.value)
    assert "gpu_only" in text and "cpu:1" in text and "no cpu kernel" in text
    assert "kernels for: gpu" in text and "lk.device('cpu:1')" in text


def test_a_missing_gpu_is_a_clear_error_naming_what_is_missing():
    if HAVE_GPU:
        pytest.skip("there is a GPU here")
    with pytest.raises(lk.DeviceError, match="CuPy|CUDA"):
        with lk.device("gpu:0"):
            pass


def test_colocate_with_puts_ops_beside_a_tensor(cpus):
    u = lk.Variable([1.0, 2.0], name="u", device="cpu:1")

    @lk.function
    def f(x):
        h = x * 3.0                               # cpu:0
        with lk.colocate_with(u):
            y = h + 1.0                           # beside u: cpu:1
        return y

    np.testing.assert_allclose(f(lk.ones(2)).numpy(), [4.0, 4.0])
    report = f.graph(lk.ones(2)).placement()
    assert report["add"].device == "cpu:1"
    assert report["add"].reason == "colocated with u (lk.colocate_with)"
    assert report["mul"].device == "cpu:0"


# ---- the report, the heuristic, the pipeline ---------------------------------------------------
def test_placement_report_names_every_node_and_why(cpus):
    g, *_ = two_device_graph()
    report = g.placement()
    assert len(report) == len(g)
    kinds = {r.name: r.reason.split(":")[0].split(" (")[0] for r in report}
    assert kinds["x"] == "input"
    assert kinds["w1"] == "variable w1"
    assert kinds["matmul"] == "explicit"
    assert kinds["tanh"] == "follows its inputs' device"
    assert report.by_device()["cpu:1"] == ["matmul", "relu", "add", "mul_1", "exp"]
    text = str(report)
    assert text.splitlines()[0].split() == ["node", "op", "device", "why"]
    assert "matmul" in text and "explicit: lk.device('cpu:1')" in text
    assert g.placement().as_dict()["matmul"]["device"] == "cpu:1"
    assert all(n.placement_reason is None for n in g.nodes)   # a report places a copy


def test_the_heuristic_follows_the_data_and_weighs_moving_it(cpus):
    with lk.Graph() as g:
        p = lk.placeholder((256, 256), name="p")
        x = lk.placeholder((256,), name="x")                  # cpu:0, 1 KB
        with lk.device("cpu:1"):
            big = p * 0.5                                     # 256 KB, on cpu:1
        y = big @ x
    report = g.placement()
    assert report["matmul"].device == "cpu:1"                 # move x, not big
    assert report["matmul"].reason.startswith("heuristic: least estimated")
    got = g.run(y, {p: np.ones((256, 256), np.float32), x: np.ones(256, np.float32)})
    np.testing.assert_allclose(got.numpy(), np.full(256, 128.0))
    assert got.device.name == "cpu:1"


def test_single_device_graphs_are_not_placed_and_keep_the_straight_line_plan():
    @lk.function
    def f(x):
        return (x @ x).relu().sum()

    x = lk.ones(4, 4)
    f(x)
    assert [r.name for r in f.graph(x).history] == passes.PIPELINE
    plan = f.traces[0].plan
    assert plan.parts is None and "_step" not in plan.source
    assert f.graph(x).placement()["matmul"].reason.startswith("follows its inputs' device")


def test_a_device_block_around_a_call_does_not_place_the_function(cpus):
    @lk.function
    def f(x):
        return x * 2.0

    with lk.device("cpu:1"):
        f(lk.ones(2))
    assert all(n.requested_device is None for n in f.traces[0].raw_graph.nodes)
    assert f.traces[0].plan.parts is None


def test_placement_can_be_switched_off(cpus):
    @lk.function
    def f(x):
        with lk.device("cpu:1"):
            return x * 2.0

    lk.config.disable_pass("placement")
    try:
        y = f(lk.ones(2))
        assert y.device.name == "cpu:0"            # requests ignored
        assert "placement" not in [r.name for r in f.graph(lk.ones(2)).history]
    finally:
        lk.config.enable_pass()
    assert f(lk.ones(2)).device.name == "cpu:1"


def test_control_flow_inside_a_device_block(cpus):
    @lk.function
    def f(x):
        with lk.device("cpu:1"):
            y = lk.cond(x.sum() > 0, lambda: x * 2.0, lambda: x * 3.0)
        return y + 1.0

    np.testing.assert_allclose(f(lk.ones(3)).numpy(), [3.0, 3.0, 3.0])
    np.testing.assert_allclose(f(-lk.ones(3)).numpy(), [-2.0, -2.0, -2.0])
    report = f.graph(lk.ones(3)).placement()
    assert report["cond/output"].device == report["cond"].device     # takes its tuple apart


# ---- devices, workers, rendezvous ------------------------------------------------------------
def test_labkit_cpus_splits_the_host_at_import():
    env = dict(os.environ, LABKIT_CPUS="3")
    out = subprocess.run([sys.executable, "-c", "import labkit as lk; "
                          "print([d.name for d in lk.devices()])"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.stdout.strip() == "['cpu:0', 'cpu:1', 'cpu:2']", out.stderr


def test_each_device_has_one_worker_thread_that_runs_in_order(cpus):
    c0, c1 = cpus
    assert workers.worker(c0) is workers.worker(c0)
    assert workers.worker(c1).thread.name == "labkit-cpu:1"
    results = workers.run_parts([(c1, lambda: workers.current_device().name, ()),
                                 (c0, lambda: threading.current_thread().name, ())])
    assert results == ["cpu:1", "labkit-cpu:0"]
    assert workers.current_device() is None


def test_rendezvous_keys_by_name_and_step_and_aborts():
    rv = Rendezvous()
    rv.send("a", 1, "one")
    rv.send("a", 0, "zero")
    assert rv.recv("a", 0) == "zero" and rv.recv("a", 1) == "one"
    got = []
    t = threading.Thread(target=lambda: got.append(rv.recv("b", 5)))
    t.start()
    rv.send("b", 5, "late")
    t.join(5)
    assert got == ["late"]
    rv.abort(7, ValueError("boom"))
    with pytest.raises(RendezvousAborted, match="boom"):
        rv.recv("c", 7)
    rv.send("d", 7, "orphan")
    rv.finish(7)
    assert rv.pending() == 0


def test_memory_stats_on_a_cpu_report_what_labkit_holds():
    @lk.function
    def f(x):
        return ((x * 2.0).exp() + 1.0).sum()

    gc.collect()            # plans of earlier tests awaiting collection would leave in between
    before = lk.devices.memory_stats("cpu:0")
    f(lk.ones(64, 64))
    after = lk.devices.memory_stats("cpu:0")
    assert after["device"] == "cpu:0"
    assert after["bytes_in_use"] is None and after["peak_bytes_in_use"] is None
    assert after["workspace_bytes"] >= before["workspace_bytes"] + 64 * 64 * 4
    assert "not tracked" in after["source"]
