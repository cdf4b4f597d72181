"""The profiler inside graphs: one event per node run (op, node, device, lane, times, bytes,
step), steps per lk.function call, multi-device timelines, Chrome traces, no cost when off."""
import json
import time

import numpy as np
import pytest

import labkit as lk


@pytest.fixture
def cpus():
    lk.devices.configure(cpus=2)
    yield
    lk.devices.configure(cpus=1)


def mlp_step():
    """The captured training step of a 784-256-256-10 MLP (batch 128), and its inputs."""
    lk.manual_seed(0)
    model = lk.nn.Sequential(lk.nn.Linear(784, 256), lk.nn.ReLU(), lk.nn.Linear(256, 256),
                             lk.nn.ReLU(), lk.nn.Linear(256, 10))
    params = list(model.parameters())

    @lk.function
    def step(x, y):
        loss = lk.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        for p in params:
            p.assign_sub(p.grad * 0.01)
        return loss

    rng = np.random.default_rng(0)
    x = lk.tensor(rng.standard_normal((128, 784)).astype(np.float32))
    y = lk.tensor(rng.integers(0, 10, 128))
    return step, x, y


def test_graph_ops_are_recorded_with_node_device_lane_bytes_and_step():
    @lk.function
    def f(a, b):
        return (a @ b).relu().sum()

    a, b = lk.ones(16, 32), lk.ones(32, 8)
    f(a, b)
    with lk.profile() as prof:
        for _ in range(3):
            f(a, b)
    assert len(prof.steps) == 3                      # one step per call
    name = f.traces[0].graph.name
    step0 = prof.steps[0]
    assert [e.op for e in step0] == [n.op_name for n in f.traces[0].plan.nodes
                                     if n.kind == "op"]
    mm = next(e for e in step0 if e.op == "matmul")
    assert mm.name == "matmul" and mm.source == name and mm.device == "cpu:0"
    assert mm.lane == "main" and mm.step == 0
    assert mm.bytes_in == (16 * 32 + 32 * 8) * 4 and mm.bytes_out == 16 * 8 * 4
    for steps in prof.steps:
        for e1, e2 in zip(steps, steps[1:]):         # one after the other, on one thread
            assert e1.end_ns <= e2.start_ns
    prof.step()                                      # after a call's own mark: no empty step
    assert len(prof.step_marks) == 3


def test_no_profile_no_instrumented_plan():
    @lk.function
    def f(x):
        return (x * 2.0).sum()

    f(lk.ones(3))
    plan = f.traces[0].plan
    assert plan._profiled is None
    with lk.profile() as prof:
        f(lk.ones(3))
    assert plan._profiled is not None and len(prof.events) == len(plan._profiled[0].timed)
    f(lk.ones(3))
    assert len(prof.events) == len(plan._profiled[0].timed)   # closed: nothing more


def test_two_independent_matmuls_on_two_devices_overlap_in_time(cpus):
    @lk.function
    def two(a, b):
        with lk.device("cpu:0"):
            x = a @ b
        with lk.device("cpu:1"):
            y = b @ a
        return x.sum() + y.sum()

    rng = np.random.default_rng(0)
    a = lk.tensor(rng.standard_normal((768, 768)).astype(np.float32))   # ~10-30 ms each
    b = lk.tensor(rng.standard_normal((768, 768)).astype(np.float32))
    want = (a.numpy() @ b.numpy()).sum() + (b.numpy() @ a.numpy()).sum()
    two(a, b)
    with lk.profile() as prof:
        for _ in range(5):
            np.testing.assert_allclose(two(a, b).item(), want, rtol=1e-3)
    overlaps = []
    for events in prof.steps:
        mms = [e for e in events if e.op == "matmul"]
        assert sorted(e.device for e in mms) == ["cpu:0", "cpu:1"]
        assert {e.lane for e in mms} == {"labkit-cpu:0", "labkit-cpu:1"}
        first, second = sorted(mms, key=lambda e: e.start_ns)
        overlaps.append(min(first.end_ns, second.end_ns) - second.start_ns)
    assert max(overlaps) > 0, overlaps      # both ran at once (in one step at least: a busy
    #                                        machine may not give both threads a core at once)
    sends = [e for e in prof.events if e.op in ("send", "recv")]
    assert sends and all(e.source == two.traces[0].graph.name for e in sends)


def test_chrome_trace_of_the_mlp_training_step(tmp_path):
    step, x, y = mlp_step()
    for _ in range(3):
        step(x, y)
    with lk.profile() as prof:
        measured = []
        for _ in range(10):
            t = time.perf_counter_ns()
            step(x, y)
            measured.append(time.perf_counter_ns() - t)
    path = prof.export_chrome_trace(str(tmp_path / "mlp.json"))
    data = json.loads(open(path).read())                      # valid JSON
    assert data["displayTimeUnit"] == "ms"
    spans = [e for e in data["traceEvents"] if e["ph"] == "X"]
    for e in spans:                                           # trace-event "complete" events
        assert {"name", "ph", "ts", "dur", "pid", "tid", "args"} <= set(e)
        assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0
    tracks = {e["args"]["name"]: e["pid"] for e in data["traceEvents"]
              if e["ph"] == "M" and e["name"] == "process_name"}
    assert tracks == {"cpu:0": 0}                             # one track per device
    assert {e["pid"] for e in spans} == {0}
    per_step = {}
    for e in spans:
        per_step[e["args"]["step"]] = per_step.get(e["args"]["step"], 0.0) + e["dur"] * 1e3
    assert sorted(per_step) == list(range(10))
    ratios = sorted(per_step[i] / measured[i] for i in range(10))
    assert 0.9 <= ratios[len(ratios) // 2] <= 1.0, ratios    # within 10% of the step time
    ops = {e["name"] for e in spans}
    assert {"matmul", "assign_sub"} <= ops


def test_chrome_trace_has_one_track_per_device(cpus, tmp_path):
    @lk.function
    def f(x):
        h = x * 2.0
        with lk.device("cpu:1"):
            h = h.exp()
        return h.sum()

    with lk.profile() as prof:
        f(lk.ones(8))
        f(lk.ones(8))
    data = prof.to_chrome_trace()
    json.dumps(data)
    names = {e["args"]["name"] for e in data["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"cpu:0", "cpu:1"}
    lanes = {e["args"]["name"] for e in data["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert lanes == {"labkit-cpu:0", "labkit-cpu:1"}
    assert len(prof.steps) == 2
    assert "cpu:1" in prof.summary() and "recv" in prof.summary()


def test_eager_and_graph_events_in_one_profile():
    @lk.function
    def f(x):
        return (x @ x).sum()

    with lk.profile() as prof:
        a = lk.ones(4, 4)
        (a @ a).sum()            # eager
        f(a)                     # a graph: ends the step
    sources = [e.source for e in prof.steps[0]]
    assert sources[:2] == ["eager", "eager"] and set(sources[2:]) == {f.traces[0].graph.name}
