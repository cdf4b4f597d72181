"""What labkit's notebook widgets share: the display bundle of a live widget and its static
picture, the values of a graph's nodes and their summaries, and the optimisation passes one
at a time with what each changed (the graph explorer's pass slider reads them).

>>> import labkit as lk
>>> @lk.function
... def f(x):
...     return (x.exp() + x.exp()).sum()
>>> stages = pass_stages(f, lk.ones(3))
>>> [s.name for s in stages][:3]
['prune', 'constant_folding', 'cse']
>>> sorted(m for m, _ in pass_marks(stages[2].record).values())
['kept', 'merged']
"""
import numpy as np

from ..errors import LabkitError


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
