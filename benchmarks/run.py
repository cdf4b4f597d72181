"""Run labkit's benchmark suite and rewrite ``BENCHMARKS.md`` at the repository root.

Usage::

    python benchmarks/run.py                 # every workload, full run (a few minutes)
    python benchmarks/run.py --quick         # fewer, shorter samples (under a minute)
    python benchmarks/run.py -w W1 -w W3     # only some workloads
    python benchmarks/run.py --no-write      # print the report instead of writing the file
    python benchmarks/run.py --profile W3    # cProfile labkit's eager W3 step, print the top

How it measures, so that the ratios hold on a noisy machine:

- every implementation of a workload (labkit eager, labkit captured, hand-written NumPy,
  PyTorch eager) runs in a process of its own (``benchmarks/worker.py``), importing only its own
  library, so imports, allocators and memory do not mix;
- all of them start from the same weights and inputs, drawn from one seeded NumPy generator, and
  before anything is timed their first results (losses after one and two SGD steps, or a
  checksum) must agree within 1e-4 relative; an implementation that disagrees is reported and
  not timed;
- each warms up, then the runner takes samples round-robin (one from each implementation in
  turn, the starting one rotating), and reports the median of the samples;
- peak resident memory (RSS) is each worker's high-water mark; import times are the median of
  fresh interpreters importing one library each.

Implementations are found through each workload module's registry (``IMPLS``); one whose factory
says it cannot run here (``NotAvailable``) is shown with its reason, e.g. labkit's captured column
reads "n/a (graph capture not built yet)" until ``lk.function`` exists, and is measured without
any change here once it does. A GPU table (labkit on gpu:0 against PyTorch CUDA) is added when
CuPy and a CUDA device are present. Text after the marker line at the end of ``BENCHMARKS.md``
(hand-written analysis) is kept when the file is rewritten.
"""
import argparse
import datetime
import importlib
import importlib.metadata
import importlib.util
import json
import os
import pkgutil
import platform
import re
import select
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from benchmarks import common  # noqa: E402
from benchmarks import workloads as _workloads_pkg  # noqa: E402

KEEP_MARKER = ("<!-- Everything below this line is kept when benchmarks/run.py rewrites this "
               "file. -->")
REL_TOL = 1e-4
LABELS = {"labkit_eager": "labkit eager", "labkit_captured": "labkit captured",
          "numpy": "NumPy (hand-written)", "torch": "PyTorch eager"}
# (workload, labkit implementation, reference, comparison, bound)
TARGETS = [
    ("W1", "labkit_eager", "torch", "<=", 1.0),
    ("W2", "labkit_eager", "torch", "<=", 1.0),
    ("W3", "labkit_eager", "torch", "<=", 1.3),
    ("W4", "labkit_eager", "torch", "<=", 2.0),
    ("W5", "labkit_eager", "numpy", ">=", 0.95),
    ("W6", "labkit_eager", "torch", "<=", 1.2),
    ("W10", "labkit_eager", "torch", "<=", 1.2),
    ("W1", "labkit_captured", "torch", "<=", 0.1),
    ("W2", "labkit_captured", "torch", "<=", 0.1),
    ("W3", "labkit_captured", "torch", "<=", 0.9),
    ("W4", "labkit_captured", "torch", "<=", 1.5),
    ("W6", "labkit_captured", "torch", "<=", 0.8),
    ("W10", "labkit_captured", "torch", "<=", 1.0),
    ("W11", "labkit_captured", "torch", "<=", 0.8),
    ("W12", "labkit_captured", "labkit_eager", "<=", 1.0),
    ("W13", "labkit_eager", "torch", "<=", 1.2),
    ("W13", "labkit_captured", "torch", "<=", 1.0),
]
IMPORT_TARGET_S = 0.5
RSS_TARGET = 0.5
NOT_YET = [
    ("W7", "distributed data-parallel training step",
     "not yet measurable: needs labkit.dist (launcher, allreduce, DataParallel)"),
]
ENV_KEYS = ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
            "NUMEXPR_NUM_THREADS", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
            "LABKIT_DEBUG")
SETTINGS = {
    "full": dict(repeats=11, warmup_s=0.5, target_s=0.25, import_repeats=7),
    "quick": dict(repeats=3, warmup_s=0.1, target_s=0.05, import_repeats=3),
}


def log(*args):
    print(*args, file=sys.stderr, flush=True)


