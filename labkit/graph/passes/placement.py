"""Placement: choose the device every node runs on, and record why.

In order of precedence:

1. *Fixed* nodes stay where their value lives: a placeholder (where the fed value lives), a
   capture (a variable lives where its buffer is), a constant, a transfer (``t.to(d)`` runs on
   ``d``, its target), an op tied to a resource (a queue op runs where its queue is), a
   control-flow node (where its inputs were when it was traced).
2. *Colocation groups* share one device: a variable with its assigns (and the views an assign
   writes through), a stateful op with the state it changes, a control-flow node with the
   nodes that take its tuple of results apart, and the ops made inside
   ``with lk.colocate_with(t)`` with ``t``. A group holding a fixed node is on that node's
   device; two fixed nodes on different devices in one group are an error.
3. *Explicit requests* (ops made inside ``with lk.device(...)`` while building a graph) are
   honoured when the op has a kernel for that device, and rejected with an error naming the
   op, the device and the devices it has kernels for when it has none. A request that
   conflicts with a colocation gives way to it (the reason says so) unless it was made with
   ``force=True``, which makes the conflict an error.
4. Everything else is placed by a *cost heuristic*: of the devices the graph already uses that
   have a kernel for the op, the one with the least estimated time for its compute plus moving
   its inputs there (bytes / link bandwidth + a per-transfer latency). Equal devices (virtual
   CPUs) never win by compute alone, so an op follows its inputs unless a faster device earns
   back the copy.

Each node's ``device`` is set and ``node.placement_reason`` says why; ``graph.placement()``
reports both for every node, and ``lk.viz.placement`` shows them as tooltips.

>>> import labkit as lk
>>> from labkit.graph import passes
>>> lk.devices.configure(cpus=2)
>>> with lk.Graph() as g:
...     x = lk.placeholder((2, 2), name="x")
...     with lk.device("cpu:1"):
...         y = x @ x
...     z = y + 1.0
>>> placed = passes.placement(g)
>>> print(placed.placement())
node    op           device  why
x       placeholder  cpu:0   input: where the fed value lives
matmul  matmul       cpu:1   explicit: lk.device('cpu:1')
add     add          cpu:1   follows its inputs' device (heuristic: moves no data)
>>> lk.devices.configure(cpus=1)
"""
from ...devices import get_device
from ...errors import DeviceError
from ...tensor.ops import linalg
from ..node import CAPTURE, CONSTANT, PLACEHOLDER, Node
from .base import (ASSIGN_OPS, FRESH_OPS, Rewriter, graph_pass, has_side_effects, is_opaque)

ALL_TYPES = frozenset(["cpu", "gpu"])
_kernel_types = {}       # op -> device types it has kernels for (default: every type)

# the cost model: rough, but of the right order for this library's NumPy/CuPy kernels
_ELEMENTS_PER_S = {"cpu": 1e9, "gpu": 1e11}
_FLOPS = {"cpu": 5e10, "gpu": 2e13}
_LAUNCH_S = {"cpu": 1e-6, "gpu": 8e-6}
_LINK = {("cpu", "cpu"): (10e9, 5e-6), ("cpu", "gpu"): (12e9, 15e-6),
         ("gpu", "cpu"): (12e9, 15e-6), ("gpu", "gpu"): (50e9, 15e-6)}


class PlacementError(DeviceError):
    """A device constraint that cannot be met (no kernel there, or a forced conflict)."""


def kernel_devices(op):
    """The device types (``'cpu'``, ``'gpu'``) that ``op`` has a kernel for.

    Kernels are written once against the array module, so by default every op runs on every
    device type; ``set_kernel_devices`` narrows that for an op that cannot.
    """
    return _kernel_types.get(op, ALL_TYPES)


