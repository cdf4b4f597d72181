"""``graph_explorer(obj, *example_args)``: a graph to explore in JupyterLab (an anywidget
widget).

The front end (``labkit/viz/static/graph.js``, built from ``frontend/``) lays the graph out in
the browser (a layered layout, one open group at a time) and draws it as SVG: wheel to zoom,
drag to pan, a minimap beside it. A module's scope is a box named ``conv1 (Conv2d)``; at
first the explorer opens as many as keep box text at least 10 px high on the canvas it
measures (``collapse=`` / ``expand=`` choose instead), and a click opens one in place and
moves the view to it. A click on a node shows its details beside the picture (op, inputs
and outputs with shapes and dtypes, device and placement reason, the user's source line, what
each pass did to it, and its value's statistics on request); search by name or op; colour by
role, device or time (with ``profile=``), explained by a legend (with the marks of the pass
shown); the selected node's ancestors and descendants are highlighted (the path from the
inputs to the loss); a slider steps through the passes; an input of many boxes is a stub at
each of them. Nothing is fetched from the network.

What the person does comes back as traits: ``expanded`` (the open group paths), ``selected``
(a node name, "" for none), ``query``, ``color_by`` (``"role"``, ``"device"`` or ``"time"``)
and ``stage`` (0: the traced graph, ``k``: after pass ``k``). Setting them from Python moves
the view the same way. The value button sends a message the kernel answers with
``widgets.value_summary`` of the node's value (``value_text``).

``lk.viz.graph(...)`` shows one of these in a live notebook, next to its static SVG (which
nbval, nbconvert and GitHub show instead). Needs ``anywidget``.

>>> import labkit as lk
>>> @lk.function
... def f(x):
...     return (x.exp() * 2.0).sum()
>>> w = graph_explorer(f, lk.ones(3))                    # doctest: +SKIP
>>> [s["name"] for s in w.data["stages"]][:2]            # doctest: +SKIP
['traced', 'prune']
>>> print(w.value_text("exp"))                           # doctest: +SKIP
value: float32 (3,)
...
"""
from ..errors import LabkitError
from .timeline_explorer import widget_class
from .graph import as_graph
from .graph_data import graph_payload
from .widgets import _feeds_for, node_values, pass_stages, value_summary

COLOR_MODES = ("role", "device", "time")


def _make_class(AnyWidget, t, bundle):
    class GraphExplorerWidget(AnyWidget):
        _esm = bundle
        data = t.Dict().tag(sync=True)
        expanded = t.List([]).tag(sync=True)
        selected = t.Unicode("").tag(sync=True)
        query = t.Unicode("").tag(sync=True)
        color_by = t.Unicode("role").tag(sync=True)
        stage = t.Int(0).tag(sync=True)

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.on_msg(self._on_message)

        def _on_message(self, _widget, content, _buffers):
            if isinstance(content, dict) and content.get("event") == "value":
                name = str(content.get("name", ""))
                try:
                    text = self.value_text(name, content.get("stage"))
                except Exception as e:   # noqa: BLE001 - the panel shows what went wrong
                    text = f"could not compute the value: {type(e).__name__}: {e}"
                self.send({"event": "value", "name": name, "text": text})

        def value_text(self, name, stage=None):
            return _value_text(self, name, self.stage if stage is None else int(stage))

        def __repr__(self):
            return f"<graph explorer: {self.data.get('title', '')}>"

    return GraphExplorerWidget


def _explorer_class():
    return widget_class("graph", "graph explorer", _make_class)


def _value_text(w, name, stage):
    """The statistics of node ``name``'s value in the graph of ``stage``."""
    g = w.graphs[min(max(stage, 0), len(w.graphs) - 1)]
    node = next((n for n in g.nodes if n.name == name), None)
    if node is None:
        raise LabkitError(f"graph explorer: no node named {name!r} in {getattr(g, 'name', g)} "
                          f"at stage {stage}")
    if w.function is not None:
        values = w.values.get(id(g))
        if values is None:
            feeds, tensors = _feeds_for(g, w.function, w.args, w.kwargs)
            values = w.values[id(g)] = node_values(g, feeds, tensors)
        if name in values:
            return value_summary(values[name])
    value = getattr(node, "value", None)
    if value is not None and getattr(node, "kind", "op") != "op":
        return value_summary(value.numpy(force=True) if hasattr(value, "numpy") else value)
    if w.function is None:
        return ("value: not known here (values are computed for an lk.function given with "
                "example arguments: lk.viz.graph_explorer(f, x, ...))")
    return "value: not computed (a side effect, or depends on one)"


