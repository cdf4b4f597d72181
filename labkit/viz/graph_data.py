"""A graph as the graph explorer's payload: what the browser needs to draw, lay out and explain
every node without asking the kernel again.

``graph_payload(graph)`` returns a JSON-able dict (see ``frontend/src/graph/model.js``)::

    {"title": ..., "n": nodes, "strings": [every text once],
     "nodes": {"name", "op", "cat", "role", "device", "reason", "type", "source", "attrs":
               one string index per node (-1: none); "group": the scope each node sits in
               (an index into "groups", -1: the top level); "alive": per node a bit mask of
               the stages it exists in; "stateful": 1 for a node with a side effect (a
               random draw, an assign); "time": ns per node when a profile was given},
     "edges": [source, target, ...] (node indices, flat), "edge_alive": a mask per edge,
     "groups": [{"path", "label", "parent", "kind": "scope" | "control" | "body", "owner":
                 the control-flow node a "control" group opens into (else -1), "count",
                 "roles": {role: count}, "type": the class of the nn.Module whose call made
                 the scope (or None)}],
     "expanded": the group paths open at first, "auto_open": true when the explorer picks
                 them itself (as many as stay readable on the real canvas),
     "stages": [{"name", "summary", "marks": [[node, mark, note]]}],
     "colors": {"role", "kind", "device", "marks"}}

Name scopes become groups (unscoped backward and update nodes go into the pseudo-scopes
``gradients`` and ``update``, as in ``lk.viz.graph``). A control-flow node (``cond``,
``while_loop``, ``scan``) is a group too, of kind ``"control"``, holding one ``"body"`` group
per branch or body with the body's own nodes: collapsed it is drawn as the node itself, open
as a box with its bodies inside. With ``stages`` (``widgets.pass_stages``) the payload holds the
union of the graphs before and after each pass: stage 0 is the raw trace, stage ``k`` the graph
pass ``k`` made, and each node and edge says in which stages it exists.

>>> import labkit as lk
>>> with lk.Graph() as g:
...     x = lk.placeholder((2, 3), lk.float32, name="x")
...     with lk.name_scope("layer"):
...         y = lk.relu(x * 2.0)
>>> p = graph_payload(g)
>>> p["n"], [grp["path"] for grp in p["groups"]], p["edges"]
(3, ['layer'], [0, 1, 1, 2])
>>> p["strings"][p["nodes"]["type"][2]]
'f32 2×3'
"""
from ..errors import source_text
from . import style
from .graph import (ROLE_SCOPES, _device_name, _literal, _op_name, _prefixes, category,
                    display_roles, type_text)
from .placement import placement_reason
from .widgets import CHANGE_STYLE, pass_marks

BODY_ATTRS = ("branches", "cond", "body")     # where control-flow nodes keep their sub-graphs


class _Strings:
    """Every text stored once; a node holds indices into the list."""

    def __init__(self):
        self.index, self.values = {}, []

    def __call__(self, value):
        if value is None:
            return -1
        value = str(value)
        k = self.index.get(value)
        if k is None:
            k = self.index[value] = len(self.values)
            self.values.append(value)
        return k


def node_source(node):
    """The user's line that made ``node`` as every labkit picture and error writes it
    (``'Cell In[5], line 3: loss = model(x)'``, ``'train.py:12: ...'``), or None."""
    src = getattr(node, "source", None)
    return source_text(src) if src else None


def _attrs_text(node):
    attrs = getattr(node, "attrs", None) or {}
    parts = [f"{k}={_literal(v)}" for k, v in attrs.items()
             if k not in ("res",) + BODY_ATTRS]
    lits = [_literal(a) for a in getattr(node, "inputs", ()) if not hasattr(a, "inputs")]
    if lits:
        parts.insert(0, "literals " + ", ".join(lits))
    return ", ".join(parts) or None


