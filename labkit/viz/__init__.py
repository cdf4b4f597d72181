"""Pictures of what labkit does: graphs, placement (timelines and widgets come later).

Every picture is DOT text laid out by graphviz's ``dot`` and shown inline as SVG, so a saved
notebook keeps it. ``lk.Graph``, ``lk.Tensor`` and ``lk.nn.Module`` render themselves too.

>>> import labkit as lk
>>> model = lk.nn.Linear(3, 2)
>>> pic = lk.viz.graph(lambda x: model(x).sum(), lk.ones(4, 3))
>>> pic.save("linear.svg")            # doctest: +SKIP
>>> lk.viz.placement(pic.graph)       # doctest: +SKIP
"""
from .graph import as_graph, graph, to_dot
from .html import module_html, tensor_html
from .placement import placement, placement_reason
from .render import GraphPicture, GraphvizNotFound, RenderError, find_dot, run_dot
from .tape import TapeGraph, tape_graph

__all__ = ["GraphPicture", "GraphvizNotFound", "RenderError", "TapeGraph", "as_graph",
           "find_dot", "graph", "module_html", "placement", "placement_reason", "run_dot",
           "tape_graph", "tensor_html", "to_dot"]