# ---- workloads and workers -------------------------------------------------------------------
def discover():
    """Every workload module under benchmarks/workloads, in the order of their names (W1..)."""
    mods = []
    for info in pkgutil.iter_modules(_workloads_pkg.__path__):
        mod = importlib.import_module(f"benchmarks.workloads.{info.name}")
        if hasattr(mod, "IMPLS"):
            mods.append(mod)
    return sorted(mods, key=lambda m: int(m.NAME[1:]))


def discover_scripts():
    """Workload modules that drive themselves (no ``IMPLS``; a ``run(repeats=...)`` returning a
    dict), such as W7, which starts a cluster of worker processes of its own."""
    mods = []
    for info in pkgutil.iter_modules(_workloads_pkg.__path__):
        mod = importlib.import_module(f"benchmarks.workloads.{info.name}")
        if not hasattr(mod, "IMPLS") and callable(getattr(mod, "run", None)) \
                and hasattr(mod, "NAME"):
            mods.append(mod)
    return sorted(mods, key=lambda m: int(m.NAME[1:]))


# How the runner shows a script workload's result, per module: one row each
# (title suffix, labkit's key, the reference's key, the reference's label, the ratio's key)
SCRIPT_VIEWS = {
    "w7_allreduce": [("", "labkit_GBps", "raw_GBps", "raw mpi4py Allreduce", "ratio")],
    "w7_data_parallel": [
        (": 64 MB gradient allreduce in 25 MB buckets (Iallreduce, start to wait)",
         "allreduce_labkit_GBps", "allreduce_raw_GBps", "raw mpi4py Allreduce", "allreduce_ratio"),
        (": 64 MB gradient averaging, hooks to wait (GB/s)", "average_labkit_GBps",
         "average_raw_GBps", "raw mpi4py: copy, Allreduce, divide", "average_ratio"),
        (": W3 MLP training step, batch 128 per worker (samples/s)", "train_2_samples_per_s",
         "train_1_samples_per_s", "1 worker", "train_ratio"),
        (": W3's step in hand-written NumPy + raw mpi4py Allreduce, 2 workers (samples/s)",
         "numpy_train_2_samples_per_s", "numpy_train_1_samples_per_s", "1 worker",
         "numpy_train_ratio")],
    "w7_ps_null_step": [
        (": 1 worker", "labkit_ms_1", "raw_ms_1", "raw mpi4py, same messages", "ratio_1"),
        (": 2 workers", "labkit_ms_2", "raw_ms_2", "raw mpi4py, same messages", "ratio_2")],
    "w9_profiler_overhead": [("", "profiled_steps_per_s", "plain_steps_per_s",
                              "the same step unprofiled", "ratio")],
}
SCRIPT_REPEATS = {"full": 21, "quick": 5}


def run_script(mod, cfg_name):
    """Run a self-driven workload in a fresh interpreter; its ``run()`` result, or an error."""
    name = mod.__name__.rsplit(".", 1)[1]
    code = (f"import json; from benchmarks.workloads.{name} import run; "
            f"print('@@' + json.dumps(run(repeats={SCRIPT_REPEATS[cfg_name]})))")
    log(f"[{mod.NAME}] {mod.TITLE}: running {name}.run()")
    try:
        p = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=child_env(),
                           capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return {"error": "did not finish within 600 s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("@@")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {p.returncode}: {tail[:200]}"}
    result = json.loads(lines[-1][2:])
    log(f"[{mod.NAME}]   {result}")
    return result


def script_key(mod):
    """A script workload's own name (several scripts may share a workload number)."""
    return mod.__name__.rsplit(".", 1)[1]


def script_cells(mod, r):
    """One (title, labkit's number, the reference's label and number, labkit / reference) per
    row the script shows."""
    views = SCRIPT_VIEWS.get(script_key(mod), [("", None, None, None, "ratio")])
    title = f"{mod.NAME} {mod.TITLE}"
    if "error" in r:
        return [(title, "failed: " + r["error"].replace("|", "/"), None, None, None)]
    if r.get("results_equal") is False:
        return [(title, "failed: labkit's result differs from the reference's", None, None,
                 None)]
    rows = []
    for suffix, lk_key, ref_key, ref_label, ratio_key in views:
        lk_val, ref_val = r.get(lk_key), r.get(ref_key)
        rows.append((title + suffix, fmt_value(lk_val) if lk_val is not None else "-",
                     ref_label, fmt_value(ref_val) if ref_val is not None else None,
                     r.get(ratio_key)))
    return rows


THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "NUMEXPR_NUM_THREADS")
_threads = None   # --threads N: set in every worker's environment


def child_env():
    env = dict(os.environ)
    if _threads:
        env.update({k: str(_threads) for k in THREAD_VARS})
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


class WorkerError(RuntimeError):
    pass


def worker_name(module):
    """How a worker finds a workload: its module's name in benchmarks/workloads, or its own
    ``WORKER_NAME`` (a corpus program's)."""
    return getattr(module, "WORKER_NAME", None) or module.__name__.rsplit(".", 1)[1]


class Worker:
    """A worker process running one implementation; ``ask`` sends a command, returns the reply."""

    def __init__(self, module, impl, device):
        self.impl = impl
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.worker", worker_name(module), impl, device],
            cwd=REPO, env=child_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.err)

    def read(self, timeout):
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise WorkerError(f"{self.impl}: no answer within {timeout:.0f} s")
        line = self.proc.stdout.readline()
        if not line:
            raise WorkerError(f"{self.impl}: worker exited ({self.stderr_tail()})")
        return json.loads(line)

    def ask(self, timeout=600, **msg):
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()
        reply = self.read(timeout)
        if not reply.get("ok"):
            raise WorkerError(f"{self.impl}: {reply.get('error')}")
        return reply

    def stderr_tail(self, n=400):
        self.err.seek(0)
        text = self.err.read().decode(errors="replace").strip()
        return text[-n:] if text else "no output"

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.err.close()


def agree(a, b):
    """Largest relative difference between two lists of check values, or inf if they differ in
    length."""
    if len(a) != len(b):
        return float("inf")
    worst = 0.0
    for x, y in zip(a, b):
        worst = max(worst, abs(x - y) / max(abs(y), 1e-12))
    return worst


def run_workload(mod, device, cfg, impls=None):
    """Measure every implementation of ``mod`` on ``device``; returns a dict by implementation."""
    names = [n for n in mod.IMPLS.names() if impls is None or n in impls]
    log(f"[{mod.NAME}] {mod.TITLE} ({device}): starting {', '.join(names)}")
    workers = {n: Worker(mod, n, device) for n in names}
    res = {n: {} for n in names}
    live = {}
    try:
        for n, w in workers.items():
            try:
                reply = w.read(timeout=600)
            except WorkerError as exc:
                res[n]["error"] = str(exc)
                w.close()
                continue
            if reply.get("ok"):
                res[n].update(check=reply["check"], fingerprint=reply["fingerprint"],
                              info=reply["info"])
                live[n] = w
            else:
                res[n]["na" if "na" in reply else "error"] = reply.get("na") or reply.get("error")
                if "error" in reply:
                    res[n]["error"] += f" [{w.stderr_tail(200)}]"
                w.close()

        # agreement: same input bits, and first results within REL_TOL of the reference
        ref = next((n for n in ("torch", "numpy", "labkit_eager") if n in live), None)
        for n in list(live) if ref else []:
            if res[n]["fingerprint"] != res[ref]["fingerprint"]:
                res[n]["error"] = "got different initial data (fingerprint mismatch)"
            diff = agree(res[n]["check"], res[ref]["check"])
            res[n]["check_diff"] = diff
            res[n]["check_ref"] = ref
            if diff > REL_TOL:
                res[n]["error"] = (f"disagrees with {LABELS[ref]}: {res[n]['check']} vs "
                                   f"{res[ref]['check']} (relative {diff:.2e} > {REL_TOL})")
            if "error" in res[n]:
                log(f"[{mod.NAME}]   {n}: {res[n]['error']}")
                live.pop(n).close()

        for n, w in live.items():
            try:
                r = w.ask(cmd="calibrate", warmup_s=cfg["warmup_s"], target_s=cfg["target_s"])
                res[n].update(n=r["n"], samples=[])
            except WorkerError as exc:
                res[n]["error"] = str(exc)
        live = {n: w for n, w in live.items() if "error" not in res[n]}

        order = list(live)
        for rep in range(cfg["repeats"]):
            k = rep % len(order) if order else 0
            for n in order[k:] + order[:k]:
                if "error" in res[n]:
                    continue
                try:
                    res[n]["samples"].append(live[n].ask(
                        cmd="measure", n=res[n]["n"],
                        clock=cfg["clock"] if device == "cpu" else "wall")["per_step"])
                except WorkerError as exc:
                    res[n]["error"] = str(exc)

        for n, w in live.items():
            if "error" in res[n]:
                continue
            try:
                r = w.ask(cmd="finish")
                res[n].update(peak_rss=r["peak_rss"], baseline_rss=r["baseline_rss"])
            except WorkerError as exc:
                res[n]["error"] = str(exc)
            s = res[n]["samples"]
            res[n]["seconds"] = common.median(s)
            res[n]["value"] = mod.metric(res[n]["seconds"])
            res[n]["spread"] = (max(s) - min(s)) / res[n]["seconds"] if s else float("nan")
            log(f"[{mod.NAME}]   {LABELS[n]:22s} {res[n]['value']:10.3f} {mod.UNIT}"
                f"   (median of {len(s)} x {res[n]['n']} steps, "
                f"peak RSS {res[n]['peak_rss'] / 2**20:.0f} MB)")
    finally:
        for w in workers.values():
            w.close()
    for n in res:
        if "na" in res[n]:
            log(f"[{mod.NAME}]   {LABELS[n]:22s} {res[n]['na']}")
    return res


