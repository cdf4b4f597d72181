"""``labkit.distributed`` (torch.distributed's spellings), ``DistributedDataParallel`` and the
launcher's torchrun spellings.

On 2 workers: every collective against NumPy, in place as PyTorch's, with ``async_op`` and a
sub-group; DDP with activation checkpointing (gradients reach the buckets through the
recomputation) against each rank's own step; DDP refusing a captured step; the torch-style
example (nanoGPT's DDP branch, examples/dist/train_ddp.py) under
``python -m labkit.dist.run --standalone --nproc_per_node=2`` against one process, with the
torchrun environment each rank saw. Without workers: a world of one, the errors, DDP in one
process, and ``labkit.nn.parallel.DataParallel`` over virtual devices.
"""
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import labkit as lk
import labkit.distributed as dist
from labkit.dist import run
from labkit.nn.parallel import DataParallel, DistributedDataParallel, data_parallel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "dist", "train_ddp.py")
SEED = 99


@pytest.fixture
def world_of_one():
    dist.init_process_group("gloo", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def rank_data(rank, shape):
    return np.random.default_rng(SEED + rank).standard_normal(shape).astype(np.float32)


# ---- 2 ranks: the collectives ---------------------------------------------------------------
def _collectives():
    """Every collective once on this rank; returns what each wrote (NumPy arrays)."""
    import labkit.distributed as dist
    before = dist.is_initialized()            # a launched worker's group is the default one
    dist.init_process_group(backend="gloo")
    try:
        out = _each_collective(dist)
    finally:
        dist.destroy_process_group()
    out["facts"] = (before,) + out["facts"]
    out["after"] = (dist.is_initialized(), lk.dist.is_initialized())
    return out


def _each_collective(dist):
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = lambda shape: lk.tensor(rank_data(rank, shape))             # noqa: E731
    out = {"facts": (rank, world, dist.get_backend())}
    for op in ("SUM", "AVG", "PRODUCT", "MIN", "MAX"):
        t = mine((3,))
        assert dist.all_reduce(t, op=getattr(dist.ReduceOp, op)) is None
        out[f"all_reduce_{op}"] = t.numpy()
    t = mine((2, 2))
    work = dist.all_reduce(t, async_op=True)
    out["async"] = (work.wait(), work.is_completed(), t.numpy())
    t = mine((2,))
    dist.broadcast(t, src=1)
    out["broadcast"] = t.numpy()
    gathered = [lk.zeros(2, 3) for _ in range(world)]
    dist.all_gather(gathered, mine((2, 3)))
    out["all_gather"] = np.stack([g.numpy() for g in gathered])
    flat = lk.zeros(world * 2, 3)
    dist.all_gather_into_tensor(flat, mine((2, 3)))
    out["all_gather_into_tensor"] = flat.numpy()
    part = lk.zeros(2)
    dist.reduce_scatter(part, [mine((world, 2))[r] for r in range(world)])
    out["reduce_scatter"] = part.numpy()
    part = lk.zeros(3)
    dist.reduce_scatter_tensor(part, mine((world * 3,)), op=dist.ReduceOp.MAX)
    out["reduce_scatter_tensor"] = part.numpy()
    t = mine((2,))
    dist.reduce(t, dst=1)
    out["reduce"] = t.numpy()
    into = [lk.zeros(2) for _ in range(world)] if rank == 0 else None
    dist.gather(mine((2,)), into, dst=0)
    out["gather"] = np.stack([g.numpy() for g in into]) if into else None
    t = lk.zeros(2)
    dist.scatter(t, [lk.full((2,), 10.0 * r) for r in range(world)] if rank == 0 else None, src=0)
    out["scatter"] = t.numpy()
    objects = [None] * world
    dist.all_gather_object(objects, {"rank": rank})
    out["all_gather_object"] = objects
    sub = dist.new_group([1])
    if rank == 1:
        t = mine((2,))
        dist.all_reduce(t, group=sub)
        out["subgroup"] = (dist.get_rank(sub), dist.get_world_size(sub), t.numpy())
    else:
        out["subgroup"] = (dist.get_rank(sub), dist.all_reduce(mine((2,)), group=sub))
    dist.barrier()
    return out


@pytest.mark.dist
def test_collectives_on_two_ranks_match_numpy(cluster):
    results = cluster.run(_collectives)
    data = lambda shape: np.stack([rank_data(r, shape) for r in range(2)])    # noqa: E731
    reference = {"SUM": np.sum, "AVG": np.mean, "PRODUCT": np.prod, "MIN": np.min,
                 "MAX": np.max}
    for rank, out in enumerate(results):
        assert out["facts"] == (True, rank, 2, "gloo")
        for op, f in reference.items():
            np.testing.assert_allclose(out[f"all_reduce_{op}"], f(data((3,)), axis=0),
                                       rtol=1e-6)
        assert out["async"][:2] == (True, True)
        np.testing.assert_allclose(out["async"][2], data((2, 2)).sum(0), rtol=1e-6)
        np.testing.assert_array_equal(out["broadcast"], rank_data(1, (2,)))
        np.testing.assert_array_equal(out["all_gather"], data((2, 3)))
        np.testing.assert_array_equal(out["all_gather_into_tensor"],
                                      data((2, 3)).reshape(4, 3))
        np.testing.assert_allclose(out["reduce_scatter"], data((2, 2)).sum(0)[rank], rtol=1e-6)
        np.testing.assert_allclose(out["reduce_scatter_tensor"],
                                   data((6,)).max(0)[3 * rank:3 * rank + 3])
        want_reduce = data((2,)).sum(0) if rank == 1 else rank_data(0, (2,))  # dst only
        np.testing.assert_allclose(out["reduce"], want_reduce, rtol=1e-6)
        if rank == 0:
            np.testing.assert_array_equal(out["gather"], data((2,)))
        else:
            assert out["gather"] is None
        assert out["scatter"].tolist() == [10.0 * rank] * 2
        assert out["all_gather_object"] == [{"rank": 0}, {"rank": 1}]
        assert out["after"] == (True, True)       # a launched worker keeps its group
    assert results[0]["subgroup"] == (-1, None)   # not a member: nothing happens
    rank, size, values = results[1]["subgroup"]
    assert (rank, size) == (0, 1)
    np.testing.assert_array_equal(values, rank_data(1, (2,)))


def _ddp_in_a_captured_step():
    import labkit.distributed as dist
    dist.init_process_group()
    try:
        model = DistributedDataParallel(lk.nn.Linear(2, 1))
        step = lk.function(lambda x: model(x).sum())
        try:
            step(lk.ones(1, 2))
        except lk.dist.DistError as e:
            return str(e)
        return "ran"
    finally:
        dist.destroy_process_group()


@pytest.mark.dist
def test_ddp_refuses_a_captured_step_rather_than_train_apart(cluster):
    for said in cluster.run(_ddp_in_a_captured_step):
        assert said.startswith("DistributedDataParallel inside a captured function")


def _train_checkpointed(rank, ddp, steps):
    """An MLP whose hidden block (with dropout) is checkpointed, trained on rank ``rank``'s half
    of fixed batches, wrapped in DDP or not; the losses and final parameters."""
    from labkit.utils.checkpoint import checkpoint
    lk.manual_seed(5)
    hidden = lk.nn.Sequential(lk.nn.Linear(4, 16), lk.nn.Tanh(), lk.nn.Dropout(0.2))
    model = lk.nn.ModuleDict({"hidden": hidden, "head": lk.nn.Linear(16, 1)})
    net = DistributedDataParallel(model, bucket_cap_mb=0.0001) if ddp else model  # 3 buckets
    opt = lk.optim.SGD(net.parameters(), lr=0.1)
    data = lk.Generator().manual_seed(11)
    losses = []
    for _ in range(steps):
        x, y = lk.randn(8, 4, generator=data), lk.randn(8, 1, generator=data)
        lk.manual_seed(100 + rank)              # each rank its own dropout masks
        h = checkpoint(hidden, x[4 * rank:4 * rank + 4], use_reentrant=False)
        loss = lk.nn.functional.mse_loss(model["head"](h), y[4 * rank:4 * rank + 4])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.numpy().copy() for p in model.parameters()]


