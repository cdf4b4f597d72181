"""DataLoader with worker processes: the same batches as in-process loading, per-worker seeds,
worker_init_fn and get_worker_info, IterableDataset sharding, persistent workers, errors that
name the worker, timeouts, and no process left behind (end of epoch, break, garbage collection,
KeyboardInterrupt raised in the loop or by SIGINT while waiting, the main process killed).

Datasets are tiny and workers are few: every test here takes well under a second or two."""
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import labkit as lk
from labkit import data
from labkit.data import worker as worker_module

psutil = pytest.importorskip("psutil")


_before = set()     # child processes that other tests' machinery left running


def children():
    """This process's live child processes started during the test, but for the resource
    tracker that the spawn start method keeps for the session (multiprocessing's, no worker)."""
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.pid not in _before and p.status() != psutil.STATUS_ZOMBIE and (
                    "resource_tracker" not in " ".join(p.cmdline())):
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def no_children_within(seconds=3.0):
    deadline = time.monotonic() + seconds
    while children():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture(autouse=True)
def _no_worker_outlives_its_test(monkeypatch):
    monkeypatch.setattr(worker_module, "_JOIN_SECONDS", 0.2)
    _before.clear()
    _before.update(p.pid for p in psutil.Process().children(recursive=True))
    yield
    assert no_children_within(), f"processes left behind: {children()}"


def labels(loader):
    return [b[1].tolist() for b in loader]


class Numbers(data.Dataset):
    """Sample i is (a float32 vector, i, a string); slow=True sleeps in every sample."""

    def __init__(self, n=10, slow=0.0, fail_at=None, die_at=None):
        self.n, self.slow, self.fail_at, self.die_at = n, slow, fail_at, die_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.slow)
        if i == self.fail_at:
            self.explode(i)
        if i == self.die_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return np.full(2, i, np.float32), i, f"s{i}"

    def explode(self, i):
        raise ValueError(f"sample {i} is broken")


@pytest.mark.parametrize("kwargs", [
    dict(batch_size=3, shuffle=True),
    dict(batch_size=3, shuffle=True, generator="generator"),
    dict(batch_size=4, drop_last=True, sampler="weighted"),
    dict(batch_sampler=[[3, 1], [0], [9, 9, 2]]),
    dict(batch_size=None, shuffle=True),
    dict(batch_size=2, collate_fn=lambda s: [x[1] * 10 for x in s]),
])
def test_workers_yield_the_batches_of_one_process(kwargs):
    def make(num_workers):
        args = dict(kwargs)
        if args.get("generator") == "generator":
            args["generator"] = lk.Generator().manual_seed(5)
        if args.get("sampler") == "weighted":
            args["sampler"] = data.WeightedRandomSampler(
                [1.0] * 10, 12, generator=lk.Generator().manual_seed(1))
        return data.DataLoader(Numbers(), num_workers=num_workers, **args)

    def epochs(loader):
        return [[repr(b) for b in loader] for _ in range(2)]
    lk.manual_seed(0)
    alone = epochs(make(0))
    lk.manual_seed(0)
    assert epochs(make(2)) == alone
    lk.manual_seed(0)
    assert epochs(make(2)) == alone


def test_tensor_dataset_with_workers_and_seed():
    ds = data.TensorDataset(lk.arange(30).float(), lk.arange(30))
    alone = labels(data.DataLoader(ds, batch_size=4, shuffle=True, seed=2))
    loader = data.DataLoader(ds, batch_size=4, shuffle=True, seed=2, num_workers=2,
                             prefetch_factor=1, pin_memory=True)
    assert labels(loader) == alone
    assert sorted(sum(labels(loader), [])) == list(range(30))   # a new order next epoch
    unordered = data.DataLoader(ds, batch_size=4, shuffle=True, seed=2, num_workers=2,
                                in_order=False)
    assert sorted(map(sorted, labels(unordered))) == sorted(map(sorted, alone))


