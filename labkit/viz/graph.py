"""``lk.viz.graph``: a dataflow graph as a picture laid out by graphviz.

``to_dot(graph)`` turns a graph into DOT text (no graphviz needed; that is what tests check);
``graph(obj, *example_args)`` accepts whatever a person has at hand (a captured ``Graph``, an
``lk.function``, a plain function or a Module with example arguments, or an eager tensor whose
autodiff tape is drawn) and returns a ``GraphPicture``, which renders itself in a notebook.

What the picture shows:

- each op as a box labelled with its op name and output shape; edges labelled with the dtype and
  shape of the tensor they carry (small graphs; ``edge_labels=`` decides);
- colour by role: forward (blue), backward / gradient (orange), optimiser update (green);
  ops computed from gradients that only feed an update (``p.grad * lr``) count as update;
- shape by kind: inputs (placeholders) as arrows, state (variables, parameters, captured tensors)
  as cylinders, constants as ellipses, stateful ops with a double border, control flow as
  diamonds (cond / switch / merge) and hexagons (loops), queues as stacked boxes, Send/Recv as
  purple flags;
- name scopes as boxes; a collapsed scope as one node with its node count and roles. By default
  every top-level scope is collapsed when the graph has more than ``COLLAPSE_OVER`` nodes.

The graph may be anything with ``.nodes`` in topological order whose nodes have ``name``,
``kind``, ``op_name``, ``inputs``, ``shape``, ``dtype``, ``device``, ``scope`` and ``role``
(``lk.Graph`` and the ``TapeGraph`` of ``labkit.viz.tape`` both do).

>>> import labkit as lk
>>> with lk.Graph() as g:
...     x = lk.placeholder((2, 3), lk.float32, name="x")
...     with lk.name_scope("layer"):
...         y = lk.relu(x * 2.0)
>>> dot = to_dot(g)
>>> "cluster" in dot and "relu" in dot and "f32 2×3" in dot
True
"""
import re

from ..errors import LabkitError
from . import style

COLLAPSE_OVER = 200      # collapse every top-level scope of a graph larger than this
MAX_NODES = 600          # draw at most this many boxes; the rest become one "... more" note
EDGE_LABELS_UP_TO = 120  # label edges by default when at most this many boxes are drawn
LAYOUT_LIMITS_OVER = 150  # bound dot's layout effort for pictures with more boxes than this
SERIES_OVER = 60         # fold numbered sibling scopes into a series when more boxes than this
_NUMBERED = re.compile(r"^(.*?)(\d+)$")

_DTYPE_SHORT = {"float16": "f16", "float32": "f32", "float64": "f64", "int32": "i32",
                "int64": "i64", "bool_": "bool", "bool": "bool", "int8": "i8", "uint8": "u8"}


# ---- small text helpers -----------------------------------------------------------------------
def _html(text):
    """Escape text for a graphviz HTML-like label."""
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def _quote(text):
    """A DOT double-quoted string."""
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def shape_text(shape):
    """``(5, 8)`` -> ``'5×8'``; a 0-d shape -> ``'scalar'``; unknown -> ``'?'``."""
    if shape is None:
        return "?"
    if len(shape) == 0:
        return "scalar"
    return "×".join("?" if s is None else str(s) for s in shape)


def type_text(node):
    """Short dtype and shape of a node's output, as on an edge: ``'f32 5×8'``."""
    dtype = getattr(node, "dtype", None)
    if dtype is None and getattr(node, "shape", None) is None:
        # a control-flow node's value is a tuple, read by the output nodes that pick its parts
        return "tuple" if category(node) in ("control", "loop") else "?"
    name = getattr(dtype, "name", None) or (str(dtype) if dtype is not None else "?")
    return f"{_DTYPE_SHORT.get(name, name)} {shape_text(getattr(node, 'shape', None))}"


def _device_name(node):
    d = getattr(node, "device", None)
    return None if d is None else getattr(d, "name", None) or str(d)


