"""The timeline explorer's Python side: the columnar payload (values against the profile's
events), the widget's traits, what a timeline shows in a notebook (the explorer beside its
static SVG), and the categories of a parameter-server run's phases."""
import importlib
import importlib.util

import numpy as np
import pytest

import labkit as lk
from labkit.profiler import Profile
from labkit.viz.timeline import KIND_COLORS, op_kind
from labkit.viz.timeline_data import decode_column, timeline_payload

from .test_timeline import two_device_profile

needs_anywidget = pytest.mark.skipif(importlib.util.find_spec("anywidget") is None,
                                     reason="anywidget is not installed")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def test_payload_columns_hold_every_event():
    prof = two_device_profile()
    payload, events = timeline_payload(prof)
    assert payload["n"] == len(events) == len(prof.events) == 12
    assert all(isinstance(v, bytes) for v in payload["columns"].values())   # binary, compact
    t0 = min(e.start_ns for e in prof.events)
    np.testing.assert_array_equal(decode_column(payload, "start"),
                                  [e.start_ns - t0 for e in events])
    np.testing.assert_array_equal(decode_column(payload, "dur"),
                                  [e.duration_ns for e in events])
    strings = payload["strings"]
    assert [strings["op"][i] for i in decode_column(payload, "op")] == [e.op for e in events]
    assert [strings["name"][i] for i in decode_column(payload, "name")] == [e.name
                                                                              for e in events]
    lanes = [(lane["device"], lane["lane"]) for lane in payload["lanes"]]
    assert lanes == [("cpu:0", "main"), ("cpu:1", "worker-1")]
    assert [lanes[i] for i in decode_column(payload, "lane")] == [(e.device, e.lane)
                                                                  for e in events]
    kinds = [k["name"] for k in payload["kinds"]]
    assert [kinds[i] for i in decode_column(payload, "kind")] == [op_kind(e.op) for e in events]
    assert {k["name"] for k in payload["kinds"] if k["used"]} == {
        "matmul / conv", "elementwise", "transfer", "reduction"}
    np.testing.assert_array_equal(decode_column(payload, "bytes_in"),
                                  [e.bytes_in for e in events])
    assert [s["step"] for s in payload["steps"]] == [0, 1]
    assert payload["steps"][1]["mark"] == 16_200 and payload["steps"][1]["start"] == 10_000
    # one send -> recv pair per step, as event indices
    pairs = np.frombuffer(payload["arrows"], "<i4").reshape(-1, 2)
    assert [(events[s].name, events[r].name, events[s].step) for s, r in pairs] == [
        ("send_h", "recv_h", 0), ("send_h", "recv_h", 1)]
    assert "shape" not in payload["columns"]        # the profiler records no shapes (yet)


def test_payload_of_an_empty_profile():
    payload, events = timeline_payload(Profile())
    assert payload["n"] == 0 and events == [] and payload["steps"] == []


@needs_anywidget
def test_explorer_traits_and_selected_event():
    prof = two_device_profile()
    w = lk.viz.timeline_explorer(prof, step=1, title="two devices")
    assert w.step == 1 and w.data["title"] == "two devices" and w.selected_event is None
    w.selected = 4
    assert w.selected_event is w.events[4] and w.selected_event in prof.events
    state = w.get_state()
    assert set(state) >= {"data", "step", "query", "selected", "selection", "view", "_esm"}
    assert "export" in state["_esm"]      # the bundled module itself, not a URL
    assert lk.viz.timeline(prof, step=1).explorer().step == 1


@needs_anywidget
def test_timeline_shows_the_explorer_beside_its_svg():
    prof = two_device_profile()
    pic = lk.viz.timeline(prof)
    bundle = pic._repr_mimebundle_()
    assert bundle["image/svg+xml"] == pic.svg()          # what nbval, GitHub and nbconvert show
    assert WIDGET_VIEW in bundle                         # what a live JupyterLab shows
    assert bundle["text/plain"] == repr(pic)
    # an empty profile has nothing to explore: the picture alone
    assert WIDGET_VIEW not in lk.viz.timeline(Profile())._repr_mimebundle_()


@needs_anywidget
def test_a_profile_shown_in_a_notebook_is_the_explorer_beside_its_svg():
    prof = two_device_profile()
    bundle = prof._repr_mimebundle_()
    assert WIDGET_VIEW in bundle and bundle["image/svg+xml"] == lk.viz.timeline(prof).svg()
    assert WIDGET_VIEW not in Profile()._repr_mimebundle_()


def test_timeline_without_anywidget_is_the_static_picture(monkeypatch):
    from labkit.errors import LabkitError
    explorer = importlib.import_module("labkit.viz.timeline_explorer")
    monkeypatch.setattr(explorer, "have_anywidget", lambda: False)
    bundle = lk.viz.timeline(two_device_profile())._repr_mimebundle_()
    assert set(bundle) == {"image/svg+xml", "text/plain"}
    monkeypatch.setattr(explorer, "_CLASSES", {})
    monkeypatch.setitem(__import__("sys").modules, "anywidget", None)
    with pytest.raises(LabkitError, match="pip install 'labkit\\[notebooks\\]'"):
        lk.viz.timeline_explorer(two_device_profile())


def test_a_ranks_own_delay_is_not_drawn_as_waiting_for_others():
    """ParameterServer's straggler= sleeps inside the rank's own step: that is time the rank
    spends on itself. Only a blocking pull is spent on the others."""
    assert op_kind("ps.straggle") == "injected delay"
    assert op_kind("ps.compute") == "compute"
    assert op_kind("ps.pull") == op_kind("ps.push") == "pull / push"
    assert "waiting" not in KIND_COLORS