class Draws(data.Dataset):
    """Each sample reports where and with what seeds it was made."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        info = data.get_worker_info()
        return (info.id, info.num_workers, info.seed, getattr(info.dataset, "tag", None),
                random.random(), float(np.random.random()), lk.rand(1).item())


def test_worker_seeds_info_and_init_fn():
    def init(worker_id):
        data.get_worker_info().dataset.tag = f"worker {worker_id}"

    def run():
        loader = data.DataLoader(Draws(), batch_size=None, num_workers=2, worker_init_fn=init)
        return [list(s) for s in loader], [list(s) for s in loader]
    lk.manual_seed(0)
    first, second = run()
    assert [s[0] for s in first] == [0, 1, 0, 1]
    assert {s[1] for s in first} == {2}
    assert [s[3] for s in first] == ["worker 0", "worker 1"] * 2
    seeds = [s[2] for s in first]
    assert seeds[1] == seeds[0] + 1                       # base seed + worker id, as PyTorch
    draws = [s[4:] for s in first]
    assert draws[0] != draws[1]                           # workers draw different numbers
    assert all(a != b for a, b in zip(draws[0], draws[2]))
    assert [s[2] for s in second] != seeds                # new seeds each epoch
    lk.manual_seed(0)
    assert run()[0] == first                              # reproducible from lk.manual_seed
    assert data.get_worker_info() is None
    with pytest.raises(RuntimeError, match="Cannot assign"):
        data.WorkerInfo(id=0, num_workers=1, seed=0, dataset=None).id = 3


class Shards(data.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = data.get_worker_info()
        first, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(first, self.n, step))


def test_iterable_dataset_sharded_by_worker_info():
    got = [b.tolist() for b in data.DataLoader(Shards(9), batch_size=2, num_workers=2)]
    assert got == [[0, 2], [1, 3], [4, 6], [5, 7], [8]]   # batches alternate between workers
    uneven = [b.tolist() for b in data.DataLoader(Shards(3), batch_size=2, num_workers=2,
                                                  drop_last=True)]
    assert uneven == [[0, 2]]
    single = sorted(int(x) for x in data.DataLoader(Shards(5), batch_size=None, num_workers=2))
    assert single == [0, 1, 2, 3, 4]
    repeated = data.DataLoader(Shards(4), batch_size=3, num_workers=2)
    assert [b.tolist() for b in repeated] == [[0, 2], [1, 3]]


def test_persistent_workers_live_across_epochs():
    loader = data.DataLoader(Shards(6), batch_size=2, num_workers=2, persistent_workers=True)
    assert [b.tolist() for b in loader] == [[0, 2], [1, 3], [4], [5]]
    pids = {p.pid for p in children()}
    assert len(pids) == 2
    for batch in loader:                                   # an epoch left half-way
        break
    assert [b.tolist() for b in loader] == [[0, 2], [1, 3], [4], [5]]
    assert {p.pid for p in children()} == pids             # the same two processes
    mapped = data.DataLoader(Numbers(), batch_size=4, shuffle=True, seed=0, num_workers=2,
                             persistent_workers=True)
    assert labels(mapped) == labels(data.DataLoader(Numbers(), batch_size=4, shuffle=True,
                                                     seed=0))
    del loader, mapped                                     # collected: the workers end


def test_worker_exception_reaches_the_caller_with_worker_id_and_traceback():
    loader = data.DataLoader(Numbers(fail_at=3), batch_size=2, num_workers=2)
    got = []
    with pytest.raises(ValueError) as caught:
        for batch in loader:
            got.append(batch[1].tolist())
    message = str(caught.value)
    assert got == [[0, 1]]
    assert "Caught ValueError in DataLoader worker process 1" in message
    assert "Original Traceback" in message and "in explode" in message
    assert "sample 3 is broken" in message and caught.value.worker_id == 1
    it = iter(data.DataLoader(Numbers(fail_at=0), batch_size=2, num_workers=2))
    with pytest.raises(ValueError, match="worker process 0"):
        next(it)
    assert next(it)[1].tolist() == [2, 3]                  # as PyTorch: the loop may go on
    del it

    def bad_init(worker_id):
        raise KeyError(f"no config for {worker_id}")
    with pytest.raises(KeyError, match="no config for 0"):
        list(data.DataLoader(Numbers(), num_workers=1, worker_init_fn=bad_init))
    unpicklable = data.DataLoader(Numbers(), batch_size=2, num_workers=1,
                                  collate_fn=lambda s: lambda: s)
    with pytest.raises(Exception, match="sending a batch from DataLoader worker process 0"):
        next(iter(unpicklable))


def test_a_worker_that_dies_is_reported():
    loader = data.DataLoader(Numbers(die_at=2), batch_size=2, num_workers=2)
    with pytest.raises(RuntimeError, match=r"worker 1 \(pid \d+\) exited unexpectedly with "
                                           r"exit code -9 \(SIGKILL\)"):
        list(loader)


def test_timeout():
    loader = data.DataLoader(Numbers(slow=0.3), num_workers=1, timeout=0.05)
    with pytest.raises(RuntimeError, match="timed out after 0.05 seconds"):
        next(iter(loader))


def test_workers_end_with_the_epoch_a_break_and_collection():
    loader = data.DataLoader(Numbers(), batch_size=2, num_workers=2)
    for _ in loader:
        assert len(children()) == 2
    assert no_children_within()
    for _ in loader:
        break
    assert no_children_within()
    it = iter(loader)
    next(it)
    del it
    assert no_children_within()


def test_keyboard_interrupt_in_the_loop_leaves_no_process():
    loader = data.DataLoader(Numbers(100), batch_size=2, num_workers=2)
    with pytest.raises(KeyboardInterrupt):
        for i, _ in enumerate(loader):
            if i == 2:
                raise KeyboardInterrupt
    assert no_children_within()


def test_sigint_while_waiting_for_a_batch_leaves_no_process():
    loader = data.DataLoader(Numbers(slow=5.0), batch_size=2, num_workers=2)
    it = iter(loader)                                      # kept: the loader must end it
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            next(it)
    finally:
        timer.cancel()
    assert no_children_within()
    with pytest.raises(StopIteration):
        next(it)


def test_workers_ignore_sigint_sent_to_them():
    loader = data.DataLoader(Numbers(slow=0.05), batch_size=2, num_workers=2)
    it = iter(loader)
    first = next(it)
    for p in children():
        os.kill(p.pid, signal.SIGINT)                      # as a terminal's Ctrl-C does
    assert [first[1].tolist()] + [b[1].tolist() for b in it] == [[0, 1], [2, 3], [4, 5],
                                                                 [6, 7], [8, 9]]
    for _ in range(3):                                     # even while they start
        it = iter(loader)
        for p in children():
            os.kill(p.pid, signal.SIGINT)
        assert len(list(it)) == 5


def test_no_orphan_when_the_main_process_is_killed(tmp_path):
    script = textwrap.dedent("""
        import sys, time, psutil
        import labkit as lk
        class Slow(lk.data.Dataset):
            def __len__(self):
                return 100
            def __getitem__(self, i):
                time.sleep(0.05)
                return i
        it = iter(lk.data.DataLoader(Slow(), num_workers=2))
        next(it)
        print(*[p.pid for p in psutil.Process().children()], flush=True)
        time.sleep(60)
    """)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            cwd=root, env={**os.environ, "PYTHONPATH": root})
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 5
    while any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
              for p in pids):
        assert time.monotonic() < deadline, "a worker outlived its killed main process"
        time.sleep(0.05)


def test_spawn_context():
    loader = data.DataLoader(Numbers(4), batch_size=2, num_workers=1,
                             multiprocessing_context="spawn")
    assert labels(loader) == [[0, 1], [2, 3]]


def test_progress_bar_with_workers(capsys):
    loader = data.DataLoader(Numbers(), batch_size=5, num_workers=2, progress="load")
    assert len(list(loader)) == 2
    assert "2/2" in capsys.readouterr().err


def test_a_task_sent_to_a_worker_that_died_reports_the_death_not_a_broken_pipe():
    loader = data.DataLoader(Numbers(n=40), batch_size=1, num_workers=2)
    it = iter(loader)
    next(it)
    pool = it._pool
    pool.processes[1].kill()
    pool.processes[1].join()
    with pytest.raises(data.worker.WorkerDied, match=r"worker 1 \(pid \d+\) exited "
                                                     r"unexpectedly with exit code -9"):
        pool.send(1, (99, [0]))
    it.close()


class _DiesWhenTold(data.Dataset):
    """Worker 1 ends itself after its first few samples, at a moment that varies per run."""

    def __init__(self, when):
        self.when = when

    def __len__(self):
        return 60

    def __getitem__(self, i):
        info = data.get_worker_info()
        if info.id == 1 and i >= self.when:
            time.sleep(0.001 * (i % 7))
            os._exit(3)
        time.sleep(0.002)
        return np.float32(i)


def test_a_worker_death_surfaces_as_the_loaders_error_whenever_it_happens():
    seen = set()
    for when in range(1, 21):
        loader = data.DataLoader(_DiesWhenTold(when), batch_size=1, num_workers=2,
                                 prefetch_factor=3)
        with pytest.raises(RuntimeError) as info:
            list(loader)
        assert type(info.value).__name__ == "WorkerDied", info.value
        assert "worker 1" in str(info.value) and "exit code 3" in str(info.value)
        seen.add(type(info.value))
    assert seen == {data.worker.WorkerDied}
