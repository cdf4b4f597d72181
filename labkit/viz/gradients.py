"""``lk.viz.gradients``: per-parameter gradient norms and histograms across training steps, and
the gradient flow drawn on a captured graph.

``monitor = lk.viz.gradients(model)`` returns a ``GradientMonitor``; call ``monitor.record()``
after each ``loss.backward()`` (before ``opt.zero_grad()``). It keeps, per parameter and step,
the L2 norm of the gradient, the parameter's own norm, the count of NaN / Inf entries, and a
histogram of ``log10 |g|`` over fixed bins, so histograms of different steps line up. Its
picture (SVG written directly; shown inline, ``.svg()``, ``.save(path)``) has

- a chart of every parameter's gradient norm per step on a log scale; vanishing (below
  ``vanish``) and exploding (above ``explode``) bands are shaded, and a step whose gradient has a
  NaN or an Inf is marked with a red cross;
- one strip per parameter: the histogram of ``log10 |g|`` at each step (columns = steps,
  darker = more entries, as its colour scale shows), ticks at whole powers of ten, exact zeros
  (a dead ReLU's gradients) in a row of their own under it, framed in red when a NaN or an Inf
  appeared.

``monitor.flags()`` lists what went wrong, as text. ``gradient_flow(f, *args)`` draws the graph of
an ``lk.function`` with every edge that carries a gradient coloured and thickened by the
gradient's norm (computed for the example arguments, without running any update), and any
gradient holding a NaN or an Inf in red.

>>> import labkit as lk
>>> model = lk.nn.Linear(3, 2)
>>> monitor = lk.viz.gradients(model)
>>> model(lk.ones(4, 3)).sum().backward()
>>> monitor.record()
>>> sorted(monitor.norms)
['bias', 'weight']
>>> round(monitor.norms["bias"][-1], 3)    # each bias entry's gradient is 4 (the batch)
5.657
"""
import html
import math

import numpy as np

from . import style

BINS = np.linspace(-12.0, 4.0, 33)   # log10 |g|: from 1e-12 to 1e4, 32 bins
VANISH = 1e-7       # a gradient norm below this counts as vanishing
EXPLODE = 1e3       # and above this as exploding
NONFINITE = "#dc2626"
SERIES = [p[1] for p in style.DEVICE_PALETTE]   # line colours: the palette's borders


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _esc(text):
    return html.escape(str(text), quote=True)


