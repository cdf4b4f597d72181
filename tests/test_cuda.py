"""``lk.cuda`` in PyTorch's spellings: devices, streams, events, synchronisation, seeds.

Runs on a simulated GPU (``tests/devices/fake_gpu.py``: asynchronous streams on the host clock)
and, for what only a real one can show (memory), on CuPy where a GPU is present.
"""
import time

import numpy as np
import pytest

import labkit as lk
from labkit.errors import DeviceError
from tests.devices.fake_gpu import FakeGpu, installed

DELAY_NS = 20_000_000


@pytest.fixture
def fake(monkeypatch):
    gpu = FakeGpu(2)
    installed(gpu, monkeypatch)
    return gpu


def test_devices_and_the_current_one(fake):
    assert lk.cuda.is_available() and lk.cuda.device_count() == 2
    assert lk.cuda.get_device_name(1) == "Simulated GPU 1"
    assert lk.cuda.current_device() == 0
    lk.cuda.set_device("cuda:1")
    assert lk.cuda.current_device() == 1
    with lk.cuda.device(0):
        assert lk.cuda.current_device() == 0
        x = lk.ones(3, device="cuda:1")
        fake.launches.clear()
        x * 2.0
        assert [d for _, d, *_ in fake.launches] == [1]   # on its tensor's device
    assert lk.cuda.current_device() == 1
    lk.cuda.set_device(0)


def test_ops_in_a_stream_block_queue_on_that_stream(fake):
    x = lk.ones(8, 8, device="cuda")
    s = lk.cuda.Stream()
    assert lk.cuda.current_stream() == lk.cuda.default_stream() != s
    fake.launches.clear()
    with lk.cuda.stream(s):
        assert lk.cuda.current_stream() == s
        y = x @ x
    x + 1.0
    assert [(name, ptr) for name, _, ptr, *_ in fake.launches] == [
        ("matmul", s.cuda_stream), ("add", 0)]
    assert s.device is lk.device("cuda:0")
    np.testing.assert_array_equal(y._data, np.full((8, 8), 8.0))
    with lk.cuda.stream(None):        # changes nothing, as PyTorch's
        assert lk.cuda.current_stream() == lk.cuda.default_stream()


def test_events_time_the_gpu_work_between_them(fake):
    s = lk.cuda.Stream()
    start, end = lk.cuda.Event(enable_timing=True), lk.cuda.Event(enable_timing=True)
    with lk.cuda.stream(s):
        start.record()
        fake.launch("delay", DELAY_NS)
        end.record()
    assert not end.query() and not s.query()
    # the delay's own time, plus the moment the host took to launch it
    assert DELAY_NS / 1e6 <= start.elapsed_time(end) < DELAY_NS / 1e6 + 5
    assert end.query() and s.query()


def test_wait_stream_orders_work_across_streams(fake):
    first, second = lk.cuda.Stream(), lk.cuda.Stream()
    x = lk.ones(4, device="cuda")
    with lk.cuda.stream(first):
        fake.launch("delay", DELAY_NS)
    second.wait_stream(first)
    with lk.cuda.stream(second):
        x + 1.0
    delay = next(row for row in fake.launches if row[0] == "delay")
    add = next(row for row in fake.launches if row[0] == "add")
    assert add[2] == second.cuda_stream and add[3] >= delay[4]   # starts once the delay ends


def test_synchronize_waits_for_every_stream(fake):
    s = lk.cuda.Stream()
    with lk.cuda.stream(s):
        fake.launch("delay", DELAY_NS)
    lk.cuda.synchronize()
    assert time.perf_counter_ns() >= fake.launches[-1][4] and s.query()


def test_event_misuse_is_explained(fake):
    plain, timed = lk.cuda.Event(), lk.cuda.Event(enable_timing=True)
    with pytest.raises(DeviceError, match="never recorded"):
        timed.elapsed_time(lk.cuda.Event(enable_timing=True))
    plain.record()
    timed.record()
    with pytest.raises(DeviceError, match="enable_timing=True"):
        plain.elapsed_time(timed)
    other = lk.cuda.Event(enable_timing=True)
    other.record(lk.cuda.Stream("cuda:1"))
    with pytest.raises(DeviceError, match="different devices"):
        timed.elapsed_time(other)
    with pytest.raises(DeviceError, match="no CUDA device 5"):
        lk.cuda.synchronize(5)
    with pytest.raises(DeviceError, match="cpu:0 is not a CUDA device"):
        lk.cuda.Stream("cpu")


@pytest.mark.skipif(lk.cuda.is_available(), reason="checks the machine without a GPU")
def test_without_a_gpu_the_questions_answer_and_the_rest_says_what_is_missing():
    assert not lk.cuda.is_available() and lk.cuda.device_count() == 0
    for call in (lk.cuda.synchronize, lk.cuda.Stream, lk.cuda.current_device, lk.cuda.Event,
                 lk.cuda.memory_allocated, lk.cuda.empty_cache):
        with pytest.raises(DeviceError, match=r"lk\.cuda\.\w+: .*(CuPy|CUDA device)"):
            call()


def test_seeding_the_gpu_seeds_the_one_generator_every_device_draws_from():
    lk.cuda.manual_seed_all(5)
    a = lk.rand(3)
    lk.manual_seed(5)
    assert lk.cuda.initial_seed() == 5
    np.testing.assert_array_equal(lk.rand(3).numpy(), a.numpy())
    lk.cuda.manual_seed(6)
    assert lk.initial_seed() == 6


@pytest.mark.gpu
@pytest.mark.cupy
def test_memory_counts_follow_tensors_on_a_real_gpu():
    lk.cuda.synchronize()
    lk.cuda.reset_peak_memory_stats()
    before = lk.cuda.memory_allocated()
    x = lk.ones(1024, 1024, device="cuda")            # 4 MiB
    assert lk.cuda.memory_allocated() - before >= 4 << 20
    assert lk.cuda.max_memory_allocated() >= lk.cuda.memory_allocated()
    assert lk.cuda.memory_reserved() >= lk.cuda.memory_allocated()
    del x
    lk.cuda.empty_cache()
    assert lk.cuda.memory_allocated() == before
    name = lk.cuda.get_device_name()
    assert isinstance(name, str) and name.strip()
