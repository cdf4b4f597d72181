"""The GPT trained in parallel on four virtual devices, every strategy against one device
(float64, eager and captured): data parallelism, FSDP (ZeRO-3 and ZeRO-2), tensor parallelism
(Megatron's layout, and with sequence parallelism), 2-d FSDP + TP. And what each costs: the
bytes each device holds (FSDP: a quarter, plus the gathered units), the bytes each moves in a
step (equal to the formulas), and the errors for wrong use."""
import numpy as np
import pytest

import labkit as lk
from labkit.distributed.fsdp import fully_shard, gathered_memory
from labkit.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from labkit.distributed.tensor.debug import CommDebugMode, bytes_sent, memory_per_device
from labkit.distributed.tensor.parallel import ColwiseParallel, parallelize_module
from labkit.errors import ShapeError

from . import gpt
from .strategies import STRATEGIES, mesh_for

CFG = gpt.SMALL


@pytest.fixture(scope="module")
def reference():
    return gpt.train(lk, gpt.build(lk, CFG), CFG, 3)


def test_the_split_attention_is_w10s_function():
    from benchmarks.workloads.w10_gpt import make_gpt as w10_gpt
    import benchmarks.workloads.w10_gpt as w10
    cfg = dict(vocab=w10.VOCAB, context=w10.CONTEXT, d_model=w10.D_MODEL, heads=w10.HEADS,
               layers=w10.LAYERS, batch=4)
    state = gpt.weights(cfg)
    ours = gpt.build(lk, cfg)
    theirs = w10_gpt(lk).to(lk.float64)
    theirs.load_state_dict({k: lk.tensor(v, dtype=lk.float64)
                            for k, v in gpt.w10_weights(state).items()})
    idx, targets = (lk.tensor(a) for a in gpt.batch(cfg))
    assert abs(ours(idx, targets).item() - theirs(idx, targets).item()) < 1e-12


@pytest.mark.parametrize("captured", [False, True], ids=["eager", "captured"])
@pytest.mark.parametrize("name", list(STRATEGIES))
def test_every_strategy_trains_like_one_device(four_devices, reference, name, captured):
    model = STRATEGIES[name](gpt.build(lk, CFG), mesh_for(name))
    losses = gpt.train(lk, model, CFG, 3, captured=captured)
    np.testing.assert_allclose(losses, reference, rtol=1e-12)


# ---- FSDP ------------------------------------------------------------------------------------
def _fsdp_model(mesh, layers=2, reshard=True):
    cfg = dict(CFG, layers=layers)
    return STRATEGIES["fsdp" if reshard else "fsdp_zero2"](gpt.build(lk, cfg), mesh), cfg


def test_fsdp_holds_a_quarter_of_parameters_gradients_and_optimizer_state(four_devices):
    whole = gpt.build(lk, CFG)
    gpt.train(lk, whole, CFG, 1)
    opt_whole = lk.optim.AdamW(whole.parameters())
    whole(*(lk.tensor(a) for a in gpt.batch(CFG))).backward()
    opt_whole.step()
    total = memory_per_device(whole, opt_whole)["cpu:0"]
    model, _ = _fsdp_model(mesh_for("fsdp"))
    assert model.blocks[0].attn.q.weight.placements == (Shard(0),)
    assert model.blocks[0].attn.q.weight.to_local((3,)).shape == (4, 16)
    opt = lk.optim.AdamW(model.parameters())
    gathered_memory.reset()
    model(*(lk.tensor(a) for a in gpt.batch(CFG))).backward()
    opt.step()
    per_device = memory_per_device(model, opt)
    assert sorted(per_device) == ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
    for row in per_device.values():
        for kind in ("parameters", "gradients", "optimizer"):
            assert abs(row[kind] / (total[kind] / 4) - 1) < 0.05, (kind, row, total)
    # at most the root's and two blocks' parameters were gathered at once (one prefetched)
    block = sum(p.numel() * 8 for p in gpt.build(lk, CFG).blocks[0].parameters())
    assert max(gathered_memory.peak.values()) <= total["parameters"] - block * (CFG["layers"] - 2)


def test_zero3_gathers_a_unit_at_a_time_zero2_keeps_them(four_devices):
    mesh = mesh_for("fsdp")
    peaks = {}
    for reshard in (True, False):
        model, cfg = _fsdp_model(mesh, layers=4, reshard=reshard)
        gathered_memory.reset()
        gpt.train(lk, model, cfg, 2)
        peaks[reshard] = gathered_memory.peak["cpu:1"]
    whole = gpt.build(lk, dict(CFG, layers=4))
    everything = sum(p.numel() * 8 for p in whole.parameters())
    block = sum(p.numel() * 8 for p in whole.blocks[0].parameters())
    assert peaks[False] == everything
    assert peaks[True] == everything - 2 * block     # the root, one block and the next one


def _step_bytes(model, mesh, cfg, captured, placements):
    idx, targets = (distribute_tensor(lk.tensor(a), mesh, placements)
                    for a in gpt.batch(cfg))
    run = gpt.trainer(lk, model, captured)
    run(idx, targets)
    with lk.profile() as prof:
        run(idx, targets)
    return bytes_sent(prof)


