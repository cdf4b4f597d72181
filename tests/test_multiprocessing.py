"""``labkit.multiprocessing`` as ``torch.multiprocessing``: the standard module's API, and
``spawn`` / ``start_processes`` running ``fn(i, *args)`` in each process, a failing child raised
in the parent with its index and traceback."""
import multiprocessing
import os
import time

import pytest

import labkit as lk
import labkit.multiprocessing as mp


def write_rank(i, folder, word):
    with open(os.path.join(folder, f"{i}.txt"), "w") as f:
        f.write(f"{word} {i} {lk.ones(2).sum().item()}")


def fail_on_one(i, folder):
    if i == 1:
        raise ValueError(f"rank {i} was told to fail")
    time.sleep(60)                     # stopped by the parent once rank 1 failed
    write_rank(i, folder, "late")


def exit_with_three(i):
    os._exit(3)


def test_the_standard_api_is_there():
    assert set(multiprocessing.__all__) <= set(mp.__all__)
    assert mp.Process is multiprocessing.Process and mp.get_context is multiprocessing.get_context
    assert lk.multiprocessing is mp


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_each_process_runs_fn_with_its_index_and_args(tmp_path, method):
    run = mp.spawn if method == "spawn" else \
        lambda *a, **k: mp.start_processes(*a, start_method="fork", **k)
    assert run(write_rank, args=(str(tmp_path), "hello"), nprocs=3) is None
    assert sorted(p.read_text() for p in tmp_path.iterdir()) == \
        [f"hello {i} 2.0" for i in range(3)]


def test_a_failing_process_raises_in_the_parent_with_its_index_and_traceback(tmp_path):
    start = time.monotonic()
    with pytest.raises(mp.ProcessRaisedException) as info:
        mp.start_processes(fail_on_one, args=(str(tmp_path),), nprocs=2, start_method="fork")
    msg = str(info.value)
    assert info.value.error_index == 1 and info.value.error_pid > 0
    assert "-- Process 1 terminated with the following error:" in msg
    assert "in fail_on_one" in msg and "ValueError: rank 1 was told to fail" in msg
    assert list(tmp_path.iterdir()) == []          # rank 0 was stopped before it wrote
    assert time.monotonic() - start < 30           # not the 60 s rank 0 would have slept


def test_a_process_that_exits_raises_with_its_exit_code():
    with pytest.raises(mp.ProcessExitedException, match="process 0 terminated with exit "
                                                        "code 3") as info:
        mp.start_processes(exit_with_three, nprocs=1, start_method="fork")
    assert info.value.exit_code == 3 and info.value.error_index == 0


def test_join_false_returns_the_context_to_join(tmp_path):
    context = mp.start_processes(write_rank, args=(str(tmp_path), "later"), nprocs=2,
                                 join=False, start_method="fork")
    assert len(context.pids()) == 2
    while not context.join(timeout=10):
        pass
    assert context.join() is True
    assert len(list(tmp_path.iterdir())) == 2


def test_spawn_warns_about_another_start_method(tmp_path):
    with pytest.warns(FutureWarning, match="start_processes"):
        mp.spawn(write_rank, args=(str(tmp_path), "x"), nprocs=1, start_method="fork")


def test_the_same_failure_reads_as_pytorchs(tmp_path):
    torch_mp = pytest.importorskip("torch.multiprocessing")
    for library in (torch_mp, mp):
        with pytest.raises(library.ProcessRaisedException) as info:
            library.start_processes(fail_on_one, args=(str(tmp_path),), nprocs=2,
                                    start_method="fork")
        first = str(info.value).splitlines()[:3]
        assert first == ["", "", "-- Process 1 terminated with the following error:"], first
