"""Seeing sharded training: a DTensor's pieces per device (lk.viz.placement), the memory per
device over a step (lk.viz.memory), a pipeline's bubbles and each collective's messages with
their bytes on the timeline (lk.viz.timeline)."""
import labkit as lk
from labkit.distributed.fsdp import gathered_memory
from labkit.distributed.memory import memory_trace
from labkit.distributed.pipelining import Schedule1F1B, ScheduleGPipe, SplitPoint, pipeline
from labkit.distributed.tensor import Partial, Replicate, Shard, distribute_tensor
from labkit.viz.timeline import op_kind

from . import gpt
from .strategies import STRATEGIES, mesh_for

CFG = gpt.SMALL


def test_pieces_per_device(mesh1d, mesh2d):
    x = lk.ones(8, 6)
    rows = lk.viz.placement(distribute_tensor(x, mesh1d, [Shard(0)]))
    assert [(r, devices) for r, _, devices in rows.cells] == [
        ((0, 2), ["cpu:0"]), ((2, 4), ["cpu:1"]), ((4, 6), ["cpu:2"]), ((6, 8), ["cpu:3"])]
    whole = lk.viz.placement(distribute_tensor(x, mesh1d, [Replicate()]))
    assert whole.cells == [((0, 8), (0, 6), ["cpu:0", "cpu:1", "cpu:2", "cpu:3"])]
    partial = lk.viz.placement(distribute_tensor(x, mesh1d, [Partial()]))
    assert "cpu:0 + cpu:1 + cpu:2 + cpu:3" in partial.svg()
    board = lk.viz.placement(distribute_tensor(x, mesh2d, [Shard(0), Shard(1)]))
    assert [devices for _, _, devices in board.cells] == [["cpu:0"], ["cpu:1"], ["cpu:2"],
                                                          ["cpu:3"]]
    assert "(S(0), S(1)) on 4 devices" in board.svg()


def test_memory_per_device_over_an_fsdp_step(four_devices):
    model = STRATEGIES["fsdp"](gpt.build(lk, dict(CFG, layers=4)), mesh_for("fsdp"))
    opt = lk.optim.AdamW(model.parameters())
    gathered_memory.reset()
    model(*(lk.tensor(a) for a in gpt.batch(CFG))).backward()
    opt.step()
    trace = memory_trace(model, opt, gathered=gathered_memory)
    assert trace.devices() == ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
    assert trace.kinds() == ["parameters", "gradients", "optimizer", "gathered parameters"]
    staying = sum(trace.staying["cpu:2"].values())
    assert trace.peak()["cpu:2"][1] == staying + gathered_memory.peak["cpu:2"]
    svg = lk.viz.memory(trace).svg()
    assert svg.count("peak ") == 4 and "gathered parameters" in svg


def _gpt_pipeline(schedule_type):
    seq = gpt.as_sequence(lk, gpt.build(lk, CFG))
    pipe = pipeline(seq, split_spec={str(i): SplitPoint.BEGINNING for i in range(1, 4)})
    stages = [pipe.build_stage(i, f"cpu:{i}") for i in range(4)]
    schedule = schedule_type(stages, 8, loss_fn=gpt.loss_fn(lk))
    schedule.step(*(lk.tensor(a) for a in gpt.batch(CFG)[:1]),
                  target=lk.tensor(gpt.batch(CFG)[1]))
    return schedule


def test_pipeline_bubbles_and_activations_on_the_timeline(four_devices):
    peaks = {}
    for name, schedule_type in (("gpipe", ScheduleGPipe), ("1f1b", Schedule1F1B)):
        schedule = _gpt_pipeline(schedule_type)
        prof = schedule.timeline()
        ops = {e.op for e in prof.events}
        assert ops == {"forward", "backward", "bubble"}
        assert sorted(prof.devices()) == ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
        # the first stage waits at the end, the last one at the start
        first = sorted((e for e in prof.events if e.device == "cpu:3"), key=lambda e: e.start_ns)
        assert first[0].op == "bubble"
        svg = lk.viz.timeline(prof).svg()
        assert "kind-bubble" in svg and "kind-forward" in svg and "kind-backward" in svg
        trace = memory_trace([s.submod for s in schedule.stages], schedule=schedule)
        peaks[name] = {d: p for d, (_, p) in trace.peak().items()}
    for d in ("cpu:0", "cpu:1", "cpu:2", "cpu:3"):
        assert peaks["1f1b"][d] < peaks["gpipe"][d]


def test_collectives_are_messages_on_the_timeline(mesh1d):
    x = distribute_tensor(lk.ones(8, 4), mesh1d, [Shard(0)])
    with lk.profile() as prof:
        x.redistribute(placements=[Replicate()])
    sends = [e for e in prof.events if e.op == "send"]
    assert len(sends) == 12 and all(e.bytes_in == 32 for e in sends)
    assert {op_kind(e.op) for e in prof.events} == {"transfer", "shape / index"}
    svg = lk.viz.timeline(prof).svg()
    assert svg.count("marker-end") >= 12           # an arrow per message


def test_mpi_collectives_are_transfers():
    assert op_kind("mpi_all_gather") == op_kind("mpi_all_reduce") == "transfer"
