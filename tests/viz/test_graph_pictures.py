"""Static pictures: lk.viz.graph and lk.viz.placement (DOT text, SVG via graphviz's dot),
eager tapes, collapsed scopes on large graphs, and the notebook reprs of Graph/Tensor/Module."""
import importlib.util
import os
import re
import time
import xml.etree.ElementTree as ET

import pytest

import labkit as lk
from labkit.devices import get_device
from labkit.tensor.op import Op
from labkit.viz import style
from labkit.viz.graph import display_roles, to_dot
from labkit.viz.render import GraphvizNotFound, find_dot
from labkit.viz.tape import tape_graph

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
needs_dot = pytest.mark.skipif(find_dot() is None,
                               reason="graphviz 'dot' is not installed: SVG rendering skipped")


def _fill(color_pair):
    return f'fillcolor="{color_pair[0]}"'


def _node_line(dot, op):
    """The DOT statement of the first node whose label starts with ``op``."""
    for line in dot.splitlines():
        if f"<B>{op}</B>" in line:
            return line
    raise AssertionError(f"no node labelled {op} in\n{dot}")


def _parse_svg(svg):
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    return root


@pytest.fixture
def two_cpus():
    lk.devices.configure(cpus=2)
    yield
    lk.devices.configure(cpus=1)


@pytest.fixture
def mlp_step():
    """The captured training step of a small MLP: forward, loss.backward(), manual SGD."""
    model = lk.nn.Sequential(lk.nn.Linear(4, 8), lk.nn.ReLU(), lk.nn.Linear(8, 3))

    @lk.function
    def step(x, y):
        with lk.name_scope("model"):
            out = model(x)
        loss = lk.nn.functional.cross_entropy(out, y)
        loss.backward()
        for p in model.parameters():
            p.assign_sub(p.grad * 0.1)
        return loss

    return step, (lk.randn(5, 4), lk.tensor([0, 1, 2, 0, 1]))


# ---- DOT text -------------------------------------------------------------------------------
def test_dot_of_a_small_graph_has_nodes_edges_labels_and_colours():
    with lk.Graph("small") as g:
        x = lk.placeholder((2, 3), lk.float32, name="x")
        with lk.name_scope("layer"):
            y = lk.relu(x * 2.0)
        y.sum()
    dot = to_dot(g)
    print(dot)
    assert dot.startswith('digraph "small" {') and dot.rstrip().endswith("}")
    # nodes: labelled by op and output shape, with kind-specific shapes
    assert "<B>x</B>" in dot and "shape=invhouse" in dot            # the placeholder
    relu = _node_line(dot, "relu")
    assert "2×3" in relu and _fill(style.ROLE["forward"]) in relu and "shape=box" in relu
    assert "scalar" in _node_line(dot, "sum")
    # edges: by dtype and shape; from the placeholder (n0) into mul (n1) etc.
    assert re.search(r'n0 -> n1 \[label=" f32 2×3 "', dot)
    assert "n1 -> n2" in dot and "n2 -> n3" in dot
    # the scope is a box (cluster) labelled by its name, holding mul and relu
    cluster = dot[dot.index("subgraph cluster_"):]
    assert 'label="layer"' in cluster.splitlines()[1]
    assert cluster.index("<B>mul</B>") < cluster.index("}") and "<B>relu</B>" in cluster
    # tooltips hold the listing line; the legend names the roles present
    assert "%1 = mul(%0, 2.0)" in dot
    assert "forward (3)" in dot and "input" in dot


def test_collapsed_scope_is_one_box_with_a_count():
    with lk.Graph("scoped") as g:
        x = lk.placeholder((4,), lk.float32, name="x")
        with lk.name_scope("model"):
            with lk.name_scope("hidden"):
                h = lk.tanh(x * 3.0 + 1.0)
            with lk.name_scope("head"):
                h = lk.exp(h)
        h.sum()
    open_dot = to_dot(g, collapse=False)
    assert open_dot.count("subgraph cluster_") == 3
    dot = to_dot(g, collapse=True)
    assert "subgraph cluster_" not in dot
    assert "<B>model</B> ▸" in dot and "4 nodes" in dot
    assert "<B>tanh</B>" not in dot
    assert re.search(r"n0 -> s\d+", dot) and re.search(r"s\d+ -> n\d+", dot)
    inner = to_dot(g, collapse=["model/hidden"])      # an inner scope only: model stays open
    assert inner.count("subgraph cluster_") == 2 and "<B>hidden</B> ▸" in inner  # model, head
    assert "3 nodes" in inner and "<B>exp</B>" in inner