def bodies(node):
    """``[(label, Subgraph)]``: the branches / loop condition and body a control-flow node
    runs (empty for any other node)."""
    attrs = getattr(node, "attrs", None) or {}
    out = []
    for key in BODY_ATTRS:
        value = attrs.get(key)
        for sub in (value if isinstance(value, tuple) else (value,)):
            if hasattr(sub, "listing_lines") and hasattr(sub, "plan"):
                out.append((sub.label.rsplit("/", 1)[-1], sub))
    return out


def _body_nodes(sub):
    """A sub-graph's own nodes in order: its inputs and what its plan runs."""
    shown = {n.index: n for n in sub.plan(sub.backward_of is None).nodes}
    shown.update((n.index, n) for n in sub.in_nodes)
    return [shown[i] for i in sorted(shown)]


class _Builder:
    """The union of one or more graphs (the stages of a pipeline), node by node."""

    def __init__(self, times, module_types):
        self.module_types = module_types    # scope path -> the nn.Module class that made it
        self.control_scopes = {}            # a control-flow node's name -> its group
        self.s = _Strings()
        self.times = times
        self.key_of = {}        # node key -> index
        self.rows = []          # per node: dict of facts (the latest stage's)
        self.edges = {}         # (src, dst) -> alive mask
        self.groups, self.group_of = [], {}
        self.alive = []

    def group(self, path, label, parent, kind, owner=-1):
        k = self.group_of.get(path)
        if k is None:
            k = self.group_of[path] = len(self.groups)
            self.groups.append({"path": path, "label": label, "parent": parent, "kind": kind,
                                "owner": owner, "count": 0, "roles": {},
                                "type": self.module_types.get(path)})
        elif owner >= 0:
            self.groups[k]["owner"] = owner
        return k

    def scope_group(self, scope):
        parent = -1
        parts = scope.split("/") if scope else []
        for k in range(len(parts)):
            parent = self.group("/".join(parts[:k + 1]), parts[k], parent, "scope")
        return parent

    def add_graph(self, graph, bit):
        """Add every node of ``graph`` (alive in stage ``bit``), bodies of control flow too."""
        nodes = list(getattr(graph, "nodes", ()))
        roles = display_roles(nodes)
        todo = [(nodes, roles, None, "")]      # (nodes, roles, group or None, key prefix)
        while todo:                            # iterative: bodies may hold control flow too
            nodes, roles, body_group, prefix = todo.pop()
            local = {}
            for n, role in zip(nodes, roles):
                key = prefix + n.name
                i = self.node(key, n, role, bit, body_group)
                local[id(n)] = i
                subs = bodies(n)
                if subs:
                    g = self.rows[i]["group"]
                    path = (self.groups[g]["path"] + "/" if g >= 0 else "") + f"[{n.name}]"
                    cg = self.group(path, n.name.rsplit("/", 1)[-1], g, "control", owner=i)
                    self.rows[i]["group"] = cg
                    self.control_scopes[n.name] = cg
                    for label, sub in subs:
                        bg = self.group(f"{path}/{label}", label, cg, "body")
                        inner = _body_nodes(sub)
                        todo.append((inner, display_roles(inner), bg, f"{key}\x00{label}\x00"))
            for n in nodes:
                dst = local[id(n)]
                for a in getattr(n, "inputs", ()):
                    src = local.get(id(a))
                    if src is not None:
                        self.edges[(src, dst)] = self.edges.get((src, dst), 0) | (1 << bit)

    def node(self, key, n, role, bit, body_group):
        i = self.key_of.get(key)
        if i is None:
            i = self.key_of[key] = len(self.rows)
            self.rows.append(None)
            self.alive.append(0)
        self.alive[i] |= 1 << bit
        if body_group is not None:
            group = body_group
        else:
            scope = getattr(n, "scope", "") or ROLE_SCOPES.get(role, "")
            # the nodes made under a control-flow node's name (its outputs, 'while/output_1')
            # belong in its box, not in a second box of the same name
            owner = next((self.control_scopes[p] for p in _prefixes(scope)
                          if p in self.control_scopes), None) if scope else None
            group = owner if owner is not None else self.scope_group(scope)
        s = self.s
        self.rows[i] = {
            "name": s(n.name), "op": s(_op_name(n)), "cat": s(category(n)), "role": s(role),
            "device": s(_device_name(n)), "reason": s(placement_reason(n)),
            "type": s(type_text(n)), "source": s(node_source(n)), "attrs": s(_attrs_text(n)),
            "group": group, "time": self.times.get(n.name, 0.0) if self.times else None,
            "stateful": int(bool(getattr(n, "stateful", False)))}
        return i


