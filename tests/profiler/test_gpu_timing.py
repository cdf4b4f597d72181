"""GPU ops in the profiler: at the times they ran on their stream, on their own device.

Each test runs on a simulated GPU (``fake_gpu``: asynchronous streams on the host clock, CUDA's
rules enforced) and, where CuPy and a GPU are present, on the real one.
"""
import time

import numpy as np
import pytest

import labkit as lk
from labkit.profiler.gpu_time import GpuClocks

from tests.devices.fake_gpu import FakeGpu, installed

DELAY_NS = 30_000_000        # the known delay queued on one stream


class Simulated:
    def __init__(self, monkeypatch):
        self.fake = FakeGpu(2)
        installed(self.fake, monkeypatch)

    def device(self, i):
        return lk.devices.get_device(f"gpu:{i}")

    def delay(self, ns):
        self.fake.launch("delay", ns)


class Real:
    def device(self, i):
        if i >= lk.cuda.device_count():
            pytest.skip(f"needs {i + 1} GPUs")
        return lk.devices.get_device(f"gpu:{i}")

    _spin = None

    def delay(self, ns):
        if Real._spin is None:
            Real._spin = self._compile_spin()
        Real._spin((1,), (1,), (np.int64(ns),))

    @staticmethod
    def _compile_spin():
        import cupy
        spin = cupy.RawKernel(r'''
        extern "C" __global__ void spin(long long ns) {
            long long start, now;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
            do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
        }''', "spin")
        spin((1,), (1,), (np.int64(0),))         # compiled now, not inside a timed profile
        return spin


@pytest.fixture(params=["simulated",
                        pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.cupy])])
def gpu(request, monkeypatch):
    return Simulated(monkeypatch) if request.param == "simulated" else Real()


def test_an_op_queued_behind_a_known_delay_starts_when_its_stream_gets_to_it(gpu):
    x = lk.ones(64, 64, device="cuda")
    side = lk.cuda.Stream()
    gpu.delay(0)
    with lk.cuda.stream(side):       # a real GPU's first calls compile kernels and make cuBLAS's
        x + 1.0, x @ x, x * 2.0      # handle, which would sit inside the timed ops below
    lk.cuda.synchronize()
    with lk.profile() as prof:
        x + 1.0                                   # the step's first GPU op: anchors the clock
        launched = time.perf_counter_ns()
        with lk.cuda.stream(side):
            gpu.delay(DELAY_NS)                   # stream 1 is busy for DELAY_NS from now
            x @ x                                 # launched now, runs after the delay
        x * 2.0                                   # the default stream is free: runs now
    mm = next(e for e in prof.events if e.op == "matmul")
    mul = next(e for e in prof.events if e.op == "mul")
    assert (mm.device, mm.lane) == ("gpu:0", "stream 1")
    assert (mul.device, mul.lane) == ("gpu:0", "stream 0")
    # the matmul ran after the delay, though the host launched it before the mul
    assert mm.start_ns - launched >= 0.9 * DELAY_NS
    assert mm.start_ns - mul.start_ns >= 0.8 * DELAY_NS
    assert mul.start_ns - launched < 0.5 * DELAY_NS
    # its time is its own, not the wait in the queue
    assert 0 < mm.duration_ns < 0.5 * DELAY_NS
    assert all(e.gpu_span is None for e in prof.events)   # read when the block closed


def test_an_op_runs_and_is_timed_on_its_tensors_device_not_the_current_one():
    fake = FakeGpu(2)
    gpu0, gpu1 = fake.devices
    x = lk.ones(8, 8, device=gpu1)
    fake.launches.clear()
    with lk.profile() as prof:
        with gpu0.activate():
            y = x @ x
    assert fake.current_device() == 0
    assert [(name, dev) for name, dev, *_ in fake.launches] == [("matmul", 1)]
    (e,) = prof.events
    assert (e.device, e.lane) == ("gpu:1", "stream 0") and e.duration_ns > 0
    np.testing.assert_array_equal(y._data, np.full((8, 8), 8.0))   # the fake holds NumPy arrays
    assert y.device is gpu1


