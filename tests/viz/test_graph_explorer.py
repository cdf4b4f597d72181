"""The graph explorer's Python side: the payload (nodes, edges, scopes, shapes, control-flow
bodies, pass stages, profile times) checked against the graph it came from, the widget's
traits and value messages, and what a graph picture shows in a notebook (the explorer beside
its static SVG)."""
import importlib
import importlib.util

import numpy as np
import pytest

import labkit as lk
from labkit.graph import passes
from labkit.viz.graph import display_roles, type_text
from labkit.viz.graph_data import graph_payload

needs_anywidget = pytest.mark.skipif(importlib.util.find_spec("anywidget") is None,
                                     reason="anywidget is not installed")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _col(p, name):
    """A string column of the payload as text per node."""
    return [p["strings"][k] if k >= 0 else None for k in p["nodes"][name]]


def mlp_step(layers=3):
    lk.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [lk.nn.Linear(4, 4), lk.nn.ReLU()]
    model = lk.nn.Sequential(*mods)
    opt = lk.optim.SGD(model.parameters(), lr=0.1)

    @lk.function
    def step(x):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    return step, lk.randn(2, 4)


def test_payload_nodes_edges_and_shapes_match_the_graph():
    step, x = mlp_step()
    g = step.graph(x)
    p = graph_payload(g)
    assert p["n"] == len(g.nodes)
    assert _col(p, "name") == [n.name for n in g.nodes]
    assert _col(p, "op") == [n.op_name for n in g.nodes]
    assert _col(p, "type") == [type_text(n) for n in g.nodes]
    assert _col(p, "role") == display_roles(g.nodes)
    assert _col(p, "device") == [n.device.name for n in g.nodes]
    index = {id(n): i for i, n in enumerate(g.nodes)}
    want = sorted((index[id(a)], i) for i, n in enumerate(g.nodes) for a in n.inputs
                  if id(a) in index)
    edges = p["edges"]
    assert sorted(zip(edges[::2], edges[1::2])) == sorted(set(want))
    # the user's line is kept for traced ops, written as errors and the profiler write it
    src = _col(p, "source")
    assert any(s and s.startswith(f"{__file__}:") and s.endswith(": loss = (model(x) ** 2).mean()")
               for s in src), src
    assert p["title"].endswith(f"{len(g.nodes):,} nodes")


def test_payload_scopes_are_a_tree_with_counts_and_roles():
    step, x = mlp_step()
    g = step.graph(x)
    p = graph_payload(g)
    groups = p["groups"]
    paths = [grp["path"] for grp in groups]
    assert {"0", "2", "4", "gradients"} <= set(paths)
    roles = display_roles(g.nodes)
    for k, grp in enumerate(groups):
        members = [i for i, n in enumerate(g.nodes)
                   if _inside(p, p["nodes"]["group"][i], k)]
        assert grp["count"] == len(members), grp["path"]
        counted = {}
        for i in members:
            counted[roles[i]] = counted.get(roles[i], 0) + 1
        assert grp["roles"] == counted
        if grp["parent"] >= 0:
            assert grp["path"].startswith(groups[grp["parent"]]["path"] + "/")
    # every unscoped backward node sits in the pseudo-scope 'gradients', as lk.viz.graph draws
    grads = paths.index("gradients")
    for i, n in enumerate(g.nodes):
        if not n.scope and roles[i] == "backward":
            assert p["nodes"]["group"][i] == grads
    # by default the explorer chooses what opens (as much as stays readable on its canvas)
    assert p["auto_open"] and p["expanded"] == []
    q = graph_payload(g, expanded=["0", "nope"])
    assert not q["auto_open"] and q["expanded"] == ["0"]
    # stateful nodes (the update's assigns) are marked for the picture
    stateful = [n.name for n, flag in zip(g.nodes, p["nodes"]["stateful"]) if flag]
    assert stateful and all(n.stateful for n in g.nodes if n.name in stateful)
    # each module's scope knows the module's class: "0 (Linear)"
    types = {grp["path"]: grp["type"] for grp in groups}
    assert types["0"] == "Linear" and types["1"] == "ReLU" and types["gradients"] is None


def _inside(p, g, k):
    while g >= 0:
        if g == k:
            return True
        g = p["groups"][g]["parent"]
    return False


