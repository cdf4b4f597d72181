"""One implementation of one workload, in a process of its own, driven by the runner.

Started as ``python -m benchmarks.worker MODULE IMPLEMENTATION DEVICE`` (MODULE: a module of
``benchmarks/workloads``, or ``corpus.NAME`` for a program of ``benchmarks/corpus``). It imports
only the library its implementation needs (so import cost and memory are that library's alone),
builds the seeded data, runs the agreement check, and then answers the runner's commands, one
JSON object per line on stdin, one JSON reply per line on the protocol pipe:

- ``{"cmd": "calibrate", "warmup_s": s, "target_s": t}``: warm up for about ``s`` seconds
  (at least two steps) and reply with how many steps make a sample of about ``t`` seconds;
- ``{"cmd": "measure", "n": n, "clock": "wall"}``: run ``n`` steps, reply with the seconds per
  step by that clock ("wall" or "cpu");
- ``{"cmd": "finish"}``: reply with the peak and the post-import resident memory, and exit.

Anything the implementation prints goes to stderr, so it cannot corrupt the protocol.
"""
import importlib
import json
import os
import sys
import time
import traceback


def _library(impl):
    if impl.startswith("labkit"):
        return "labkit"
    if impl == "torch":
        return "torch"
    return None


def main(argv):
    module_name, impl, device = argv
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)            # stray prints go to stderr
    sys.stdout = sys.stderr

    def reply(**msg):
        proto.write(json.dumps(msg) + "\n")
        proto.flush()

    from benchmarks import common
    lib = _library(impl)
    t0 = time.perf_counter()
    if lib:
        importlib.import_module(lib)
    import_s = time.perf_counter() - t0
    baseline = common.current_rss()

    try:
        if module_name.startswith("corpus."):         # a program of benchmarks/corpus
            from benchmarks.corpus.bench import workload
            mod = workload(module_name.split(".", 1)[1])
        else:
            mod = importlib.import_module(f"benchmarks.workloads.{module_name}")
        data = mod.data(common.rng())
        fp = common.fingerprint(data)
        bench = mod.IMPLS.factories[impl](data, device)
        # the generated inputs go now: an implementation that copied them into its own tensors
        # is measured holding its copy, not the harness's as well (one that uses them keeps them)
        del data
        check = [float(v) for v in bench.check()]
    except common.NotAvailable as exc:
        reply(ok=False, na=str(exc))
        return 0
    except Exception as exc:
        traceback.print_exc()
        reply(ok=False, error=f"{type(exc).__name__}: {exc}".splitlines()[0][:200])
        return 0
    reply(ok=True, check=check, fingerprint=fp, info=bench.info, import_s=import_s)

    for line in sys.stdin:
        msg = json.loads(line)
        cmd = msg["cmd"]
        try:
            if cmd == "calibrate":
                bench.sync()
                t_start = time.perf_counter()
                steps = 0
                while steps < 2 or time.perf_counter() - t_start < msg["warmup_s"]:
                    bench.step()
                    steps += 1
                bench.sync()
                per_step = (time.perf_counter() - t_start) / steps
                # time one more short sample with the warm step, for a better estimate
                per_step = min(per_step, common.timed(bench, max(1, min(steps, 5))))
                reply(ok=True, n=common.steps_for(per_step, msg["target_s"]), per_step=per_step)
            elif cmd == "measure":
                reply(ok=True, per_step=common.timed(bench, msg["n"], msg.get("clock", "wall")))
            elif cmd == "finish":
                reply(ok=True, peak_rss=common.peak_rss(), baseline_rss=baseline)
                return 0
            else:
                reply(ok=False, error=f"unknown command {cmd!r}")
        except Exception as exc:
            traceback.print_exc()
            reply(ok=False, error=f"{type(exc).__name__}: {exc}".splitlines()[0][:200])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