def test_roles_of_the_captured_mlp_training_step_are_distinct(mlp_step):
    step, args = mlp_step
    pic = lk.viz.graph(step, *args)
    g = pic.graph
    roles = display_roles(g.nodes)
    assert {"forward", "backward", "update"} <= set(roles)
    for n, r in zip(g.nodes, roles):
        if n.kind == "op" and n.op.name == "assign_sub":
            assert r == "update"
        if n.kind == "op" and n.op.name == "mul" and r == "update":   # p.grad * 0.1
            assert all(u.op.name == "assign_sub" for u in g.nodes if n in u.inputs)
    dot = pic.dot
    for role in ("forward", "backward", "update"):
        fill = _fill(style.ROLE[role])
        assert sum(fill in line for line in dot.splitlines()) >= 4, role
    assert "peripheries=2" in _node_line(dot, "assign_sub")           # stateful: double border
    assert "shape=cylinder" in dot                                     # parameters as state
    assert "backward (gradients)" in dot and "update (" in dot
    assert "subgraph cluster_" in dot and 'label="model"' in dot


@needs_dot
def test_svg_renders_and_parses(mlp_step, tmp_path):
    step, args = mlp_step
    pic = lk.viz.graph(step, *args)
    root = _parse_svg(pic.svg())
    groups = [el for el in root.iter() if el.tag.endswith("}g")]
    drawn = [el for el in groups if "lk-node" in (el.get("class") or "")]
    assert len(drawn) == len(pic.graph.nodes)
    assert any("role-backward" in el.get("class") for el in drawn)
    assert pic._repr_svg_().startswith("<svg")
    bundle = pic._repr_mimebundle_()
    assert bundle["image/svg+xml"].startswith("<svg") and "text/plain" in bundle
    png = pic.save(tmp_path / "step.png")
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "step.dot").exists() is False
    pic.save(tmp_path / "step.dot")
    assert (tmp_path / "step.dot").read_text().startswith("digraph")