def _op_name(node):
    name = getattr(node, "op_name", None)
    if name is None:
        op = getattr(node, "op", None)
        name = getattr(op, "name", None) or str(op)
    return name


def _literal(value):
    text = repr(value)
    return text if len(text) <= 24 else text[:21] + "..."


# ---- what each node is ------------------------------------------------------------------------
def category(node):
    """How a node is drawn: 'placeholder' | 'capture' | 'constant' | 'transfer' | 'control' |
    'loop' | 'queue' | 'op'."""
    kind = getattr(node, "kind", "op")
    if kind != "op":
        return kind if kind in style.KIND else "op"
    name = _op_name(node)
    if name in style.TRANSFER_OPS:
        return "transfer"
    if name in style.CONTROL_OPS:
        return "control"
    if name in style.LOOP_OPS:
        return "loop"
    if style.is_queue_op(name):
        return "queue"
    return "op"


def display_roles(nodes):
    """The role each node is drawn with, one per node.

    A node's own ``role`` (set at capture: forward, backward, update), except that a forward op
    computed from gradients whose result only goes on to an update (the ``p.grad * lr`` of a
    hand-written SGD step) is drawn as part of the update, and an input, state or constant used
    only by backward ops (the seed gradient) as part of the backward pass.
    """
    index = {id(n): i for i, n in enumerate(nodes)}
    roles = [getattr(n, "role", "forward") or "forward" for n in nodes]
    after_grad = [False] * len(nodes)       # computed (transitively) from a gradient
    users = [[] for _ in nodes]
    for i, n in enumerate(nodes):
        for a in getattr(n, "inputs", ()):
            j = index.get(id(a))
            if j is not None:
                users[j].append(i)
                after_grad[i] = after_grad[i] or after_grad[j]
        after_grad[i] = after_grad[i] or roles[i] == "backward"
    for i in range(len(nodes) - 1, -1, -1):     # users come later, so they are decided first
        if roles[i] != "forward" or not users[i]:
            continue
        if after_grad[i] and all(roles[u] == "update" for u in users[i]):
            roles[i] = "update"
        elif (getattr(nodes[i], "kind", "op") != "op"
              and all(roles[u] == "backward" for u in users[i])):
            roles[i] = "backward"   # e.g. the seed gradient (ones) that backward() starts from
    return roles


# ---- scopes -----------------------------------------------------------------------------------
def _prefixes(scope):
    parts = scope.split("/")
    return ["/".join(parts[:k]) for k in range(1, len(parts) + 1)]


ROLE_SCOPES = {"backward": "gradients", "update": "update"}


def _scopes(nodes, roles, group_roles):
    """Each node's scope path; with ``group_roles``, unscoped backward and update nodes go
    into the pseudo-scopes ``gradients`` and ``update`` (as TensorFlow's ``gradients/``)."""
    out = []
    for n, r in zip(nodes, roles):
        scope = getattr(n, "scope", "") or ""
        if not scope and group_roles:
            scope = ROLE_SCOPES.get(r, "")
        out.append(scope)
    return out


def _collapsed_set(scopes, collapse):
    """The scope paths to draw as single boxes."""
    if collapse is True:
        return {s.split("/")[0] for s in scopes if s}
    if collapse is False:
        return set()
    if isinstance(collapse, str):
        return {collapse.strip("/")}
    return {str(s).strip("/") for s in collapse}


def _series(paths):
    """``{path: (series path, number of scopes)}`` for collapsed sibling scopes named alike but
    for a trailing number (``layer0`` ... ``layer119`` -> ``layer[0-119]``), three or more."""
    groups = {}
    for path in paths:
        parent, _, name = path.rpartition("/")
        m = _NUMBERED.match(name)
        if m:
            groups.setdefault((parent, m.group(1)), []).append((int(m.group(2)), path))
    out = {}
    for (parent, stem), found in groups.items():
        if len(found) < 3:
            continue
        numbers = sorted(n for n, _ in found)
        span = (f"{numbers[0]}–{numbers[-1]}" if numbers[-1] - numbers[0] + 1 == len(numbers)
                else f"{len(numbers)} of {numbers[0]}–{numbers[-1]}")
        name = f"{stem}[{span}]"
        target = f"{parent}/{name}" if parent else name
        for _, path in found:
            out[path] = (target, len(found))
    return out


