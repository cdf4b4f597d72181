"""Traced graph -> plan: the one path from a graph to the code that runs it.

Every maker of plans calls ``compile_graph``: ``lk.function`` (each trace, with the optimisation
pipeline), ``Graph.run`` (``run_graph``, no passes: an explicit graph runs as it was built),
the sub-graphs that control-flow nodes carry, and ``lk.viz`` when it shows a graph's values. In
order:

1. *placement*, decided once: a graph that asks for it (an explicit ``lk.device`` request or a
   colocation on some node, or nodes on more than one device: ``needs_placement``) and
   was not placed yet gets the ``placement`` pass, so the passes that follow see final devices
   (``lk.config.disable_pass("placement")`` leaves the devices the nodes were made on);
2. the *passes* asked for (``lk.function``: the default pipeline of ``labkit.graph.passes``);
3. *partition*: a graph that asked for placement gets a Send/Recv pair on each edge between
   devices;
4. the *plan*: ``executor.Plan`` compiles the nodes the fetches need into straight-line code,
   one function per device.

Nothing here runs a node; the executor runs plans and imports no pass, and no pass imports
the executor.

>>> import labkit as lk
>>> from labkit.graph.compile import compile_graph
>>> with lk.Graph() as g:
...     x = lk.placeholder((3,), name="x")
...     y = (x.exp() + x.exp()) * 2.0
>>> opt, plan = compile_graph(g, [y.node], [x.node], passes=None)
>>> len(g), len(opt), opt.history[2].summary()
(5, 4, 'cse: 5 -> 4 nodes; merged 1')
>>> plan(lk.zeros(3).numpy())[0].tolist()
[4.0, 4.0, 4.0]
"""
from .. import config
from ..errors import GraphError, LabkitError
from ..tensor.tensor import Tensor
from .executor import Plan, feed_array
from .node import PLACEHOLDER, as_node
from .passes.base import run_passes
from .passes.partition import partition_graph
from .passes.placement import placement


def compile_graph(graph, fetch_nodes=None, feed_nodes=(), passes=(), include_stateful=False,
                  what=None):
    """``(graph, plan)``: ``graph`` placed (when it asks for placement) and put through
    ``passes``, and the ``Plan`` computing ``fetch_nodes`` (default: the graph's outputs) from
    ``feed_nodes`` on it (partitioned first when it spans devices).

    ``passes``: ``()`` for none (the graph runs as built), ``None`` for the default pipeline
    (``lk.config.disable_pass`` applies), or a list of names or functions. The passes keep the
    fetches computable; placeholders are found again by name. ``include_stateful``: the plan
    runs every side effect of the graph, fetched or not (a function's assigns). ``what`` names
    the caller in errors.
    """
    if fetch_nodes is None:
        fetch_nodes = graph.outputs
    fetch_nodes, feed_nodes = list(fetch_nodes), list(feed_nodes)
    spans = not getattr(graph, "partitioned", False) and needs_placement(graph)
    if spans and not getattr(graph, "placed", False) and \
            "placement" not in config.disabled_passes():
        graph = placement(graph)            # node for node: the same indices
        fetch_nodes = [graph.nodes[n.index] for n in fetch_nodes]
        feed_nodes = [graph.nodes[n.index] for n in feed_nodes]
    if passes != ():
        before = graph
        keep = None if graph.outputs is not None and fetch_nodes == list(graph.outputs) \
            else fetch_nodes
        graph = run_passes(graph, passes, outputs=keep)
        if graph is not before:
            fetch_nodes = list(graph.outputs)
            feed_nodes = _same_placeholders(graph, feed_nodes, what)
    ready = graph
    if spans:
        ready, mapping, _, _ = partition_graph(graph)
        fetch_nodes = [mapping[n.index] for n in fetch_nodes]
        feed_nodes = [mapping[n.index] for n in feed_nodes]
    return graph, Plan(ready, fetch_nodes, feed_nodes, include_stateful=include_stateful)


def needs_placement(graph):
    """Whether ``graph`` asks for placement: an explicit request or colocation on some node,
    or nodes on more than one device."""
    first = None
    for n in graph.nodes:
        if n.requested_device is not None or n.colocation is not None:
            return True
        if n.device is not None:
            if first is None:
                first = n.device.name
            elif n.device.name != first:
                return True
    return False


def _same_placeholders(graph, feed_nodes, what):
    """The placeholders of ``graph`` that have the names of ``feed_nodes`` (passes keep every
    placeholder, and its name)."""
    by_name = {n.name: n for n in graph.nodes}
    missing = [n.name for n in feed_nodes if n.name not in by_name]
    if missing:
        raise LabkitError(f"{what or 'compile_graph'}: a graph pass removed the placeholders "
                          f"{missing}; passes must keep every placeholder")
    return [by_name[n.name] for n in feed_nodes]


def run_graph(graph, fetches, feeds=None):
    """``Graph.run``: the values of ``fetches`` (a tensor, a list/tuple or a dict of them) with
    ``feeds`` for placeholders; one plan per (fetches, feeds) pair, kept on the graph."""
    items, rebuild = _flatten_fetches(fetches)
    fetch_nodes = [as_node(graph, t) for t in items]
    feeds = feeds or {}
    feed_nodes, feed_values = [], []
    for k, v in feeds.items():
        node = as_node(graph, k) if not isinstance(k, str) else graph.node(k)
        if node.kind != PLACEHOLDER:
            raise GraphError(f"feeds: '{node.name}' is a {node.op_name}, not a placeholder; "
                             f"only placeholders can be fed")
        feed_nodes.append(node)
        feed_values.append(feed_array(node, v))
    key = (tuple(n.index for n in fetch_nodes), tuple(n.index for n in feed_nodes))
    plan = graph._plans.get(key)
    if plan is None:
        with graph._lock:
            plan = graph._plans.get(key)
            if plan is None:
                plan = graph._plans[key] = compile_graph(graph, fetch_nodes, feed_nodes)[1]
    arrays = plan(*feed_values)
    return rebuild([Tensor._make(a, n.device) for a, n in zip(arrays, plan.fetch_nodes)])


def _flatten_fetches(fetches):
    if isinstance(fetches, dict):
        keys = list(fetches)
        return [fetches[k] for k in keys], lambda vals: dict(zip(keys, vals))
    if isinstance(fetches, (list, tuple)):
        kind = type(fetches)
        return list(fetches), lambda vals: kind(vals)
    return [fetches], lambda vals: vals[0]