def _ddp_checkpointed(steps):
    import labkit.distributed as dist
    dist.init_process_group()
    try:
        return _train_checkpointed(dist.get_rank(), True, steps)
    finally:
        dist.destroy_process_group()


@pytest.mark.dist
def test_ddp_averages_gradients_that_reach_parameters_through_checkpoint(cluster):
    (_, a), (_, b) = cluster.run(_ddp_checkpointed, 3)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)      # the replicas stay equal
    # one SGD step from equal weights: the mean of the two ranks' own steps
    (l0, p0), (l1, p1) = cluster.run(_ddp_checkpointed, 1)
    (m0, q0), (m1, q1) = (_train_checkpointed(r, False, 1) for r in (0, 1))
    assert (l0, l1) == (m0, m1)
    for got, x, y in zip(p0, q0, q1):
        np.testing.assert_allclose(got, (x + y) / 2, rtol=1e-6, atol=1e-7)


# ---- 2 ranks: torchrun's launcher, nanoGPT's DDP branch -------------------------------------
WRAPPER = """
import json, os, runpy, sys
names = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
         "TORCHELASTIC_RUN_ID"]
with open(os.path.join({folder!r}, os.environ["RANK"] + ".json"), "w") as f:
    json.dump({{n: os.environ.get(n) for n in names}}, f)
sys.argv = [{example!r}] + sys.argv[1:]
runpy.run_path({example!r}, run_name="__main__")
"""