# ---- the DOT text -------------------------------------------------------------------------------
def to_dot(graph, *, color_by="role", collapse=None, max_nodes=MAX_NODES, edge_labels=None,
           group_roles=None, rankdir="TB", title=None, reasons=None, node_style=None,
           edge_style=None):
    """DOT text drawing ``graph`` (see the module docstring for what it shows).

    ``color_by``: ``'role'`` (forward / backward / update) or ``'device'`` (placement view).
    ``collapse``: None (collapse every top-level scope when the graph has more than
    ``COLLAPSE_OVER`` nodes), True (always), False (never), or scope paths to collapse
    (``'model/layer1'``). ``max_nodes``: boxes drawn at most; the rest are summarised in one
    note. ``edge_labels``: label edges with dtype and shape (default: small pictures only).
    ``group_roles``: put unscoped backward / update nodes in pseudo-scopes ``gradients`` /
    ``update`` (default: whenever something is collapsed).
    ``reasons``: a function node -> text shown in the node's tooltip (placement reasons).
    ``node_style`` / ``edge_style``: hooks for pictures drawn on top of this one (gradient
    flow, pass highlights): ``node_style(node)`` and ``edge_style(source nodes, target node)``
    return None or a dict of DOT attributes that replace the defaults (``{"color": "red"}``);
    the key ``"note"`` is appended to the tooltip instead.
    """
    if color_by not in ("role", "device"):
        raise ValueError(f"to_dot: color_by must be 'role' or 'device', got {color_by!r}")
    d = _Drawing(graph, color_by, reasons)
    d.node_style, d.edge_style = node_style, edge_style
    d.assign_boxes(collapse, group_roles, max_nodes)
    return d.dot(edge_labels, rankdir, title)


def _restyle(attrs, extra):
    """``attrs`` (a list of ``key=value`` DOT attributes) with those of the dict ``extra``
    replacing the ones of the same key; ``extra["note"]`` is appended to the tooltip."""
    if not extra:
        return attrs
    extra = dict(extra)
    note = extra.pop("note", None)
    out = [a for a in attrs if a.split("=", 1)[0] not in extra]
    if note:
        for k, a in enumerate(out):
            if a.startswith("tooltip="):
                out[k] = a[:-1] + _quote("\n" + note)[1:]
    for k, v in extra.items():
        text = str(v)
        out.append(f"{k}={text if text.startswith('<') or text.isdigit() else _quote(text)}")
    return out


