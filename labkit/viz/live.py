"""``lk.viz.live``: loss and accuracy curves that update while a training loop runs, with a
Stop button that ends the loop cleanly (between two steps, never inside one).

>>> import labkit as lk
>>> view = lk.viz.live(display=False)
>>> for step in view.steps(100):
...     view.log(loss=1.0 / (step + 1), accuracy=step / 100)
...     if step == 4:
...         view.stop()          # what the Stop button does
>>> len(view.history["loss"]), view.stopped, view.stop_reason
(5, True, 'view.stop()')

In JupyterLab the view shows the curves, a status line and a Stop button under the cell (one
widget, redrawn at most every ``refresh`` seconds; it needs ``anywidget``). A click on Stop
shows "stopping…" at once, in the page, and the loop ends after the step it is in; the cell
prints where it stopped and goes on after the loop. The click reaches the busy kernel through
``comm_tap`` (ipykernel 7 or later; with an older kernel the button says to interrupt instead).
Interrupting the kernel (the ■ button) also ends the loop cleanly: ``steps()`` stops, the view
says so, and the cell goes on; a second interrupt raises ``KeyboardInterrupt`` as usual.

The widget's display also carries the curves as SVG, updated when the loop ends: a saved
notebook (nbval, a web page) shows that static copy, a live JupyterLab only the widget.
Without a widget front end (a script) it prints a line every ``print_every`` seconds, and in a
kernel without anywidget the curves are displayed as an SVG when the loop ends.
"""
import contextlib
import functools
import html
import math
import pathlib
import threading
import time

from . import comm_tap, style

LINE = {"loss": style.ROLE["backward"][1], "accuracy": style.ROLE["update"][1]}
BUTTON = "the Stop button"          # how the loop was stopped, as the cell says it
INTERRUPT = "an interrupt"

# The widget's front end (an anywidget ES module): the Stop button, the status line and the
# curves. A click relabels the button at once and tells the kernel which run to stop, so a
# late click never stops a later loop.
BUNDLE = pathlib.Path(__file__).parent / "static" / "live.js"   # built from frontend/src/live.js


def _esc(text):
    return html.escape(str(text), quote=True)


def _in_kernel():
    return comm_tap._kernel() is not None


@functools.lru_cache(maxsize=None)
def _widget_class():
    """The live view's anywidget class, or None without anywidget."""
    try:
        import anywidget
        import traitlets
    except ImportError:
        return None

    class LiveWidget(anywidget.AnyWidget):
        _esm = BUNDLE
        svg = traitlets.Unicode("").tag(sync=True)
        status = traitlets.Unicode("").tag(sync=True)
        state = traitlets.Unicode("idle").tag(sync=True)   # idle running stopping stopped done
        run = traitlets.Int(0).tag(sync=True)               # which loop the button stops
        can_stop = traitlets.Bool(True).tag(sync=True)
        hint = traitlets.Unicode("end the loop after the current step").tag(sync=True)

    return LiveWidget


