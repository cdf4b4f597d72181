"""What guards cost (labkit/graph/guards.py): per call of W3's and W10's captured training steps
(``lk.function``) and of W10's GPT compiled with ``lk.compile``, the time to check every guard
of the trace, next to the time of the step; and what recording them adds to a trace.

    python benchmarks/guard_cost.py

Three cases per step, each the median over many checks:

- *steady*: nothing changed since the last call (the usual training step): module and
  param-group guards are skipped on their counters, the others (globals, closures...) checked;
- *lr set each step*: a param-group entry written before every call, as nanoGPT writes
  ``param_group['lr'] = lr`` (the group guards are checked again each call);
- *a module attribute set each step* (``model.train()`` every step, or DDP's
  ``require_backward_grad_sync``): every module guard is checked each call.

Trace time is the first call's (trace, passes, plan) with guards recorded and with the recorder
replaced by one that records nothing, median of a few. Step and trace times are this process's
CPU time (steadier than the wall clock on a shared machine; run with OPENBLAS_NUM_THREADS=1 for
one core's).
"""
import os
import statistics
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

import labkit as lk  # noqa: E402
from benchmarks.workloads import w3_mlp, w10_gpt  # noqa: E402
from labkit.graph import guards  # noqa: E402

function_module = sys.modules["labkit.graph.function"]   # (labkit.graph.function: the decorator)


def _captured(bench):
    """The lk.function a workload's Bench calls (held in its step's closure)."""
    for cell in bench.step.__closure__ or ():
        if isinstance(cell.cell_contents, lk.Function):
            return cell.cell_contents
    raise LookupError("no lk.function in the step")


def _median_us(fn, n=20000, rounds=7):
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(times)


def _step_ms(step, n=20):
    step()
    times = []
    for _ in range(n):
        start = time.process_time()
        step()
        times.append(time.process_time() - start)
    return statistics.median(times) * 1e3


class _NoGuards:
    """A recorder that records nothing (to time a trace without guards)."""

    def __init__(self, fn):
        self._recorder = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def result(self):
        return guards.Guards(())


def _trace_ms(make, record=True, n=3):
    """Median time of the first call (the trace) of a fresh step from ``make()``."""
    times = []
    for _ in range(n):
        bench = make()
        saved = function_module.GuardRecorder
        if not record:
            function_module.GuardRecorder = _NoGuards
        try:
            start = time.process_time()
            bench.step()
            times.append(time.process_time() - start)
        finally:
            function_module.GuardRecorder = saved
    return statistics.median(times) * 1e3


def _cases(check, group):
    """Per-call µs of ``check()``: steady, after a param-group write, after a module change.
    The write itself is timed alone and taken off."""
    def lr_write():
        group["lr"] = group["lr"]

    def module_change():
        guards.MODULES[0] += 1
    steady = _median_us(check)
    with_lr = _median_us(lambda: (lr_write(), check())) - _median_us(lr_write)
    with_module = _median_us(lambda: (module_change(), check())) - _median_us(module_change)
    return steady, with_lr, with_module


def report():
    rows = []
    w3 = w3_mlp.data(np.random.default_rng(0))
    w10 = w10_gpt.data(np.random.default_rng(0))
    make_w3 = lambda: w3_mlp.IMPLS.factories["labkit_captured"](w3, "cpu")      # noqa: E731
    make_w10 = lambda: w10_gpt.IMPLS.factories["labkit_captured"](w10, "cpu")   # noqa: E731
    for name, make in (("W3 captured step", make_w3), ("W10 captured step", make_w10)):
        bench = make()
        f = _captured(bench)
        step = _step_ms(bench.step)
        trace = f._cache[next(iter(f._cache))]
        opt_group = _group_of(f)
        rows.append((name, len(trace.guards), step, *_cases(trace.guards.holds, opt_group),
                     _trace_ms(make, True), _trace_ms(make, False)))
    # W10's GPT compiled: the forward (and its backward) as one call on the tape
    model = w10_gpt.make_gpt(lk)
    model.load_state_dict({k: lk.tensor(v) for k, v in w10_gpt._state(w10).items()})
    opt = lk.optim.AdamW(model.parameters(), lr=w10_gpt.LR)
    fast = lk.compile(model)
    idx, targets = lk.tensor(w10["idx"]), lk.tensor(w10["targets"])

    def compiled_step():
        opt.zero_grad()
        fast(idx, targets).backward()
        opt.step()
    step = _step_ms(compiled_step)
    trace = fast.forward.traces[0]
    rows.append(("W10 lk.compile(model) step", len(trace.guards), step,
                 *_cases(trace.guards.holds, opt.param_groups[0]), float("nan"), float("nan")))
    head = ("| step | guards | step ms | check µs (steady) | check µs (lr set each step) | "
            "check µs (module changed each step) | trace ms with guards | trace ms without |")
    lines = [head, "|" + "---|" * 8]
    for name, n, ms, a, b, c, t1, t2 in rows:
        lines.append(f"| {name} | {n} | {ms:.2f} | {a:.2f} | {b:.2f} | {c:.2f} | "
                     f"{t1:.0f} | {t2:.0f} |")
    return "\n".join(lines)


def _group_of(f):
    """The first param group of an optimiser the captured step calls (by its closure)."""
    for cell in getattr(f.fn, "__closure__", None) or ():
        value = cell.cell_contents
        if isinstance(value, lk.optim.Optimizer):
            return value.param_groups[0]
    return {"lr": 0.0}


if __name__ == "__main__":
    print(report())