def _example():
    spec = importlib.util.spec_from_file_location("train_ddp", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.dist
def test_torchrun_script_with_ddp_trains_like_one_process(tmp_path):
    steps = 5
    script = tmp_path / "wrapper.py"
    script.write_text(WRAPPER.format(folder=str(tmp_path), example=EXAMPLE))
    saved = tmp_path / "ddp.npz"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "labkit.dist.run", "--standalone", "--nnodes=1",
         "--nproc_per_node=2", "--master_port", "29731", str(script), "--steps", str(steps),
         "--save", str(saved)],
        capture_output=True, text=True, env=env, timeout=180)
    assert done.returncode == 0, done.stderr
    for rank in (0, 1):
        seen = json.loads((tmp_path / f"{rank}.json").read_text())
        assert seen == {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
                        "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": "29731", "TORCHELASTIC_RUN_ID": "none"}
    losses, params = _example().train(steps, log=False)      # one process, all micro-batches
    ddp = np.load(saved)
    np.testing.assert_allclose(ddp["losses"], losses, rtol=0, atol=1e-6)
    for i, want in enumerate(params):
        np.testing.assert_allclose(ddp[f"arr_{i}"], want, rtol=0, atol=1e-6)
    assert losses[-1] < losses[0]
    assert [line.split(":")[0] for line in done.stdout.splitlines()] == \
        [f"[rank 0] iter {i}" for i in range(steps)]


# ---- without workers ------------------------------------------------------------------------
def test_a_world_of_one(world_of_one):
    assert dist.is_initialized() and dist.group.WORLD is dist.GroupMember.WORLD
    assert (dist.get_rank(), dist.get_world_size(), dist.get_backend()) == (0, 1, "gloo")
    t = lk.tensor([1.0, -2.0])
    assert dist.all_reduce(t, op=dist.ReduceOp.MIN) is None and t.tolist() == [1.0, -2.0]
    gathered = [lk.zeros(2)]
    work = dist.all_gather(gathered, t, async_op=True)
    assert work.wait() and work.result()[0] is gathered[0]
    assert gathered[0].tolist() == [1.0, -2.0]
    flat = lk.zeros(1, 2)
    dist.all_gather_into_tensor(flat, t)
    assert flat.tolist() == [[1.0, -2.0]]
    pg = dist.new_group([0])
    assert (dist.get_rank(pg), dist.get_world_size(pg), dist.get_process_group_ranks(pg)) == \
        (0, 1, [0])