class GradientMonitor:
    """Records gradient statistics of some parameters at each ``record()`` call.

    ``params``: a Module (its named parameters), a dict ``{name: tensor}``, or a list of tensors
    (named ``p0``, ``p1``...). ``.steps``: the step numbers recorded; ``.norms[name]``,
    ``.param_norms[name]``, ``.nan[name]``, ``.inf[name]``: one entry per recorded step
    (``nan`` as the norm of a missing gradient); ``.hist[name]``: one row of ``len(BINS) - 1``
    counts per step of the entries that are not zero (those below the first bin count in it);
    ``.zeros[name]``: how many entries were exactly zero.
    """

    def __init__(self, params, vanish=VANISH, explode=EXPLODE, bins=BINS):
        if hasattr(params, "named_parameters"):
            named = list(params.named_parameters())
        elif isinstance(params, dict):
            named = list(params.items())
        else:
            named = [(f"p{i}", p) for i, p in enumerate(params)]
        if not named:
            raise ValueError("lk.viz.gradients: no parameters to watch")
        self.params = named
        self.names = [n for n, _ in named]
        self.vanish, self.explode = vanish, explode
        self.bins = np.asarray(bins, dtype=np.float64)
        self.steps = []
        self.norms = {n: [] for n in self.names}
        self.param_norms = {n: [] for n in self.names}
        self.nan = {n: [] for n in self.names}
        self.inf = {n: [] for n in self.names}
        self.hist = {n: [] for n in self.names}
        self.zeros = {n: [] for n in self.names}

    def record(self, step=None):
        """Read every parameter's ``.grad`` now (after ``backward()``). ``step``: its number
        (default: one more than the last)."""
        self.steps.append(step if step is not None else (self.steps[-1] + 1 if self.steps else 0))
        for name, p in self.params:
            g = p.grad
            data = _host(p._data).astype(np.float64, copy=False)
            self.param_norms[name].append(float(np.sqrt((data * data).sum())))
            if g is None:
                self.norms[name].append(float("nan"))
                self.nan[name].append(0)
                self.inf[name].append(0)
                self.hist[name].append(np.zeros(len(self.bins) - 1, dtype=np.int64))
                self.zeros[name].append(0)
                continue
            a = _host(g._data).astype(np.float64, copy=False).reshape(-1)
            nan, inf = int(np.isnan(a).sum()), int(np.isinf(a).sum())
            self.nan[name].append(nan)
            self.inf[name].append(inf)
            self.norms[name].append(float(np.sqrt((a * a).sum())))   # nan or inf if any is
            finite = np.abs(a[np.isfinite(a)])
            self.zeros[name].append(int((finite == 0).sum()))
            finite = finite[finite > 0]          # zeros have no log: counted apart
            logs = np.log10(np.maximum(finite, 10.0 ** self.bins[0]))
            logs = np.minimum(logs, self.bins[-1])
            self.hist[name].append(np.histogram(logs, self.bins)[0])

    # ---- reading ----------------------------------------------------------------------------
    def flags(self):
        """What looks wrong, one line each: NaN / Inf gradients, vanishing and exploding norms."""
        out = []
        for name in self.names:
            for step, norm, nan, inf in zip(self.steps, self.norms[name], self.nan[name],
                                            self.inf[name]):
                if nan or inf:
                    out.append(f"step {step}: {name} gradient has {nan} NaN and {inf} Inf")
                elif norm < self.vanish:
                    out.append(f"step {step}: {name} gradient vanishing (norm {norm:.2e})")
                elif norm > self.explode:
                    out.append(f"step {step}: {name} gradient exploding (norm {norm:.2e})")
        return out

    def has_nonfinite(self, name=None):
        names = self.names if name is None else [name]
        return any(any(self.nan[n]) or any(self.inf[n]) for n in names)

    def summary(self):
        """A text table: per parameter, its shape, last gradient norm, ratio to the parameter
        norm, and NaN / Inf counts over all steps."""
        lines = [f"{'parameter':<28}{'shape':>14}{'grad norm':>12}{'/ param':>10}{'NaN/Inf':>9}"]
        for name, p in self.params:
            g = self.norms[name][-1] if self.steps else float("nan")
            w = self.param_norms[name][-1] if self.steps else float("nan")
            bad = sum(self.nan[name]) + sum(self.inf[name])
            ratio = g / w if w and math.isfinite(g) else float("nan")
            lines.append(f"{name:<28}{str(tuple(p.shape)):>14}{g:>12.3e}{ratio:>10.2e}"
                         f"{bad:>9}")
        return "\n".join(lines)

    def __repr__(self):
        bad = " (NaN/Inf seen)" if self.has_nonfinite() else ""
        return (f"<GradientMonitor: {len(self.names)} parameters, {len(self.steps)} steps "
                f"recorded{bad}; .record() after backward(), .flags(), .svg()>")

    # ---- the picture -------------------------------------------------------------------------
    def svg(self, width=760, max_params=12):
        return gradients_svg(self, width, max_params)

    def save(self, path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.svg())
        return path

    def _repr_svg_(self):
        return self.svg()


def gradients(params, vanish=VANISH, explode=EXPLODE):
    """A ``GradientMonitor`` of ``params`` (a Module, a dict of tensors, or a list of tensors):
    call ``.record()`` after each backward; it draws norms and histograms per step."""
    return GradientMonitor(params, vanish=vanish, explode=explode)