@contextlib.contextmanager
def _soft_interrupt(view):
    """While the loop runs, a first interrupt (Ctrl-C, the kernel's ■) stops it after the
    current step instead of raising; a second one raises ``KeyboardInterrupt`` as usual."""
    import signal
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.getsignal(signal.SIGINT)
    old = old if callable(old) or old in (signal.SIG_IGN, signal.SIG_DFL) \
        else signal.default_int_handler

    def handler(signum, frame):
        view.stop(INTERRUPT)
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
        self._run = 0            # which loop of steps() runs (a Stop click names it)
        self._running = False
        self.widget = None
        if display and _in_kernel():
            self._build_widget()

    # ---- the loop ---------------------------------------------------------------------------
    def stop(self, reason="view.stop()"):
        """End the loop after the current step (the Stop button calls this). Safe from another
        thread or a signal handler: it only records the request."""
        if not self.stopped:
            self.stop_reason = reason
            self.stopped = True

    def steps(self, n=None):
        """Yield step numbers ``0 .. n-1`` until done or stopped; keeps the view up to date."""
        self.total, self.stopped, self.stop_reason = n, False, None
        self._t0 = time.perf_counter()
        self._t1 = None
        self._run += 1
        self._running = True
        if self.widget is not None:
            self.widget.run, self.widget.state = self._run, "running"
        self._show()
        step = 0
        try:
            with _soft_interrupt(self), self._hear_stop_while_busy():
                while n is None or step < n:
                    if self.stopped:
                        break
                    self.step = step
                    yield step
                    step += 1
                    self._maybe_draw()
        finally:
            self._running = False
            self._t1 = time.perf_counter()      # steps/s stays what it was when the loop ended
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

    # ---- the Stop button ---------------------------------------------------------------------
    def _on_front_message(self, data):
        """A message from the widget's page: ``{"event": "stop", "run": k}`` stops loop ``k``
        if it still runs (a click that arrives late never stops a later loop)."""
        if isinstance(data, dict) and data.get("event") == "stop" \
                and data.get("run") == self._run and self._running:
            self.stop(BUTTON)

    def _on_widget_msg(self, widget, content, buffers):
        self._on_front_message(content)

    @contextlib.contextmanager
    def _hear_stop_while_busy(self):
        """While the loop runs, hear the Stop click although the kernel is busy (``comm_tap``);
        where the kernel cannot, the button says to interrupt instead."""
        if self.widget is None:
            yield
            return
        comm_id = self.widget.model_id

        def heard(data):     # an ipywidgets custom message: {"method": "custom", "content"}
            if data.get("method") == "custom":
                self._on_front_message(data.get("content"))

        heard_busy = comm_tap.listen(comm_id, heard)
        self.widget.can_stop = heard_busy
        self.widget.hint = ("end the loop after the current step" if heard_busy else
                            "this kernel reads a click only after the cell (ipykernel 7 reads "
                            "it at once): interrupt the kernel (■) to stop the loop")
        try:
            yield
        finally:
            comm_tap.forget(comm_id)

    # ---- showing it ----------------------------------------------------------------------------
    def status(self):
        done = self.step + 1
        parts = [f"step {done}" + (f"/{self.total}" if self.total else "")]
        parts += [f"{m} {v:.4g}" for m, v in self.latest().items()]
        if self._t0 is not None and done:
            end = self._t1 if getattr(self, "_t1", None) is not None else time.perf_counter()
            parts.append(f"{done / max(end - self._t0, 1e-9):.1f} steps/s")
        if self.stopped and self._running:
            again = " (interrupt again to raise KeyboardInterrupt)" \
                if self.stop_reason == INTERRUPT else ""
            parts.append(f"stopping: {self.stop_reason}{again}")
        elif self.stopped:
            parts.append(f"stopped: {self.stop_reason}")
        return " · ".join(parts)

    def _build_widget(self):
        cls = _widget_class()
        if cls is None:
            return
        self.widget = cls(svg=self.svg(), status=self.status())
        self.widget.on_msg(self._on_widget_msg)

    def _show(self):
        if self._shown or not self._display:
            return
        self._shown = True
        if self.widget is not None:
            from IPython.display import display
            self._handle = display(self, display_id=True)

    def _maybe_draw(self, force=False):
        now = time.perf_counter()
        if self.widget is not None:
            if force or now - self._last_draw >= self.refresh:
                self._last_draw = now
                text = self.status()           # one reading for the picture and the line
                self.widget.svg = self.svg(text)
                self.widget.status = text
                if self._running:
                    self.widget.state = "stopping" if self.stopped else "running"
        elif self._display and (force or now - self._last_print >= self.print_every):
            text = self.status()
            if text.split(" · ")[0] != getattr(self, "_printed", None):   # once per step
                self._last_print, self._printed = now, text.split(" · ")[0]
                print(text, flush=True)

    def _finish(self, steps_run):
        if self.widget is not None:
            self.widget.state = "stopped" if self.stopped else "done"
        self._maybe_draw(force=True)
        if self.widget is not None:
            handle = getattr(self, "_handle", None)
            if handle is not None:   # the saved notebook's static copy shows the final curves
                handle.update(self)
        elif self._display and _in_kernel():   # no widget: leave the curves in the notebook
            from IPython.display import SVG, display
            display(SVG(self.svg()))
        if self.stopped and self._display:
            total = f"/{self.total}" if self.total else ""
            print(f"{self.title}: stopped at step {steps_run}{total} by {self.stop_reason}",
                  flush=True)

    # ---- the picture -----------------------------------------------------------------------------
    def svg(self, status=None):
        """The curves as SVG: one panel per metric logged (before anything is logged, one per
        metric named), step on the x axis; ``status``: the line under the title (default:
        ``status()``)."""
        font = f'font-family="{style.FONT}"'
        status = self.status() if status is None else status
        metrics = ([m for m in self.metrics if self.history.get(m)]
                   or [m for m in self.metrics if m in self.history] or ["loss"])
        cols = min(len(metrics), 2)
        pw = (self.width - 10 * (cols - 1)) / cols
        ph = 180
        out = [f'<text x="4" y="15" {font} font-size="12" font-weight="bold" '
               f'fill="{style.TEXT}">{_esc(self.title)} · {_esc(status)}</text>']
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
        return widget_bundle(self.widget, self.svg(), repr(self))

    def __repr__(self):
        return f"<TrainingView {self.title!r}: {self.status()}>"


