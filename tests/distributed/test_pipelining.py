"""Pipeline parallelism on four virtual devices: the GPT cut into stages trains like one
device (GPipe, 1F1B, interleaved 1F1B; eager and captured), the tied embedding stays tied,
the bubble fractions against the formula (the schedule's rounds, and the timeline of a step
it ran with a backward twice a forward, exactly), 1F1B holds fewer activations than GPipe, the messages are the
activations and their gradients, and wrong use is refused clearly."""
import numpy as np
import pytest

import labkit as lk
from labkit.distributed.pipelining import (Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B,
                                           SplitPoint, pipeline)
from labkit.distributed.tensor.debug import bytes_sent

from . import gpt
from .strategies import pipeline_trainer

CFG = gpt.SMALL
SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}


def _gpt_stages(cfg, devices=4, per_device=1):
    seq = gpt.as_sequence(lk, gpt.build(lk, cfg))     # embedding, blocks..., head
    n = devices * per_device
    pipe = pipeline(seq, split_spec={str(i): SplitPoint.BEGINNING for i in range(1, n)})
    assert pipe.num_stages == n
    return [pipe.build_stage(i, f"cpu:{i % devices}") for i in range(n)]


@pytest.mark.parametrize("captured", [False, True], ids=["eager", "captured"])
@pytest.mark.parametrize("name", list(SCHEDULES))
def test_the_gpt_in_four_stages_trains_like_one_device(four_devices, name, captured):
    reference = gpt.train(lk, gpt.build(lk, CFG), CFG, 3)
    stages = _gpt_stages(CFG)
    schedule = SCHEDULES[name](stages, 8, loss_fn=gpt.loss_fn(lk))
    run = pipeline_trainer(schedule, stages, captured)
    idx, targets = (lk.tensor(a) for a in gpt.batch(CFG))
    losses = [run(idx, targets).item() for _ in range(3)]
    np.testing.assert_allclose(losses, reference, rtol=1e-12)
    # the embedding and the head share one weight: their copies took the same steps
    tok, head = stages[0].submod[0].tok.weight, stages[-1].submod[0].head.weight
    assert tok.device.name == "cpu:0" and head.device.name == "cpu:3"
    np.testing.assert_array_equal(tok.detach().numpy(), head.detach().numpy())


def test_interleaved_two_stages_per_device(four_devices):
    cfg = dict(CFG, layers=6)                          # 8 parts: 2 stages on each device
    reference = gpt.train(lk, gpt.build(lk, cfg), cfg, 2)
    stages = _gpt_stages(cfg, per_device=2)
    assert [s.device.name for s in stages[:5]] == ["cpu:0", "cpu:1", "cpu:2", "cpu:3", "cpu:0"]
    schedule = ScheduleInterleaved1F1B(stages, 8, loss_fn=gpt.loss_fn(lk))
    run = pipeline_trainer(schedule, stages, captured=False)
    idx, targets = (lk.tensor(a) for a in gpt.batch(cfg))
    np.testing.assert_allclose([run(idx, targets).item() for _ in range(2)], reference,
                               rtol=1e-12)
    # v = 2 stages per device fill the bubble twice as well
    assert schedule.bubble_fraction() == pytest.approx(3 / (2 * 8 + 3))


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_the_rounds_give_the_textbook_bubble(four_devices, name):
    schedule = SCHEDULES[name](_gpt_stages(CFG), 8)
    p, m = 4, 8
    assert schedule.bubble_fraction() == pytest.approx((p - 1) / (m + p - 1))
    assert len(schedule.order) == 2 * (m + p - 1)
    order = schedule.pipeline_order
    assert [repr(a) for a in order[0][:2]] == ["0F0", "0F1"] and order[3][:3] == [None] * 3


