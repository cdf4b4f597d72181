"""Interactive pictures for a notebook: ``GraphWidget`` (nodes, values, the optimisation passes
one at a time) and the helpers every labkit widget shares.

``GraphWidget(f, *example_args)`` draws ``f``'s graph with

- a node selector: pick a node to see its op, attributes, inputs and users, shape, dtype,
  device and why it is there (placement reason); after ``.run()`` (the *run* button) also a
  summary of the value it computed for the example arguments (min / max / mean / norm, NaN and
  Inf counts, the first values);
- a pass slider: one picture per pass of the pipeline. Picture ``k`` is the graph pass ``k`` was
  given, with what it is about to change marked (removed red and dashed, merged orange, folded
  gold, fused teal, buffer reused violet) and its ``PassRecord`` summary as the caption; tick
  *after* to see the graph the pass made.

The logic (``stages``, ``picture(k)``, ``select_node``, ``node_text``) works without ipywidgets,
so it is testable and usable in plain Python; the controls need ``ipywidgets``. Every widget
displays, next to its live view, a static picture: a saved notebook still shows it.

>>> import labkit as lk
>>> @lk.function
... def f(x):
...     return (x.exp() + x.exp()).sum()
>>> w = GraphWidget(f, lk.ones(3))
>>> [s.name for s in w.stages][:3]
['prune', 'constant_folding', 'cse']
>>> "merged" in w.picture(2).dot
True
"""
import html

import numpy as np

from ..errors import LabkitError
from . import style
from .graph import MAX_NODES, to_dot
from .placement import placement_reason
from .render import GraphPicture


# ---- shared by every widget ----------------------------------------------------------------
def have_ipywidgets():
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def require_ipywidgets(what):
    try:
        import ipywidgets
    except ImportError:
        raise LabkitError(f"{what} needs ipywidgets: pip install 'labkit[notebooks]' (or pip "
                          f"install ipywidgets). The static pictures work without it.") from None
    return ipywidgets


def widget_bundle(box, static_svg_or_html, text, mime="text/html"):
    """A display bundle holding the live widget and a static picture of it: a live kernel
    shows the widget, a saved notebook (GitHub, nbconvert, a kernel-less viewer) the picture
    (under ``mime``: ``text/html``, or ``image/svg+xml`` for an SVG shown as an image)."""
    bundle = {"text/plain": text}
    if static_svg_or_html:
        bundle[mime] = static_svg_or_html
    if box is not None:
        try:
            live = box._repr_mimebundle_()
        except Exception:   # noqa: BLE001 - no widget frontend: the static picture alone
            live = None
        if isinstance(live, tuple):
            live = live[0]
        if live:
            bundle.update({k: v for k, v in live.items() if k != "text/plain"})
    return bundle


# ---- values of a graph's nodes ----------------------------------------------------------------
def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def evaluable_nodes(graph):
    """The nodes whose values can be computed without running a side effect: no stateful or
    control-flow node among them or their inputs, and a known shape."""
    from ..graph.passes.base import has_side_effects
    tainted = set()
    out = []
    for n in graph.nodes:
        bad = has_side_effects(n) or any(getattr(a, "index", None) in tainted
                                         for a in n.inputs if hasattr(a, "graph"))
        if bad:
            tainted.add(n.index)
        elif n.shape is not None:
            out.append(n)
    return out


def node_values(graph, feed_nodes=(), feed_tensors=()):
    """``{node name: NumPy array}``: what each side-effect-free node of ``graph`` computes when
    its placeholders ``feed_nodes`` are fed ``feed_tensors``. Assigns and other side effects
    are not run, so variables keep their values."""
    from ..graph.compile import compile_graph
    from ..graph.executor import feed_array
    fetch = evaluable_nodes(graph)
    if not fetch:
        return {}
    plan = compile_graph(graph, fetch, feed_nodes)[1]
    arrays = [t._data if t._data is not None else feed_array(n, t)
              for t, n in zip(feed_tensors, feed_nodes)]
    return {n.name: _host(v) for n, v in zip(plan.fetch_nodes, plan(*arrays))}


def _feeds_for(graph, function, args, kwargs):
    """The placeholders of ``graph`` (one stage of ``function``'s trace) and the tensors that
    feed them, for these example arguments."""
    from ..graph.function import _flatten
    leaves = []
    structure = _flatten((args, kwargs), leaves, "", None)
    key = (structure, tuple((t.shape, t.dtype.name, t.device.name, t._requires_grad)
                            for t in leaves))
    trace = function._cache[key]
    by_name = {n.name: n for n in graph.nodes}
    return [by_name[n.name] for n in trace.raw_feeds], leaves