def test_control_flow_bodies_are_groups_inside_their_node():
    @lk.function
    def f(x):
        return lk.cond(x.sum() > 0, lambda a: (a * 2.0).exp(), lambda a: a - 1.0, x).sum()
    g = f.graph(lk.ones(3))
    p = graph_payload(g)
    names = _col(p, "name")
    cond = names.index(next(n.name for n in g.nodes if n.op_name == "cond"))
    control = [k for k, grp in enumerate(p["groups"]) if grp["kind"] == "control"]
    assert len(control) == 1 and p["groups"][control[0]]["owner"] == cond
    assert p["nodes"]["group"][cond] == control[0]
    body = {grp["label"]: k for k, grp in enumerate(p["groups"]) if grp["kind"] == "body"}
    assert set(body) == {"true", "false"}
    ops = _col(p, "op")
    in_true = [ops[i] for i in range(p["n"]) if p["nodes"]["group"][i] == body["true"]]
    in_false = [ops[i] for i in range(p["n"]) if p["nodes"]["group"][i] == body["false"]]
    assert "exp" in in_true and "mul" in in_true and "sub" in in_false
    # the cond's own output node sits in its box too (not in a second box named 'cond')
    outputs = [ops[i] for i in range(p["n"]) if p["nodes"]["group"][i] == control[0]
               and i != cond]
    assert outputs == ["output"] and "cond" not in [grp["path"] for grp in p["groups"]]
    assert p["groups"][control[0]]["count"] == 2 + len(in_true) + len(in_false)
    # a body's own edges are there (mul -> exp inside the true branch)
    pairs = list(zip(p["edges"][::2], p["edges"][1::2]))
    assert any(ops[a] == "mul" and ops[b] == "exp" for a, b in pairs)
    for loop in (lambda x: lk.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2.0),
                                         (lk.tensor(0), x))[1].sum(),
                 lambda x: lk.scan(lambda c, r: (c + r, c * r), lk.zeros(3),
                                   lk.ones(4, 3))[0].sum()):
        q = graph_payload(lk.function(loop).graph(lk.ones(3)))
        kinds = [grp["kind"] for grp in q["groups"]]
        assert "control" in kinds and "body" in kinds


def test_pass_stages_say_what_each_pass_changed():
    @lk.function
    def f(x):
        y = x.exp() + x.exp()            # cse merges the two exps
        unused = x * 3.0                 # noqa: F841 - prune removes it
        return ((y * 2.0).tanh() + 1.0).sum()
    from labkit.viz.widgets import pass_stages
    stages = pass_stages(f, lk.ones(3))
    p = graph_payload(None, stages=stages)
    assert [s["name"] for s in p["stages"]] == ["traced"] + passes.default_passes()
    names, alive = _col(p, "name"), p["nodes"]["alive"]
    graphs = [stages[0].before] + [s.after for s in stages]
    for k, g in enumerate(graphs):     # each stage's nodes are those alive in it
        assert sorted(names[i] for i in range(p["n"]) if alive[i] >> k & 1) == \
            sorted(n.name for n in g.nodes)
    by = {s["name"]: s for s in p["stages"]}
    marks = {(names[i], m) for i, m, _ in by["prune"]["marks"]}
    assert ("mul", "removed") in marks or any(m == "removed" for _, m in marks)
    assert any(m == "merged" for _, m, _ in by["cse"]["marks"])
    fused = {names[i] for i, m, _ in by["fusion"]["marks"] if m == "new"}
    assert fused and all(n.startswith("fused") for n in fused)
    assert p["strings"][by["cse"]["marks"][0][2]].startswith("cse:")


def test_profile_times_per_node():
    step, x = mlp_step(1)
    step(x)
    with lk.profile() as prof:
        step(x)
        step(x)
    g = step.graph(x)
    p = graph_payload(g, profile=prof)
    want = {}
    for e in prof.events:
        want[e.name] = want.get(e.name, 0.0) + e.duration_ns
    times = p["nodes"]["time"]
    names = _col(p, "name")
    assert any(t > 0 for t in times)
    for name, t in zip(names, times):
        assert t == pytest.approx(want.get(name, 0.0))


def test_a_2000_node_payload_stays_compact():
    import json
    step, x = mlp_step(150)
    g = step.graph(x)
    assert len(g.nodes) > 2000
    size = len(json.dumps(graph_payload(g)))
    assert size < 120 * len(g.nodes), size     # about 85 bytes a node


