"""End-to-end training, eagerly: the digits CNN of examples/train_digits.py reaches 95% test
accuracy; an LSTM learns a sequence task; 10,000 training steps keep memory flat."""
import importlib.util
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import labkit as lk
from labkit import nn
from labkit.nn import functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_example(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "examples",
                                                                     f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_digits_cnn_reaches_95_percent(record_property):
    example = load_example("train_digits")
    result = example.train(progress=False, log=lambda *a: None)
    record_property("digits_accuracy", result["accuracy"])
    record_property("digits_train_seconds", round(result["seconds"], 2))
    print(f"digits CNN: test accuracy {result['accuracy']:.2%}, trained in "
          f"{result['seconds']:.1f} s")
    assert result["accuracy"] >= 0.95
    assert result["losses"][-1] < result["losses"][0] / 4


class SineModel(nn.Module):
    """LSTM + linear head that predicts the next value of a sine wave at every step."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(1, 16, batch_first=True)
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out)


@pytest.mark.slow
def test_lstm_learns_next_value_of_sine_waves(record_property):
    lk.manual_seed(0)
    rng = np.random.default_rng(0)
    model = SineModel()
    opt = lk.optim.Adam(model.parameters(), lr=0.02)
    n, length, losses = 32, 20, []
    start = time.perf_counter()
    for _ in range(150):
        phase = rng.uniform(0, 2 * np.pi, (n, 1))
        freq = rng.uniform(0.2, 0.5, (n, 1))
        wave = np.sin(freq * np.arange(length + 1) + phase).astype(np.float32)
        x, y = lk.tensor(wave[:, :-1, None]), lk.tensor(wave[:, 1:, None])
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    ratio = losses[0] / np.mean(losses[-10:])
    record_property("lstm_loss_ratio", round(float(ratio), 1))
    print(f"LSTM: loss {losses[0]:.4f} -> {np.mean(losses[-10:]):.5f} ({ratio:.0f}x) in "
          f"{time.perf_counter() - start:.1f} s")
    assert ratio >= 10


SOAK = textwrap.dedent("""
    import resource
    import sys
    import labkit as lk
    from labkit import nn
    from labkit.nn import functional as F

    def peak_rss_kib():
        # VmHWM is this process's own peak; ru_maxrss would also count the parent's peak at
        # fork time, which hides the loop behind whatever pytest had loaded
        try:
            with open("/proc/self/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1])
        except OSError:
            pass
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak // 1024 if sys.platform == "darwin" else peak

    lk.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 10))
    opt = lk.optim.Adam(model.parameters(), lr=1e-3)
    x, y = lk.randn(64, 32), lk.randint(0, 10, 64)
    for step in range(1, 10001):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step in (1000, 10000):
            print(step, peak_rss_kib(), loss.item(), flush=True)
""")


@pytest.mark.slow
def test_ten_thousand_eager_steps_keep_memory_flat(record_property):
    # a fresh process, so the peak RSS is this loop's alone (not earlier tests')
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.run([sys.executable, "-c", SOAK], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr
    rows = [line.split() for line in run.stdout.split("\n") if line.strip()]
    peak = {int(step): int(kb) for step, kb, _ in rows}
    growth = peak[10000] / peak[1000] - 1
    record_property("peak_rss_kb_at_1000", peak[1000])
    record_property("peak_rss_kb_at_10000", peak[10000])
    print(f"peak RSS: {peak[1000] / 1024:.1f} MiB after 1,000 steps, "
          f"{peak[10000] / 1024:.1f} MiB after 10,000 ({growth:+.2%})")
    assert abs(growth) < 0.05
    assert float(rows[-1][2]) < float(rows[0][2])          # and it was training