# ---- imports, machine, versions --------------------------------------------------------------
def import_times(repeats):
    """Median seconds (and the peak RSS) of a fresh interpreter importing each library."""
    out = {}
    code = ("import time, resource; t = time.perf_counter(); import {m}; "
            "d = time.perf_counter() - t; "
            "print(d, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    for mod in ("numpy", "labkit", "torch"):
        times, rss = [], []
        for i in range(repeats + 1):
            p = subprocess.run([sys.executable, "-c", code.format(m=mod)], cwd=REPO,
                               env=child_env(), capture_output=True, text=True)
            if p.returncode != 0:
                out[mod] = {"error": p.stderr.strip().splitlines()[-1][:200]}
                break
            if i:   # the first one warms the file cache
                t, r = p.stdout.split()
                times.append(float(t))
                rss.append(int(r) * 1024)
        else:
            out[mod] = {"seconds": common.median(times), "min": min(times),
                        "rss": common.median(rss)}
    return out


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_total():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def labkit_version():
    import labkit
    v = labkit.__version__
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "labkit"], cwd=REPO,
                               capture_output=True, text=True).stdout.strip()
        v += f" (commit {sha}{', labkit/ modified' if dirty else ''})"
    except (OSError, subprocess.CalledProcessError):
        pass
    return v


def load_average():
    try:
        return os.getloadavg()
    except (AttributeError, OSError):
        return None


def machine():
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "cpu": cpu_model(), "cores": os.cpu_count(), "usable_cores": usable,
        "memory": memory_total(), "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(), "numpy": version("numpy"),
        "torch": version("torch"), "labkit": labkit_version(),
        "env": {k: child_env().get(k) for k in ENV_KEYS},
        "load_before": load_average(),
    }


def gpu_available():
    """Whether a GPU table can be made here: CuPy with a CUDA device (probed in a subprocess)."""
    if importlib.util.find_spec("cupy") is None:
        return False, "CuPy is not installed"
    p = subprocess.run([sys.executable, "-c", "import cupy; print(cupy.is_available())"],
                       capture_output=True, text=True, env=child_env())
    if p.stdout.strip() != "True":
        return False, "CuPy finds no CUDA device"
    return True, ""


# ---- the report ----------------------------------------------------------------------------
def fmt_value(v):
    if v is None or v != v:
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}" if v >= 1 else f"{v:.3f}"


def cell(r):
    if r is None:
        return "-"
    if "na" in r:
        return r["na"]
    if "error" in r:
        return "failed: " + r["error"].replace("|", "/")[:160]
    return fmt_value(r["value"])


def workload_table(mods, impls, results, cell):
    """Markdown rows: one per workload, one column per implementation, ``cell(result)`` each."""
    rows = ["| workload | " + " | ".join(LABELS[n] for n in impls) + " |",
            "|---|" + "---|" * len(impls)]
    for m in mods:
        cells = [cell(results[m.NAME].get(n, {})) for n in impls]
        rows.append(f"| {m.NAME} | " + " | ".join(cells) + " |")
    return rows