@needs_anywidget
def test_explorer_traits_and_value_statistics_on_request():
    @lk.function
    def f(x):
        return (x.exp() * 2.0).sum()
    x = lk.tensor([0.0, 1.0, 2.0])
    w = lk.viz.graph_explorer(f, x)
    assert w.stage == len(passes.default_passes()) and w.color_by == "role"
    assert set(w.get_state()) >= {"data", "expanded", "selected", "query", "color_by",
                                  "stage", "_esm"}
    assert "export" in w.get_state()["_esm"]
    exp_name = next(n.name for n in w.graphs[0].nodes if n.op_name == "exp")
    text = w.value_text(exp_name, 0)                       # in the traced graph
    assert f"max {np.exp(2.0):.4g}" in text and "min 1" in text
    sent = []
    w.send = sent.append
    w._on_message(w, {"event": "value", "name": exp_name, "stage": 0}, [])
    assert sent == [{"event": "value", "name": exp_name, "text": text}]
    w._on_message(w, {"event": "value", "name": "nope", "stage": 0}, [])
    assert "no node named 'nope'" in sent[-1]["text"]
    with pytest.raises(ValueError, match="color_by='time' needs a profile"):
        lk.viz.graph_explorer(f, x, color_by="time")
    with pytest.raises(ValueError, match="color_by must be one of"):
        lk.viz.graph_explorer(f, x, color_by="size")


@needs_anywidget
def test_graph_picture_shows_the_explorer_beside_its_svg():
    from labkit.viz.render import find_dot
    pic = lk.viz.graph(lambda x: lk.relu(x @ x.T).sum(), lk.ones(3, 2))
    bundle = pic._repr_mimebundle_()
    assert WIDGET_VIEW in bundle and bundle["text/plain"] == repr(pic)
    if find_dot() is not None:
        assert bundle["image/svg+xml"].startswith("<svg")
    assert pic.explorer().data["n"] == len(pic.graph.nodes)
    assert len(pic.explorer().data["stages"]) == 1             # a plain function: no slider

    @lk.function
    def g(x):
        return (x.exp() * 2.0).sum()
    w = lk.viz.graph(g, lk.ones(3)).explorer()                 # an lk.function: the passes
    assert [s["name"] for s in w.data["stages"]][1:] == list(passes.default_passes())
    assert w.stage == len(passes.default_passes()) and w.data["n"] >= len(w.graph.nodes)
    lk.devices.configure(cpus=2)
    try:
        @lk.function
        def f(x):
            return ((x * 2.0).to("cpu:1") + 1.0).sum()
        place = lk.viz.placement(f, lk.ones(3))
        w = place.explorer()
        assert w.color_by == "device" and set(w.data["colors"]["device"]) == {"cpu:0", "cpu:1"}
        reasons = _col(w.data, "reason")
        assert all(reasons)
    finally:
        lk.devices.configure(cpus=1)


def test_collapse_and_expand_say_what_opens_first():
    from labkit.viz.graph_explorer import open_paths
    paths = ["enc", "enc/0", "enc/1", "dec", "[cond]", "[cond]/true"]
    assert open_paths(paths) is None                           # the explorer chooses
    assert open_paths(paths, collapse=True) == []
    assert open_paths(paths, collapse=False) == paths
    assert open_paths(paths, collapse=["enc/0", "[cond]"]) == ["enc", "enc/1", "dec"]
    assert open_paths(paths, collapse="dec") == ["enc", "enc/0", "enc/1", "[cond]",
                                                 "[cond]/true"]
    assert open_paths(paths, expand=["enc/1"]) == ["enc", "enc/1"]
    assert open_paths(paths, collapse=True, expand="[cond]/true") == ["[cond]", "[cond]/true"]


@needs_anywidget
def test_graph_options_reach_the_explorer():
    step, x = mlp_step()
    w = lk.viz.graph(step, x, collapse=["0"]).explorer()
    assert not w.data["auto_open"] and "0" not in w.expanded and "2" in w.expanded
    w = lk.viz.graph(step, x, expand=["2"]).explorer()
    assert w.expanded == ["2"]
    assert lk.viz.graph(step, x).explorer().data["auto_open"]
    # profile= is taken (it was passed on to the traced function before) and colours by time
    step(x)
    with lk.profile() as prof:
        step(x)
    pic = lk.viz.graph(step, x, profile=prof)
    w = pic.explorer()
    assert w.color_by == "time" and any(t > 0 for t in w.data["nodes"]["time"])
    assert "digraph" in pic.dot


def test_graph_picture_without_anywidget_is_the_static_picture(monkeypatch):
    explorer = importlib.import_module("labkit.viz.timeline_explorer")
    monkeypatch.setattr(explorer, "have_anywidget", lambda: False)
    bundle = lk.viz.graph(lambda x: (x * 2.0).sum(), lk.ones(3))._repr_mimebundle_()
    assert WIDGET_VIEW not in bundle
