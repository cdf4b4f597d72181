"""A host that goes down mid-run: ``train_with_checkpoints`` on 4 ranks over the 2 hosts; at a
known step every process of the second host is killed at once (its sshd, Open MPI's daemon, its
two workers: the machine is gone), and with ``shrink=True`` the run resumes on the first host
alone from the last checkpoint. Nothing is lost: one loss per step, and the final parameters
within 1e-6 of the remaining steps run in this process from a copy of that checkpoint. No
process is left on either host afterwards."""
import functools
import os
import shutil
import socket
import threading
import time

import numpy as np
import pytest

import labkit as lk
from labkit.dist import fault, remote

from ..conftest import wait_until_gone
from ..test_fault import EVERY, make_state, step_fn
from .test_ending import _left

pytestmark = [pytest.mark.dist, pytest.mark.multihost]
STEPS, CRASH_AT = 20, 12           # the last checkpoint before the crash is at step 10


def _make_state_noting_where(folder):
    """make_state, leaving a note of where this worker runs: world size and host name."""
    with open(os.path.join(folder, f"worker-{socket.gethostname()}-{os.getpid()}"), "w") as f:
        f.write(str(lk.dist.world_size()))
    return make_state()


def _step_until_the_crash(folder, state, step):
    """step_fn, except that rank 2 (on the second host) stops at step CRASH_AT, the first
    time, and waits there for its host to go down (the other ranks wait in the step's
    allreduce for it)."""
    if (step == CRASH_AT and lk.dist.rank() == 2
            and not os.path.exists(os.path.join(folder, "crashed"))):
        open(os.path.join(folder, "waiting"), "w").close()
        while True:
            time.sleep(0.05)
    return step_fn(state, step)


def _crash_the_second_host_when_waiting(hosts, folder, path, copy, crashed):
    def watch():
        deadline = time.monotonic() + 90
        while not os.path.exists(os.path.join(folder, "waiting")):
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
        # rank 0 waits in step CRASH_AT's allreduce: the checkpoint stays as it is until the
        # resumed run writes its next one, so this copy is the one the run resumes from
        shutil.copy(path, copy)
        open(os.path.join(folder, "crashed"), "w").close()
        crashed.extend(hosts.crash(1))
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _launches(folder):
    """(world size, host name) of every worker started, from their notes."""
    notes = []
    for name in os.listdir(folder):
        if name.startswith("worker-"):
            with open(os.path.join(folder, name)) as f:
                notes.append((int(f.read()), name[len("worker-"):].rsplit("-", 1)[0]))
    return notes


@pytest.mark.timeout(180)
def test_a_host_that_goes_down_is_left_out_and_the_run_resumes_on_the_other(hosts, tmp_path,
                                                                            capfd):
    folder, path, copy = str(tmp_path), str(tmp_path / "run.lk"), str(tmp_path / "resume.lk")
    crashed = []
    watcher = _crash_the_second_host_when_waiting(hosts, folder, path, copy, crashed)
    try:
        run = lk.dist.train_with_checkpoints(
            functools.partial(_make_state_noting_where, folder),
            functools.partial(_step_until_the_crash, folder), STEPS, path, every=EVERY, n=4,
            hosts=hosts.specs, ssh_options=hosts.ssh_options, network=hosts.network,
            shrink=True, output="none")
    finally:
        watcher.join(timeout=10)
        hosts.restore(1)                   # the session's other tests use both hosts
    assert crashed, "the second host was never crashed"
    assert run.restarts == 1
    assert run.world_sizes == [4, 2] and run.resumed_from == [0, 10]
    err = capfd.readouterr().err
    assert f"host(s) {hosts.specs[1]} no longer answer" in err
    assert f"on 2 worker(s) on {hosts.specs[0]}" in err
    launches = _launches(folder)
    assert sorted(w for w, _ in launches) == [2, 2, 4, 4, 4, 4]
    if hosts.kind == "namespaces":          # the resumed workers ran on the first host only
        assert {h for w, h in launches if w == 2} == {hosts.names[0]}

    # the reference: the same checkpoint, the remaining steps in this process (one rank)
    saved = lk.load(copy)
    assert saved["step"] == 10 and saved["world_size"] == 4
    reference = fault.run_steps(make_state, step_fn, STEPS, copy, EVERY, seed=0)
    assert len(run.history) == STEPS
    np.testing.assert_allclose(run.history, reference["history"], rtol=0, atol=1e-6)
    params, expected = run.state["model"], reference["state"]["model"]
    assert list(params) == list(expected)
    difference = max(np.abs(params[k].numpy() - expected[k].numpy()).max() for k in expected)
    assert difference <= 1e-6, difference
    assert lk.load(path)["step"] == STEPS
    assert not wait_until_gone(lambda: _left(hosts), timeout=5.0)


def test_after_a_death_the_hosts_are_asked_and_one_gone_is_named(hosts, tmp_path):
    """What the run does after a death, host by host: every host answers, so the same hosts
    again (with or without shrink); the second host down: without shrink an error naming it
    and the checkpoint's step, with shrink the first host alone with its 2 workers."""
    plan = remote.plan_hosts(hosts.specs, 4, hosts.ssh_options, hosts.network)
    path = str(tmp_path / "run.lk")
    lk.save({"step": 10, "world_size": 4, "history": [], "state": {}}, path)

    def where():
        return fault._Where(4, hosts.specs, hosts.ssh_options, hosts.network)

    assert plan.answering() == [True, True]
    for shrink in (False, True):
        after = where()
        assert after.resume(shrink, path) == ""
        assert (after.n, after.hosts) == (4, hosts.specs)
    hosts.crash(1)
    try:
        assert plan.answering() == [True, False]
        with pytest.raises(lk.dist.DistError, match=rf"host\(s\) {hosts.specs[1]} no longer "
                                                    rf"answer over SSH; pass shrink=True.*"
                                                    rf"is at step 10"):
            where().resume(False, path)
        after = where()
        assert "left out" in after.resume(True, path)
        assert (after.n, after.hosts) == (2, hosts.specs[:1])
    finally:
        hosts.restore(1)
    assert plan.answering() == [True, True]
