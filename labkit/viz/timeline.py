"""``lk.viz.timeline``: a profile drawn as one lane per device and thread/stream.

The picture is SVG written directly (no graphviz): time runs left to right, one lane per
``(device, lane)`` of the events, each op a bar coloured by its kind (matmul / conv,
elementwise, reduction, shape / index, state, fused, transfer, control). Dashed vertical lines
mark the step boundaries (``prof.step()``, one per ``lk.function`` call). Hovering a bar shows
the op, its node, device, lane, duration, bytes and step (an SVG ``<title>``). A ``send`` and
the ``recv`` that takes its value (events named ``send_X`` / ``recv_X``, as partitioning names
them) are joined by a purple arrow from one lane to the other.

``timeline(prof, step=k)`` draws one step only. In a live notebook with anywidget installed
the picture shows as the timeline explorer (``lk.viz.timeline_explorer``: canvas, zoom and pan,
range totals, search, details), with this SVG beside it in the output for nbval, nbconvert
and GitHub; ``.explorer()`` returns that widget. A ``Profile`` shown in a notebook (``prof`` as
a cell's last line) is this picture.

>>> import labkit as lk
>>> with lk.profile() as prof:
...     y = (lk.ones(8, 8) @ lk.ones(8, 8)).relu().sum()
>>> pic = lk.viz.timeline(prof)
>>> pic.svg().startswith("<svg") and "matmul" in pic.svg()
True
"""
import html
import re

from ..profiler.flows import arrows
from . import style

WIDTH = 960             # pixels, the whole picture
LABEL_W = 150           # the lane names on the left
LANE_H = 22             # one row of bars
LANE_GAP = 6
TOP = 34                # the time axis above the lanes
MIN_BAR = 1.0           # a bar is at least this wide (pixels), however short the op

# What a bar's colour says: the kind of op (by the module its kernel is declared in).
KIND_COLORS = {
    "matmul / conv": style.DEVICE_PALETTE[0],
    "elementwise": style.DEVICE_PALETTE[2],
    "reduction": style.DEVICE_PALETTE[1],
    "shape / index": style.DEVICE_PALETTE[9],
    "fused": style.DEVICE_PALETTE[5],
    "state": style.KIND["capture"],
    "transfer": style.TRANSFER,
    "control": style.CONTROL,
    "pull / push": style.TRANSFER,                      # parameter-server traffic
    "compute": style.DEVICE_PALETTE[0],
    # a rank's own deliberate sleep (ParameterServer's straggler=): time it spends on
    # itself, not waiting for others (a pull that blocks on the server is "pull / push")
    "injected delay": style.DEVICE_PALETTE[7],
    "apply": style.KIND["capture"],
    # a pipeline schedule's actions and the rounds a device waits (labkit.distributed)
    "forward": style.ROLE["forward"],
    "backward": style.ROLE["backward"],
    "bubble": ("#fef2f2", "#ef4444"),
    "other": style.UNKNOWN,
}
# The phases a parameter-server run records (labkit.dist.parameter_server), by kind.
_PHASE_KIND = {"ps.pull": "pull / push", "ps.push": "pull / push", "ps.compute": "compute",
               "ps.straggle": "injected delay", "ps.apply": "apply",
               "forward": "forward", "backward": "backward", "bubble": "bubble"}
# A primitive's kind is that of the module of labkit/tensor/ops that declares its kernel...
_MODULE_KIND = {"linalg": "matmul / conv", "conv": "matmul / conv", "einsum": "matmul / conv",
                "quantized": "matmul / conv",
                "decompositions": "matmul / conv", "fft": "matmul / conv",
                "elementwise": "elementwise", "elementwise_math": "elementwise",
                "complex": "elementwise",
                "bitwise": "elementwise", "nn_kernels": "elementwise", "composite": "elementwise",
                "recurrent": "elementwise",
                "reduce": "reduction", "statistics": "reduction", "scan": "reduction",
                "norm": "reduction", "softmax": "reduction", "nll": "reduction",
                "loss": "reduction",
                "shape": "shape / index", "index": "shape / index", "layout": "shape / index",
                "scatter": "shape / index", "sorting": "shape / index",
                "state": "state", "checks": "state"}