def test_eager_ops_launch_on_their_device_without_a_profile_too():
    fake = FakeGpu(2)
    x = lk.ones(4, device=fake.devices[1])
    fake.launches.clear()
    (x * 3.0).exp()
    assert [dev for _, dev, *_ in fake.launches] == [1, 1]


def test_each_step_anchors_each_device_once():
    fake = FakeGpu(2)
    clocks = GpuClocks()
    a0 = clocks.anchor(fake.devices[0], step=0)
    assert clocks.anchor(fake.devices[0], step=0) is a0
    a1 = clocks.anchor(fake.devices[1], step=0)
    assert a1 is not a0 and a1.event.device == 1
    assert clocks.anchor(fake.devices[0], step=1) is not a0
    # anchors go on a stream of their own: no user work waits for them, nor they for it
    anchor_streams = {s.ptr for s in fake.streams if s.ptr != 0}
    assert len(anchor_streams) == 2


def test_steps_keep_true_gaps_across_anchors(gpu):
    dev = gpu.device(0)
    x = lk.ones(32, 32, device=dev)
    with lk.profile() as prof:
        for _ in range(3):
            x @ x
            time.sleep(0.02)                      # the host pauses between steps
            prof.step()
    starts = [step[0].start_ns for step in prof.steps]
    gaps = np.diff(starts)
    assert all(g >= 0.018e9 for g in gaps), gaps


def test_stream_lanes_are_numbered_per_device_in_the_order_seen():
    fake = FakeGpu(2)
    gpu0, gpu1 = fake.devices
    x0, x1 = lk.ones(4, device=gpu0), lk.ones(4, device=gpu1)
    with gpu0.activate():
        s_a, s_b = fake.xp.cuda.Stream(), fake.xp.cuda.Stream()
    with gpu1.activate():
        s_c = fake.xp.cuda.Stream()
    with lk.profile() as prof:
        with gpu0.activate():
            with s_b:
                x0 + 1.0
            with s_a:
                x0 + 1.0
            x0 + 1.0
        with gpu1.activate(), s_c:
            x1 + 1.0
    assert [(e.device, e.lane) for e in prof.events] == [
        ("gpu:0", "stream 1"), ("gpu:0", "stream 2"), ("gpu:0", "stream 0"),
        ("gpu:1", "stream 1")]


def test_captured_ops_are_timed_on_the_gpu_stream(gpu):
    dev = gpu.device(0)

    @lk.function
    def f(x):
        return ((x @ x) * 2.0).sum()

    x = lk.ones(16, 16, device=dev)
    f(x)
    with dev.activate():
        side = dev.xp.cuda.Stream(non_blocking=True)
    with lk.profile() as prof:
        x + 1.0
        launched = time.perf_counter_ns()
        with dev.activate(), side:
            gpu.delay(DELAY_NS)
            out = f(x)
    graph = [e for e in prof.events if e.source != "eager"]
    assert graph and all((e.device, e.lane) == ("gpu:0", "stream 1") for e in graph)
    assert graph[0].start_ns - launched >= 0.9 * DELAY_NS
    assert all(a.end_ns <= b.start_ns for a, b in zip(graph, graph[1:]))
    assert out.item() == pytest.approx(2 * 16 * 16 * 16)


def test_chrome_trace_has_a_track_per_stream():
    fake = FakeGpu(1)
    x = lk.ones(4, device=fake.devices[0])
    with fake.devices[0].activate():
        side = fake.xp.cuda.Stream()
    with lk.profile() as prof:
        x + 1.0
        with fake.devices[0].activate(), side:
            x + 1.0
    trace = prof.to_chrome_trace()["traceEvents"]
    names = {e["args"]["name"] for e in trace if e["name"] == "thread_name"}
    assert names == {"stream 0", "stream 1"}