def ratio(results, a, b):
    ra, rb = results.get(a), results.get(b)
    if not ra or not rb or "value" not in ra or "value" not in rb or "error" in ra or "error" in rb:
        return None
    return ra["value"] / rb["value"]


def judge(r, op, bound):
    """'met' / 'missed by N%' for a ratio against its bound."""
    if r is None:
        return "not measured"
    if op == "<=":
        return (f"met ({r:.2f}x <= {bound}x)" if r <= bound
                else f"**missed** by {100 * (r / bound - 1):.0f}% ({r:.2f}x, target <= {bound}x)")
    return (f"met ({r:.2f}x >= {bound}x)" if r >= bound
            else f"**missed** by {100 * (1 - r / bound):.0f}% ({r:.2f}x, target >= {bound}x)")


def mb(b):
    return "-" if b is None else f"{b / 2**20:.0f}"


def results_table(mods, all_res, impls_order, scripts=(), script_res=None):
    labkit_cols = [n for n in ("labkit_eager", "labkit_captured")
                   if any("value" in all_res[m.NAME].get(n, {}) for m in mods)]
    head = (["workload", "unit"] + [LABELS[n] for n in impls_order]
            + [f"{LABELS[n].replace('labkit ', '')} / PyTorch" for n in labkit_cols]
            + [f"{LABELS[n].replace('labkit ', '')} / NumPy" for n in labkit_cols])
    body = []
    for m in mods:
        res = all_res[m.NAME]
        row = [f"{m.NAME} {m.TITLE}", m.UNIT] + [cell(res.get(n)) for n in impls_order]
        for ref in ("torch", "numpy"):
            for n in labkit_cols:
                r = ratio(res, n, ref)
                row.append("-" if r is None else f"{r:.2f}x")
        body.append((int(m.NAME[1:]), row))
    for m in scripts:
        for title, val, ref_label, ref_val, r in script_cells(m, script_res[script_key(m)]):
            if ref_label:
                val = f"{val} ({ref_label}: {ref_val}; ratio {r:.2f}x)" if r else val
            unit = m.UNIT              # a row whose title ends in "(unit/s)" has its own unit
            own = re.search(r" \(([^()]+/s)\)$", title)
            if own:
                unit, title = own.group(1), title[:own.start()]
            body.append((int(m.NAME[1:]), [title, unit, val] + ["-"] * (len(head) - 3)))
    have = {m.NAME for m in scripts} | {m.NAME for m in mods}
    for name, title, why in NOT_YET:
        if name not in have:
            body.append((int(name[1:]), [f"{name} {title}", "-", why] + ["-"] * (len(head) - 3)))
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    rows += ["| " + " | ".join(row) + " |" for _, row in sorted(body, key=lambda b: b[0])]
    return "\n".join(rows)