def open_paths(paths, collapse=None, expand=None):
    """The group paths open at first, or None where the explorer should choose (as many as stay
    readable). ``collapse``: True (every scope closed), False (every scope open) or the scope
    paths to keep closed (the others open); ``expand``: scope paths to open (with the scopes
    around them), the others closed unless ``collapse`` opened them.

    >>> open_paths(["enc", "enc/0", "dec"], collapse=["enc/0"])
    ['enc', 'dec']
    >>> open_paths(["enc", "enc/0", "dec"], expand=["enc/0"])
    ['enc', 'enc/0']
    """
    if collapse is None and expand is None:
        return None
    if isinstance(collapse, str):
        collapse = [collapse]
    if collapse is False:
        opened = set(paths)
    elif collapse is None or collapse is True:
        opened = set()
    else:
        shut = [str(c).strip("/") for c in collapse]
        opened = {p for p in paths if not any(p == c or p.startswith(c + "/") for c in shut)}
    for e in ([expand] if isinstance(expand, str) else expand or ()):
        parts = str(e).strip("/").split("/")
        opened.update("/".join(parts[:k]) for k in range(1, len(parts) + 1))
    return [p for p in paths if p in opened]


def graph_explorer(obj, *example_args, passes=None, stages=None, profile=None,
                   color_by=None, title=None, expanded=None, collapse=None, expand=None,
                   **example_kwargs):
    """The explorer widget of ``obj``'s graph (whatever ``lk.viz.graph`` accepts).

    ``passes``: for an ``lk.function`` with example arguments, the pipeline whose passes the
    slider steps through (default: the enabled passes); ``stages=False`` leaves the slider out
    (``True`` makes it for an ``lk.Graph`` too). ``profile``: an ``lk.profile()`` of runs of
    this graph, for colour by time. ``color_by``: ``"role"`` (default), ``"device"`` or
    ``"time"`` (the default with a profile). What is open at first: by default as many scopes
    as stay readable (text at least 10 px) on the canvas; ``collapse`` / ``expand`` as for
    ``open_paths``, or ``expanded``, the exact list of group paths.

    Besides the synced traits it has ``.graph`` (the graph drawn), ``.graphs`` (one per stage)
    and ``.value_text(name)``.
    """
    from ..graph import Function, Graph
    cls = _explorer_class()
    function = obj if isinstance(obj, Function) and (example_args or example_kwargs) else None
    if stages is None:
        stages = function is not None
    found = []
    if stages and (function is not None or isinstance(obj, Graph)):
        found = pass_stages(obj, *example_args, passes=passes, **example_kwargs)
    g = found[-1].after if found else as_graph(obj, *example_args, **example_kwargs)
    mode = color_by or ("time" if profile is not None else "role")
    if mode not in COLOR_MODES:
        raise ValueError(f"graph_explorer: color_by must be one of {COLOR_MODES}, got {mode!r}")
    if mode == "time" and profile is None:
        raise ValueError("graph_explorer: color_by='time' needs a profile: "
                         "graph_explorer(f, x, profile=prof) with prof from lk.profile()")
    payload = graph_payload(g, stages=found or None, profile=profile, title=title,
                            expanded=expanded)
    if expanded is None:
        chosen = open_paths([grp["path"] for grp in payload["groups"]], collapse, expand)
        if chosen is not None:
            payload["expanded"], payload["auto_open"] = chosen, False
    w = cls(data=payload, expanded=list(payload["expanded"]), color_by=mode,
            stage=len(payload["stages"]) - 1)
    w.graph, w.function = g, function
    w.graphs = [found[0].before] + [s.after for s in found] if found else [g]
    w.args, w.kwargs, w.values = example_args, example_kwargs, {}
    return w