def _profile_times(profile):
    """``{node name: ns}``: the time the profile's events of each node took, summed."""
    out = {}
    for e in profile.events:
        out[e.name] = out.get(e.name, 0.0) + float(e.duration_ns)
    return out


def graph_payload(graph, *, stages=None, profile=None, title=None, expanded=None):
    """The explorer's payload of ``graph`` (see the module docstring).

    ``stages``: a list of ``widgets.Stage`` (each pass's graphs before and after); the payload
    then holds every stage, and ``graph`` is only used for its name. ``profile``: an
    ``lk.profile()`` whose events give each node's time (colour by time). ``expanded``: the
    group paths open at first (default: the explorer opens as many as stay readable).
    """
    graphs = [stages[0].before] + [st.after for st in stages] if stages else [graph]
    module_types = {}
    for g in graphs:
        module_types.update(getattr(g, "module_types", None) or {})
    b = _Builder(_profile_times(profile) if profile is not None else None, module_types)
    for bit, g in enumerate(graphs):
        b.add_graph(g, bit)
    # group sizes and roles, counted over the last stage's nodes
    last = 1 << (len(graphs) - 1)
    for i, row in enumerate(b.rows):
        if not b.alive[i] & last:
            continue
        role = b.s.values[row["role"]]
        g = row["group"]
        while g >= 0:
            grp = b.groups[g]
            grp["count"] += 1
            grp["roles"][role] = grp["roles"].get(role, 0) + 1
            g = grp["parent"]
    n = len(b.rows)
    names = [b.s.values[r["name"]] for r in b.rows]
    index = {name: i for i, name in enumerate(names)}   # body nodes keep their own keys
    marks = []
    for k, st in enumerate(stages or []):
        rec = st.record
        if rec is None:
            marks.append([])
            continue
        found = {**pass_marks(rec, after=False), **pass_marks(rec, after=True)}
        marks.append([[index[name], mark, b.s(note)] for name, (mark, note) in found.items()
                      if name in index])
    auto = expanded is None
    known = {grp["path"] for grp in b.groups}
    expanded = [] if auto else [path for path in expanded if path in known]
    name = title if title is not None else getattr(graphs[-1], "name", "graph")
    cols = {key: [r[key] for r in b.rows] for key in
            ("name", "op", "cat", "role", "device", "reason", "type", "source", "attrs",
             "group")}
    cols["alive"] = b.alive
    cols["stateful"] = [r["stateful"] for r in b.rows]
    if b.times is not None:
        cols["time"] = [r["time"] for r in b.rows]
    devices = [b.s.values[d] for d in dict.fromkeys(cols["device"]) if d >= 0]
    edges = list(b.edges.items())
    return {
        "title": f"{name} · {sum(1 for a in b.alive if a & last):,} nodes",
        "n": n, "strings": b.s.values, "nodes": cols,
        "edges": [v for (src, dst), _ in edges for v in (src, dst)],
        "edge_alive": [mask for _, mask in edges],
        "groups": b.groups, "expanded": expanded, "auto_open": auto,
        "stages": [{"name": "traced", "summary": "the graph as traced, before any pass"}]
        + [{"name": st.name, "summary": st.record.summary() if st.record else st.name,
            "marks": marks[k]} for k, st in enumerate(stages or [])],
        "colors": {
            "role": {r: list(c) for r, c in style.ROLE.items()},
            "kind": {k: list(c) for k, c in style.KIND.items()},
            "transfer": list(style.TRANSFER), "control": list(style.CONTROL),
            "unknown": list(style.UNKNOWN),
            "device": {d: list(c) for d, c in style.device_colors(devices).items()},
            "marks": {m: [c[0], c[2]] for m, c in CHANGE_STYLE.items()},
        },
    }
