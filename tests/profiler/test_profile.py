"""The profiler: eager events, steps, summary, Chrome-trace export, zero cost when off."""
import json

import pytest

import labkit as lk
from labkit.tensor import dispatch


def _work():
    a = lk.ones(32, 32)
    return (a @ a).relu().sum()


def test_records_each_eager_op_with_device_and_step():
    with lk.profile() as prof:
        for _ in range(3):
            _work()
            prof.step()
    assert len(prof.steps) == 3
    assert [e.op for e in prof.steps[1]] == ["matmul", "relu", "sum"]
    for e in prof.events:
        assert e.device == "cpu:0"
        assert e.duration_ns >= 0
        assert e.end_ns >= e.start_ns
    matmul = prof.steps[0][0]
    assert matmul.bytes_in == 2 * 32 * 32 * 4 and matmul.bytes_out == 32 * 32 * 4


def test_profiling_mode_is_removed_after_the_block():
    depth = len(dispatch._state.stack)
    with lk.profile():
        assert len(dispatch._state.stack) == depth + 1
    assert len(dispatch._state.stack) == depth
    with lk.profile() as prof:
        pass
    _work()
    assert prof.events == []


def test_summary_lists_top_ops_per_device():
    with lk.profile() as prof:
        _work()
    text = prof.summary()
    assert "cpu:0" in text and "matmul" in text and "calls" in text


def test_chrome_trace_is_valid_trace_event_json(tmp_path):
    lk.devices.configure(cpus=2)
    try:
        with lk.profile() as prof:
            _work()
            with lk.device("cpu:1"):
                _work()
            prof.step()
        path = prof.export_chrome_trace(str(tmp_path / "trace.json"))
    finally:
        lk.devices.configure(cpus=1)
    data = json.loads(open(path).read())
    spans = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == 6
    for e in spans:
        assert {"name", "ts", "dur", "pid", "tid"} <= set(e)
        assert e["dur"] >= 0
    names = {e["args"]["name"] for e in data["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"cpu:0", "cpu:1"}          # one track per device
    assert len({e["pid"] for e in spans}) == 2


def test_capture_inside_a_profile_is_not_timed_as_eager_ops():
    @lk.function
    def f(x):
        return (x * 2.0).sum()
    with lk.profile() as prof:
        f(lk.ones(3))
    graph_name = f.traces[0].graph.name
    assert all(e.source in ("eager", graph_name) for e in prof.events)
    assert not any(e.op == "mul" and e.source == "eager" for e in prof.events)


@pytest.mark.gpu
@pytest.mark.cupy
def test_gpu_durations_come_from_cuda_events():
    with lk.profile() as prof:
        a = lk.ones(512, 512, device="gpu:0")
        (a @ a).sum()
    (mm,) = [e for e in prof.events if e.op == "matmul"]
    assert mm.device == "gpu:0" and mm.duration_ns > 0


def test_chrome_trace_draws_each_message_as_a_flow_between_its_slices():
    prof = lk.profiler.Profile()
    prof.record("send", "send_h", "cpu:0", 100, 200, lane="main")
    prof.record("recv", "recv_h", "cpu:1", 250, 400, lane="labkit-cpu:1")
    prof.record("ps.push", "step 0: push", "rank 1", 500, 600, lane="steps")
    prof.record("ps.apply", "step 0: apply", "rank 0", 700, 900, lane="steps")
    prof.flows.append((prof.events[2], prof.events[3]))    # recorded, not named send/recv
    trace = prof.to_chrome_trace()["traceEvents"]
    spans = {e["name"]: e for e in trace if e["ph"] == "X"}
    starts = {e["id"]: e for e in trace if e["ph"] == "s"}
    ends = {e["id"]: e for e in trace if e["ph"] == "f"}
    assert sorted(starts) == sorted(ends) == [0, 1]
    got = []
    for k in starts:
        s, f = starts[k], ends[k]
        assert f["bp"] == "e" and s["name"] == f["name"]
        src = next(n for n, e in spans.items() if (e["pid"], e["tid"], e["ts"]) ==
                   (s["pid"], s["tid"], s["ts"]))
        dst = next(n for n, e in spans.items() if (e["pid"], e["tid"], e["ts"]) ==
                   (f["pid"], f["tid"], f["ts"]))
        got.append((s["name"], src, dst))
    assert sorted(got) == [("ps.push -> ps.apply", "ps.push", "ps.apply"),
                           ("send -> recv", "send", "recv")]


def test_a_profile_pickles_to_another_process_with_its_events_and_lanes():
    import pickle

    from tests.devices.fake_gpu import FakeGpu
    gpu = FakeGpu(1)
    x = lk.ones(4, device=gpu.devices[0])
    with lk.profile(record_shapes=True) as prof:
        _work()
        x + 1.0
        prof.step()
    back = pickle.loads(pickle.dumps(prof))
    assert [(e.op, e.device, e.lane, e.start_ns, e.end_ns, e.shape) for e in back.events] == [
        (e.op, e.device, e.lane, e.start_ns, e.end_ns, e.shape) for e in prof.events]
    assert back.events[-1].lane == "stream 0" and back.gpu.lane(gpu.devices[0], gpu.streams[0]) \
        == "stream 0"