# ... but for the ops of a module that holds more than one kind.
_OP_KIND = {"layer_norm": "reduction", "layer_norm_backward": "reduction",
            "layer_norm_affine": "reduction", "layer_norm_affine_backward": "reduction",
            "batch_norm": "reduction", "batch_norm_backward": "reduction",
            "channel_moments": "reduction", "channel_moments_backward": "elementwise",
            "max_pool": "reduction", "max_pool_backward": "reduction",
            "lstm_sequence": "matmul / conv", "lstm_sequence_backward": "matmul / conv",
            "lstm_layer": "matmul / conv", "lstm_layer_backward": "matmul / conv"}


def op_kind(op_name):
    """The colour group of an op: ``'matmul / conv'``, ``'elementwise'``, ``'transfer'``..."""
    if op_name in style.TRANSFER_OPS or op_name == "to_device" or op_name.startswith("mpi_"):
        return "transfer"       # (mpi_all_gather...: a collective between MPI ranks)
    if op_name == "fused":
        return "fused"
    if op_name in _PHASE_KIND:
        return _PHASE_KIND[op_name]
    if op_name in style.CONTROL_OPS or op_name in style.LOOP_OPS:
        return "control"
    if style.is_queue_op(op_name):
        return "state"
    if op_name in _OP_KIND:
        return _OP_KIND[op_name]
    from ..tensor.op import REGISTRY
    o = REGISTRY.get(op_name)
    module = getattr(getattr(o, "kernel", None), "__module__", "") or ""
    return _MODULE_KIND.get(module.rsplit(".", 1)[-1], "other")


# ---- small helpers ---------------------------------------------------------------------------
def _esc(text):
    return html.escape(str(text), quote=True)


def time_text(ns):
    """``1234`` -> ``'1.23 us'``; picks ns, us, ms or s."""
    ns = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def bytes_text(n):
    n = float(n or 0)
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def _nice_step(span, target=10):
    """A tick spacing of 1, 2 or 5 times a power of ten giving about ``target`` ticks."""
    import math
    if span <= 0:
        return 1.0
    raw = span / target
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * power >= raw:
            return m * power
    return 10 * power


def _lane_key(key):
    """Lanes by device, then the main thread first, then by name with numbers in number order
    (``stream 2`` before ``stream 10``)."""
    device, lane = key
    natural = [int(t) if i % 2 else t for i, t in enumerate(re.split(r"(\d+)", lane))]
    return (style._device_key(device or "?"), lane != "main", natural)


def event_details(e, t0=0):
    """Several lines describing one event (the tooltip of its bar, the widget's detail view)."""
    lines = [f"{e.op}  ({e.name})" if e.name and e.name != e.op else str(e.op),
             f"{e.device} · {e.lane} · step {e.step}",
             f"{time_text(e.duration_ns)}  (from {time_text(e.start_ns - t0)})"]
    if e.bytes_in or e.bytes_out:
        lines.append(f"in {bytes_text(e.bytes_in)} · out {bytes_text(e.bytes_out)}")
    shape, line = getattr(e, "shape", None), getattr(e, "line", None)
    if shape:
        lines.append(shape)
    if e.source:
        lines.append(f"source: {e.source}")
    if line:
        lines.append(line)
    return "\n".join(lines)


def _rows(events):
    """Within one lane, give each event a row so that bars never cover one another."""
    ends, rows = [], []
    for e in events:
        for r, end in enumerate(ends):
            if e.start_ns >= end:
                ends[r] = e.end_ns
                rows.append(r)
                break
        else:
            ends.append(e.end_ns)
            rows.append(len(ends) - 1)
    return rows, max(len(ends), 1)


