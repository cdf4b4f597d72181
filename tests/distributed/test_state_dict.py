"""State dicts between a sharded model and an unsharded one, both ways, with equal values;
and between two sharded layouts."""
import numpy as np
import pytest

import labkit as lk
from labkit.distributed.checkpoint import (StateDictOptions, get_model_state_dict,
                                           set_model_state_dict)
from labkit.distributed.tensor import DTensor

from . import gpt
from .strategies import STRATEGIES, mesh_for

CFG = gpt.SMALL
FULL = StateDictOptions(full_state_dict=True)


def _values(state):
    return {k: (v.full_tensor() if isinstance(v, DTensor) else v).numpy().copy()
            for k, v in state.items()}


@pytest.mark.parametrize("name", ["fsdp", "tensor_parallel", "fsdp_tp"])
def test_sharded_to_unsharded_and_back(four_devices, name):
    sharded = STRATEGIES[name](gpt.build(lk, CFG), mesh_for(name))
    gpt.train(lk, sharded, CFG, 2)                # weights that differ from the initial ones
    state = get_model_state_dict(sharded)
    assert any(isinstance(v, DTensor) for v in state.values())
    full = get_model_state_dict(sharded, options=FULL)
    assert not any(isinstance(v, DTensor) for v in full.values())
    plain = gpt.build(lk, CFG, seed=7)
    plain.load_state_dict(full)
    expect = _values(state)
    got = _values(plain.state_dict())
    assert got.keys() == expect.keys()
    for k in expect:
        np.testing.assert_array_equal(got[k], expect[k])
    # and back: the unsharded weights, changed, into a fresh sharded model
    for p in plain.parameters():
        p.detach().numpy()[...] *= 2.0
    fresh = STRATEGIES[name](gpt.build(lk, CFG, seed=9), mesh_for(name))
    set_model_state_dict(fresh, plain.state_dict())
    for k, v in _values(get_model_state_dict(fresh)).items():
        np.testing.assert_array_equal(v, 2.0 * expect[k])
    # the sharded model then trains on exactly as the unsharded one does
    np.testing.assert_allclose(gpt.train(lk, fresh, CFG, 2), gpt.train(lk, plain, CFG, 2),
                               rtol=1e-12)


def test_one_sharded_layout_into_another(four_devices):
    tp = STRATEGIES["tensor_parallel"](gpt.build(lk, CFG), mesh_for("tensor_parallel"))
    fsdp = STRATEGIES["fsdp"](gpt.build(lk, CFG, seed=3), mesh_for("fsdp"))
    set_model_state_dict(fsdp, get_model_state_dict(tp))
    a, b = _values(get_model_state_dict(tp)), _values(get_model_state_dict(fsdp))
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_keys_must_match(four_devices):
    fsdp = STRATEGIES["fsdp"](gpt.build(lk, CFG), mesh_for("fsdp"))
    with pytest.raises(ValueError, match="missing"):
        set_model_state_dict(fsdp, {"tok.weight": lk.zeros(32, 16)})
