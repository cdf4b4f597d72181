"""Export a Profile in the Trace Event Format that Perfetto and chrome://tracing read: one
process track per device, one thread track per lane (a thread, or a GPU stream), a slice per op,
an instant per step end, and a flow arrow per message (a send and its recv, a parameter-server
push and the apply that used it: ``labkit.profiler.flows``)."""
from .flows import arrows


def chrome_trace(prof):
    devices = prof.devices()
    pid = {d: i for i, d in enumerate(devices)}
    t0 = prof.start_ns or min((e.start_ns for e in prof.events), default=0)
    events = []
    for d in devices:
        events.append({"name": "process_name", "ph": "M", "pid": pid[d], "tid": 0,
                       "args": {"name": d}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": pid[d], "tid": 0,
                       "args": {"sort_index": pid[d]}})
    lanes = {}
    for e in prof.events:
        key = (e.device, e.lane)
        if key not in lanes:
            lanes[key] = len([k for k in lanes if k[0] == e.device])
            events.append({"name": "thread_name", "ph": "M", "pid": pid[e.device],
                           "tid": lanes[key], "args": {"name": e.lane}})
        events.append({
            "name": e.op, "cat": e.source, "ph": "X", "pid": pid[e.device], "tid": lanes[key],
            "ts": (e.start_ns - t0) / 1e3, "dur": e.duration_ns / 1e3,
            "args": {"node": e.name, "step": e.step, "bytes_in": e.bytes_in,
                     "bytes_out": e.bytes_out}})
    for k, (a, b) in enumerate(arrows(prof)):
        for e, phase in ((a, {"ph": "s"}), (b, {"ph": "f", "bp": "e"})):
            events.append({"name": f"{a.op} -> {b.op}", "cat": "message", "id": k,
                           "pid": pid[e.device], "tid": lanes[(e.device, e.lane)],
                           "ts": (e.start_ns - t0) / 1e3, **phase})
    for step, t in prof.step_marks:
        for d in devices:
            events.append({"name": f"end of step {step}", "ph": "i", "s": "p", "pid": pid[d],
                           "tid": 0, "ts": (t - t0) / 1e3})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"producer": "labkit"}}