@needs_dot
def test_digits_cnn_training_step_renders_with_three_roles():
    path = os.path.join(ROOT, "examples", "train_digits.py")
    spec = importlib.util.spec_from_file_location("train_digits", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    model = example.make_model()

    @lk.function
    def step(x, y):
        loss = lk.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        for p in model.parameters():
            p.assign_sub(p.grad * 0.01)
        return loss

    pic = lk.viz.graph(step, lk.randn(8, 1, 8, 8), lk.tensor(list(range(8))))
    roles = set(display_roles(pic.graph.nodes))
    assert roles == {"forward", "backward", "update"}
    _parse_svg(pic.svg())


# ---- placement --------------------------------------------------------------------------------
def test_placement_colours_nodes_by_device(two_cpus):
    @lk.function
    def two(x):
        h = lk.tanh(x * 2.0)
        with lk.device("cpu:1"):
            h = h.to("cpu:1") + lk.ones(3)
        return h.sum()

    pic = lk.viz.placement(two, lk.ones(3))
    dot = pic.dot
    colors = style.device_colors(["cpu:0", "cpu:1"])
    assert _fill(colors["cpu:0"]) in _node_line(dot, "tanh")
    assert _fill(colors["cpu:1"]) in _node_line(dot, "sum")
    assert colors["cpu:0"] != colors["cpu:1"]
    assert "cpu:0 (3)" in dot and "cpu:1 (4)" in dot                 # the legend
    assert "crosses devices (1)" in dot and style.CROSS_DEVICE_EDGE in dot
    assert "placed on cpu:1: a transfer" in dot                        # reasons in tooltips
    assert "placed on cpu:0: follows its inputs' device" in dot
    if find_dot():
        _parse_svg(pic.svg())


def _fake_op(name, stateful=False):
    return Op(name, lambda xp, *a: a[0], lambda *a, **k: (None, None), stateful=stateful)


def test_placement_of_a_hand_built_graph_with_send_and_recv(two_cpus):
    c0, c1 = get_device("cpu:0"), get_device("cpu:1")
    g = lk.Graph("two_devices")
    x = g.add_node("placeholder", None, (), {}, (4,), lk.float32, c0, name="x")
    m = g.add_node("op", _fake_op("mul"), (x, 2.0), {}, (4,), lk.float32, c0)
    s = g.add_node("op", _fake_op("send"), (m,), {}, (4,), lk.float32, c0)
    r = g.add_node("op", _fake_op("recv"), (s,), {}, (4,), lk.float32, c1)
    g.add_node("op", _fake_op("while"), (r,), {}, None, None, c1)
    r.attrs["placement_reason"] = "partition: receives mul from cpu:0"
    pic = lk.viz.placement(g)
    dot = pic.dot
    colors = style.device_colors(["cpu:0", "cpu:1"])
    send, recv = _node_line(dot, "send"), _node_line(dot, "recv")
    assert "shape=cds" in send and "shape=cds" in recv
    assert _fill(colors["cpu:0"]) in send and _fill(colors["cpu:1"]) in recv
    assert f'color="{style.TRANSFER[1]}"' in send
    assert "send / recv" in dot and "control flow" in dot
    assert "shape=hexagon" in _node_line(dot, "while") and "tuple" in _node_line(dot, "while")
    assert "inserted at a device boundary" in dot                     # derived for send
    assert "placed on cpu:1: partition: receives mul from cpu:0" in dot  # recorded for recv
    role_dot = lk.viz.graph(g).dot                     # the role view marks them too
    assert _fill(style.TRANSFER) in _node_line(role_dot, "send")
    if find_dot():
        _parse_svg(pic.svg())


# ---- large graphs ---------------------------------------------------------------------------
def _chain(n_steps, scopes):
    with lk.Graph(name="chain") as g:
        x = lk.placeholder((4,), lk.float32, name="x")
        per = n_steps // scopes
        for s in range(scopes):
            with lk.name_scope(f"block{s}"):
                for i in range(per):
                    x = x * 1.0001 + 0.5 if i % 2 else lk.tanh(x)
    return g


@needs_dot
def test_a_2000_node_graph_renders_quickly_with_scopes_collapsed():
    g = _chain(1400, 4)
    assert len(g) > 2000
    start = time.perf_counter()
    pic = lk.viz.graph(g)
    svg = pic.svg()
    seconds = time.perf_counter() - start
    print(f"\n{len(g)} nodes, scopes collapsed: DOT + SVG in {seconds:.3f} s")
    assert seconds < 30
    assert pic.dot.count("<B>block") == 4 and "525 nodes" in pic.dot
    _parse_svg(svg)
    start = time.perf_counter()
    capped = lk.viz.graph(g, collapse=False)                          # open: max_nodes boxes
    _parse_svg(capped.svg())
    print(f"{len(g)} nodes, scopes open, capped at max_nodes: "
          f"{time.perf_counter() - start:.3f} s")


def test_a_large_unscoped_graph_is_capped_at_max_nodes():
    with lk.Graph("flat") as g:
        x = lk.placeholder((2,), lk.float32, name="x")
        for _ in range(700):
            x = lk.tanh(x)
    dot = to_dot(g, max_nodes=100)
    assert dot.count("<B>tanh</B>") == 99
    assert "601 more nodes not drawn" in dot
    assert 'label=" f32' not in to_dot(g, max_nodes=200)              # big: no edge labels


# ---- eager tapes ------------------------------------------------------------------------------
def test_an_eager_tape_becomes_a_graph_and_renders():
    w = lk.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    data = lk.ones(2, 2)
    z = (lk.tanh(w @ w) * 3.0 + data).sum()
    tg = tape_graph(z)
    names = [n.op_name for n in tg.nodes]
    assert names[0] == "capture" and names[-1] == "sum"                 # inputs first
    assert sorted(names) == sorted(["capture", "matmul", "tanh", "mul", "constant", "add", "sum"])
    index = {id(n): i for i, n in enumerate(tg.nodes)}
    for i, n in enumerate(tg.nodes):                                   # topological order
        assert all(index[id(a)] < i for a in n.inputs if id(a) in index)
    dot = lk.viz.graph(z).dot
    assert "<B>matmul</B>" in dot and "shape=cylinder" in dot and "2×2" in dot
    if find_dot():
        _parse_svg(lk.viz.graph(z).svg())
    with pytest.raises(lk.LabkitError, match="no autodiff tape"):
        lk.viz.graph(lk.ones(2))


def test_a_deep_tape_is_walked_without_recursion():
    x = lk.tensor([0.5], requires_grad=True)
    y = x
    for _ in range(3000):
        y = y * 1.0
    tg = tape_graph(y)
    assert len(tg) == 3001
    dot = to_dot(tg, max_nodes=50)
    assert "more nodes not drawn" in dot


def test_a_freed_tape_is_drawn_as_far_as_it_goes():
    x = lk.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    assert "(freed)" in lk.viz.graph(y).dot


# ---- inputs and errors -----------------------------------------------------------------------
def test_functions_need_example_arguments():
    with pytest.raises(lk.LabkitError, match="example arguments"):
        lk.viz.graph(lambda x: x * 2)
    f = lk.function(lambda x: x * 2.0)
    with pytest.raises(lk.LabkitError, match="not been traced"):
        lk.viz.graph(f)
    f(lk.ones(2))
    assert "<B>mul</B>" in lk.viz.graph(f).dot                         # its latest trace
    model = lk.nn.Linear(3, 2)
    assert "<B>matmul</B>" in lk.viz.graph(model, lk.ones(4, 3)).dot  # a Module
    with pytest.raises(TypeError, match="cannot draw"):
        lk.viz.graph(42)


def test_missing_dot_gives_a_clear_error_and_falls_back_to_dot_text(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    pic = lk.viz.graph(lambda x: lk.relu(x), lk.ones(3))
    with pytest.raises(GraphvizNotFound, match="apt-get install graphviz"):
        pic.svg()
    with pytest.raises(GraphvizNotFound, match="picture.dot"):
        pic.save(tmp_path / "x.png")
    assert pic._repr_svg_() is None
    bundle = pic._repr_mimebundle_()
    # no SVG; the text says what to install (a live notebook with anywidget also gets the
    # graph explorer, which lays the graph out in the browser without graphviz)
    assert "image/svg+xml" not in bundle and "text/plain" in bundle
    assert "graphviz" in bundle["text/plain"] and "digraph" in bundle["text/plain"]


# ---- notebook reprs ---------------------------------------------------------------------------
def test_graph_tensor_and_module_render_themselves():
    with lk.Graph("g") as g:
        x = lk.placeholder((2,), lk.float32, name="x")
        y = x + 1.0
    bundle = g._repr_mimebundle_()
    if find_dot():
        assert bundle["image/svg+xml"].startswith("<svg")
        assert g._repr_svg_().startswith("<svg")
    else:
        assert "digraph" in bundle["text/plain"]
    html = lk.tensor([[1.0, 2.0, 3.0]] * 4, requires_grad=True)._repr_html_()
    for text in ("shape", "(4, 3)", "float32", "cpu:0", "requires_grad", "True",
                 "12 values", "min / max / mean"):
        assert text in html, text
    assert "symbolic" in y._repr_html_()
    model = lk.nn.Sequential(lk.nn.Linear(4, 8), lk.nn.ReLU(), lk.nn.Linear(8, 3))
    tree = model._repr_html_()
    assert "Sequential" in tree and "67 parameters" in tree
    assert "40 params" in tree and "27 params" in tree and "no params" in tree
    assert tree.count("<li>") == 3


def test_numbered_scopes_fold_into_a_series_and_gradients_into_one_box(mlp_step):
    with lk.Graph("deep") as g:
        x = lk.placeholder((4,), lk.float32, name="x", requires_grad=True)
        h = x
        for i in range(70):
            with lk.name_scope(f"layer{i}"):
                h = lk.tanh(h * 1.5)
        lk.gradients(h.sum(), [x])
    dot = to_dot(g)                                      # 280+ nodes: collapsed by default
    assert "<B>layer[0–69]</B> ▸" in dot and "70 scopes · 140 nodes" in dot
    assert "<B>gradients</B> ▸" in dot
    assert dot.count("[label=<") < 12
    step, args = mlp_step
    small = to_dot(step.graph(*args), collapse=True)     # a small graph, collapsed on request
    assert "<B>gradients</B> ▸" in small and "<B>update</B> ▸" in small
    assert "<B>model</B> ▸" in small
    assert "<B>gradients</B>" not in to_dot(step.graph(*args))   # open by default: no grouping


def test_control_flow_nodes_are_drawn_apart():
    if not hasattr(lk, "cond"):
        pytest.skip("lk.cond / lk.while_loop are not in this build")

    @lk.function
    def f(x):
        y = lk.cond(x.sum() > 0, lambda: x * 2.0, lambda: x - 1.0)
        _, z = lk.while_loop(lambda i, z: i < 3, lambda i, z: (i + 1, z * 1.5),
                             (lk.tensor(0), y))
        return z.sum()

    dot = lk.viz.graph(f, lk.ones(3)).dot
    cond, loop = _node_line(dot, "cond"), _node_line(dot, "while")
    assert "shape=diamond" in cond and "shape=hexagon" in loop
    assert f'color="{style.CONTROL[1]}"' in cond and "tuple" in cond
    assert "cond/true" in cond and "mul(%0, 2.0)" in cond        # branch listing in the tooltip
    assert '" tuple "' in dot and "<B>output[0]</B>" in dot
    assert "control flow" in dot