def step_range(prof, step):
    """(start, end) in ns of step ``step``: from its first op to its last op's end."""
    events = [e for e in prof.events if e.step == step]
    if not events:
        raise ValueError(f"timeline: step {step} has no events; the profile has steps "
                         f"0..{len(prof.steps) - 1}")
    return min(e.start_ns for e in events), max(e.start_ns + e.duration_ns for e in events)


# ---- the picture -------------------------------------------------------------------------------
def timeline_svg(prof, step=None, width=WIDTH, title=None, selected=None):
    """The SVG text of the timeline (see the module docstring). ``step``: draw only that step;
    ``selected``: an event to outline (the widget's selection)."""
    events = list(prof.events)
    if step is not None:
        events = [e for e in events if e.step == step]
    if not events:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="40">'
                f'<text x="8" y="24" font-family="{style.FONT}" font-size="12" '
                f'fill="{style.MUTED}">empty profile: no op ran while it recorded</text></svg>')
    t0 = min(e.start_ns for e in events)
    t1 = max(e.end_ns for e in events)
    drawn_steps = {e.step for e in events}
    marks = [(s, t) for s, t in prof.step_marks if s in drawn_steps and t >= t0]
    t1 = max([t1] + [t for _, t in marks])
    span = max(t1 - t0, 1)
    plot_w = width - LABEL_W - 16
    scale = plot_w / span

    def x(t):
        return LABEL_W + (t - t0) * scale

    lanes = {}
    for e in events:
        lanes.setdefault((e.device, e.lane), []).append(e)
    keys = sorted(lanes, key=_lane_key)
    layout, y = {}, TOP
    for key in keys:
        evs = sorted(lanes[key], key=lambda e: (e.start_ns, -e.end_ns))
        rows, n_rows = _rows(evs)
        layout[key] = (y, n_rows, list(zip(evs, rows)))
        y += n_rows * LANE_H + LANE_GAP
    lanes_bottom = y
    used_kinds = []
    out = []
    font = f'font-family="{style.FONT}"'
    # lane backgrounds and names
    colors = style.device_colors([k[0] for k in keys])
    for key in keys:
        top, n_rows, _ = layout[key]
        fill, border = colors.get(key[0], style.UNKNOWN)
        h = n_rows * LANE_H
        out.append(f'<g class="lk-lane" data-device="{_esc(key[0])}" data-lane="{_esc(key[1])}">'
                   f'<rect x="0" y="{top}" width="{width}" height="{h}" fill="#f9fafb"/>'
                   f'<rect x="2" y="{top + 2}" width="5" height="{h - 4}" fill="{border}"/>'
                   f'<text x="12" y="{top + LANE_H / 2 + 4}" {font} font-size="11" '
                   f'font-weight="bold" fill="{style.TEXT}">{_esc(key[0])}</text>'
                   f'<text x="{12 + 7 * len(str(key[0])) + 6}" y="{top + LANE_H / 2 + 4}" '
                   f'{font} font-size="10" fill="{style.MUTED}">{_esc(key[1])}</text>'
                   f'<title>{_esc(key[0])} · {_esc(key[1])}: {len(lanes[key])} ops</title></g>')
    # time axis
    tick = _nice_step(span * 1.0)
    out.append(f'<g class="lk-axis"><line x1="{LABEL_W}" y1="{TOP - 4}" x2="{LABEL_W + plot_w}" '
               f'y2="{TOP - 4}" stroke="{style.MUTED}" stroke-width="0.8"/>')
    k = 0
    while k * tick <= span:
        tx = x(t0 + k * tick)
        out.append(f'<line x1="{tx:.1f}" y1="{TOP - 8}" x2="{tx:.1f}" y2="{lanes_bottom}" '
                   f'stroke="#e5e7eb" stroke-width="0.6"/>'
                   f'<text x="{tx:.1f}" y="{TOP - 11}" {font} font-size="9" '
                   f'fill="{style.MUTED}" text-anchor="middle">{time_text(k * tick)}</text>')
        k += 1
    out.append("</g>")
    # bars
    for key in keys:
        top, _, placed = layout[key]
        for e, row in placed:
            kind = op_kind(e.op)
            if kind not in used_kinds:
                used_kinds.append(kind)
            fill, border = KIND_COLORS[kind]
            bx, bw = x(e.start_ns), max((e.end_ns - e.start_ns) * scale, MIN_BAR)
            by = top + row * LANE_H + 3
            outline = (' stroke-width="2.5"' if e is selected else ' stroke-width="0.8"')
            label = ""
            if bw > 7 * len(e.op) + 6:
                label = (f'<text x="{bx + 3:.2f}" y="{by + LANE_H / 2 + 2}" {font} '
                         f'font-size="9" fill="{style.TEXT}" pointer-events="none">'
                         f'{_esc(e.op)}</text>')
            out.append(f'<g class="lk-op kind-{kind.split()[0]}" data-op="{_esc(e.op)}" '
                       f'data-step="{e.step}"><title>{_esc(event_details(e, t0))}</title>'
                       f'<rect x="{bx:.2f}" y="{by}" width="{bw:.2f}" height="{LANE_H - 6}" '
                       f'rx="2" fill="{fill}" stroke="{border}"{outline}/>{label}</g>')
    # step boundaries
    for s, t in marks:
        sx = x(t)
        out.append(f'<g class="lk-step" data-step="{s}"><line x1="{sx:.1f}" y1="{TOP - 4}" '
                   f'x2="{sx:.1f}" y2="{lanes_bottom}" stroke="{style.TEXT}" '
                   f'stroke-width="1" stroke-dasharray="4,3"/>'
                   f'<text x="{sx - 3:.1f}" y="{lanes_bottom + 10}" {font} font-size="9" '
                   f'fill="{style.TEXT}" text-anchor="end">end of step {s}</text>'
                   f'<title>end of step {s} at {time_text(t - t0)}</title></g>')
    # message arrows: send -> recv, push -> apply
    pairs = arrows(prof, events)
    tcolor = style.TRANSFER[1]
    for s, r in pairs:
        (st, _, sp), (rt, _, rp) = layout[(s.device, s.lane)], layout[(r.device, r.lane)]
        srow = next(row for e, row in sp if e is s)
        rrow = next(row for e, row in rp if e is r)
        y1 = st + srow * LANE_H + LANE_H / 2
        y2 = rt + rrow * LANE_H + LANE_H / 2
        x1, x2 = x(s.end_ns), x(r.end_ns)
        out.append(f'<g class="lk-transfer"><title>{_esc(s.name)} ({s.device}) → '
                   f'{_esc(r.name)} ({r.device}), step {s.step}: '
                   f'{bytes_text(s.bytes_in or r.bytes_out)}</title>'
                   f'<line x1="{x1:.2f}" y1="{y1:.1f}" x2="{x2:.2f}" y2="{y2:.1f}" '
                   f'stroke="{tcolor}" stroke-width="1.6" marker-end="url(#lk-arrow)"/></g>')
    # legend
    ly = lanes_bottom + 24
    head = title if title is not None else (
        f"{len(events)} ops on {len({e.device for e in events})} device(s), "
        f"{len(keys)} lane(s), {time_text(span)}"
        + (f" · step {step}" if step is not None else f" · {len(prof.steps)} step(s)"))
    legend = [f'<text x="4" y="{ly}" {font} font-size="11" font-weight="bold" '
              f'fill="{style.TEXT}">{_esc(head)}</text>']
    lx = 4
    ly += 16
    for kind in sorted(used_kinds, key=list(KIND_COLORS).index):
        fill, border = KIND_COLORS[kind]
        legend.append(f'<rect x="{lx}" y="{ly - 9}" width="12" height="10" fill="{fill}" '
                      f'stroke="{border}"/><text x="{lx + 16}" y="{ly}" {font} font-size="10" '
                      f'fill="{style.TEXT}">{_esc(kind)}</text>')
        lx += 16 + 6 * len(kind) + 16
    if pairs:
        legend.append(f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 18}" y2="{ly - 4}" '
                      f'stroke="{tcolor}" stroke-width="1.6" marker-end="url(#lk-arrow)"/>'
                      f'<text x="{lx + 24}" y="{ly}" {font} font-size="10" fill="{style.TEXT}">'
                      f'messages between lanes ({len(pairs)})</text>')
        lx += 24 + 6 * 28 + 16
    if marks:
        legend.append(f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 18}" y2="{ly - 4}" '
                      f'stroke="{style.TEXT}" stroke-dasharray="4,3"/><text x="{lx + 24}" '
                      f'y="{ly}" {font} font-size="10" fill="{style.TEXT}">step boundary</text>')
    height = ly + 10
    defs = (f'<defs><marker id="lk-arrow" viewBox="0 0 10 10" refX="9" refY="5" '
            f'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
            f'<path d="M 0 0 L 10 5 L 0 10 z" fill="{tcolor}"/></marker></defs>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height:.0f}" '
            f'viewBox="0 0 {width} {height:.0f}" class="lk-timeline">{defs}'
            f'<rect width="100%" height="100%" fill="white"/>'
            + "".join(out) + "".join(legend) + "</svg>")


