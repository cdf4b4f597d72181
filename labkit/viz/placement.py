"""``lk.viz.placement``: the same graph picture, coloured by the device each node runs on.

A legend lists every device with its colour and node count; edges that cross devices are drawn
red and dashed (that is where partitioning puts a Send/Recv pair), and ``send`` / ``recv`` ops
keep their flag shape and purple border. Hovering a node shows why it is on its device: the
reason the placement pass recorded (``node.placement_reason``) when there is one, otherwise what
can be told from the node itself (an explicit ``lk.device`` request, a transfer's target, state
living where its tensor lives, an op following its inputs).

>>> import labkit as lk
>>> lk.devices.configure(cpus=2)
>>> @lk.function
... def f(x):
...     return ((x * 2.0).to("cpu:1") + 1.0).sum()
>>> pic = lk.viz.placement(f, lk.ones(3))
>>> "cpu:1" in pic.dot and "crosses devices" in pic.dot
True
>>> lk.devices.configure(cpus=1)
"""
from .graph import MAX_NODES, as_graph, to_dot
from .render import GraphPicture


def placement_reason(node):
    """Why ``node`` is on its device, as a short phrase."""
    why = getattr(node, "placement_reason", None)
    if why is None:
        why = (getattr(node, "attrs", None) or {}).get("placement_reason")
    if why:
        return str(why)
    requested = getattr(node, "requested_device", None)
    if requested is not None:
        return f"requested with lk.device('{getattr(requested, 'name', requested)}')"
    kind = getattr(node, "kind", "op")
    if kind == "capture":
        return "state: lives where its tensor lives"
    if kind == "placeholder":
        return "input: where the fed value lives"
    if kind == "constant":
        return "constant: made on this device"
    op = getattr(node, "op", None)
    name = getattr(node, "op_name", None) or getattr(op, "name", "")
    if name in ("send", "recv"):
        return "inserted at a device boundary by partitioning"
    if getattr(op, "out_device", None) is not None:
        return "a transfer: its output lives on the target device"
    if getattr(node, "stateful", False):
        return "stateful: colocated with the state it changes"
    if any(hasattr(a, "device") and hasattr(a, "inputs") for a in getattr(node, "inputs", ())):
        return "follows its inputs' device"
    return "the default device when it was made (lk.device)"


def placement(obj, *example_args, collapse=None, max_nodes=MAX_NODES, edge_labels=None,
              rankdir="TB", title=None, expand=None, **example_kwargs):
    """Draw ``obj``'s graph coloured by device; returns a ``GraphPicture``.

    Accepts what ``lk.viz.graph`` accepts (a Graph, an ``lk.function`` with example arguments,
    an eager tensor...). Each node's tooltip gives its device and the reason it is there.
    A distributed tensor (``DTensor``) is drawn as its pieces on their devices instead
    (``labkit.viz.sharding``).
    """
    if hasattr(obj, "placements") and hasattr(obj, "device_mesh"):
        from .sharding import sharding
        return sharding(obj)
    g = as_graph(obj, *example_args, **example_kwargs)
    dot = to_dot(g, color_by="device", collapse=collapse, max_nodes=max_nodes,
                 edge_labels=edge_labels, rankdir=rankdir,
                 title=title if title is not None else f"{getattr(g, 'name', 'graph')} placement",
                 reasons=placement_reason)
    explore = {"collapse": collapse, "expand": expand, "title": title}
    return GraphPicture(dot, graph=g, kind="placement",
                        explore={k: v for k, v in explore.items() if v is not None})