class _Drawing:
    """One picture being made: per-node facts (lists indexed like ``graph.nodes``), then which
    box each node is drawn in, then the DOT statements."""

    node_style = edge_style = None     # optional hooks (see ``to_dot``)

    def __init__(self, graph, color_by, reasons):
        self.graph = graph
        self.color_by = color_by
        self.reasons = reasons
        self.nodes = nodes = list(getattr(graph, "nodes", ()))
        self.index = {id(n): i for i, n in enumerate(nodes)}
        self.roles = display_roles(nodes)
        self.cats = [category(n) for n in nodes]
        self.devices = [_device_name(n) for n in nodes]
        self.device_colors = style.device_colors(self.devices)

    def inputs(self, i):
        """Indices of the nodes node ``i`` reads (literals left out)."""
        for a in getattr(self.nodes[i], "inputs", ()):
            j = self.index.get(id(a))
            if j is not None:
                yield j

    # ---- which box each node is drawn in ---------------------------------------------------
    def assign_boxes(self, collapse, group_roles, max_nodes):
        """Set ``item_of`` (per node: ``('n', i)`` drawn as itself, or ``('s', path)`` inside a
        collapsed scope), ``items`` (the boxes drawn, in order) and ``members``."""
        nodes = self.nodes
        if collapse is None:
            collapse = len(nodes) > COLLAPSE_OVER
        if group_roles is None:
            group_roles = collapse is not False
        self.scopes = scopes = _scopes(nodes, self.roles, group_roles)
        collapsed = _collapsed_set(scopes, collapse)
        rep_of = {}
        for scope in set(scopes):
            rep_of[scope] = (next((p for p in _prefixes(scope) if p in collapsed), None)
                             if scope and collapsed else None)
        series = {}
        boxes = sum(1 for sc in scopes if rep_of[sc] is None) + len(set(rep_of.values()) - {None})
        if boxes > SERIES_OVER:     # still many boxes: fold numbered siblings into one series
            series = _series({r for r in rep_of.values() if r is not None})
            rep_of = {sc: series.get(r, (r,))[0] if r is not None else None
                      for sc, r in rep_of.items()}
        self.series_sizes = {path: n for path, n in series.values()}
        self.item_of = item_of = [None] * len(nodes)
        items, self.members = [], {}
        for i in range(len(nodes)):
            r = rep_of[scopes[i]]
            if r is None:
                item_of[i] = ("n", i)
                items.append(item_of[i])
            else:
                item_of[i] = ("s", r)
                if r not in self.members:
                    self.members[r] = []
                    items.append(item_of[i])
                self.members[r].append(i)
        self.dropped, self.max_nodes, self.keep = 0, max_nodes, None
        if max_nodes is not None and len(items) > max_nodes:
            self.keep = set(items[:max_nodes])
            self.dropped = sum(1 for it in item_of if it not in self.keep)
            items = items[:max_nodes]
        self.items = items
        self.ids = {it: f"n{it[1]}" if it[0] == "n" else f"s{k}" for k, it in enumerate(items)}

    def drawn(self, item):
        return self.keep is None or item in self.keep

    # ---- statements ----------------------------------------------------------------------------
    def node_stmt(self, i):
        n, cat, dev, role = self.nodes[i], self.cats[i], self.devices[i], self.roles[i]
        op = _op_name(n)
        if self.color_by == "device":
            fill, border = self.device_colors.get(dev, style.UNKNOWN)
        elif cat in style.KIND:
            fill, border = style.KIND[cat]
        elif cat == "transfer":
            fill, border = style.TRANSFER
        else:
            fill, border = style.ROLE.get(role, style.UNKNOWN)
        penwidth = 1.2
        if cat in ("control", "loop"):
            border, penwidth = style.CONTROL[1], 2.2
        elif cat == "transfer":
            border, penwidth = style.TRANSFER[1], 2.5
        # the label: what it is, then its output shape
        if cat == "placeholder":
            head = getattr(n, "name", "input")
        elif cat == "capture":
            value = getattr(n, "value", None)
            # a Variable by its name; other outside tensors by their kind
            head = (getattr(value, "name", None) or type(value).__name__) if value is not None \
                else "state"
        elif cat == "constant":
            value = getattr(n, "value", None)
            head = _literal(_scalar(value)) if _size(value) == 1 else "const"
        elif op == "output" and "index" in (getattr(n, "attrs", None) or {}):
            head = f"output[{n.attrs['index']}]"     # one value of a control-flow node
        else:
            head = op
        sub = shape_text(getattr(n, "shape", None))
        if cat in ("control", "loop") and getattr(n, "shape", None) is None:
            sub = "tuple"
        if getattr(n, "freed", False):
            sub += " (freed)"
        label = (f'<<B>{_html(head)}</B><BR/><FONT POINT-SIZE="8" COLOR="{style.MUTED}">'
                 f'{_html(sub)}</FONT>>')
        tip = _tooltip(n, i, self.index, role, dev, self.scopes[i])
        why = self.reasons(n) if self.reasons is not None else None
        if why:
            tip += f"\nplaced on {dev}: {why}"
        attrs = [f"label={label}", f"shape={style.SHAPE[cat]}", f'fillcolor="{fill}"',
                 f'color="{border}"', f"penwidth={penwidth}", f"tooltip={_quote(tip)}",
                 f'id="n{i}"', f'class="lk-node role-{_css(role)} kind-{cat}"',
                 'style="rounded,filled"' if cat == "op" else 'style="filled"']
        if cat == "transfer":
            attrs.append('margin="0.22,0.06"')
        if getattr(n, "stateful", False):
            attrs.append("peripheries=2")
        if cat == "constant":
            attrs.append("fontsize=8")
        if self.node_style is not None:
            attrs = _restyle(attrs, self.node_style(n))
        return f"n{i} [{', '.join(attrs)}];"

    def scope_stmt(self, path, sid):
        idx = self.members[path]
        by_device = self.color_by == "device"
        counts = {}
        for i in idx:
            key = self.devices[i] if by_device else self.roles[i]
            counts[key] = counts.get(key, 0) + 1
        palette = self.device_colors if by_device else style.ROLE
        ordered = sorted(counts.items(), key=lambda kv: -kv[1])
        if len(ordered) == 1:
            fill = palette.get(ordered[0][0], style.UNKNOWN)[0]
        else:   # one stripe per role (device), as wide as its share of the scope's nodes
            fill = ":".join(f"{palette.get(k, style.UNKNOWN)[0]};{c / len(idx):.3f}"
                            for k, c in ordered)
        border = palette.get(ordered[0][0], style.UNKNOWN)[1]
        breakdown = " · ".join(f"{k} {c}" for k, c in ordered)
        count, what = f"{len(idx):,} nodes", f"name scope {path} (collapsed)"
        if path in self.series_sizes:
            count = f"{self.series_sizes[path]} scopes · {count}"
            what = f"{self.series_sizes[path]} name scopes {path} (collapsed into one series)"
        inside = ""
        if by_device:    # device crossings hidden inside the box
            crossings = sum(1 for i in idx for j in self.inputs(i)
                            if self.item_of[j] == ("s", path)
                            and self.devices[j] != self.devices[i])
            if crossings:
                inside = (f'<BR/><FONT COLOR="{style.CROSS_DEVICE_EDGE}">⇢ {crossings} '
                          f'crossing{"s" if crossings > 1 else ""} inside</FONT>')
        label = (f'<<B>{_html(path.rsplit("/", 1)[-1])}</B> ▸<BR/><FONT POINT-SIZE="8" '
                 f'COLOR="{style.MUTED}">{_html(count)}<BR/>{_html(breakdown)}{inside}</FONT>>')
        tip = (f"{what}: {len(idx):,} nodes\n{breakdown}\n"
               f"draw it open with collapse=False, or pass collapse=[scope paths]")
        return (f'{sid} [label={label}, shape=box, '
                f'style="{"filled" if len(ordered) == 1 else "striped"}", fillcolor="{fill}", '
                f'color="{border}", penwidth=2, peripheries=2, tooltip={_quote(tip)}, '
                f'id="{sid}", class="lk-scope"];')

    def cluster_lines(self):
        """Every drawn box, inside nested ``subgraph cluster_N`` blocks for its open scopes."""
        tree = {"": []}              # scope path -> child scope paths (open scopes only)
        content = {"": []}           # scope path -> statements of the boxes directly inside
        for it in self.items:
            if it[0] == "n":
                where, stmt = self.scopes[it[1]], self.node_stmt(it[1])
            else:
                where = it[1].rpartition("/")[0]
                stmt = self.scope_stmt(it[1], self.ids[it])
            parent = ""
            for p in (_prefixes(where) if where else []):
                if p not in tree:
                    tree[p], content[p] = [], []
                    tree[parent].append(p)
                parent = p
            content[where].append(stmt)
        lines, counter = [], 0
        stack = [("", 0, False)]
        while stack:   # iterative: scopes may nest deeply
            path, depth, closing = stack.pop()
            pad = "  " * (depth + 1)
            if closing:
                lines.append(pad + "}")
                continue
            inner = ""
            if path:
                counter += 1
                lines.append(f"{pad}subgraph cluster_{counter} {{")
                lines.append(f'{pad}  label={_quote(path.rsplit("/", 1)[-1])}; '
                             f'tooltip={_quote("name scope " + path)}; style="rounded,filled"; '
                             f'fillcolor="{style.CLUSTER[0]}"; color="{style.CLUSTER[1]}"; '
                             f'fontcolor="{style.MUTED}"; fontsize=10; labeljust=l; '
                             f'labelloc=t; id="cluster_{counter}"; class="lk-cluster";')
                stack.append((path, depth, True))
                inner = "  "
            lines.extend(pad + inner + s for s in content[path])
            for child in reversed(tree[path]):
                stack.append((child, depth + 1 if path else 0, False))
        return lines

    def edges(self):
        """``{(source box, target box): {'sources': node indices, 'cross': device pairs}}``."""
        edges = {}
        for i in range(len(self.nodes)):
            dst = self.item_of[i]
            if not self.drawn(dst):
                continue
            for j in self.inputs(i):
                src = self.item_of[j]
                if src == dst or not self.drawn(src):
                    continue
                e = edges.get((src, dst))
                if e is None:
                    e = edges[(src, dst)] = {"sources": set(), "cross": set()}
                e["sources"].add(j)
                a, b = self.devices[j], self.devices[i]
                if a != b and a and b:
                    e["cross"].add((a, b))
        return edges

    def edge_stmt(self, src, dst, e, labelled):
        nodes, sources = self.nodes, sorted(e["sources"])
        text = type_text(nodes[sources[0]]) if len(sources) == 1 else f"{len(sources)} tensors"
        tip = ", ".join(f"{nodes[j].name}: {type_text(nodes[j])}" for j in sources[:6])
        if len(sources) > 6:
            tip += f", ... ({len(sources)} tensors)"
        attrs = []
        if e["cross"]:
            moves = ", ".join(f"{a} → {b}" for a, b in sorted(e["cross"]))
            tip += f"\ncrosses devices: {moves}"
            text += f"\n {moves}"
            attrs += [f'color="{style.CROSS_DEVICE_EDGE}"', "penwidth=2.2", 'style="dashed"',
                      f'fontcolor="{style.CROSS_DEVICE_EDGE}"']
        elif len(sources) > 1:
            attrs.append(f"penwidth={min(1 + 0.3 * len(sources), 3):.1f}")
        if labelled:
            attrs.insert(0, f"label={_quote(' ' + text + ' ')}")
        attrs.append(f"tooltip={_quote(tip)}")
        if self.edge_style is not None and dst[0] == "n":
            attrs = _restyle(attrs, self.edge_style([nodes[j] for j in sources],
                                                    nodes[dst[1]]))
        return f"  {self.ids[src]} -> {self.ids[dst]} [{', '.join(attrs)}];"

    def dot(self, edge_labels, rankdir, title):
        items = self.items
        if edge_labels is None:
            edge_labels = len(items) <= EDGE_LABELS_UP_TO
        edges = self.edges()
        # big pictures: bound dot's network-simplex passes (its time grows fast with size)
        fast = (", nslimit=2, mclimit=0.5" if len(items) > LAYOUT_LIMITS_OVER
                or len(edges) > 2 * LAYOUT_LIMITS_OVER else "")
        lines = [f"digraph {_quote(getattr(self.graph, 'name', 'graph'))} {{",
                 f'  graph [rankdir={rankdir}, fontname="{style.FONT}", fontsize=10, '
                 f'nodesep=0.22, ranksep=0.32, bgcolor="white", pad=0.2, labelloc=b, '
                 f'labeljust=l, tooltip=" "{fast}];',
                 f'  node [fontname="{style.FONT}", fontsize=10, fontcolor="{style.TEXT}", '
                 f'margin="0.09,0.035", height=0.3, width=0.4];',
                 f'  edge [fontname="{style.FONT}", fontsize=8, fontcolor="{style.MUTED}", '
                 f'color="{style.EDGE}", arrowsize=0.6, penwidth=1];']
        lines += self.cluster_lines()
        lines += [self.edge_stmt(s, d, e, edge_labels) for (s, d), e in edges.items()]
        if self.dropped:
            more = (f"… {self.dropped:,} more nodes not drawn\\n(max_nodes={self.max_nodes}; "
                    f"collapse scopes or raise max_nodes)")
            lines.append(f'  more [label="{more}", shape={style.SHAPE["more"]}, style=filled, '
                         f'fillcolor="#f9fafb", color="{style.MUTED}", '
                         f'fontcolor="{style.MUTED}"];')
        crossing = sum(1 for e in edges.values() if e["cross"])
        lines.append(f"  label={self.legend(crossing, title)};")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def legend(self, crossing, title):
        """An HTML-like table under the picture: the title, then one swatch per colour used."""
        nodes, items = self.nodes, self.items
        name = title if title is not None else getattr(self.graph, "name", "graph")
        head = f"{name} · {len(nodes):,} nodes"
        if len(items) != len(nodes):
            head += f" ({len(items):,} boxes drawn)"
        present = {self.cats[it[1]] for it in items if it[0] == "n"}   # drawn as themselves
        cells = []

        def swatch(fill, border, text, count=None):
            suffix = f" ({count:,})" if count is not None else ""
            cells.append(f'<TD BGCOLOR="{fill}" COLOR="{border}" BORDER="1" WIDTH="14"> </TD>'
                         f'<TD ALIGN="LEFT">{_html(text + suffix)}</TD>')

        counts = {}
        if self.color_by == "device":
            for d in self.devices:
                counts[d] = counts.get(d, 0) + 1
            for dev, (fill, border) in self.device_colors.items():
                swatch(fill, border, dev, counts.get(dev))
            if None in counts:
                swatch(*style.UNKNOWN, "not placed", counts[None])
            if crossing:
                cells.append(f'<TD><FONT COLOR="{style.CROSS_DEVICE_EDGE}">⇢</FONT></TD>'
                             f'<TD ALIGN="LEFT">crosses devices ({crossing})</TD>')
        else:
            for r, c in zip(self.roles, self.cats):
                if c not in style.KIND:
                    counts[r] = counts.get(r, 0) + 1
            for r in list(style.ROLE_ORDER) + sorted(set(counts) - set(style.ROLE_ORDER)):
                if r in counts:
                    swatch(*style.ROLE.get(r, style.UNKNOWN),
                           "backward (gradients)" if r == "backward" else r, counts[r])
            for kind, text in (("placeholder", "input"), ("capture", "state"),
                               ("constant", "constant")):
                if kind in present:
                    swatch(*style.KIND[kind], text)
        if "control" in present or "loop" in present:
            swatch("#ffffff", style.CONTROL[1], "control flow (gold border)")
        if "transfer" in present:
            swatch(*style.TRANSFER, "send / recv")
        if "queue" in present:
            cells.append('<TD> </TD><TD ALIGN="LEFT">queue (stacked box)</TD>')
        if self.dropped:
            cells.append(f'<TD> </TD><TD ALIGN="LEFT">{self.dropped:,} not drawn</TD>')
        row = "".join(cells) or "<TD> </TD>"
        return (f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="1">'
                f'<TR><TD ALIGN="LEFT"><B>{_html(head)}</B></TD></TR>'
                f'<TR><TD ALIGN="LEFT"><TABLE BORDER="0" CELLBORDER="0" CELLSPACING="3" '
                f'CELLPADDING="2"><TR>{row}</TR></TABLE></TD></TR></TABLE>>')