def _scalar_all_reduce(mesh):
    """What each device sends to sum one float64 number over the mesh (a ring of pieces of
    which only one is not empty)."""
    x = distribute_tensor(lk.tensor(1.0, dtype=lk.float64), mesh, [Partial()])
    with lk.profile() as prof:
        x.redistribute(placements=[Replicate()])
    return bytes_sent(prof)


def _host_copies(cfg):
    """Plain tensors made inside the step go from cpu:0 to the three other devices: the
    position indices (int64) and each layer's causal mask (float64)."""
    T = cfg["context"]
    return 3 * (T * 8 + cfg["layers"] * T * T * 8)


@pytest.mark.parametrize("captured", [False, True], ids=["eager", "captured"])
@pytest.mark.parametrize("reshard", [True, False], ids=["zero3", "zero2"])
def test_fsdp_moves_all_gathers_and_reduce_scatters(four_devices, reshard, captured):
    mesh = mesh_for("fsdp")
    model, cfg = _fsdp_model(mesh, reshard=reshard)
    P = sum(p.numel() * 8 for p in gpt.build(lk, cfg).parameters())
    again = 0
    if reshard:     # the blocks' parameters gathered again for backward
        for block in gpt.build(lk, cfg).blocks:
            for name, p in block.named_parameters():
                # a captured step gathers only what backward reads: not the biases
                if not (captured and name.endswith("bias")):
                    again += p.numel() * 8
    gather, scatter = 3 * (P + again) // 4, 3 * P // 4
    # the loss's mean divides by the batch's count, summed over the devices: a scalar's ring
    count = _scalar_all_reduce(mesh)
    sent = _step_bytes(model, mesh, cfg, captured, [Shard(0)])
    for d, b in sent.items():
        assert b == gather + scatter + count[d] + (_host_copies(cfg) if d == "cpu:0" else 0)


@pytest.mark.parametrize("captured", [False, True], ids=["eager", "captured"])
@pytest.mark.parametrize("name", ["tensor_parallel", "sequence_parallel"])
def test_tensor_parallelism_moves_its_all_reduces(four_devices, name, captured):
    mesh = mesh_for(name)
    model = STRATEGIES[name](gpt.build(lk, CFG), mesh)
    B, T, C, V, L = (CFG[k] for k in ("batch", "context", "d_model", "vocab", "layers"))
    replicated = sum(p.numel() * 8 for p in model.parameters()
                     if p.placements == (Replicate(),))

    def ring_all_reduce(nbytes):
        return 2 * nbytes * 3 // 4
    # forward: the embedding's and each attention's and MLP's all-reduce (sequence
    # parallelism: a reduce-scatter and an all-gather each, the same bytes), the head's
    # all-gather of the logits; backward: each one's transpose; then the replicated
    # parameters' gradients summed
    formula = 2 * (1 + 2 * L) * ring_all_reduce(B * T * C * 8) + 2 * (B * T * V * 8 * 3 // 4) \
        + ring_all_reduce(replicated)
    sent = _step_bytes(model, mesh, CFG, captured, [Replicate()])
    for d, b in sent.items():
        assert b == formula + (_host_copies(CFG) if d == "cpu:0" else 0)


def test_megatron_layout_one_all_reduce_per_attention_and_mlp(four_devices):
    mesh = mesh_for("tensor_parallel")
    model = STRATEGIES["tensor_parallel"](gpt.build(lk, CFG), mesh)
    idx, targets = (lk.tensor(a) for a in gpt.batch(CFG))
    with lk.no_grad(), CommDebugMode() as comm:
        model(idx, targets)
    # the embedding's, then one per attention and one per MLP; the head gathers the logits
    assert comm.get_comm_counts() == {"all_reduce": 1 + 2 * CFG["layers"], "all_gather": 1}
    model = STRATEGIES["sequence_parallel"](gpt.build(lk, CFG), mesh)
    with lk.no_grad(), CommDebugMode() as comm:
        model(idx, targets)
    assert comm.get_comm_counts() == {"reduce_scatter": 1 + 2 * CFG["layers"],
                                      "all_gather": 2 * CFG["layers"] + 2}


# ---- wrong use ------------------------------------------------------------------------------
def test_fsdp_of_a_dimension_that_does_not_divide(four_devices):
    with pytest.raises(ShapeError, match=r"fully_shard\(weight\).*size 6.*mesh dim dp"):
        fully_shard(lk.nn.Linear(4, 6), mesh=mesh_for("fsdp"))


def test_tied_weights_need_styles_that_agree(four_devices):
    model = gpt.build(lk, CFG)
    with pytest.raises(ValueError, match="tied"):
        parallelize_module(model, mesh_for("tensor_parallel"),
                           {"tok": ColwiseParallel(), "head": ColwiseParallel()})


def test_the_model_returns_a_distributed_loss(four_devices):
    model = STRATEGIES["fsdp"](gpt.build(lk, CFG), mesh_for("fsdp"))
    loss = model(*(lk.tensor(a) for a in gpt.batch(CFG)))
    assert isinstance(loss, DTensor) and loss.shape == ()