# ---- drawing the monitor ----------------------------------------------------------------------
def _log_ticks(lo, hi):
    return [10.0 ** k for k in range(math.floor(lo), math.ceil(hi) + 1)]


def gradients_svg(mon, width=760, max_params=12):
    font = f'font-family="{style.FONT}"'
    names = mon.names[:max_params]
    out = []
    n_steps = len(mon.steps)
    left, right = 64, 170          # the y axis labels; the legend on the right
    cw, ch, top = width - left - right, 190, 26
    title = (f"gradient norms · {len(mon.names)} parameters · {n_steps} step(s)"
             + (f" (first {max_params} drawn)" if len(mon.names) > max_params else ""))
    out.append(f'<text x="4" y="16" {font} font-size="12" font-weight="bold" '
               f'fill="{style.TEXT}">{_esc(title)}</text>')
    finite = [v for n in names for v in mon.norms[n] if math.isfinite(v) and v > 0]
    if not n_steps:
        out.append(f'<text x="4" y="40" {font} font-size="11" fill="{style.MUTED}">nothing '
                   f'recorded yet: call .record() after loss.backward()</text>')
        return _svg(width, 50, out)
    lo = math.log10(min(finite)) if finite else -1.0
    hi = math.log10(max(finite)) if finite else 1.0
    lo, hi = math.floor(lo - 0.2), math.ceil(hi + 0.2)
    if hi - lo < 2:
        lo, hi = lo - 1, hi + 1

    def sx(i):
        return left + (cw * i / (n_steps - 1) if n_steps > 1 else cw / 2)

    def sy(v):
        return top + ch * (hi - math.log10(v)) / (hi - lo)

    # plot frame, bands, ticks
    out.append(f'<rect x="{left}" y="{top}" width="{cw}" height="{ch}" fill="#f9fafb" '
               f'stroke="#e5e7eb"/>')
    for edge, text, above in ((mon.vanish, "vanishing", False), (mon.explode, "exploding", True)):
        e = math.log10(edge)
        if lo < e < hi:
            y = sy(edge)
            y0, h = (top, y - top) if above else (y, top + ch - y)
            out.append(f'<rect x="{left}" y="{y0:.1f}" width="{cw}" height="{h:.1f}" '
                       f'fill="#fee2e2" opacity="0.6"><title>{text}: norm '
                       f'{"above" if above else "below"} {edge:g}</title></rect>'
                       f'<text x="{left + 4}" y="{(y0 + 11):.1f}" {font} font-size="9" '
                       f'fill="{NONFINITE}">{text}</text>')
    for t in _log_ticks(lo, hi):
        y = sy(t)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + cw}" y2="{y:.1f}" '
                   f'stroke="#e5e7eb" stroke-width="0.6"/><text x="{left - 4}" y="{y + 3:.1f}" '
                   f'{font} font-size="9" fill="{style.MUTED}" text-anchor="end">'
                   f'1e{round(math.log10(t))}'
                   f'</text>')
    every = max(1, n_steps // 10)
    for i in range(0, n_steps, every):
        out.append(f'<text x="{sx(i):.1f}" y="{top + ch + 12}" {font} font-size="9" '
                   f'fill="{style.MUTED}" text-anchor="middle">{mon.steps[i]}</text>')
    out.append(f'<text x="{left + cw / 2}" y="{top + ch + 24}" {font} font-size="9" '
               f'fill="{style.MUTED}" text-anchor="middle">step</text>')
    # one line per parameter; red crosses where the gradient was not finite
    for k, name in enumerate(names):
        color = SERIES[k % len(SERIES)]
        pts, runs = [], []
        for i, v in enumerate(mon.norms[name]):
            if math.isfinite(v) and v > 0:
                pts.append(f"{sx(i):.1f},{sy(v):.1f}")
            elif pts:
                runs.append(pts)
                pts = []
        if pts:
            runs.append(pts)
        for run in runs:
            if len(run) > 1:
                out.append(f'<polyline points="{" ".join(run)}" fill="none" stroke="{color}" '
                           f'stroke-width="1.5"><title>{_esc(name)}</title></polyline>')
        for i, v in enumerate(mon.norms[name]):
            tip = (f"{name} · step {mon.steps[i]}: grad norm {v:.3e}, param norm "
                   f"{mon.param_norms[name][i]:.3e}")
            if mon.nan[name][i] or mon.inf[name][i]:
                x, y = sx(i), top + 8
                tip += f" · {mon.nan[name][i]} NaN, {mon.inf[name][i]} Inf"
                out.append(f'<g class="lk-nonfinite"><title>{_esc(tip)}</title>'
                           f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ch}" '
                           f'stroke="{NONFINITE}" stroke-width="1" stroke-dasharray="3,3"/>'
                           f'<path d="M{x - 4:.1f},{y - 4} L{x + 4:.1f},{y + 4} M{x - 4:.1f},'
                           f'{y + 4} L{x + 4:.1f},{y - 4}" stroke="{NONFINITE}" '
                           f'stroke-width="2.2"/></g>')
            elif math.isfinite(v) and v > 0:
                out.append(f'<circle cx="{sx(i):.1f}" cy="{sy(v):.1f}" r="2.2" fill="{color}">'
                           f'<title>{_esc(tip)}</title></circle>')
        ly = top + 10 + 14 * k
        bad = mon.has_nonfinite(name)
        out.append(f'<line x1="{left + cw + 10}" y1="{ly - 3}" x2="{left + cw + 26}" '
                   f'y2="{ly - 3}" stroke="{color}" stroke-width="2"/><text x="{left + cw + 30}" '
                   f'y="{ly}" {font} font-size="10" fill="{NONFINITE if bad else style.TEXT}">'
                   f'{_esc(_clip(name, 22))}{" (NaN/Inf)" if bad else ""}</text>')
    # histograms: one strip per parameter, columns = steps, rows = log10 |g| bins
    y = top + ch + 40
    out.append(f'<text x="4" y="{y}" {font} font-size="12" font-weight="bold" '
               f'fill="{style.TEXT}">histograms of |gradient| per step (log scale)</text>')
    out.append(_shade_scale(width - 250, y - 10, font))
    y += 8
    cols, gap = 2, 14
    sw = (width - 8 - gap * (cols - 1)) / cols
    sh = 64
    nb = len(mon.bins) - 1
    for k, name in enumerate(names):
        cx = 4 + (k % cols) * (sw + gap)
        cy = y + (k // cols) * (sh + 30)
        hist = np.asarray(mon.hist[name], dtype=np.float64)     # steps x bins
        bad = mon.has_nonfinite(name)
        last = mon.norms[name][-1]
        out.append(f'<text x="{cx}" y="{cy + 12}" {font} font-size="10" '
                   f'fill="{NONFINITE if bad else style.TEXT}">{_esc(_clip(name, 36))} · last '
                   f'norm {last:.2e}{" · NaN/Inf seen" if bad else ""}</text>')
        px, py, pw = cx + 36, cy + 16, sw - 36
        out.append(f'<rect x="{px}" y="{py}" width="{pw:.1f}" height="{sh}" fill="white" '
                   f'stroke="{NONFINITE if bad else "#d1d5db"}" '
                   f'stroke-width="{2 if bad else 1}"/>')
        # the y range of this strip: the bins that ever had entries
        used = np.nonzero(hist.sum(axis=0))[0]
        b0, b1 = (int(used[0]), int(used[-1]) + 1) if len(used) else (0, nb)
        rows = b1 - b0
        colw, rowh = pw / n_steps, sh / rows
        peak = hist.max() or 1.0
        cells = []
        for i in range(n_steps):
            for b in range(b0, b1):
                c = hist[i, b]
                if c <= 0:
                    continue
                shade = _shade(c / peak)
                cells.append(f'<rect x="{px + i * colw:.1f}" y="{py + (b1 - 1 - b) * rowh:.1f}" '
                             f'width="{colw + 0.3:.1f}" height="{rowh + 0.3:.1f}" '
                             f'fill="{style.ROLE["backward"][1]}" fill-opacity="{shade:.2f}">'
                             f'<title>step {mon.steps[i]}: {int(c)} entries with |g| in '
                             f'{_power(mon.bins[b])}..{_power(mon.bins[b + 1])}</title></rect>')
            z = mon.zeros[name][i]
            if z:
                cells.append(f'<rect x="{px + i * colw:.1f}" y="{py + sh + 2}" '
                             f'width="{colw + 0.3:.1f}" height="5" fill="{style.MUTED}" '
                             f'fill-opacity="{_shade(z / max(z, peak)):.2f}"><title>step '
                             f'{mon.steps[i]}: {z} entries exactly 0</title></rect>')
            if mon.nan[name][i] or mon.inf[name][i]:
                cells.append(f'<rect x="{px + i * colw:.1f}" y="{py}" width="{max(colw, 2):.1f}" '
                             f'height="3" fill="{NONFINITE}"><title>step {mon.steps[i]}: '
                             f'{mon.nan[name][i]} NaN, {mon.inf[name][i]} Inf</title></rect>')
        out.extend(cells)
        lo, hi = mon.bins[b0], mon.bins[b1]
        ticks = [e for e in range(math.ceil(lo), math.floor(hi) + 1)] or [lo, hi]
        for e in ticks:                  # whole powers of ten (both ends if there are none)
            ty = py + sh * (hi - e) / (hi - lo)
            out.append(f'<line x1="{px - 2}" y1="{ty:.1f}" x2="{px}" y2="{ty:.1f}" '
                       f'stroke="{style.MUTED}"/><text x="{px - 3}" y="{ty + 3:.1f}" {font} '
                       f'font-size="8" fill="{style.MUTED}" text-anchor="end">'
                       f'{_power(e)}</text>')
        if any(mon.zeros[name]):
            out.append(f'<text x="{px - 3}" y="{py + sh + 7}" {font} font-size="8" '
                       f'fill="{style.MUTED}" text-anchor="end">= 0</text>')
    height = y + ((len(names) + cols - 1) // cols) * (sh + 30) + 4
    return _svg(width, height, out)


def _shade(f):
    """The opacity of a histogram cell holding the fraction ``f`` of the strip's fullest."""
    return 0.15 + 0.85 * f ** 0.5


def _power(e):
    """A power of ten for a tick: ``1e-3`` for a whole exponent, else its value (``0.32``)."""
    return f"1e{int(round(e))}" if abs(e - round(e)) < 1e-9 else f"{10.0 ** e:.2g}"


def _shade_scale(x, y, font):
    """The histograms' colour scale: few entries light, many dark."""
    color = style.ROLE["backward"][1]
    cells = "".join(f'<rect x="{x + 64 + 12 * k}" y="{y}" width="12" height="9" fill="{color}" '
                    f'fill-opacity="{_shade(f):.2f}"/>'
                    for k, f in enumerate((0.02, 0.1, 0.25, 0.5, 0.75, 1.0)))
    return (f'<g class="lk-shade-scale"><text x="{x + 60}" y="{y + 8}" {font} font-size="9" '
            f'fill="{style.MUTED}" text-anchor="end">entries: few</text>{cells}'
            f'<text x="{x + 64 + 12 * 6 + 4}" y="{y + 8}" {font} font-size="9" '
            f'fill="{style.MUTED}">many (per step)</text></g>')


def _clip(text, n):
    return text if len(text) <= n else text[:n - 1] + "…"


def _svg(width, height, parts):
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height:.0f}" '
            f'viewBox="0 0 {width} {height:.0f}" class="lk-gradients">'
            f'<rect width="100%" height="100%" fill="white"/>' + "".join(parts) + "</svg>")


