"""Saves that are killed leave nothing behind: SIGTERM / SIGHUP remove the temporary file at
once, SIGKILL's leftovers are removed by the next save into the folder, and the last checkpoint
written is always whole."""
import os
import random
import signal
import sys
import time

import numpy as np
import pytest

import labkit as lk
from labkit.tensor import atomic_file

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and flock")

STATE = {f"layer{i}.weight": np.full((512, 1024), float(i), np.float32) for i in range(8)}


def _temporary_bytes(folder):
    """Bytes in files that are not the checkpoint (every temporary file a save may make)."""
    return sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder)
               if n != "ck.safetensors")


def _saving_child(path):
    """Fork a process that saves ``STATE`` (16 MiB) to ``path`` over and over, the step
    number written with it; returns its pid once it is running (labkit is already imported)."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:                                      # the child: save until killed
        try:
            os.close(ready_r)
            for signum in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(signum, signal.SIG_DFL)
            state = {k: lk.from_numpy(v) for k, v in STATE.items()}
            os.write(ready_w, b"1")
            step = 0
            while True:
                step += 1
                lk.save({"step": step, "model": state}, path)
        finally:
            os._exit(1)
    os.close(ready_w)
    assert os.read(ready_r, 1) == b"1"
    os.close(ready_r)
    return pid


def test_twenty_kills_during_saves_leave_no_temporary_file_and_a_whole_checkpoint(tmp_path):
    path = str(tmp_path / "ck.safetensors")
    rng = random.Random(0)
    kinds = [signal.SIGTERM, signal.SIGKILL, signal.SIGHUP]
    caught = 0
    for kill in range(20):
        pid = _saving_child(path)
        time.sleep(rng.uniform(0.0, 0.4))
        signum = kinds[kill % 3]
        os.kill(pid, signum)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signum
        if signum != signal.SIGKILL:
            assert _temporary_bytes(tmp_path) == 0, os.listdir(tmp_path)
        else:
            caught += _temporary_bytes(tmp_path) > 0
        if os.path.exists(path):
            loaded = lk.load(path)                       # whole, and its checksum holds
            assert loaded["step"] >= 1
            np.testing.assert_array_equal(loaded["model"]["layer7.weight"].numpy(), 7.0)
    lk.save({"step": 0}, path)          # the job's next save sweeps what SIGKILL left
    assert _temporary_bytes(tmp_path) == 0, os.listdir(tmp_path)
    assert lk.load(path) == {"step": 0}


def test_sigterm_during_a_save_removes_the_temporary_file_then_ends_by_sigterm(tmp_path):
    path = str(tmp_path / "ck.safetensors")
    for delay in (0.05, 0.15, 0.3):
        pid = _saving_child(path)
        time.sleep(delay)
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
        assert _temporary_bytes(tmp_path) == 0, os.listdir(tmp_path)


def test_the_next_save_removes_only_the_leftovers_of_writers_that_are_gone(tmp_path):
    folder = str(tmp_path)
    dead = os.path.join(folder, ".ck.safetensors.labkit-0123abcd.tmp")
    with open(dead, "wb") as f:
        f.write(b"x" * 1000)
    past = time.time() - 60
    os.utime(dead, (past, past))
    other = os.path.join(folder, ".notes.0123abcd.tmp.bak")     # not labkit's naming: kept
    open(other, "w").close()
    held = os.path.join(folder, ".other.safetensors.labkit-89abcdef.tmp")
    fd = os.open(held, os.O_RDWR | os.O_CREAT)           # a writer at work holds its lock
    import fcntl
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b"y" * 100)
    try:
        lk.save({"w": lk.ones(3)}, os.path.join(folder, "ck.safetensors"))
        assert sorted(os.listdir(folder)) == sorted(
            ["ck.safetensors", os.path.basename(other), os.path.basename(held)])
    finally:
        os.close(fd)
    assert atomic_file.sweep(folder) == [os.path.basename(held)]


def test_a_save_in_another_thread_removes_its_file_on_an_exception(tmp_path, monkeypatch):
    import threading

    def broken(fd):
        raise OSError("I/O error")
    monkeypatch.setattr(os, "fsync", broken)
    errors = []

    def save():
        try:
            lk.save({"w": lk.ones(3)}, str(tmp_path / "ck.safetensors"))
        except OSError as exc:
            errors.append(exc)
    t = threading.Thread(target=save)
    t.start()
    t.join()
    assert len(errors) == 1 and os.listdir(tmp_path) == []