def test_errors_name_the_fix(world_of_one):
    with pytest.raises(ValueError, match="initialize the default process group twice"):
        dist.init_process_group("gloo", rank=0, world_size=1)
    with pytest.raises(dist.DistError, match="one tensor per rank of the group"):
        dist.all_gather([lk.zeros(2), lk.zeros(2)], lk.zeros(2))
    with pytest.raises(dist.DistError, match=r"must hold one input_tensor .* per rank"):
        dist.all_gather_into_tensor(lk.zeros(3, 2), lk.zeros(2))
    with pytest.raises(dist.DistError, match="op=ReduceOp.BAND is not supported"):
        dist.all_reduce(lk.ones(1), op=dist.ReduceOp.BAND)
    with pytest.raises(TypeError, match="takes a ReduceOp"):
        dist.all_reduce(lk.ones(1), op="sum")
    with pytest.raises(ValueError, match="src=3 is not a member of the group"):
        dist.broadcast(lk.ones(1), src=3)
    with pytest.raises(ValueError, match="give src or group_src, not both"):
        dist.broadcast(lk.ones(1), src=0, group_src=0)


def test_not_initialized_and_bad_arguments():
    assert not dist.is_initialized()
    for call in (dist.get_rank, dist.get_world_size, lambda: dist.all_reduce(lk.ones(1)),
                 lambda: DistributedDataParallel(lk.nn.Linear(1, 1))):
        with pytest.raises(ValueError, match="Default process group has not been initialized"):
            call()
    with pytest.raises(dist.DistError, match="was not started as one of several ranks"):
        dist.init_process_group("gloo")
    with pytest.raises(dist.DistError, match="labkit's ranks meet as one MPI world"):
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:23456", rank=0,
                                world_size=2)
    with pytest.raises(dist.DistError, match="backend 'ucc' is not one labkit has"):
        dist.init_process_group("ucc", rank=0, world_size=1)
    assert not dist.is_initialized()
    assert dist.Backend("NCCL") == "nccl" and dist.is_available()


def _train(model, steps=3, accumulate=1, ddp=None):
    """Train ``model`` (or the DDP wrapping it) on fixed batches; the losses."""
    opt = lk.optim.SGD(model.parameters(), lr=0.1)
    data = lk.Generator().manual_seed(3)
    xs, ys = lk.randn(steps, accumulate, 4, 3, generator=data), lk.randn(steps, accumulate, 4, 2,
                                                                         generator=data)
    losses = []
    for s in range(steps):
        for k in range(accumulate):
            if ddp is not None:
                ddp.require_backward_grad_sync = k == accumulate - 1
            loss = lk.nn.functional.mse_loss(model(xs[s, k]), ys[s, k]) / accumulate
            loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def test_ddp_in_one_process_trains_as_the_module(world_of_one):
    lk.manual_seed(0)
    plain = lk.nn.Linear(3, 2)
    lk.manual_seed(0)
    model = DistributedDataParallel(lk.nn.Linear(3, 2), device_ids=None, bucket_cap_mb=1,
                                    find_unused_parameters=True)
    assert model.require_backward_grad_sync and sorted(model.state_dict()) == \
        ["module.bias", "module.weight"]
    assert _train(model, accumulate=2, ddp=model) == _train(plain, accumulate=2)
    np.testing.assert_array_equal(model.module.weight.numpy(), plain.weight.numpy())
    with model.no_sync():
        assert model.require_backward_grad_sync is False
    assert model.require_backward_grad_sync is True
    with pytest.raises(ValueError, match="leave device_ids out"):
        DistributedDataParallel(lk.nn.Linear(1, 1), device_ids=[1])
    with pytest.raises(NotImplementedError, match="device_mesh"):
        DistributedDataParallel(lk.nn.Linear(1, 1), device_mesh=object())
    import labkit.nn.parallel.distributed as torch_path
    assert torch_path.DistributedDataParallel is dist.DistributedDataParallel is \
        DistributedDataParallel


