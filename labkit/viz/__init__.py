"""Pictures of what labkit does: graphs, placement, timelines, gradients, live training curves
and widgets.

Graph pictures are DOT text laid out by graphviz's ``dot``; timelines, gradient charts and
training curves are SVG written directly. All show inline as SVG, so a saved notebook keeps
them. In a live notebook the graph explorer (``graph_explorer``, what ``graph`` and
``placement`` show) and the timeline explorer (``timeline_explorer``, what ``timeline`` and a
``Profile`` show; ``TimelineWidget`` is another name for it) take their place, with the live
view's curves and Stop button: they need anywidget, and each carries its static picture too. ``lk.Graph``, ``lk.Tensor``, ``lk.nn.Module`` and ``lk.profile()``'s ``Profile``
render themselves.

>>> import labkit as lk
>>> model = lk.nn.Linear(3, 2)
>>> pic = lk.viz.graph(lambda x: model(x).sum(), lk.ones(4, 3))
>>> pic.save("linear.svg")            # doctest: +SKIP
>>> lk.viz.placement(pic.graph)       # doctest: +SKIP
"""
from .graph import as_graph, graph, to_dot
from .html import module_html, tensor_html
from .placement import placement, placement_reason
from .sharding import sharding
from .memory import memory
from .render import GraphPicture, GraphvizNotFound, RenderError, find_dot, run_dot
from .tape import TapeGraph, tape_graph
from .gradients import GradientMonitor, gradient_flow, gradients
from .live import TrainingView, live
from .timeline import TimelinePicture, timeline
from .timeline_explorer import timeline_explorer
from .graph_explorer import graph_explorer
TimelineWidget = timeline_explorer      # the one interactive timeline, by its older name
from .. import display as _display

# how the layers below show their objects in a notebook (they do not import viz)
_display.register("graph", graph)
_display.register("profile", timeline)
_display.register("tensor", tensor_html)
_display.register("module", module_html)

__all__ = ["GradientMonitor", "GraphPicture", "GraphvizNotFound", "RenderError",
           "TapeGraph", "TimelinePicture", "TimelineWidget", "TrainingView", "as_graph",
           "find_dot", "gradient_flow", "graph_explorer", "gradients", "graph", "live",
           "memory", "module_html", "sharding",
           "placement", "placement_reason", "run_dot", "tape_graph", "tensor_html", "timeline",
           "timeline_explorer", "to_dot"]
