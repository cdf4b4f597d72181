"""``timeline_explorer(prof)``: a profile to explore in JupyterLab (an anywidget widget).

The front end (``labkit/viz/static/timeline.js``, built from ``frontend/``) draws the events
on a canvas, so a timeline of 20,000 events stays fast. It opens on the first three steps
(each labelled, every other one shaded); hovering a bar shows its details at once, a click
keeps them; wheel or W / S zoom on the time axis, drag or A / D pan (or use the overview strip
above), as in Perfetto; shift+drag (or drag on the axis) selects a range and totals it per op
and per lane; type to filter ops by name, pick a step. Lanes are named in full, with a module
track (the scope each run of a graph's ops ran in); events that nest stack. Send -> recv
arrows join matched transfers (those of the view when few, else those of the selection).
Everything it needs is in the package: nothing is fetched from the network.

The events travel as one binary column per field (``timeline_data.timeline_payload``).
What the person does comes back as traits: ``step`` (-1: all steps), ``query``,
``selected`` (an event index, -1: none), ``selection`` (``[start, end]`` ns from the first
event, or ``[]``) and ``view`` (the visible ``[start, end]``, or ``[]``: everything).
Setting them from Python moves the view the same way.

``lk.viz.timeline(prof)`` shows one of these in a live notebook, next to its static SVG
(which nbval, nbconvert and GitHub show instead). Needs ``anywidget``
(``pip install 'labkit[notebooks]'``).

>>> import labkit as lk
>>> with lk.profile() as prof:
...     y = (lk.ones(8, 8) @ lk.ones(8, 8)).sum()
>>> w = timeline_explorer(prof)                        # doctest: +SKIP
>>> w.selected = 0; w.selected_event.op               # doctest: +SKIP
'matmul'
"""
import pathlib

from ..errors import LabkitError

STATIC = pathlib.Path(__file__).parent / "static"
BUNDLE = STATIC / "timeline.js"


def have_anywidget():
    try:
        import anywidget  # noqa: F401
    except ImportError:
        return False
    return True


def _base(what, bundle):
    try:
        import anywidget
        import traitlets
    except ImportError:
        raise LabkitError(f"the {what} needs anywidget: pip install 'labkit[notebooks]' "
                          f"(or pip install anywidget). Its static picture (.svg()) works "
                          f"without it.") from None
    if not bundle.exists():
        raise LabkitError(f"the {what}'s front end {bundle.name} is missing from "
                          f"labkit/viz/static: build it with `npm run build` in frontend/")
    return anywidget.AnyWidget, traitlets


_CLASSES = {}


def widget_class(name, what, make):
    """The anywidget class of the front end ``static/<name>.js``: ``make(AnyWidget,
    traitlets, bundle path)`` runs once, on first use, so importing labkit needs no
    anywidget (``what`` names the widget in the error when anywidget is missing)."""
    cls = _CLASSES.get(name)
    if cls is None:
        AnyWidget, t = _base(what, STATIC / f"{name}.js")
        cls = _CLASSES[name] = make(AnyWidget, t, STATIC / f"{name}.js")
    return cls


def _make_timeline_class(AnyWidget, t, bundle):
    class TimelineExplorerWidget(AnyWidget):
        _esm = bundle
        data = t.Dict().tag(sync=True)
        step = t.Int(-1).tag(sync=True)
        query = t.Unicode("").tag(sync=True)
        selected = t.Int(-1).tag(sync=True)
        selection = t.List([]).tag(sync=True)
        view = t.List([]).tag(sync=True)

        @property
        def selected_event(self):
            """The ``OpEvent`` clicked (``selected``), or None."""
            return self.events[self.selected] if 0 <= self.selected < len(self.events) else None

        def __repr__(self):
            return f"<timeline explorer of {self.profile!r}>"

    return TimelineExplorerWidget


def _explorer_class():
    return widget_class("timeline", "timeline explorer", _make_timeline_class)


def timeline_explorer(prof, step=None, title=None):
    """The explorer widget of a profile (``step``: open at that step; ``title``: the heading).

    Besides the synced traits it has ``.profile``, ``.events`` (in the payload's order, so
    ``selected`` indexes it) and ``.selected_event``.
    """
    from .timeline_data import timeline_payload
    cls = _explorer_class()
    payload, events = timeline_payload(prof, title)
    w = cls(data=payload, step=-1 if step is None else int(step))
    w.profile, w.events = prof, events
    return w