def set_kernel_devices(op, *types):
    """Declare that ``op`` has kernels only for these device types (e.g. ``'cpu'``).

    >>> import labkit as lk
    >>> from labkit.graph import passes
    >>> from labkit.tensor.shape_rules import same_as_first
    >>> host_only = lk.op("host_only", shape=same_as_first, register=False)(lambda xp, x: x)
    >>> passes.set_kernel_devices(host_only, "cpu")
    >>> sorted(passes.kernel_devices(host_only))
    ['cpu']
    """
    bad = set(types) - ALL_TYPES
    if bad or not types:
        raise ValueError(f"set_kernel_devices({op.name}): device types are 'cpu' and 'gpu'; "
                         f"got {types!r}")
    _kernel_types[op] = frozenset(types)


# ---- what a node is tied to -------------------------------------------------------------------
def _read_only_stateful():
    from ..variables import _save_kernel
    return {_save_kernel}


def _is_variable(value):
    from ..variables import Variable
    return isinstance(value, Variable)


def _fixed(node):
    """(device, reason) for a node whose device is not a choice, or None."""
    if node.kind == PLACEHOLDER:
        return node.device, "input: where the fed value lives"
    if node.kind == CAPTURE:
        if _is_variable(node.value):
            return node.device, f"variable {node.value.name}: lives where its buffer is"
        return node.device, "a captured tensor: lives where it is"
    if node.kind == CONSTANT:
        return node.device, "constant: made on this device"
    if node.kind != "op":
        return node.device, "a node of an unknown kind: left where it is"
    op = node.op
    if op.name == "send" and "src" in node.attrs:
        return get_device(node.attrs["src"]), "partition: sends to " + node.attrs["dst"]
    if op.out_device is not None:
        dev = op.out_device(node.attrs)
        if op.name == "to_device":
            return dev, "a transfer: its output lives on its target device"
        if op.name == "recv":
            return dev, "partition: receives from " + node.attrs["src"]
        return dev, "tied to a resource: runs where it lives"
    if is_opaque(node):
        return node.device, "control flow: runs where its inputs were when traced"
    return None


def _view_chain(target):
    """The views an in-place op writes through, and the node they are views of."""
    chain = []
    while (isinstance(target, Node) and target.kind == "op" and not has_side_effects(target)
           and target.op not in FRESH_OPS and target.op.out_device is None
           and target.inputs and isinstance(target.inputs[0], Node)):
        chain.append(target)
        target = target.inputs[0]
    return chain, target


def _mutable_root(a):
    """The capture (or side effect) that input ``a`` is a view of, or None."""
    chain, root = _view_chain(a)
    if isinstance(root, Node) and (root.kind == CAPTURE or has_side_effects(root)):
        return chain, root
    return None, None


class _Groups:
    """Colocation groups (union-find), with the link that put each node in its group."""

    def __init__(self, nodes):
        self.parent = list(range(len(nodes)))
        self.link = {}          # index -> (index of the node it is colocated with, why)

    def find(self, i):
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(self, i, j, why):
        self.link.setdefault(i, (j, why))
        a, b = self.find(i), self.find(j)
        if a != b:
            self.parent[max(a, b)] = min(a, b)


def _colocation_groups(nodes):
    groups = _Groups(nodes)
    by_name = {n.name: n for n in nodes}
    read_only = _read_only_stateful()
    for n in nodes:
        if n.kind != "op":
            continue
        for a in n.inputs:     # a tuple of results (control flow) is taken apart where it is
            if isinstance(a, Node) and a.kind == "op" and a.dtype is None:
                groups.join(n.index, a.index, f"takes apart the results of {a.name}")
        if n.colocation is not None and n.colocation in by_name:
            groups.join(n.index, by_name[n.colocation].index, "lk.colocate_with")
        if not n.stateful or n.op in read_only or _fixed(n) is not None:
            continue
        targets = n.inputs[:1] if n.op in ASSIGN_OPS else n.inputs
        for a in targets:
            chain, root = _mutable_root(a)
            if root is None:
                continue
            why = ("an assign runs where its variable lives" if n.op in ASSIGN_OPS
                   else f"{n.op.name} changes it in place")
            groups.join(n.index, root.index, why)
            for view in chain:
                groups.join(view.index, root.index, f"a view that {n.name} writes through")
    return groups