class TimelinePicture:
    """A timeline drawing: ``.svg()``, ``.save(path)`` (``.svg``), shown inline in a notebook."""

    kind = "timeline"

    def __init__(self, profile, step=None, width=WIDTH, title=None):
        self.profile = profile
        self.step = step
        self.width = width
        self.title = title
        self._svg = None

    def svg(self):
        if self._svg is None:
            self._svg = timeline_svg(self.profile, self.step, self.width, self.title)
        return self._svg

    def save(self, path):
        import os
        path = os.fspath(path)
        if not path.endswith(".svg"):
            raise ValueError("TimelinePicture.save writes SVG: give a path ending in .svg")
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.svg())
        return path

    def explorer(self):
        """The interactive timeline explorer of this profile (needs anywidget; see
        ``lk.viz.timeline_explorer``), opened at this picture's step."""
        from .timeline_explorer import timeline_explorer
        return timeline_explorer(self.profile, self.step, self.title)

    def _repr_svg_(self):
        return self.svg()

    def _repr_mimebundle_(self, include=None, exclude=None):
        """The SVG, and with anywidget installed the explorer too: a live notebook shows the
        explorer, anything without a widget front end (nbval, nbconvert, GitHub) the SVG."""
        from .timeline_explorer import have_anywidget
        from .widgets import widget_bundle
        box = self.explorer() if have_anywidget() and self.profile.events else None
        return widget_bundle(box, self.svg(), repr(self), mime="image/svg+xml")

    def __repr__(self):
        what = f"step {self.step} of " if self.step is not None else ""
        return f"<timeline picture of {what}{self.profile!r}: .svg(), .save(path)>"


def timeline(prof, step=None, width=WIDTH, title=None):
    """Draw a profile as a timeline (one lane per device and thread/stream); returns a
    ``TimelinePicture`` that shows itself in a notebook. ``step``: just that step.

    ``prof`` is the ``Profile`` of a ``with lk.profile() as prof:`` block.
    """
    if not hasattr(prof, "events") or not hasattr(prof, "step_marks"):
        raise TypeError(f"lk.viz.timeline draws a Profile (from `with lk.profile() as prof:`), "
                        f"not a {type(prof).__name__}")
    if step is not None:
        step_range(prof, step)   # a clear error for a step with no events
    return TimelinePicture(prof, step, width, title)