# ---- labkit.nn.parallel.DataParallel: one process, several devices --------------------------
@pytest.fixture
def two_cpus():
    lk.devices.configure(cpus=2)
    yield ["cpu:0", "cpu:1"]
    lk.devices.configure(cpus=1)


def test_data_parallel_over_two_devices_equals_one(two_cpus):
    lk.manual_seed(1)
    net = lk.nn.Sequential(lk.nn.Linear(3, 5), lk.nn.Tanh(), lk.nn.Linear(5, 2))
    x = lk.randn(7, 3)
    want = net(x)
    want.sum().backward()
    grads = [p.grad.numpy().copy() for p in net.parameters()]
    net.zero_grad()
    dp = DataParallel(net, device_ids=two_cpus)
    got = dp(x)
    assert got.device.name == "cpu:0" and got.shape == (7, 2)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-6)
    got.sum().backward()        # both chunks' gradients reach the module's own parameters
    for p, g in zip(net.parameters(), grads):
        assert p.grad.device.name == "cpu:0"
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-5, atol=1e-6)
    out = data_parallel(net, (x,), device_ids=two_cpus, output_device="cpu:1")
    assert out.device.name == "cpu:1"
    with pytest.raises(ValueError, match="parameters and buffers on device cpu:1"):
        DataParallel(net, device_ids=["cpu:1", "cpu:0"])(x)


def test_data_parallel_without_devices_calls_the_module():
    net = lk.nn.Linear(2, 2)
    dp = lk.nn.DataParallel(net)
    x = lk.ones(3, 2)
    assert dp.device_ids == [] and dp.module is net
    np.testing.assert_array_equal(dp(x).detach().numpy(), net(x).detach().numpy())
    assert sorted(dp.state_dict()) == ["module.bias", "module.weight"]


# ---- the launcher's torchrun spellings --------------------------------------------------------
def test_torchruns_module_path_is_the_launcher():
    done = subprocess.run([sys.executable, "-m", "labkit.distributed.run", "--help"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0 and "torchrun's options" in done.stdout


def test_launcher_takes_torchruns_options(tmp_path, capsys):
    script = tmp_path / "s.py"
    script.write_text("")
    args = run.parse_args(["--standalone", "--nnodes=1", "--nproc-per-node", "3",
                           "--master-port=29600", "--rdzv_id", "job7", str(script), "--lr", "1"])
    assert (args.nproc, args.master_port, args.rdzv_id, args.training_script_args) == \
        (3, 29600, "job7", ["--lr", "1"])
    assert run.parse_args(["--nproc_per_node=cpu", "--nnodes", "1:1", str(script)]).nproc >= 1
    env = run.torchrun_env(3, master_port=29600, run_id="job7")
    assert (env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"], env["MASTER_PORT"],
            env["TORCHELASTIC_RUN_ID"]) == ("3", "3", "29600", "job7")
    assert int(run.torchrun_env(2)["MASTER_PORT"]) > 0
    for argv, message in ((["--nnodes=2", str(script)], "starts the ranks on this machine"),
                          (["--max_restarts=3", str(script)], "does not restart ranks"),
                          (["--nproc_per_node=many", str(script)], "expected a number")):
        with pytest.raises(SystemExit):
            run.parse_args(argv)
        assert message in capsys.readouterr().err