def _balanced(schedule_type):
    """Four equal stages (a 1024-wide Linear and tanh each), eight micro-batches of 64."""
    lk.manual_seed(0)
    seq = lk.nn.Sequential(*[lk.nn.Sequential(lk.nn.Linear(1024, 1024), lk.nn.Tanh())
                             for _ in range(4)])
    pipe = pipeline(seq, split_spec={str(i): SplitPoint.BEGINNING for i in range(1, 4)})
    stages = [pipe.build_stage(i, f"cpu:{i}") for i in range(4)]
    return schedule_type(stages, 8, loss_fn=lambda out, t: ((out - t) ** 2).mean())


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_timeline_of_a_run_step_has_the_textbook_bubble(four_devices, name):
    # the actions the step really ran, placed with a backward twice a forward: the formula
    schedule = _balanced(SCHEDULES[name])
    schedule.step(lk.randn(512, 1024), target=lk.randn(512, 1024))
    prof = schedule.timeline({"F": 1, "B": 2})
    assert prof.measured_bubble_fraction == pytest.approx(3 / 11)
    assert prof.end_ns == 3 * (8 + 4 - 1)
    for d in range(4):
        busy = [e for e in prof.events if e.device == f"cpu:{d}" and e.op != "bubble"]
        assert len(busy) == 16 and sum(e.duration_ns for e in busy) == 8 * 3
    # measured times give a timeline of the same actions (how close to the formula it comes
    # depends on the machine: benchmarks and notebook 16 show it, no test asserts it)
    measured = schedule.timeline("median")
    assert 0 < measured.measured_bubble_fraction < 1
    assert len([e for e in measured.events if e.op != "bubble"]) == 64


def test_timeline_refuses_unknown_durations(four_devices):
    schedule = _balanced(ScheduleGPipe)
    schedule.step(lk.randn(64, 1024), target=lk.randn(64, 1024))
    with pytest.raises(ValueError, match=r"needs a time for \['B'\]"):
        schedule.timeline({"F": 1})
    with pytest.raises(ValueError, match="expected 'measured', 'cpu', 'median'"):
        schedule.timeline("wall")


def test_1f1b_holds_fewer_activations_than_gpipe(four_devices):
    peaks = {}
    idx, targets = (lk.tensor(a) for a in gpt.batch(CFG))
    for name, schedule_type in SCHEDULES.items():
        stages = _gpt_stages(CFG)
        schedule = schedule_type(stages, 8, loss_fn=gpt.loss_fn(lk))
        schedule.step(idx, target=targets)
        peaks[name] = schedule.peak_activation_bytes()
    # each GPipe stage holds all m = 8 micro-batches at once; 1F1B's stage s at most p - s
    for stage in range(4):
        assert peaks["1f1b"][stage] < peaks["gpipe"][stage]
        assert peaks["1f1b"][stage] * 8 == peaks["gpipe"][stage] * (4 - stage)


@pytest.mark.parametrize("captured", [False, True], ids=["eager", "captured"])
def test_the_messages_are_activations_and_their_gradients(four_devices, captured):
    stages = _gpt_stages(CFG)
    schedule = ScheduleGPipe(stages, 8, loss_fn=gpt.loss_fn(lk))
    run = pipeline_trainer(schedule, stages, captured)
    idx, targets = (lk.tensor(a) for a in gpt.batch(CFG))
    run(idx, targets)
    with lk.profile() as prof:
        run(idx, targets)
    B, T, C, V = (CFG[k] for k in ("batch", "context", "d_model", "vocab"))
    activation = B * T * C * 8                 # the whole batch, over its 8 micro-batches
    sent = bytes_sent(prof)
    # each of stages 1..3 sends its input's gradient back, each of 0..2 its output on;
    # cpu:0 also sends the targets (int64) to the last stage; the tied embedding's gradient
    # goes from the last stage to the first and the sum back
    tied = V * C * 8
    assert sent == {"cpu:0": activation + B * T * 8 + tied, "cpu:1": 2 * activation,
                    "cpu:2": 2 * activation, "cpu:3": activation + tied}


def test_wrong_use(four_devices):
    with pytest.raises(TypeError, match="Sequential"):
        pipeline(gpt.build(lk, CFG), split_spec={"blocks": SplitPoint.BEGINNING})
    seq = gpt.as_sequence(lk, gpt.build(lk, CFG))
    with pytest.raises(ValueError, match="not a child"):
        pipeline(seq, split_spec={"9": SplitPoint.BEGINNING})
    stages = _gpt_stages(CFG)
    with pytest.raises(ValueError, match="does not split into 3"):
        ScheduleGPipe(stages, 3, loss_fn=gpt.loss_fn(lk)).step(lk.tensor(gpt.batch(CFG)[0]))
    with pytest.raises(NotImplementedError, match="every stage"):
        ScheduleGPipe(stages[0], 8)
