"""The GPT made parallel each way, for the tests (the tutorial notebook spells the same
plans out): replicated data parallelism, FSDP (ZeRO-3 / ZeRO-2), tensor parallelism
(Megatron's layout, with or without sequence parallelism), and 2-d FSDP + TP; and the training
step of a pipeline schedule."""
import labkit as lk
from labkit.distributed.device_mesh import init_device_mesh
from labkit.distributed.fsdp import fully_shard
from labkit.distributed.tensor import Replicate, Shard, distribute_module, shard_inputs
from labkit.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                                RowwiseParallel, SequenceParallel,
                                                parallelize_module)

LOCAL = dict(use_local_output=False)


def tp_plan(sequence_parallel=False):
    """Megatron's layout: q, k, v and the MLP's first Linear split by columns, the attention's
    projection and the MLP's second Linear by rows; the embedding split by vocabulary (tied to
    the head, split by columns alike). With ``sequence_parallel`` the LayerNorms and residual
    stream run on a split of the sequence, and each all-reduce becomes a reduce-scatter plus
    an all-gather."""
    plan = {"blocks.*.attn.q": ColwiseParallel(**LOCAL),
            "blocks.*.attn.k": ColwiseParallel(**LOCAL),
            "blocks.*.attn.v": ColwiseParallel(**LOCAL),
            "blocks.*.mlp.0": ColwiseParallel(**LOCAL)}
    if not sequence_parallel:
        plan.update({"tok": RowwiseParallel(input_layouts=Replicate(), **LOCAL),
                     "blocks.*.attn.proj": RowwiseParallel(**LOCAL),
                     "blocks.*.mlp.2": RowwiseParallel(**LOCAL),
                     "head": ColwiseParallel(output_layouts=Replicate(), **LOCAL)})
        return plan
    seq = Shard(1)
    gather = dict(input_layouts=seq, desired_input_layouts=Replicate())
    plan.update({"tok": RowwiseParallel(input_layouts=Replicate(), output_layouts=seq, **LOCAL),
                 "blocks.*.ln_1": SequenceParallel(), "blocks.*.ln_2": SequenceParallel(),
                 "ln_f": SequenceParallel(),
                 "blocks.*.attn": PrepareModuleInput(**gather),
                 "blocks.*.mlp": PrepareModuleInput(**gather),
                 "blocks.*.attn.proj": RowwiseParallel(output_layouts=seq, **LOCAL),
                 "blocks.*.mlp.2": RowwiseParallel(output_layouts=seq, **LOCAL),
                 "head": ColwiseParallel(input_layouts=seq, output_layouts=Replicate(),
                                         **LOCAL)})
    return plan


def data_parallel(model, mesh):
    return distribute_module(model, mesh, input_fn=shard_inputs(0))


def fsdp(model, mesh, reshard_after_forward=True):
    for block in model.blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard_after_forward)
    return fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward)


def tensor_parallel(model, mesh, sequence_parallel=False):
    return parallelize_module(model, mesh, tp_plan(sequence_parallel))


def fsdp_tp(model, mesh):
    """The torchtitan recipe on a ("dp", "tp") mesh: TP inside each row, FSDP across rows."""
    parallelize_module(model, mesh["tp"], tp_plan())
    return fsdp(model, mesh["dp"])


def mesh_for(name, n=4):
    if name == "fsdp_tp":
        return init_device_mesh("cpu", (2, n // 2), mesh_dim_names=("dp", "tp"))
    return init_device_mesh("cpu", (n,), mesh_dim_names=("dp",))


STRATEGIES = {
    "data_parallel": data_parallel,
    "fsdp": fsdp,
    "fsdp_zero2": lambda m, mesh: fsdp(m, mesh, reshard_after_forward=False),
    "tensor_parallel": tensor_parallel,
    "sequence_parallel": lambda m, mesh: tensor_parallel(m, mesh, sequence_parallel=True),
    "fsdp_tp": fsdp_tp,
}


def pipeline_trainer(schedule, stages, captured):
    """One AdamW step over the stages' parameters through ``schedule``, returning the mean of
    its micro-batches' losses (captured with ``lk.function`` if ``captured``)."""
    opt = lk.optim.AdamW([p for s in stages for p in s.submod.parameters()], lr=1e-2)

    def step(idx, targets):
        opt.zero_grad()
        losses = []
        schedule.step(idx, target=targets, losses=losses)
        opt.step()
        total = losses[0]
        for loss in losses[1:]:
            total = total + loss
        return total / len(losses)
    return lk.function(step) if captured else step