def _size(value):
    if value is None:
        return 0
    numel = getattr(value, "numel", None)
    if numel is not None:
        return int(numel())
    import numpy as np
    return int(np.size(value))


def _scalar(value):
    try:
        import numpy as np
        if hasattr(value, "get"):
            value = value.get()
        return np.asarray(value).reshape(()).item()
    except Exception:   # noqa: BLE001 - a label is best effort
        return value


def _css(text):
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in str(text))


def _tooltip(n, i, index, role, dev, scope):
    args = []
    for a in getattr(n, "inputs", ()):
        j = index.get(id(a))
        args.append(f"%{j}" if j is not None else _literal(a))
    attrs = getattr(n, "attrs", None) or {}
    args += [f"{k}={_literal(v)}" for k, v in attrs.items() if k != "res"]
    kind = getattr(n, "kind", "op")
    call = f"{_op_name(n)}({', '.join(args)})" if kind == "op" else f"{kind}()"
    text = f"%{i} = {call}\n{getattr(n, 'name', '')}: {type_text(n)}"
    text += f" @{dev}" if dev else ""
    text += f"\nrole: {role}" + (f"\nscope: {scope}" if scope else "")
    if getattr(n, "stateful", False):
        text += "\nstateful (has a side effect)"
    sub = [line for v in attrs.values() for g in (v if isinstance(v, tuple) else (v,))
           if hasattr(g, "listing_lines") for line in g.listing_lines()]
    if sub:     # control flow: the listing of its branches / loop body
        text += "\n" + "\n".join(sub[:40]) + ("\n..." if len(sub) > 40 else "")
    return text


