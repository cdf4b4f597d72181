"""The graph explorer's pass slider and value statistics (what GraphWidget did, now in the
explorer): one stage per optimisation pass with what the pass changed marked; node details
(attributes, shapes, device, placement reason) and values for the example arguments."""
import importlib.util

import numpy as np
import pytest

import labkit as lk
from labkit.graph import passes
from labkit.viz.graph_data import graph_payload
from labkit.viz.widgets import CHANGE_STYLE, pass_marks, pass_stages, value_summary

needs_anywidget = pytest.mark.skipif(importlib.util.find_spec("anywidget") is None,
                                     reason="anywidget is not installed")


@pytest.fixture
def f():
    @lk.function
    def f(x):
        y = x.exp() + x.exp()            # cse merges the two exps
        unused = x * 3.0                 # noqa: F841 - prune removes it
        return ((y * 2.0).tanh() + 1.0).sum()   # fusion fuses the elementwise chain
    return f


def _marks(payload, stage):
    """``{node name: (mark, note)}`` of one stage of a payload."""
    text = payload["strings"]
    names = [text[k] for k in payload["nodes"]["name"]]
    return {names[i]: (mark, text[note]) for i, mark, note in payload["stages"][stage]["marks"]}


def _alive(payload, name, stage):
    names = [payload["strings"][k] for k in payload["nodes"]["name"]]
    return bool(payload["nodes"]["alive"][names.index(name)] >> stage & 1)


def test_one_stage_per_pass_each_the_graph_that_pass_made(f):
    stages = pass_stages(f, lk.ones(3))
    assert [s.name for s in stages] == passes.default_passes()
    for k, stage in enumerate(stages):
        want = f.graph(lk.ones(3), passes=passes.default_passes()[:k + 1])
        assert len(stage.after.nodes) == len(want.nodes)
        assert k == 0 or stage.before is stages[k - 1].after
    p = graph_payload(None, stages=stages)
    assert [s["name"] for s in p["stages"]] == ["traced"] + passes.default_passes()
    for k, stage in enumerate(stages, 1):
        assert p["stages"][k]["summary"] == stage.record.summary()
        assert sum(a >> k & 1 for a in p["nodes"]["alive"]) == len(stage.after.nodes)


def test_removed_merged_and_fused_nodes_are_marked(f):
    stages = pass_stages(f, lk.ones(3))
    p = graph_payload(None, stages=stages)
    k = {s.name: i for i, s in enumerate(stages, 1)}
    prune = stages[k["prune"] - 1].record
    gone = prune.removed[0]
    assert _marks(p, k["prune"])[gone] == ("removed", "prune: removed")
    assert _alive(p, gone, 0) and not _alive(p, gone, k["prune"])
    dropped, kept = stages[k["cse"] - 1].record.merged[0]
    assert _marks(p, k["cse"])[dropped] == ("merged", f"cse: merged into {kept}")
    new, names = stages[k["fusion"] - 1].record.fused[0]
    marks = _marks(p, k["fusion"])
    assert all(marks[n][0] == "fused" for n in names) and marks[new][0] == "new"
    assert "x" not in marks                                   # untouched
    # each mark has its colour and legend text in the payload
    for mark in ("removed", "merged", "fused", "new"):
        assert p["colors"]["marks"][mark] == [CHANGE_STYLE[mark][0], CHANGE_STYLE[mark][2]]
    assert pass_marks(stages[k["fusion"] - 1].record).get("x") is None


@needs_anywidget
def test_node_details_and_values_for_the_example_arguments(f):
    w = lk.viz.graph_explorer(f, lk.ones(3))
    p = w.data
    text = p["strings"]
    names = [text[k] for k in p["nodes"]["name"]]
    fused = next(n.name for n in w.graph.nodes if n.op_name == "fused")
    i = names.index(fused)
    assert "program=" in text[p["nodes"]["attrs"][i]]
    assert text[p["nodes"]["type"][i]] == "f32 3"
    assert text[p["nodes"]["device"][i]] == "cpu:0" and text[p["nodes"]["reason"][i]]
    value = w.value_text(fused)
    x = np.ones(3)
    want = np.tanh((np.exp(x) + np.exp(x)) * 2.0) + 1.0
    assert value == value_summary(want.astype(np.float32))
    assert "value: float32 (3,)" in value and "norm" in value
    with pytest.raises(lk.LabkitError, match="no node named"):
        w.value_text("nope")


@needs_anywidget
def test_an_explicit_graph_steps_through_passes_and_runs_no_side_effect():
    v = lk.Variable(lk.ones(2))
    with lk.Graph() as g:
        x = lk.placeholder((2,), name="x")
        y = (x + 1.0) * (x + 1.0)
        v.assign_add(y)
    w = lk.viz.graph_explorer(g, stages=True, passes=["cse", "dce"])
    assert [s["name"] for s in w.data["stages"]] == ["traced", "cse", "dce"]
    assert w.data["stages"][1]["marks"]                     # cse merged the two (x + 1.0)
    assert "not known here" in w.value_text("x")            # no example arguments
    np.testing.assert_array_equal(v.detach().numpy(), [1.0, 1.0])   # nothing was assigned