def report(cfg_name, cfg, mods, cpu_res, gpu_res, gpu_note, imports, mach, started, elapsed,
           partial, command_args="", scripts=(), script_res=None):
    impls_order = list(common.IMPLEMENTATION_ORDER)
    infos = {}
    for res in cpu_res.values():
        for r in res.values():
            infos.update(r.get("info", {}))
    L = []
    L.append("# labkit benchmarks")
    L.append("")
    clock = "CPU time of the worker process" if cfg.get("clock") == "cpu" else "elapsed time"
    L.append(f"Written by `python benchmarks/run.py{command_args}` "
             f"on {started:%Y-%m-%d %H:%M} UTC ({cfg_name} run"
             f"{', selected workloads only' if partial else ''}, {elapsed:.0f} s). Every number is "
             f"the median of {cfg['repeats']} samples of about {cfg['target_s']} s each "
             f"({clock}), taken after a warm-up, round-robin across implementations in one "
             f"run so that ratios hold on a noisy machine. Each implementation runs in its own "
             f"process. Before timing, "
             f"every implementation's first results (the loss after one and after two SGD steps, "
             f"or a checksum) must agree with PyTorch's (NumPy's where PyTorch is absent) within "
             f"{REL_TOL:g} relative, from the same seeded initial weights; one that does not is "
             f"shown as failed and not timed. Ratios compare the reported numbers: for ms/step "
             f"and us/op lower is better, for GFLOP/s and runs/s higher is better.")
    L.append("")
    L.append("## Machine and settings")
    L.append("")
    L.append("| | |")
    L.append("|---|---|")
    L.append(f"| CPU | {mach['cpu']}, {mach['cores']} cores ({mach['usable_cores']} usable) |")
    if mach["memory"]:
        L.append(f"| memory | {mach['memory'] / 2**30:.0f} GiB |")
    L.append(f"| OS | {mach['os']} |")
    L.append(f"| versions | Python {mach['python']}, NumPy {mach['numpy']}, PyTorch "
             f"{mach['torch']}, labkit {mach['labkit']} |")
    if "blas" in infos:
        L.append(f"| NumPy BLAS | {infos['blas']}, core {infos.get('blas_core')}, "
                 f"{infos.get('blas_threads')} threads |")
    if "torch_threads" in infos:
        L.append(f"| PyTorch threads | {infos['torch_threads']} |")
    env = ", ".join(f"{k}={v if v is not None else '(unset)'}" for k, v in mach["env"].items())
    L.append(f"| environment | {env} |")
    if mach.get("load_before"):
        la, lb = mach["load_before"], mach.get("load_after") or mach["load_before"]
        L.append(f"| load average (1 min) | {la[0]:.2f} at the start, {lb[0]:.2f} at the end "
                 f"(other processes share these cores: a load above 0 means the numbers are "
                 f"noisier, and multi-threaded BLAS / OpenMP suffer most) |")
    L.append("")
    L.append("## Results (CPU)")
    L.append("")
    L.append(results_table(mods, cpu_res, impls_order, scripts, script_res or {}))
    L.append("")
    L.append("## Targets")
    L.append("")
    L.append("| target | measured | status |")
    L.append("|---|---|---|")
    names = {m.NAME for m in mods}
    for w, impl, ref, op, bound in TARGETS:
        if w not in names:
            continue
        r = ratio(cpu_res[w], impl, ref)
        L.append(f"| {w} {LABELS[impl]} {op} {bound}x {LABELS[ref]} "
                 f"{'GFLOP/s' if op == '>=' else 'time'} | "
                 f"{'-' if r is None else f'{r:.2f}x'} | {judge(r, op, bound)} |")
    for m in mods:
        target = getattr(m, "ABSOLUTE_TARGET", None)
        if target is None:
            continue
        impl, op, bound = target
        value = cpu_res[m.NAME].get(impl, {}).get("value")
        if value is None:
            status = "not measured"
        elif (value >= bound) if op == ">=" else (value <= bound):
            status = f"met ({fmt_value(value)} {op} {fmt_value(bound)})"
        else:
            status = (f"**missed** by {100 * abs(1 - value / bound):.0f}% "
                      f"({fmt_value(value)}, target {op} {fmt_value(bound)})")
        L.append(f"| {m.NAME} {LABELS[impl]} {op} {fmt_value(bound)} {m.UNIT} | "
                 f"{'-' if value is None else fmt_value(value)} | {status} |")
    for m in scripts:
        bound = getattr(m, "TARGET", None)
        _, _, ref_label, _, r = script_cells(m, (script_res or {})[script_key(m)])[0]
        if bound is not None and ref_label:
            L.append(f"| {m.NAME} labkit >= {bound}x {ref_label} ({m.UNIT}) | "
                     f"{'-' if r is None else f'{r:.2f}x'} | {judge(r, '>=', bound)} |")
    lk_imp = imports.get("labkit", {})
    if "seconds" in lk_imp:
        s = lk_imp["seconds"]
        status = (f"met ({s:.2f} s < {IMPORT_TARGET_S} s)" if s < IMPORT_TARGET_S else
                  f"**missed** by {100 * (s / IMPORT_TARGET_S - 1):.0f}% ({s:.2f} s)")
        L.append(f"| `import labkit` < {IMPORT_TARGET_S} s | {s:.3f} s | {status} |")
    for m in mods:
        res = cpu_res[m.NAME]
        lk, tr = res.get("labkit_eager", {}), res.get("torch", {})
        if "peak_rss" in lk and "peak_rss" in tr:
            r = lk["peak_rss"] / tr["peak_rss"]
            L.append(f"| {m.NAME} peak RSS <= {RSS_TARGET}x PyTorch's | {r:.2f}x "
                     f"({mb(lk['peak_rss'])} vs {mb(tr['peak_rss'])} MB) | "
                     f"{judge(r, '<=', RSS_TARGET)} |")
    L.append("")
    L.append("## Memory")
    L.append("")
    L.append("Peak resident memory of each worker process in MB (its high-water mark, including "
             "the interpreter and the library), and in brackets how much of it came after the "
             "library was imported (the workload's own data, tape and temporaries).")
    L.append("")
    mem_impls = [n for n in impls_order
                 if any("peak_rss" in cpu_res[m.NAME].get(n, {}) for m in mods)]
    L += workload_table(mods, mem_impls, cpu_res, lambda r: (
        f"{mb(r['peak_rss'])} (+{mb(r['peak_rss'] - r['baseline_rss'])})"
        if "peak_rss" in r else "-"))
    L.append("")
    L.append("## Import time")
    L.append("")
    L.append(f"A fresh interpreter importing one library; median of "
             f"{cfg['import_repeats']} after one discarded warm-up, and the process's RSS after "
             f"the import.")
    L.append("")
    L.append("| library | median | fastest | RSS after import (MB) |")
    L.append("|---|---|---|---|")
    for lib, r in imports.items():
        if "seconds" in r:
            L.append(f"| {lib} | {r['seconds']:.3f} s | {r['min']:.3f} s | {mb(r['rss'])} |")
        else:
            L.append(f"| {lib} | {r.get('error', '-')} | | |")
    L.append("")
    L.append("## Spread")
    L.append("")
    L.append("Per implementation: steps per sample, number of samples, and (max - min) / median "
             "of the samples.")
    L.append("")
    L += workload_table(mods, mem_impls, cpu_res, lambda r: (
        f"{r['n']} x {len(r['samples'])}, {100 * r['spread']:.0f}%" if r.get("samples") else "-"))
    L.append("")
    L.append("## GPU")
    L.append("")
    if gpu_res:
        gpu_impls = [n for n in impls_order if n != "numpy"]
        L.append("labkit on gpu:0 (CuPy) against PyTorch CUDA, same workloads and protocol.")
        L.append("")
        head = ["workload", "unit"] + [LABELS[n] for n in gpu_impls] + ["eager / PyTorch"]
        L.append("| " + " | ".join(head) + " |")
        L.append("|" + "---|" * len(head))
        for m in mods:
            res = gpu_res.get(m.NAME, {})
            r = ratio(res, "labkit_eager", "torch")
            L.append(f"| {m.NAME} {m.TITLE} | {m.UNIT} | "
                     + " | ".join(cell(res.get(n)) for n in gpu_impls)
                     + f" | {'-' if r is None else f'{r:.2f}x'} |")
    else:
        L.append(f"Skipped: {gpu_note}. Where CuPy and a CUDA device exist, this section holds "
                 f"labkit on gpu:0 against PyTorch CUDA.")
    L.append("")
    return "\n".join(L)