def _panel(name, points, x0, y0, w, h, font):
    """One metric's panel: a plot area with the curve, tick values on both axes and the axis
    titles (``step`` under it, the metric's name along the left side)."""
    left, bottom = 58, 30
    pts = [(s, v) for s, v in points if math.isfinite(v)]
    color = LINE.get(name, style.DEVICE_PALETTE[len(name) % len(style.DEVICE_PALETTE)][1])
    plot_h = h - bottom
    mid_y = y0 + plot_h / 2
    out = [f'<g class="lk-panel" data-metric="{_esc(name)}">',
           f'<rect x="{x0 + left}" y="{y0}" width="{w - left}" height="{plot_h}" '
           f'fill="#f9fafb" stroke="#e5e7eb"/>',
           f'<text x="{x0 + left + 4}" y="{y0 + 12}" {font} font-size="10" '
           f'fill="{style.TEXT}">{_esc(name)}'
           + (f" {pts[-1][1]:.4g}" if pts else " (nothing logged)") + "</text>",
           f'<text class="lk-axis-title" x="{x0 + left + (w - left) / 2:.1f}" y="{y0 + h - 2}" '
           f'{font} font-size="10" fill="{style.TEXT}" text-anchor="middle">step</text>',
           f'<text class="lk-axis-title" x="{x0 + 10}" y="{mid_y:.1f}" {font} font-size="10" '
           f'fill="{style.TEXT}" text-anchor="middle" '
           f'transform="rotate(-90 {x0 + 10} {mid_y:.1f})">{_esc(name)}</text>']
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
            return y0 + plot_h * (hi - v) / (hi - lo)

        for v in (lo + pad, (lo + hi) / 2, hi - pad):
            out.append(f'<text x="{x0 + left - 3}" y="{sy(v) + 3:.1f}" {font} font-size="9" '
                       f'fill="{style.MUTED}" text-anchor="end">{v:.3g}</text>')
        for s, anchor in ((s0, "start"), ((s0 + s1) // 2, "middle"), (s1, "end")):
            out.append(f'<text x="{sx(s):.1f}" y="{y0 + plot_h + 11}" {font} font-size="9" '
                       f'fill="{style.MUTED}" text-anchor="{anchor}">{s}</text>')
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

    Shows live curves and a Stop button in a notebook (anywidget), prints progress elsewhere;
    ``display=False`` draws nothing until asked (``view.svg()``).
    """
    return TrainingView(metrics, title, refresh, print_every, display)
