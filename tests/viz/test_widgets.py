"""GraphWidget: one picture per optimisation pass with what the pass changed highlighted;
node details (attributes, shapes, device, placement reason, value after a run); the ipywidgets
controls when ipywidgets is installed."""
import importlib.util
import re

import numpy as np
import pytest

import labkit as lk
from labkit.errors import LabkitError
from labkit.graph import passes
from labkit.viz.render import find_dot
from labkit.viz.widgets import CHANGE_STYLE, pass_marks

needs_ipywidgets = pytest.mark.skipif(importlib.util.find_spec("ipywidgets") is None,
                                      reason="ipywidgets is not installed")


@pytest.fixture
def f():
    @lk.function
    def f(x):
        y = x.exp() + x.exp()            # cse merges the two exps
        unused = x * 3.0                 # noqa: F841 - prune removes it
        return ((y * 2.0).tanh() + 1.0).sum()   # fusion fuses the elementwise chain
    return f


def _node_color(dot, name, graph):
    i = next(n.index for n in graph.nodes if n.name == name)
    m = re.search(rf"^\s*n{i} \[.*$", dot, re.M)
    return re.findall(r'(?<![a-z])color="(#[0-9a-f]{6})"', m.group(0))[-1]


def test_pass_slider_gives_one_picture_per_pass(f):
    w = lk.viz.GraphWidget(f, lk.ones(3))
    assert [s.name for s in w.stages] == passes.default_passes()
    pictures = w.pictures
    assert len(pictures) == len(passes.default_passes())
    for k, (stage, pic) in enumerate(zip(w.stages, pictures)):
        assert pic.graph is stage.before
        assert stage.record.summary().replace(">", "&gt;") in pic.dot   # the caption
        want = f.graph(lk.ones(3), passes=passes.default_passes()[:k + 1])
        assert len(stage.after.nodes) == len(want.nodes)
    assert len(w.stages[-1].after.nodes) == len(f.graph(lk.ones(3)).nodes)


def test_removed_merged_and_fused_nodes_are_highlighted(f):
    w = lk.viz.GraphWidget(f, lk.ones(3))
    by_name = {s.name: (k, s) for k, s in enumerate(w.stages)}
    k, prune = by_name["prune"]
    assert prune.record.removed
    gone = prune.record.removed[0]
    dot = w.picture(k).dot
    assert _node_color(dot, gone, prune.before) == CHANGE_STYLE["removed"][0]
    assert "prune: removed" in dot and 'label="removed"' in dot
    k, cse = by_name["cse"]
    dropped, kept = cse.record.merged[0]
    dot = w.picture(k).dot
    assert _node_color(dot, dropped, cse.before) == CHANGE_STYLE["merged"][0]
    assert f"cse: merged into {kept}" in dot
    k, fusion = by_name["fusion"]
    new, names = fusion.record.fused[0]
    dot = w.picture(k).dot
    assert all(_node_color(dot, n, fusion.before) == CHANGE_STYLE["fused"][0] for n in names)
    after = w.picture(k, after=True)
    assert after.graph is fusion.after
    assert _node_color(after.dot, new, fusion.after) == CHANGE_STYLE["new"][0]
    # an untouched node keeps its role colour
    assert pass_marks(fusion.record).get("x") is None


def test_select_node_shows_attributes_shape_device_reason_and_value(f):
    w = lk.viz.GraphWidget(f, lk.ones(3))
    w.show_pass(len(w.stages))                               # the result
    fused = next(n.name for n in w.graph.nodes if n.op_name == "fused")
    text = w.select_node(fused)
    assert "= fused(" in text and "program=" in text and "float32 (3,)" in text
    assert "device: cpu:0 (" in text and "users:" in text
    assert "value:" not in text
    values = w.run()
    x = np.ones(3)
    want = np.tanh((np.exp(x) + np.exp(x)) * 2.0) + 1.0
    np.testing.assert_allclose(values[fused], want, rtol=1e-6)
    text = w.node_text(fused)
    assert "value: float32 (3,)" in text and "norm" in text
    assert f'color="{lk.viz.style.TEXT}"' in w.picture().dot        # the selection is outlined
    with pytest.raises(KeyError, match="no node named"):
        w.select_node("nope")


def test_explicit_graph_and_stateful_nodes_are_not_run():
    v = lk.Variable(lk.ones(2))
    with lk.Graph() as g:
        x = lk.placeholder((2,), name="x")
        y = (x + 1.0) * (x + 1.0)
        v.assign_add(y)
    w = lk.viz.GraphWidget(g, passes=["cse", "dce"])
    assert len(w.pictures) == 2 and w.stages[0].record.merged
    with pytest.raises(LabkitError, match="needs an lk.function"):
        w.run()                                              # needs an lk.function


@needs_ipywidgets
def test_controls_drive_the_same_state(f):
    w = lk.viz.GraphWidget(f, lk.ones(3))
    box = w.widget()
    c = w._controls
    assert c["slider"].max == len(w.stages)
    c["slider"].value = 2                                    # as a person moving the slider
    assert w.index == 2 and "cse" in c["caption"].value
    name = w.stages[2].record.merged[0][0]
    c["nodes"].value = name
    assert w.selected == name and "merged into" in c["details"].value
    c["after"].value = True                                  # the merged node is gone after
    assert w.selected is None and w.after
    c["run"].click()
    assert w.values
    bundle = w._repr_mimebundle_()
    assert "text/html" in bundle and box is w.widget()
    if find_dot() is not None:
        assert "<svg" in bundle["text/html"]
