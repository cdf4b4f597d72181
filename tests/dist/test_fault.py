"""Fault tolerance: a worker killed with SIGKILL mid-run (found in the process table by the
cluster's mark) and the run finishes from its last checkpoint with the same history and the same
final parameters as an uninterrupted run; a checkpoint written by 2 workers resumes on 1 with
DataParallel keeping the global batch; and no worker process is left after any test."""
import os
import signal
import threading
import time

import numpy as np
import pytest

import labkit as lk
from labkit.dist import fault

from .conftest import own_worker_processes

pytestmark = pytest.mark.dist
STEPS, EVERY, GLOBAL_BATCH = 30, 5, 8


def make_state():
    model = lk.dist.DataParallel(lk.nn.Sequential(lk.nn.Linear(4, 8, dtype=lk.float64),
                                                  lk.nn.Linear(8, 1, dtype=lk.float64)))
    return {"model": model, "opt": lk.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)}


def step_fn(state, step, pause=0.0):
    """One step of regression; the global batch is a function of the step, and each rank takes
    its contiguous share of it."""
    rank, world = lk.dist.rank(), lk.dist.world_size()
    data = np.random.default_rng(step).normal(size=(GLOBAL_BATCH, 5))
    shard = GLOBAL_BATCH // world
    noise = lk.randn(GLOBAL_BATCH, 1).numpy() * 0.01     # seeded by the step: same everywhere
    mine = slice(rank * shard, (rank + 1) * shard)
    x, y = lk.tensor(data[mine, :4]), lk.tensor(data[mine, 4:] + noise[mine])
    model, opt = state["model"], state["opt"]
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    model.backward(loss)
    opt.step()
    time.sleep(pause)                     # slow enough to be killed in the middle
    return lk.dist.allreduce(loss.detach(), op="mean")


def slow_step(state, step):
    return step_fn(state, step, pause=0.06)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run, in this process (a world of one: the same global batches)."""
    path = str(tmp_path_factory.mktemp("reference") / "run.lk")
    out = fault.run_steps(make_state, step_fn, STEPS, path, EVERY, seed=0)
    return out["history"], out["state"]["model"]


def assert_same(run, reference):
    history, params = reference
    assert len(run.history) == STEPS
    np.testing.assert_allclose(run.history, history, rtol=0, atol=1e-6)
    assert list(run.state["model"]) == list(params)
    for name, value in params.items():
        np.testing.assert_allclose(run.state["model"][name].numpy(), value.numpy(),
                                   rtol=0, atol=1e-6)


def _kill_one_worker_after_first_checkpoint(path, killed):
    def watch():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not os.path.exists(path):
            time.sleep(0.02)
        time.sleep(2 * 0.06)              # a step or two past the checkpoint
        engines = [p for p in own_worker_processes()
                   if "ipyparallel.engine" in " ".join(p.cmdline())]
        if engines:
            victim = max(engines, key=lambda p: p.pid)
            os.kill(victim.pid, signal.SIGKILL)
            killed.append(victim.pid)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("shrink", [False, True])
def test_a_killed_worker_is_replaced_and_the_run_resumes_from_the_checkpoint(
        tmp_path, reference, shrink, capfd):
    path = str(tmp_path / "run.lk")
    killed = []
    watcher = _kill_one_worker_after_first_checkpoint(path, killed)
    run = lk.dist.train_with_checkpoints(make_state, slow_step, STEPS, path, every=EVERY, n=2,
                                         shrink=shrink, output="none")
    watcher.join(timeout=5)
    assert killed, "no worker was killed"
    assert run.restarts == 1
    assert run.world_sizes == ([2, 1] if shrink else [2, 2])
    assert run.resumed_from[0] == 0 and run.resumed_from[1] > 0      # from a checkpoint
    assert run.resumed_from[1] % EVERY == 0 and run.resumed_from[1] < STEPS
    assert "a worker died" in capfd.readouterr().err
    assert_same(run, reference)
    assert lk.load(path)["step"] == STEPS


def test_a_checkpoint_of_two_workers_resumes_on_one(tmp_path, reference):
    path = str(tmp_path / "run.lk")
    first = lk.dist.train_with_checkpoints(make_state, step_fn, 10, path, every=EVERY, n=2,
                                           output="none")
    assert first.steps == 10 and lk.load(path)["world_size"] == 2
    second = lk.dist.train_with_checkpoints(make_state, step_fn, STEPS, path, every=EVERY, n=1,
                                            output="none")
    assert second.resumed_from == [10] and second.world_sizes == [1]
    assert_same(second, reference)


def _buggy_step(state, step):
    if step == 3:
        raise ValueError("a bug, not a fault")
    return None


def test_an_exception_in_the_step_is_raised_not_retried(tmp_path):
    with pytest.raises(lk.dist.WorkerError, match="a bug, not a fault") as info:
        lk.dist.train_with_checkpoints(make_state, _buggy_step, 10, str(tmp_path / "r.lk"),
                                       every=2, n=2, output="none")
    assert info.value.remote_type == "ValueError"
    assert lk.load(str(tmp_path / "r.lk"))["step"] == 2            # the last checkpoint
    with pytest.raises(lk.dist.DistError, match="every must be an int >= 1"):
        lk.dist.train_with_checkpoints(make_state, step_fn, 10, str(tmp_path / "x.lk"), every=0)
