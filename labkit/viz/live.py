"""``lk.viz.live``: loss and accuracy curves that update while a training loop runs, with a
Stop button that ends the loop cleanly (between two steps, never inside one).

>>> import labkit as lk
>>> view = lk.viz.live(display=False)
>>> for step in view.steps(100):
...     view.log(loss=1.0 / (step + 1), accuracy=step / 100)
...     if step == 4:
...         view.stop()          # what the Stop button does
>>> len(view.history["loss"]), view.stopped
(5, True)

In JupyterLab with ipywidgets the view shows the curves, a status line and the Stop button
under the cell, redrawn at most every ``refresh`` seconds. A click reaches a running cell only
if the kernel can read widget messages while it is busy: labkit does that with the small
``jupyter-ui-poll`` package when it is installed (``pip install jupyter-ui-poll``). Interrupting the
kernel (the ■ button) also ends the loop cleanly: ``steps()`` stops, the view says so, and
the cell goes on after the loop. Without a widget frontend (a script, a CI run of a notebook)
it prints a line every ``print_every`` seconds, and the curves (an SVG) are displayed when the
loop ends, so a saved notebook keeps them.
"""
import contextlib
import html
import math
import time

from . import style

LINE = {"loss": style.ROLE["backward"][1], "accuracy": style.ROLE["update"][1]}


def _esc(text):
    return html.escape(str(text), quote=True)


def _in_kernel():
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


@contextlib.contextmanager
def _ui_poller():
    """A function that lets the kernel handle pending widget messages (button clicks) while a
    cell runs, or a no-op where that is not possible."""
    if _in_kernel():
        try:
            from jupyter_ui_poll import ui_events
        except ImportError:
            pass
        else:
            with ui_events() as poll:
                yield poll
            return
    yield lambda n=1: None