def write_report(path, text):
    kept = ""
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
        if KEEP_MARKER in old:
            kept = old.split(KEEP_MARKER, 1)[1]
    with open(path, "w") as f:
        f.write(text + "\n" + KEEP_MARKER + (kept if kept else "\n"))


# ---- profiling -----------------------------------------------------------------------------
def profile(name, impl, seconds, top):
    """Run one implementation in this process under cProfile and print the top entries.

    Thread settings come from this process's environment (e.g. OPENBLAS_NUM_THREADS=1)."""
    import cProfile
    import pstats
    mod = next(m for m in discover() if m.NAME == name.upper())
    bench = mod.IMPLS.factories[impl](mod.data(common.rng()), "cpu")
    bench.check()
    n = common.steps_for(common.timed(bench, 3), seconds)
    prof = cProfile.Profile()
    prof.enable()
    common.timed(bench, n)
    prof.disable()
    print(f"{name} {impl}: {n} steps under cProfile")
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


# ---- main ----------------------------------------------------------------------------------
def _shown_args(argv):
    """The command-line options as the report shows them (the output path left out)."""
    shown, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--output":
            skip = True
        elif not a.startswith("--output="):
            shown.append(a)
    return "".join(" " + a for a in shown)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer, shorter samples")
    ap.add_argument("-w", "--workload", action="append", metavar="W",
                    help="run only this workload (W1, W2, ...); may be repeated or "
                         "comma-separated")
    ap.add_argument("--impl", action="append", metavar="NAME",
                    help="run only these implementations "
                         f"({', '.join(common.IMPLEMENTATION_ORDER)})")
    ap.add_argument("--repeats", type=int, help="samples per implementation (overrides the mode)")
    ap.add_argument("--output", default=os.path.join(REPO, "BENCHMARKS.md"),
                    help="report file (default: BENCHMARKS.md at the repository root)")
    ap.add_argument("--no-write", action="store_true", help="print the report, write nothing")
    ap.add_argument("--threads", type=int,
                    help="set OMP/OPENBLAS/MKL/NUMEXPR_NUM_THREADS to N in every worker "
                         "(default: the libraries' own choice, which is reported)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time samples by elapsed time (default) or by the worker's CPU time; "
                         "cpu suits a machine shared with other work, with --threads 1 (GPU "
                         "runs always use wall time)")
    ap.add_argument("--no-gpu", action="store_true", help="skip the GPU table even if possible")
    ap.add_argument("--profile", metavar="W",
                    help="cProfile one workload's implementation in this process and stop")
    ap.add_argument("--profile-impl", default="labkit_eager", help="implementation to profile")
    args = ap.parse_args(argv)

    if args.profile:
        profile(args.profile, args.profile_impl, seconds=3.0, top=30)
        return 0

    global _threads
    _threads = args.threads
    cfg_name = "quick" if args.quick else "full"
    cfg = dict(SETTINGS[cfg_name])
    if args.repeats:
        cfg["repeats"] = args.repeats
    cfg["clock"] = args.clock
    if args.clock == "cpu" and args.threads != 1:
        log("note: --clock cpu adds up the CPU time of every thread (and BLAS/OpenMP threads "
            "spin while waiting); it is meant for --threads 1")
    mods = discover()
    scripts = discover_scripts()
    wanted = None
    if args.workload:
        wanted = {w.strip().upper() for arg in args.workload for w in arg.split(",") if w.strip()}
        for name, _, why in NOT_YET:
            if name in wanted and name not in {m.NAME for m in scripts}:
                log(f"{name}: {why}")
                wanted.discard(name)
        unknown = wanted - {m.NAME for m in mods} - {m.NAME for m in scripts}
        if unknown:
            ap.error(f"unknown workload(s) {sorted(unknown)}; "
                     f"known: {[m.NAME for m in mods + scripts]}")
        mods = [m for m in mods if m.NAME in wanted]
        scripts = [m for m in scripts if m.NAME in wanted]
    impls = set(args.impl) if args.impl else None

    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.perf_counter()
    mach = machine()
    log(f"machine: {mach['cpu']}, {mach['cores']} cores; {cfg_name} run")
    if mach["load_before"] and mach["load_before"][0] > 0.5:
        log(f"note: load average {mach['load_before'][0]:.2f}: other processes are running; "
            f"the numbers will be noisier")
    log("import times ...")
    imports = import_times(cfg["import_repeats"])
    for lib, r in imports.items():
        log(f"  import {lib}: " + (f"{r['seconds']:.3f} s" if "seconds" in r else r["error"]))

    cpu_res = {m.NAME: run_workload(m, "cpu", cfg, impls) for m in mods}
    script_res = {script_key(m): run_script(m, cfg_name) for m in scripts}
    gpu_res = {}
    ok, gpu_note = (False, "--no-gpu was given") if args.no_gpu else gpu_available()
    if ok:
        gpu_res = {m.NAME: run_workload(m, "gpu", cfg, impls) for m in mods}
    elapsed = time.perf_counter() - t0
    mach["load_after"] = load_average()

    text = report(cfg_name, cfg, mods, cpu_res, gpu_res, gpu_note, imports, mach, started,
                  elapsed, partial=wanted is not None or impls is not None,
                  command_args=_shown_args(argv if argv is not None else sys.argv[1:]),
                  scripts=scripts, script_res=script_res)
    raw_dir = os.path.join(REPO, "benchmarks", "results")
    os.makedirs(raw_dir, exist_ok=True)
    with open(os.path.join(raw_dir, "latest.json"), "w") as f:
        json.dump({"machine": mach, "config": cfg, "imports": imports, "cpu": cpu_res,
                   "scripts": script_res,
                   "gpu": gpu_res, "elapsed_s": elapsed}, f, indent=1, default=str)
    if args.no_write:
        print(text)
    else:
        write_report(args.output, text)
        log(f"wrote {os.path.relpath(args.output, REPO)} ({elapsed:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