# ---- the public entry point ---------------------------------------------------------------------
def as_graph(obj, *example_args, **example_kwargs):
    """The graph to draw for ``obj`` (see ``graph``); traces functions with the example args."""
    from ..graph import Function, Graph, SymbolicTensor
    from ..graph import function as lk_function
    from ..tensor.tensor import Tensor
    from .tape import tape_graph
    if isinstance(obj, Graph):
        return obj
    if isinstance(obj, SymbolicTensor):
        return obj.graph
    if isinstance(obj, Tensor):
        return tape_graph(obj)
    if isinstance(obj, Function):
        if example_args or example_kwargs:
            return obj.graph(*example_args, **example_kwargs)
        if obj.traces:
            return obj.traces[-1].graph
        raise LabkitError(f"lk.viz.graph({obj.name}): this lk.function has not been traced yet; "
                          f"pass example arguments: lk.viz.graph({obj.name}, x, ...)")
    if hasattr(obj, "nodes") and not callable(obj):
        return obj
    if callable(obj):
        name = getattr(obj, "__name__", type(obj).__name__)
        if not (example_args or example_kwargs):
            raise LabkitError(f"lk.viz.graph({name}): a function is drawn by tracing it, which "
                              f"needs example arguments: lk.viz.graph({name}, x, ...)")
        return lk_function(obj, name=name).graph(*example_args, **example_kwargs)
    raise TypeError(f"lk.viz.graph cannot draw a {type(obj).__name__}: pass an lk.Graph, an "
                    f"lk.function or a Python function (with example arguments), a Module (with "
                    f"example inputs) or an eager tensor with an autodiff tape")


