"""The acceptance run: the GPT of the benchmarks in W10's configuration (vocab 256, context
64, d_model 128, 4 heads, 2 layers, batch 16; float64) trained 10 AdamW steps on 4 virtual
devices each way, eagerly and captured, against the same 10 steps on one device."""
import numpy as np
import pytest

import labkit as lk
from labkit.distributed.pipelining import Schedule1F1B, ScheduleGPipe, SplitPoint, pipeline

from . import gpt
from .strategies import STRATEGIES, mesh_for, pipeline_trainer

CFG, STEPS = gpt.W10, 10


@pytest.fixture(scope="module")
def one_device():
    return gpt.train(lk, gpt.build(lk, CFG), CFG, STEPS)


def _pipelined(schedule_type, captured):
    seq = gpt.as_sequence(lk, gpt.build(lk, CFG))
    pipe = pipeline(seq, split_spec={str(i): SplitPoint.BEGINNING for i in range(1, 4)})
    stages = [pipe.build_stage(i, f"cpu:{i}") for i in range(4)]
    schedule = schedule_type(stages, 8, loss_fn=gpt.loss_fn(lk))
    run = pipeline_trainer(schedule, stages, captured)
    idx, targets = (lk.tensor(a) for a in gpt.batch(CFG))
    return [float(run(idx, targets).item()) for _ in range(STEPS)]


@pytest.mark.parametrize("captured", [False, True], ids=["eager", "captured"])
@pytest.mark.parametrize("name", ["data_parallel", "fsdp", "tensor_parallel", "gpipe",
                                  "1f1b", "fsdp_tp"])
def test_w10_on_four_devices_like_one(four_devices, one_device, name, captured):
    if name in ("gpipe", "1f1b"):
        losses = _pipelined(ScheduleGPipe if name == "gpipe" else Schedule1F1B, captured)
    else:
        model = STRATEGIES[name](gpt.build(lk, CFG), mesh_for(name))
        losses = gpt.train(lk, model, CFG, STEPS, captured=captured)
    np.testing.assert_allclose(losses, one_device, rtol=1e-10)
    assert losses[-1] < losses[0]