def value_summary(value):
    """A few lines on an array: shape and dtype, min / max / mean / L2 norm, NaN and Inf counts
    and the first values."""
    a = np.asarray(value)
    lines = [f"value: {a.dtype} {tuple(a.shape)}"]
    if a.size and a.dtype.kind in "fiub":
        f = a.astype(np.float64, copy=False)
        finite = np.isfinite(f)
        nan, inf = int(np.isnan(f).sum()), int(np.isinf(f).sum())
        if finite.any():
            v = f[finite]
            lines.append(f"min {v.min():.4g} · max {v.max():.4g} · mean {v.mean():.4g} · "
                         f"norm {np.sqrt((v * v).sum()):.4g}")
        if nan or inf:
            lines.append(f"NON-FINITE: {nan} NaN, {inf} Inf of {a.size}")
    few = np.array2string(a.reshape(-1)[:6], precision=4, separator=", ")
    lines.append(few if a.size <= 6 else few[:-1] + f", ... ({a.size:,} values)]")
    return "\n".join(lines)


# ---- what each pass changed ---------------------------------------------------------------
CHANGE_STYLE = {   # mark: (border colour, DOT style, legend text)
    "removed": ("#dc2626", "dashed,filled", "removed"),
    "forwarded": ("#dc2626", "dashed,filled", "forwarded (a no-op: users read its input)"),
    "merged": ("#ea580c", "bold,filled", "merged into an equal node"),
    "kept": ("#ea580c", "filled", "kept: others merged into it"),
    "folded": ("#ca8a04", "bold,filled", "folded into a constant"),
    "fused": ("#0d9488", "bold,filled", "fused into one kernel"),
    "new": ("#0d9488", "bold,filled", "new node (the fused kernel)"),
    "reused": ("#7c3aed", "bold,filled", "writes into a dead buffer"),
}


def pass_marks(record, after=False):
    """``{node name: (mark, note)}`` of the nodes a ``PassRecord`` changed, as seen in the
    graph before the pass (``after=False``) or after it."""
    marks = {}
    if not after:
        for n in record.removed:
            marks[n] = ("removed", f"{record.name}: removed")
        for a, b in record.merged:
            marks[a] = ("merged", f"{record.name}: merged into {b}")
            marks.setdefault(b, ("kept", f"{record.name}: {a} merged into this"))
        for a, b in record.forwarded:
            marks[a] = ("forwarded", f"{record.name}: users now read {b}")
        for new, names in record.fused:
            for n in names:
                marks[n] = ("fused", f"{record.name}: fused into {new}")
    else:
        for _, b in record.merged:
            marks[b] = ("kept", f"{record.name}: others merged into this")
        for new, names in record.fused:
            marks[new] = ("new", f"{record.name}: fuses {' + '.join(names)}")
    for n in record.folded:
        marks[n] = ("folded", f"{record.name}: folded into a constant")
    for a, b in record.reused:
        marks.setdefault(a, ("reused", f"{record.name}: writes into the buffer of {b}"))
    return marks


class Stage:
    """One pass of a pipeline: its name, the graph it was given, the graph it made, its record."""

    def __init__(self, name, before, after):
        self.name, self.before, self.after = name, before, after
        self.record = after.history[-1] if after.history else None

    def __repr__(self):
        return f"<Stage {self.record.summary() if self.record else self.name}>"


def pass_stages(obj, *args, passes=None, **kwargs):
    """``[Stage]``: for each pass (default: the pipeline's enabled passes) the graph before and
    after it. ``obj``: an ``lk.function`` with example arguments (its raw trace is optimised by
    each prefix of the passes, as ``f.graph(*args, passes=prefix)``) or a ``Graph``."""
    from ..graph import Function, Graph
    from ..graph import passes as gp
    names = list(gp.default_passes() if passes is None else passes)
    if isinstance(obj, Function):
        graphs = [obj.graph(*args, passes=names[:k], **kwargs) for k in range(len(names) + 1)]
    elif isinstance(obj, Graph):
        graphs = [obj] + [g for _, g in gp.stages(obj, names)]
    else:
        raise TypeError(f"pass_stages needs an lk.function (with example arguments) or an "
                        f"lk.Graph, not a {type(obj).__name__}")
    return [Stage(getattr(p, "name", str(p)), graphs[k], graphs[k + 1])
            for k, p in enumerate(names)]