@contextlib.contextmanager
def _soft_interrupt(view):
    """While the loop runs, a first interrupt (Ctrl-C, the kernel's ■) stops it after the
    current step instead of raising; a second one raises ``KeyboardInterrupt`` as usual."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.getsignal(signal.SIGINT)
    old = old if callable(old) or old in (signal.SIG_IGN, signal.SIG_DFL) \
        else signal.default_int_handler

    def handler(signum, frame):
        view.stop("stopped by an interrupt (press again to raise KeyboardInterrupt)")
        signal.signal(signal.SIGINT, old)

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


class TrainingView:
    """Curves of logged metrics (one panel each) that redraw while a loop runs; a Stop button.

    ``for step in view.steps(n):`` yields ``0 .. n-1`` (``n=None``: until stopped) and ends
    early, cleanly, when Stop is pressed (``view.stop()``) or the kernel is interrupted.
    ``view.log(loss=..., accuracy=...)`` records values (Python numbers or 0-d tensors) for the
    current step. ``view.history``: ``{metric: [(step, value)]}``.
    """

    def __init__(self, metrics=("loss", "accuracy"), title="training", refresh=0.5,
                 print_every=5.0, display=True, width=720):
        self.metrics = list(metrics)
        self.title = title
        self.refresh, self.print_every = refresh, print_every
        self.history = {m: [] for m in self.metrics}
        self.step = -1
        self.total = None
        self.stopped = False
        self.stop_reason = None
        self.width = width
        self._display = display
        self._shown = False
        self._last_draw = self._last_print = 0.0
        self._t0 = None
        self._widgets = None
        if display and _in_kernel():
            self._build_widgets()

    # ---- the loop ---------------------------------------------------------------------------
    def stop(self, reason="stopped by the Stop button"):
        """End the loop after the current step (the Stop button calls this)."""
        if not self.stopped:
            self.stopped, self.stop_reason = True, reason
        if self._widgets is not None:
            self._widgets["stop"].disabled = True
            self._widgets["stop"].description = "stopping…"

    def steps(self, n=None):
        """Yield step numbers ``0 .. n-1`` until done or stopped; keeps the view up to date."""
        self.total, self.stopped, self.stop_reason = n, False, None
        self._t0 = time.perf_counter()
        self._show()
        step = 0
        try:
            with _soft_interrupt(self), _ui_poller() as poll:
                while n is None or step < n:
                    poll(10)            # handle a pending Stop click, if the kernel can
                    if self.stopped:
                        break
                    self.step = step
                    yield step
                    step += 1
                    self._maybe_draw()
        finally:
            self._finish(step)

    def log(self, step=None, **values):
        """Record metric values for ``step`` (default: the current step of ``steps()``)."""
        step = self.step if step is None else step
        for name, v in values.items():
            if hasattr(v, "item"):
                v = v.item()
            if name not in self.history:
                self.history[name] = []
                self.metrics.append(name)
            self.history[name].append((step, float(v)))
        if self._t0 is None:      # logging outside steps(): redraw on the same schedule
            self._maybe_draw()

    def latest(self):
        return {m: h[-1][1] for m, h in self.history.items() if h}

    # ---- showing it ----------------------------------------------------------------------------
    def status(self):
        done = self.step + 1
        parts = [f"step {done}" + (f"/{self.total}" if self.total else "")]
        parts += [f"{m} {v:.4g}" for m, v in self.latest().items()]
        if self._t0 is not None and done:
            parts.append(f"{done / max(time.perf_counter() - self._t0, 1e-9):.1f} steps/s")
        if self.stopped:
            parts.append(self.stop_reason)
        return " · ".join(parts)

    def _build_widgets(self):
        try:
            import ipywidgets as w
        except ImportError:
            return
        stop = w.Button(description="Stop", button_style="danger", icon="stop",
                        tooltip="end the loop after the current step")
        stop.on_click(lambda _: self.stop())
        self._widgets = {"stop": stop, "image": w.HTML(self.svg()), "status": w.HTML(),
                         "box": None}
        self._widgets["box"] = w.VBox([w.HBox([stop, self._widgets["status"]]),
                                       self._widgets["image"]])

    @property
    def stop_button(self):
        """The ipywidgets Stop button (None without ipywidgets or outside a kernel)."""
        return self._widgets["stop"] if self._widgets is not None else None

    def _show(self):
        if self._shown or not self._display:
            return
        self._shown = True
        if self._widgets is not None:
            from IPython.display import display
            self._handle = display(self, display_id=True)

    def _maybe_draw(self, force=False):
        now = time.perf_counter()
        if self._widgets is not None:
            if force or now - self._last_draw >= self.refresh:
                self._last_draw = now
                self._widgets["image"].value = self.svg()
                self._widgets["status"].value = f"<span style='font-size:12px'>" \
                                                f"{_esc(self.status())}</span>"
        elif self._display and (force or now - self._last_print >= self.print_every):
            text = self.status()
            if text.split(" · ")[0] != getattr(self, "_printed", None):   # once per step
                self._last_print, self._printed = now, text.split(" · ")[0]
                print(text, flush=True)

    def _finish(self, steps_run):
        self._maybe_draw(force=True)
        if self._widgets is not None:
            self._widgets["stop"].disabled = True
            self._widgets["stop"].description = "stopped" if self.stopped else "done"
            handle = getattr(self, "_handle", None)
            if handle is not None:   # the saved notebook's static copy shows the final curves
                handle.update(self)
        elif self._display and _in_kernel():   # no widgets: leave the curves in the notebook
            from IPython.display import SVG, display
            display(SVG(self.svg()))

    # ---- the picture -----------------------------------------------------------------------------
    def svg(self):
        """The curves as SVG: one panel per metric, step on the x axis."""
        font = f'font-family="{style.FONT}"'
        metrics = [m for m in self.metrics if m in self.history] or ["loss"]
        cols = min(len(metrics), 2)
        pw = (self.width - 10 * (cols - 1)) / cols
        ph = 170
        out = [f'<text x="4" y="15" {font} font-size="12" font-weight="bold" '
               f'fill="{style.TEXT}">{_esc(self.title)} · {_esc(self.status())}</text>']
        for k, m in enumerate(metrics):
            x0 = (k % cols) * (pw + 10)
            y0 = 24 + (k // cols) * (ph + 10)
            out.append(_panel(m, self.history.get(m, []), x0, y0, pw, ph, font))
        rows = (len(metrics) + cols - 1) // cols
        h = 24 + rows * (ph + 10)
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{h}" '
                f'viewBox="0 0 {self.width} {h}" class="lk-live"><rect width="100%" '
                f'height="100%" fill="white"/>{"".join(out)}</svg>')

    def _repr_svg_(self):
        return self.svg()

    def _repr_mimebundle_(self, include=None, exclude=None):
        from .widgets import widget_bundle
        box = self._widgets["box"] if self._widgets is not None else None
        return widget_bundle(box, self.svg(), repr(self))

    def __repr__(self):
        return f"<TrainingView {self.title!r}: {self.status()}>"


def _panel(name, points, x0, y0, w, h, font):
    left, bottom = 46, 18
    pts = [(s, v) for s, v in points if math.isfinite(v)]
    color = LINE.get(name, style.DEVICE_PALETTE[len(name) % len(style.DEVICE_PALETTE)][1])
    out = [f'<g class="lk-panel" data-metric="{_esc(name)}">',
           f'<rect x="{x0 + left}" y="{y0}" width="{w - left}" height="{h - bottom}" '
           f'fill="#f9fafb" stroke="#e5e7eb"/>',
           f'<text x="{x0 + left + 4}" y="{y0 + 12}" {font} font-size="10" '
           f'fill="{style.TEXT}">{_esc(name)}'
           + (f" {pts[-1][1]:.4g}" if pts else " (nothing logged)") + "</text>"]
    if pts:
        s0, s1 = pts[0][0], max(pts[-1][0], pts[0][0] + 1)
        lo, hi = min(v for _, v in pts), max(v for _, v in pts)
        if hi - lo < 1e-12:
            lo, hi = lo - 0.5, hi + 0.5
        pad = (hi - lo) * 0.05
        lo, hi = lo - pad, hi + pad

        def sx(s):
            return x0 + left + (w - left) * (s - s0) / (s1 - s0)

        def sy(v):
            return y0 + (h - bottom) * (hi - v) / (hi - lo)

        for v in (lo + pad, (lo + hi) / 2, hi - pad):
            out.append(f'<text x="{x0 + left - 3}" y="{sy(v) + 3:.1f}" {font} font-size="9" '
                       f'fill="{style.MUTED}" text-anchor="end">{v:.3g}</text>')
        for s in (s0, (s0 + s1) // 2, s1):
            out.append(f'<text x="{sx(s):.1f}" y="{y0 + h - 5}" {font} font-size="9" '
                       f'fill="{style.MUTED}" text-anchor="middle">{s}</text>')
        step = max(1, len(pts) // 2000)     # at most ~2000 points drawn
        line = " ".join(f"{sx(s):.1f},{sy(v):.1f}" for s, v in pts[::step])
        out.append(f'<polyline points="{line}" fill="none" stroke="{color}" '
                   f'stroke-width="1.5"><title>{_esc(name)}: {len(pts)} values</title>'
                   f'</polyline>')
    out.append("</g>")
    return "".join(out)


def live(metrics=("loss", "accuracy"), title="training", refresh=0.5, print_every=5.0,
         display=True):
    """A ``TrainingView``: ``for step in view.steps(n): ...; view.log(loss=..., accuracy=...)``.

    Shows live curves and a Stop button in a notebook (ipywidgets), prints progress elsewhere;
    ``display=False`` draws nothing until asked (``view.svg()``).
    """
    return TrainingView(metrics, title, refresh, print_every, display)