# ---- the cost heuristic -----------------------------------------------------------------------
def _nbytes(node):
    if node.shape is None or node.dtype is None or any(s is None for s in node.shape):
        return 0
    size = 1
    for s in node.shape:
        size *= s
    return size * node.dtype.np.itemsize


def _compute_seconds(node, dtype_):
    out = _nbytes(node) // max(node.dtype.np.itemsize, 1) if node.dtype is not None else 0
    if node.op is linalg.matmul:
        a = node.inputs[0]
        axis = -2 if node.attrs.get("transpose_a") else -1
        k = a.shape[axis] if isinstance(a, Node) and a.shape and len(a.shape) >= -axis \
            and a.shape[axis] else 1
        return _LAUNCH_S[dtype_] + 2.0 * out * k / _FLOPS[dtype_]
    ins = sum(_nbytes(a) for a in node.inputs if isinstance(a, Node))
    elements = max(out, ins // 4)
    return _LAUNCH_S[dtype_] + elements / _ELEMENTS_PER_S[dtype_]


def _move_seconds(nbytes, src, dst):
    bandwidth, latency = _LINK[(src.type, dst.type)]
    return latency + nbytes / bandwidth


def _heuristic(node, candidates):
    """(device, reason): the candidate with the least compute + transfer time."""
    inputs = [a for a in node.inputs if isinstance(a, Node)]
    if not inputs:
        return node.device, "made on the default device (no inputs to follow)"
    costs = []
    for d in candidates:
        move = sum(_move_seconds(_nbytes(a), a.device, d) for a in inputs
                   if a.device.name != d.name)
        local = sum(_nbytes(a) for a in inputs if a.device.name == d.name)
        costs.append((_compute_seconds(node, d.type) + move, -local, d.name != node.device.name,
                      d.name, d, move))
    costs.sort(key=lambda c: c[:4])
    best = costs[0]
    dev = best[4]
    if all(a.device.name == dev.name for a in inputs):
        return dev, "follows its inputs' device (heuristic: moves no data)"
    others = ", ".join(f"{c[3]} {c[0] * 1e6:.0f} us" for c in costs)
    return dev, f"heuristic: least estimated compute + transfer time ({others})"


# ---- the pass -------------------------------------------------------------------------------
def _request_text(node):
    force = ", force=True" if node.device_forced else ""
    return f"lk.device('{node.requested_device.name}'{force})"


def _no_kernel(node, dev, why):
    kinds = ", ".join(sorted(kernel_devices(node.op)))
    return PlacementError(
        f"cannot place {node.name} ({node.op.name}) on {dev.name}: {node.op.name} has no "
        f"{dev.type} kernel (it has kernels for: {kinds}); {why}. Ask for a device of a kind "
        f"it runs on, or, if its kernel does run there, say so with "
        f"labkit.graph.passes.set_kernel_devices.")


def _decide_group(members, nodes, groups):
    """(device, {index: reason}) for a group that holds a fixed node or an explicit request;
    None when the heuristic decides."""
    fixed = [(m, _fixed(nodes[m])) for m in members]
    fixed = [(m, f) for m, f in fixed if f is not None]
    names = sorted({f[0].name for _, f in fixed})
    if len(names) > 1:
        where = "; ".join(f"{nodes[m].name} on {f[0].name} ({f[1]})" for m, f in fixed)
        raise PlacementError(
            f"these nodes must share one device but are tied to different ones: {where}. "
            f"Move the tensors to one device first (t.to(...)), or do not colocate them.")
    requests = [m for m in members if nodes[m].kind == "op" and
                nodes[m].requested_device is not None]
    if fixed:
        dev, anchor = fixed[0][1][0], fixed[0][0]
        for m in requests:
            n = nodes[m]
            if n.requested_device.name != dev.name and n.device_forced:
                raise PlacementError(
                    f"{n.name} ({n.op.name}) was forced onto {n.requested_device.name} by "
                    f"{_request_text(n)}, but it must run on {dev.name} with "
                    f"{nodes[anchor].name} ({fixed[0][1][1]}). Drop force=True to let the "
                    f"colocation win, or move {nodes[anchor].name} to "
                    f"{n.requested_device.name}.")
    elif requests:
        forced = sorted({nodes[m].requested_device.name for m in requests
                         if nodes[m].device_forced})
        if len(forced) > 1:
            who = ", ".join(f"{nodes[m].name} ({_request_text(nodes[m])})" for m in requests
                            if nodes[m].device_forced)
            raise PlacementError(f"colocated nodes are forced onto different devices: {who}")
        anchor = next(m for m in requests if not forced or
                      nodes[m].requested_device.name == forced[0])
        dev = nodes[anchor].requested_device
    else:
        return None
    for m in members:
        n = nodes[m]
        if n.kind == "op" and dev.type not in kernel_devices(n.op):
            if n.requested_device is not None and n.requested_device.name == dev.name:
                why = f"it was asked for with {_request_text(n)}"
            else:
                why = f"it must run with {nodes[anchor].name}, which is on {dev.name}"
            raise _no_kernel(n, dev, why)
    return dev, _member_reasons(members, nodes, groups, dev, dict(fixed))


def _link_text(m, nodes, groups, members):
    """'colocated with X (why)' for group member ``m``."""
    target, why = groups.link.get(m, (None, None))
    if target is None:        # joined from the other side: name a member that links to it
        target = next((i for i, (t, _) in groups.link.items() if t == m and i in members),
                      members[0])
        why = groups.link.get(target, (None, "colocation group"))[1]
    return f"colocated with {nodes[target].name} ({why})"


def _member_reasons(members, nodes, groups, dev, fixed):
    reasons = {}
    for m in members:
        n = nodes[m]
        if m in fixed:
            reasons[m] = fixed[m][1]
            continue
        requested = n.requested_device if n.kind == "op" else None
        if requested is not None and requested.name == dev.name:
            reasons[m] = f"explicit: {_request_text(n)}"
            continue
        text = _link_text(m, nodes, groups, members)
        if requested is not None:
            text += f"; {_request_text(n)} gave way: it was not forced"
        reasons[m] = text
    return reasons


def place_nodes(nodes):
    """Set ``device`` and ``placement_reason`` of ``nodes`` (a graph's, in order), in place.

    Returns ``{"moved": [(name, old device, new device)], "overridden": [names]}``.
    """
    groups = _colocation_groups(nodes)
    members = {}
    for n in nodes:
        members.setdefault(groups.find(n.index), []).append(n.index)
    used = {}
    for n in nodes:
        for d in (n.device, n.requested_device if n.kind == "op" else None):
            if d is not None:
                used.setdefault(d.name, d)
    decided = {}        # group root -> (device, {index: reason})
    moved, overridden = [], []
    for n in nodes:
        root = groups.find(n.index)
        if root not in decided:
            group = members[root]
            decision = _decide_group(group, nodes, groups)
            if decision is None:
                ops = [nodes[m].op for m in group if nodes[m].kind == "op"]
                candidates = [d for d in used.values()
                              if all(d.type in kernel_devices(o) for o in ops)]
                if not candidates:
                    raise _no_kernel(n, n.device, "no device this graph uses has one")
                dev, why = _heuristic(n, candidates)
                reasons = {m: why if m == n.index else _link_text(m, nodes, groups, group)
                           for m in group}
                decision = (dev, reasons)
            decided[root] = decision
        dev, reasons = decided[root]
        if n.device is None or n.device.name != dev.name:
            moved.append((n.name, n.device.name if n.device is not None else "?", dev.name))
        if n.kind == "op" and n.requested_device is not None and \
                n.requested_device.name != dev.name:
            overridden.append(n.name)
        n.device = dev
        n.placement_reason = reasons[n.index]
    return {"moved": moved, "overridden": overridden}


@graph_pass("placement")
def placement(graph, record):
    """Give every node a device and a reason (``node.placement_reason``).

    >>> import labkit as lk
    >>> from labkit.graph import passes
    >>> lk.devices.configure(cpus=2)
    >>> w = lk.Variable([1.0, 2.0], name="w")
    >>> with lk.Graph() as g:
    ...     with lk.device("cpu:1"):
    ...         step = w.assign_sub(w * 0.5)
    >>> print(passes.placement(g).history[-1])
    placement: 3 -> 3 nodes; no change
      note     cpu:0 2, cpu:1 1
      note     mul: cpu:0 -> cpu:1 (explicit: lk.device('cpu:1'))
      note     assign_sub stays with its colocation group on cpu:0: lk.device('cpu:1') gave way
    >>> lk.devices.configure(cpus=1)
    """
    new = Rewriter(graph).copy_all()
    result = place_nodes(new.nodes)
    new.placed = True
    counts = {}
    for n in new.nodes:
        counts[n.device.name] = counts.get(n.device.name, 0) + 1
    record.notes.append(", ".join(f"{d} {c}" for d, c in sorted(counts.items())))
    by_name = {n.name: n for n in new.nodes}
    for name, old, dev in result["moved"]:
        record.notes.append(f"{name}: {old} -> {dev} ({by_name[name].placement_reason})")
    for name in result["overridden"]:
        n = by_name[name]
        record.notes.append(f"{name} stays with its colocation group on {n.device.name}: "
                            f"{_request_text(n)} gave way")
    return new


# ---- the report -------------------------------------------------------------------------------
class NodePlacement:
    """One row of a placement report: ``name``, ``op``, ``device`` (a name), ``reason``."""

    __slots__ = ("name", "op", "device", "reason")

    def __init__(self, name, op, device, reason):
        self.name, self.op, self.device, self.reason = name, op, device, reason

    def __iter__(self):
        return iter((self.device, self.reason))

    def __repr__(self):
        return f"<{self.name} ({self.op}) on {self.device}: {self.reason}>"


class PlacementReport:
    """For every node of a graph, its device and why. Index it by node name; print it.

    ``by_device()``: ``{device: [node names]}``; ``as_dict()``: plain data.
    """

    def __init__(self, graph, rows):
        self.graph = graph
        self.rows = list(rows)
        self._by_name = {r.name: r for r in self.rows}

    def __getitem__(self, name):
        return self._by_name[name]

    def __iter__(self):
        return iter(self.rows)

    def __len__(self):
        return len(self.rows)

    def by_device(self):
        out = {}
        for r in self.rows:
            out.setdefault(r.device, []).append(r.name)
        return out

    def as_dict(self):
        return {r.name: {"op": r.op, "device": r.device, "reason": r.reason} for r in self.rows}

    def __str__(self):
        head = ("node", "op", "device", "why")
        table = [head] + [(r.name, r.op, r.device, r.reason) for r in self.rows]
        widths = [max(len(row[i]) for row in table) for i in range(3)]
        return "\n".join(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:<{widths[2]}}  {d}".rstrip()
                         for a, b, c, d in table)

    def __repr__(self):
        counts = ", ".join(f"{d} {len(ns)}" for d, ns in sorted(self.by_device().items()))
        return f"<placement of {self.graph.name!r}: {counts}>"


def _made_by_pass(node):
    if node.kind == CONSTANT:
        return "constant: made on this device (a folded value)"
    return "made by a graph pass from nodes on this device"


def placement_report(graph):
    """The ``PlacementReport`` of ``graph`` (placing a copy first if it was never placed)."""
    if not getattr(graph, "placed", False):
        graph = placement(graph)
    rows = [NodePlacement(n.name, n.op_name, n.device.name if n.device else "?",
                          n.placement_reason or _made_by_pass(n)) for n in graph.nodes]
    return PlacementReport(graph, rows)


# doctest does not look inside pass objects
__test__ = {"placement": placement.__doc__}