# ---- the graph widget ---------------------------------------------------------------------
class GraphWidget:
    """A graph to explore: select a node for its details, step through the passes.

    ``GraphWidget(f, *example_args)`` (an ``lk.function``) or ``GraphWidget(graph)``.
    ``passes``: the pipeline to step through (default: the enabled passes). Without ipywidgets,
    use ``.picture(k)``, ``.select_node(name)``, ``.node_text(name)`` and ``.run()`` directly.
    """

    def __init__(self, obj, *example_args, passes=None, max_nodes=MAX_NODES, **example_kwargs):
        from ..graph import Function
        self.function = obj if isinstance(obj, Function) else None
        self.args, self.kwargs = example_args, example_kwargs
        self.stages = pass_stages(obj, *example_args, passes=passes, **example_kwargs)
        self.raw = (self.stages[0].before if self.stages
                    else obj.graph(*example_args, passes=[], **example_kwargs)
                    if self.function else obj)
        self.max_nodes = max_nodes
        self.index = len(self.stages)      # which picture: pass k's, or len(stages) = result
        self.after = False
        self.selected = None               # a node name
        self.values = {}                   # graph id -> {node name: array} after .run()
        self._controls = None

    # ---- what is shown --------------------------------------------------------------------
    @property
    def graph(self):
        """The graph shown now: the result, or the graph pass ``index`` was given / made."""
        if self.index >= len(self.stages):
            return self.stages[-1].after if self.stages else self.raw
        s = self.stages[self.index]
        return s.after if self.after else s.before

    def marks(self, k=None, after=None):
        k = self.index if k is None else k
        after = self.after if after is None else after
        if k >= len(self.stages) or self.stages[k].record is None:
            return {}
        return pass_marks(self.stages[k].record, after)

    def caption(self, k=None, after=None):
        k = self.index if k is None else k
        after = self.after if after is None else after
        if k >= len(self.stages):
            done = len(self.stages)
            return f"result: after all {done} passes" if done else "the graph (no passes)"
        rec = self.stages[k].record
        where = "after" if after else "before"
        return f"pass {k + 1}/{len(self.stages)} ({where}) · {rec.summary()}"

    def picture(self, k=None, after=None):
        """The picture of pass ``k`` (default: the current one) as a ``GraphPicture``: the graph
        it was given with what it changes marked (``after=True``: the graph it made)."""
        k = self.index if k is None else k
        after = self.after if after is None else after
        if k >= len(self.stages):
            g = self.stages[-1].after if self.stages else self.raw
        else:
            g = self.stages[k].after if after else self.stages[k].before
        marks = self.marks(k, after)
        selected = self.selected

        def node_style(n):
            extra = {}
            m = marks.get(n.name)
            if m is not None:
                border, dot_style, _ = CHANGE_STYLE[m[0]]
                extra.update({"color": border, "penwidth": "3", "style": dot_style,
                              "note": m[1]})
            if n.name == selected:
                extra.update({"color": style.TEXT, "penwidth": "4"})
            return extra or None

        dot = to_dot(g, max_nodes=self.max_nodes, title=self.caption(k, after),
                     node_style=node_style)
        if marks:
            used = sorted({m for m, _ in marks.values()}, key=list(CHANGE_STYLE).index)
            key = "".join(f'    legend_{m} [label="{CHANGE_STYLE[m][2]}", shape=box, '
                          f'style="{CHANGE_STYLE[m][1]}", color="{CHANGE_STYLE[m][0]}", '
                          f'penwidth=3, fillcolor="white", fontsize=9];\n' for m in used)
            dot = (dot.rstrip().rstrip("}") + '  subgraph cluster_changes {\n    label="what '
                   f'{self.stages[k].name} changes"; fontsize=9; style="dashed"; '
                   f'color="{style.MUTED}";\n{key}  }}\n}}\n')
        return GraphPicture(dot, graph=g, kind="graph widget")

    @property
    def pictures(self):
        """One picture per pass (see ``picture``)."""
        return [self.picture(k, False) for k in range(len(self.stages))]

    # ---- nodes ---------------------------------------------------------------------------
    def select_node(self, name):
        """Select a node of the shown graph by name (None: no selection); returns its text."""
        if name is not None and not any(n.name == name for n in self.graph.nodes):
            raise KeyError(f"GraphWidget: no node named {name!r} in {self.graph.name}; the nodes "
                           f"are {[n.name for n in self.graph.nodes][:20]}")
        self.selected = name
        self._refresh()
        return self.node_text(name) if name is not None else ""

    def node_text(self, name, graph=None):
        """What the node selector shows: op and attributes, inputs and users, type, device,
        placement reason, name scope, role, what the current pass does to it, and after
        ``.run()`` a summary of its value."""
        g = self.graph if graph is None else graph
        n = next(m for m in g.nodes if m.name == name)
        ins = [a.name if hasattr(a, "graph") else repr(a) for a in n.inputs]
        users = [m.name for m in g.nodes if any(a is n for a in m.inputs)]
        attrs = {k: v for k, v in (n.attrs or {}).items() if k != "res"}
        dev = getattr(n.device, "name", n.device)
        lines = [f"%{n.index} {n.name} = {n.op_name}({', '.join(ins)})",
                 f"kind: {n.kind} · role: {n.role}" + (f" · scope: {n.scope}" if n.scope else ""),
                 f"output: {getattr(n.dtype, 'name', n.dtype)} "
                 f"{tuple(n.shape) if n.shape is not None else '?'}",
                 f"device: {dev} ({placement_reason(n)})"]
        if attrs:
            lines.append("attributes: " + ", ".join(f"{k}={_short(v)}" for k, v in attrs.items()))
        lines.append(f"users: {', '.join(users) if users else '(none: an output or unused)'}")
        if n.stateful:
            lines.append("stateful: has a side effect (not run by the value view)")
        m = self.marks().get(n.name) if graph is None else None
        if m is not None:
            lines.append(m[1])
        values = self.values.get(id(g))
        if values is not None:
            lines.append(value_summary(values[n.name]) if n.name in values
                         else "value: not computed (a side effect, or depends on one)")
        return "\n".join(lines)

    def run(self):
        """Compute the value of every side-effect-free node of the shown graph for the example
        arguments (nothing is assigned); the node view then shows a summary of each."""
        if self.function is None:
            raise LabkitError("GraphWidget.run needs an lk.function and example arguments: "
                              "GraphWidget(f, x, ...)")
        g = self.graph
        feeds, tensors = _feeds_for(g, self.function, self.args, self.kwargs)
        self.values[id(g)] = node_values(g, feeds, tensors)
        self._refresh()
        return self.values[id(g)]

    # ---- passes ----------------------------------------------------------------------------
    def show_pass(self, k, after=False):
        """Show pass ``k`` (0-based; ``len(stages)``: the result)."""
        if not 0 <= k <= len(self.stages):
            raise IndexError(f"GraphWidget: pass {k} out of range 0..{len(self.stages)}")
        self.index, self.after = k, after
        if self.selected is not None and not any(n.name == self.selected
                                                 for n in self.graph.nodes):
            self.selected = None
        self._refresh()
        return self.picture()

    # ---- the live controls -------------------------------------------------------------------
    def widget(self):
        """The ipywidgets view (built once)."""
        if self._controls is None:
            self._build()
        return self._controls["box"]

    def _build(self):
        w = require_ipywidgets("GraphWidget")
        n = len(self.stages)
        slider = w.IntSlider(value=self.index, min=0, max=n, description="pass",
                             continuous_update=False)
        after = w.Checkbox(value=self.after, description="after", indent=False)
        nodes = w.Dropdown(description="node")
        run = w.Button(description="run", tooltip="compute every node's value for the example "
                       "arguments", disabled=self.function is None)
        caption, image, details = w.HTML(), w.HTML(), w.HTML()
        self._controls = dict(slider=slider, after=after, nodes=nodes, caption=caption,
                              image=image, details=details, run=run)
        slider.observe(lambda ch: self.show_pass(ch["new"], after.value), names="value")
        after.observe(lambda ch: self.show_pass(slider.value, ch["new"]), names="value")
        nodes.observe(lambda ch: self.select_node(ch["new"]), names="value")
        run.on_click(lambda _: self.run())
        self._controls["box"] = w.VBox([w.HBox([slider, after]), caption,
                                        w.HBox([nodes, run]), image, details])
        self._refresh()

    def _refresh(self):
        c = self._controls
        if c is None or c.get("busy"):
            return
        c["busy"] = True
        try:
            g = self.graph
            options = [("(none)", None)] + [(f"%{n.index} {n.name} · {n.op_name}", n.name)
                                            for n in g.nodes]
            if list(c["nodes"].options) != options:
                c["nodes"].options = options
            c["nodes"].value = self.selected
            c["slider"].value, c["after"].value = self.index, self.after
            c["after"].disabled = self.index >= len(self.stages)
            c["caption"].value = f"<b>{html.escape(self.caption())}</b>"
            c["image"].value = _picture_html(self.picture())
            c["details"].value = ("" if self.selected is None else
                                  f"<pre style='font-size:11px'>"
                                  f"{html.escape(self.node_text(self.selected))}</pre>")
        finally:
            c["busy"] = False

    def _repr_mimebundle_(self, include=None, exclude=None):
        box = self.widget() if have_ipywidgets() else None
        return widget_bundle(box, _picture_html(self.picture()), repr(self))

    def __repr__(self):
        return (f"<GraphWidget of {self.raw.name!r}: {len(self.stages)} passes; "
                f"{self.caption()}>")


def _short(v):
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _picture_html(pic):
    svg = pic._inline_svg()
    if svg is None:   # no graphviz: show the DOT text
        return f"<pre style='font-size:10px'>{html.escape(pic.dot)}</pre>"
    return svg
