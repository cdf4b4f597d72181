"""Time the corpus programs' training steps on PyTorch and labkit; write BENCHMARKS.md's corpus
section.

Usage::

    python benchmarks/corpus/run.py                  # every program, one thread and default
    python benchmarks/corpus/run.py --quick -p mnist -p vae
    python benchmarks/corpus/run.py --threads 1      # only the one-thread table
    python benchmarks/corpus/run.py --no-write       # print the section instead

The protocol is ``benchmarks/run.py``'s: each implementation (PyTorch eager, labkit eager, labkit
captured) in a worker process of its own importing only its library, all from PyTorch's initial
weights of the program (written first by ``benchmarks.corpus.bench.prepare``) and the same
batches, their first losses checked against PyTorch's before anything is timed, then samples
taken round-robin after a warm-up, the median reported. At one thread (``OMP``, ``OPENBLAS``,
``MKL`` and ``NUMEXPR_NUM_THREADS`` = 1) samples are CPU time, which does not count the time a
process waits for a core on a shared machine; at the libraries' default threads they are elapsed
time, since CPU time would add up every thread. The section sits after BENCHMARKS.md's keep
marker, between its own markers, so that ``benchmarks/run.py`` keeps it and this script replaces
only it.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from benchmarks import common, run as runner  # noqa: E402
from benchmarks.corpus import bench  # noqa: E402
from benchmarks.corpus.programs import PROGRAMS  # noqa: E402

START = "<!-- corpus section: written by benchmarks/corpus/run.py -->"
END = "<!-- end of the corpus section -->"
SETTINGS = {"full": dict(repeats=9, warmup_s=1.0, target_s=0.5),
            "quick": dict(repeats=3, warmup_s=0.2, target_s=0.1)}
TARGETS = {"eager_max": 1.2, "eager_median": 1.0, "captured_median": 0.8, "memory": 1.0}


def prepare_weights(names):
    env = runner.child_env()
    for name in names:
        p = subprocess.run([sys.executable, "-m", "benchmarks.corpus.bench", "prepare", name],
                           cwd=REPO, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"preparing {name}'s weights failed:\n{p.stderr[-2000:]}")


def measure(names, threads, cfg, impls=None, saved=None):
    """{program: run_workload's results} with ``threads`` threads (None: the defaults); each
    program's results also go into ``saved`` (a dict written to latest.json) as they come, so
    that an interrupted run keeps what it measured (``--report-only`` writes the section from
    it)."""
    runner._threads = threads
    cfg = dict(cfg, clock="cpu" if threads == 1 else "wall")
    out = {}
    for name in names:
        out[name] = runner.run_workload(bench.workload(name), "cpu", cfg, impls)
        if saved is not None:
            saved.setdefault(str(threads), {})[name] = out[name]
            _save(saved)
    return out


def _save(saved):
    os.makedirs(bench.RESULTS, exist_ok=True)
    with open(os.path.join(bench.RESULTS, "latest.json"), "w") as f:
        json.dump(saved, f, indent=1, default=str)


def ratio(res, impl):
    return runner.ratio(res, impl, "torch")


def after_import(r):
    return r["peak_rss"] - r["baseline_rss"]


def median(values):
    values = [v for v in values if v is not None]
    return common.median(values) if values else None


def fmt_ratio(r):
    return "-" if r is None else f"{r:.2f}x"


def table(names, results):
    rows = ["| program | PyTorch eager (ms/step) | labkit eager | labkit captured | "
            "eager / PyTorch | captured / PyTorch | peak RSS, labkit eager / PyTorch (MB) | "
            "memory after import, labkit eager / PyTorch (MB) | losses agree (max rel. diff, "
            "eager / captured) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name in names:
        res = results.get(name, {})
        t, e, c = (res.get(k, {}) for k in ("torch", "labkit_eager", "labkit_captured"))
        mem = peak = "-"
        if "peak_rss" in e and "peak_rss" in t:
            peak = f"{runner.mb(e['peak_rss'])} / {runner.mb(t['peak_rss'])}"
            mem = f"{runner.mb(after_import(e))} / {runner.mb(after_import(t))}"
        check = " / ".join(f"{r['check_diff']:.0e}" if "check_diff" in r else "-"
                           for r in (e, c))
        cells = [runner.cell(res.get(k)) for k in ("torch", "labkit_eager", "labkit_captured")]
        rows.append(f"| {name} | {' | '.join(cells)} | "
                    f"{fmt_ratio(ratio(res, 'labkit_eager'))} | "
                    f"{fmt_ratio(ratio(res, 'labkit_captured'))} | {peak} | {mem} | {check} |")
    return rows


def summary(names, results):
    names = [n for n in names if n in results]
    eager = [ratio(results[n], "labkit_eager") for n in names]
    captured = [ratio(results[n], "labkit_captured") for n in names]
    worst = max((r, n) for r, n in zip(eager, names) if r is not None) if any(eager) else None
    mem = []
    for n in names:
        e, t = results[n].get("labkit_eager", {}), results[n].get("torch", {})
        if "peak_rss" in e and "peak_rss" in t:
            mem.append((after_import(e) / max(after_import(t), 1), n))
    lines = []
    if worst:
        over = [n for r, n in zip(eager, names) if r is not None and r > TARGETS["eager_max"]]
        lines.append(f"- labkit eager: median {fmt_ratio(median(eager))} (target <= "
                     f"{TARGETS['eager_median']}x), worst {fmt_ratio(worst[0])} ({worst[1]}; "
                     f"target <= {TARGETS['eager_max']}x for every program: "
                     f"{'met' if not over else 'missed by ' + ', '.join(over)})")
    if any(captured):
        lines.append(f"- labkit captured: median {fmt_ratio(median(captured))} (target <= "
                     f"{TARGETS['captured_median']}x)")
    if mem:
        over = [n for r, n in mem if r > TARGETS["memory"]]
        lines.append(f"- memory after import, labkit eager / PyTorch: median "
                     f"{fmt_ratio(median([r for r, _ in mem]))}, worst "
                     f"{fmt_ratio(max(mem)[0])} ({max(mem)[1]}); above PyTorch's: "
                     f"{', '.join(over) if over else 'none'}")
    return lines


def section(names, by_threads, cfg_name, cfg, mach, started, elapsed, argv):
    L = [START, "", "## Corpus: real PyTorch programs, ported by their import lines", ""]
    L.append(f"Written by `python benchmarks/corpus/run.py{''.join(' ' + a for a in argv)}` on "
             f"{started:%Y-%m-%d %H:%M} UTC ({cfg_name} run, {elapsed:.0f} s) on {mach['cpu']}, "
             f"{mach['usable_cores']} usable cores, load average {mach['load'][0]:.2f} at the "
             f"start and {mach.get('load_after', mach['load'])[0]:.2f} at the end; "
             f"{mach['versions']}. The "
             f"programs are `examples/programs/` (see its README), each step the body of the "
             f"program's training loop (`benchmarks/corpus/programs.py`): PyTorch eager, labkit "
             f"eager on the ported program, and labkit captured (`lk.function` over the step), "
             f"each in its own process, from PyTorch's initial weights and the same batches. "
             f"Each number is the median of {cfg['repeats']} samples of about "
             f"{cfg['target_s']} s taken round-robin after a warm-up. Before timing, each "
             f"implementation's losses over the program's first steps must agree with "
             f"PyTorch's within 1e-4 (the last column: largest relative difference; ResNet-18's "
             f"check runs in float64, see `programs.py`). Peak RSS is the worker's high-water "
             f"mark (PyTorch's library alone is about 220 MB of it); memory after import is that "
             f"mark minus the process's size after importing its library.")
    for threads, results in by_threads.items():
        L.append("")
        if threads == 1:
            L.append("### One thread (CPU time)")
        else:
            L.append("### The libraries' default threads (elapsed time)")
        L.append("")
        L += table(names, results)
        L.append("")
        L += summary(names, results)
    L += ["", END]
    return "\n".join(L)


def write_section(path, text):
    with open(path) as f:
        old = f.read()
    if START in old:
        head, rest = old.split(START, 1)
        tail = rest.split(END, 1)[1] if END in rest else ""
        new = head + text + tail
    elif runner.KEEP_MARKER in old:
        head, kept = old.split(runner.KEEP_MARKER, 1)
        new = head + runner.KEEP_MARKER + "\n\n" + text + "\n" + kept
    else:
        new = old.rstrip("\n") + "\n\n" + runner.KEEP_MARKER + "\n\n" + text + "\n"
    with open(path, "w") as f:
        f.write(new)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-p", "--program", action="append", choices=sorted(PROGRAMS),
                    help="only this program (may be repeated)")
    ap.add_argument("--quick", action="store_true", help="fewer, shorter samples")
    ap.add_argument("--threads", choices=("1", "default", "both"), default="both")
    ap.add_argument("--impl", action="append", help="only these implementations")
    ap.add_argument("--no-write", action="store_true", help="print the section, write nothing")
    ap.add_argument("--output", default=os.path.join(REPO, "BENCHMARKS.md"))
    ap.add_argument("--report-only", action="store_true",
                    help="write the section from the results an earlier run saved "
                         "(benchmarks/results/corpus/latest.json), measuring nothing")
    args = ap.parse_args(argv)
    names = args.program or list(PROGRAMS)
    cfg_name = "quick" if args.quick else "full"
    cfg = SETTINGS[cfg_name]
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.perf_counter()
    mach = runner.machine()
    mach["load"] = runner.load_average() or (0.0,)
    mach["versions"] = (f"Python {mach['python']}, NumPy {mach['numpy']}, PyTorch "
                        f"{mach['torch']}, labkit {mach['labkit']}")
    if args.report_only:
        with open(os.path.join(bench.RESULTS, "latest.json")) as f:
            saved = json.load(f)
        mach, started, elapsed = saved["machine"], datetime.datetime.fromisoformat(
            saved["started"]), saved["elapsed_s"]
        by_threads = {1 if k == "1" else None: v for k, v in saved.items()
                      if k in ("1", "None")}
        names = [n for n in PROGRAMS if any(n in r for r in by_threads.values())]
        text = section(names, by_threads, saved["config"], SETTINGS[saved["config"]], mach,
                       started, elapsed, saved["argv"])
    else:
        saved = {"machine": mach, "started": started.isoformat(), "config": cfg_name,
                 "argv": [a for a in argv if not a.startswith("--output")], "elapsed_s": 0.0}
        runner._threads = 1
        prepare_weights(names)
        settings = {"1": [1], "default": [None], "both": [1, None]}[args.threads]
        by_threads = {}
        for threads in settings:
            runner.log(f"--- {'one thread' if threads == 1 else 'default threads'} ---")
            by_threads[threads] = measure(names, threads, cfg,
                                          set(args.impl) if args.impl else None, saved)
            mach["load_after"] = runner.load_average() or (0.0,)
            saved["elapsed_s"] = time.perf_counter() - t0
            _save(saved)
        elapsed = time.perf_counter() - t0
        text = section(names, by_threads, cfg_name, cfg, mach, started, elapsed, saved["argv"])
    if args.no_write:
        print(text)
    else:
        write_section(args.output, text)
        runner.log(f"wrote the corpus section of {os.path.relpath(args.output, REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