# ---- gradient flow on a captured graph ----------------------------------------------------------
FLOW_RAMP = ("#d1d5db", "#fdba74", "#f97316", "#c2410c", "#7c2d12")   # small -> large norm


def gradient_flow(f, *example_args, collapse=None, max_nodes=None, title=None,
                  **example_kwargs):
    """Draw ``f``'s raw graph (an ``lk.function`` whose body calls ``backward()``) with every
    edge that carries a gradient coloured and widened by the gradient's L2 norm for the example
    arguments (log scale, light grey = smallest, dark = largest); a gradient with a NaN or an
    Inf is drawn red and labelled. A gradient is a backward value computed from the seed of
    ``backward()``; forward values the backward pass merely reuses (``x.T``) keep grey edges.
    Nothing is assigned: update ops are not run. Returns a
    ``GraphPicture``; ``picture.norms`` is ``{node name: norm}`` of the gradient nodes."""
    from .graph import MAX_NODES, display_roles, to_dot
    from .render import GraphPicture
    from .widgets import _feeds_for, node_values
    g = f.graph(*example_args, passes=[], **example_kwargs)
    feeds, tensors = _feeds_for(g, f, example_args, example_kwargs)
    values = node_values(g, feeds, tensors)
    roles = dict(zip((id(n) for n in g.nodes), display_roles(g.nodes)))
    # a gradient: a backward value that starts the backward pass (the seed, no inputs) or is
    # computed from a gradient; not a forward value reshaped for the backward pass (x.T)
    is_grad = set()
    for n in g.nodes:
        ins = [a for a in n.inputs if hasattr(a, "graph")]
        if roles[id(n)] == "backward" and (not ins or any(id(a) in is_grad for a in ins)):
            is_grad.add(id(n))
    grads = {n.name: values[n.name] for n in g.nodes
             if id(n) in is_grad and n.kind == "op" and n.name in values}
    norms, bad = {}, {}
    for name, v in grads.items():
        a = np.asarray(v, dtype=np.float64)
        bad[name] = int((~np.isfinite(a)).sum())
        finite = a[np.isfinite(a)]
        norms[name] = float(np.sqrt((finite * finite).sum())) if not bad[name] else float("nan")
    logs = [math.log10(v) for v in norms.values() if math.isfinite(v) and v > 0]
    lo, hi = (min(logs), max(logs)) if logs else (0.0, 1.0)

    def edge_style(sources, target):
        mine = [s for s in sources if s.name in norms]
        if not mine:
            return None
        if any(bad[s.name] for s in mine):
            n = sum(bad[s.name] for s in mine)
            return {"color": NONFINITE, "penwidth": "3.5", "fontcolor": NONFINITE,
                    "label": f" NaN/Inf ×{n} ", "note": f"gradient has {n} non-finite entries"}
        v = max(norms[s.name] for s in mine)
        if not (v > 0):
            return {"color": FLOW_RAMP[0], "penwidth": "1", "note": "gradient norm 0"}
        t = (math.log10(v) - lo) / (hi - lo) if hi > lo else 1.0
        color = FLOW_RAMP[min(int(t * len(FLOW_RAMP)), len(FLOW_RAMP) - 1)]
        return {"color": color, "penwidth": f"{1 + 3.5 * t:.2f}",
                "note": f"gradient norm {v:.3e}"}

    def node_style(n):
        if bad.get(n.name):
            return {"color": NONFINITE, "penwidth": "3",
                    "note": f"NON-FINITE gradient: {bad[n.name]} NaN/Inf entries"}
        if n.name in norms:
            return {"note": f"gradient norm {norms[n.name]:.3e}"}
        return None

    head = title or (f"{g.name} gradient flow · norms 1e{lo:.1f} .. 1e{hi:.1f}"
                     + (" · NaN/Inf in red" if any(bad.values()) else ""))
    dot = to_dot(g, collapse=collapse, max_nodes=max_nodes or MAX_NODES, title=head,
                 edge_style=edge_style, node_style=node_style)
    pic = GraphPicture(dot, graph=g, kind="gradient flow")
    pic.norms = norms
    return pic