def graph(obj, *example_args, collapse=None, max_nodes=MAX_NODES, edge_labels=None,
          rankdir="TB", title=None, **example_kwargs):
    """Draw a dataflow graph; returns a ``GraphPicture`` (renders itself in a notebook).

    ``obj``: an ``lk.Graph``; an ``lk.function`` (traced with ``example_args``, or its latest
    trace); a plain Python function or a Module (traced with ``example_args``); an eager tensor
    (its autodiff tape; draw before ``backward()`` frees it). ``collapse``: None (collapse every
    top-level name scope of graphs over ``COLLAPSE_OVER`` nodes), True, False, or the scope paths
    to collapse. ``max_nodes``: at most this many boxes are drawn.

    >>> import labkit as lk
    >>> pic = lk.viz.graph(lambda x: lk.relu(x @ x.T).sum(), lk.ones(3, 2))
    >>> "matmul" in pic.dot
    True
    >>> pic.save("graph.svg")   # doctest: +SKIP
    """
    from .render import GraphPicture
    g = as_graph(obj, *example_args, **example_kwargs)
    dot = to_dot(g, collapse=collapse, max_nodes=max_nodes, edge_labels=edge_labels,
                 rankdir=rankdir, title=title)
    return GraphPicture(dot, graph=g, kind="graph", source=(obj, example_args, example_kwargs))
