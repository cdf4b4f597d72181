"""A profile as the timeline explorer's payload: one typed column per field, not one dict
per event.

``timeline_payload(prof)`` returns ``(payload, events)``: ``events`` is the profile's events in
the order the columns hold them, and ``payload`` a dict the explorer's front end reads (see
``frontend/src/timeline/events.js``)::

    {"n": 3, "title": ..., "columns": {"start": bytes, "dur": bytes, "lane": bytes, ...},
     "dtypes": {"start": "f64", "lane": "i32", ...},
     "strings": {"op": [...], "name": [...], "source": [...]},
     "lanes": [{"device", "lane", "fill", "stroke"}], "kinds": [{"name", "fill", "stroke",
     "used"}], "steps": [{"step", "start", "end", "mark"}], "arrows": bytes (send, recv pairs)}

Times are nanoseconds from the first event. Columns are little-endian bytes (a widget sends
them as binary buffers); ``decode_column`` reads one back.

>>> import labkit as lk
>>> with lk.profile() as prof:
...     y = (lk.ones(8, 8) @ lk.ones(8, 8)).sum()
>>> payload, events = timeline_payload(prof)
>>> payload["n"], [payload["strings"]["op"][i] for i in decode_column(payload, "op")]
(2, ['matmul', 'sum'])
"""
import numpy as np

from ..profiler.flows import arrows
from . import style
from .timeline import KIND_COLORS, _lane_key, op_kind, time_text

_DTYPES = {"f64": "<f8", "i32": "<i4"}
# Optional per-event facts, shown in the details panel when the profiler recorded them, and
# the name scope (module path) an op of a captured graph ran in, from its node's name.
_OPTIONAL = ("shape", "line", "scope")


def event_scope(e):
    """The name scope of the graph node an event ran (``'encoder/layers.0'`` of the node
    ``'encoder/layers.0/matmul'``): the module it belongs to. None for eager ops and for
    nodes outside every scope."""
    if e.source == "eager" or not e.name or "/" not in e.name:
        return None
    return e.name.rpartition("/")[0]


def decode_column(payload, name):
    """One column of a payload as a NumPy array."""
    dtype = payload["dtypes"][name]
    return np.frombuffer(payload["columns"][name], dtype=_DTYPES[dtype])


class _Table:
    """Strings stored once; each event holds an index into the list."""

    def __init__(self):
        self.index, self.values = {}, []

    def __call__(self, value):
        value = "" if value is None else str(value)
        k = self.index.get(value)
        if k is None:
            k = self.index[value] = len(self.values)
            self.values.append(value)
        return k


def timeline_payload(prof, title=None):
    """``(payload, events)`` for the explorer (see the module docstring)."""
    events = list(prof.events)
    n = len(events)
    t0 = min((e.start_ns for e in events), default=0)
    keys = sorted({(e.device, e.lane) for e in events}, key=_lane_key)
    lane_of = {k: i for i, k in enumerate(keys)}
    colors = style.device_colors([k[0] for k in keys])
    kinds = list(KIND_COLORS)
    kind_of = {}
    tables = {name: _Table() for name in ("op", "name", "source") + _OPTIONAL}
    cols = {"start": np.empty(n, "<f8"), "dur": np.empty(n, "<f8"), "lane": np.empty(n, "<i4"),
            "op": np.empty(n, "<i4"), "name": np.empty(n, "<i4"), "kind": np.empty(n, "<i4"),
            "step": np.empty(n, "<i4"), "bytes_in": np.empty(n, "<f8"),
            "bytes_out": np.empty(n, "<f8"), "source": np.empty(n, "<i4")}
    optional = {name: np.full(n, -1, "<i4") for name in _OPTIONAL}
    for i, e in enumerate(events):
        if e.op not in kind_of:
            kind_of[e.op] = kinds.index(op_kind(e.op))
        cols["start"][i] = e.start_ns - t0
        cols["dur"][i] = e.end_ns - e.start_ns
        cols["lane"][i] = lane_of[(e.device, e.lane)]
        cols["op"][i] = tables["op"](e.op)
        cols["name"][i] = tables["name"](e.name)
        cols["kind"][i] = kind_of[e.op]
        cols["step"][i] = e.step
        cols["bytes_in"][i] = e.bytes_in or 0
        cols["bytes_out"][i] = e.bytes_out or 0
        cols["source"][i] = tables["source"](e.source)
        for name in _OPTIONAL:
            value = event_scope(e) if name == "scope" else getattr(e, name, None)
            if value is not None:
                optional[name][i] = tables[name](value)
    for name, column in optional.items():
        if (column >= 0).any():
            cols[name] = column
    used = set(kind_of.values())
    marks = dict(prof.step_marks)
    steps = []
    for s in sorted({e.step for e in events}):
        mine = cols["step"] == s
        start = float(cols["start"][mine].min())
        end = float((cols["start"][mine] + cols["dur"][mine]).max())
        steps.append({"step": int(s), "start": start, "end": end,
                      "mark": float(marks[s] - t0) if s in marks and marks[s] >= t0 else None})
    where = {id(e): i for i, e in enumerate(events)}
    pairs = np.array([(where[id(s)], where[id(r)]) for s, r in arrows(prof, events)],
                     "<i4").reshape(-1)
    span = max((s["end"] for s in steps), default=0)
    head = title if title is not None else (
        f"{n} ops on {len({e.device for e in events})} device(s), {len(keys)} lane(s), "
        f"{time_text(span)} · {len(steps)} step(s)")
    payload = {
        "n": n, "title": head,
        "columns": {k: v.tobytes() for k, v in cols.items()},
        "dtypes": {k: "f64" if v.dtype.kind == "f" else "i32" for k, v in cols.items()},
        "strings": {k: t.values for k, t in tables.items() if k in cols or k in
                    ("op", "name", "source")},
        "lanes": [{"device": str(d), "lane": str(lane), "fill": colors.get(d, style.UNKNOWN)[0],
                   "stroke": colors.get(d, style.UNKNOWN)[1]} for d, lane in keys],
        "kinds": [{"name": k, "fill": KIND_COLORS[k][0], "stroke": KIND_COLORS[k][1],
                   "used": j in used} for j, k in enumerate(kinds)],
        "steps": steps,
        "arrows": pairs.tobytes(),
    }
    return payload, events
