"""lk.viz.timeline: lanes per (device, lane), bars by op kind, step lines, tooltips, send/recv
arrows; a Profile renders itself; the step-selecting widget."""
import importlib.util
import xml.etree.ElementTree as ET

import pytest

import labkit as lk
from labkit.profiler import Profile
from labkit.viz.timeline import KIND_COLORS, op_kind

SVG = "{http://www.w3.org/2000/svg}"


def two_device_profile():
    """Two steps; in each, ops on cpu:0 and cpu:1 that run at the same time, and a send on
    cpu:0 whose value a recv on cpu:1 takes."""
    p = Profile()
    for step in range(2):
        t = step * 10_000
        p.record("matmul", "matmul", "cpu:0", t, t + 3000, 1024, 512, lane="main")
        p.record("add", "add", "cpu:0", t + 3000, t + 3500, lane="main")
        p.record("send", "send_h", "cpu:0", t + 3500, t + 3700, 512, 0, lane="main")
        p.record("matmul", "matmul_1", "cpu:1", t + 1000, t + 3400, lane="worker-1")
        p.record("recv", "recv_h", "cpu:1", t + 3600, t + 4500, 0, 512, lane="worker-1")
        p.record("sum", "sum", "cpu:1", t + 4500, t + 6000, lane="worker-1")
        p.step_marks.append((step, t + 6200))
        p.step_number += 1
    return p


def _groups(root, cls):
    return [g for g in root.iter(SVG + "g") if cls in g.get("class", "").split()]


def _bar(g):
    r = g.find(SVG + "rect")
    return float(r.get("x")), float(r.get("x")) + float(r.get("width")), float(r.get("y"))


def test_two_devices_two_lanes_with_overlapping_bars():
    prof = two_device_profile()
    root = ET.fromstring(lk.viz.timeline(prof).svg())
    lanes = _groups(root, "lk-lane")
    assert [(g.get("data-device"), g.get("data-lane")) for g in lanes] == [
        ("cpu:0", "main"), ("cpu:1", "worker-1")]
    ops = _groups(root, "lk-op")
    assert len(ops) == len(prof.events)
    mm0 = next(g for g in ops if "matmul on" not in g.find(SVG + "title").text
               and "cpu:0" in g.find(SVG + "title").text)
    mm1 = next(g for g in ops if "matmul_1" in g.find(SVG + "title").text)
    (a0, a1, y0), (b0, b1, y1) = _bar(mm0), _bar(mm1)
    assert a0 < b1 and b0 < a1          # the two matmuls overlap in time
    assert y0 != y1                     # ... on two lanes
    # bars are coloured by op kind, from the shared palette
    fills = {g.get("data-op"): g.find(SVG + "rect").get("fill") for g in ops}
    assert fills["matmul"] == KIND_COLORS["matmul / conv"][0]
    assert fills["sum"] == KIND_COLORS["reduction"][0]
    assert fills["send"] == fills["recv"] == lk.viz.style.TRANSFER[0]


def test_every_builtin_op_has_a_kind():
    """No primitive of labkit/tensor/ops is drawn as 'other' (a transformer's step spends much
    of its time in gelu, layer_norm and softmax, which once were)."""
    from labkit.tensor.op import REGISTRY
    builtin = {name: o for name, o in REGISTRY.items()
               if getattr(o.kernel, "__module__", "").startswith("labkit.tensor.ops.")}
    assert len(builtin) > 100
    unknown = sorted(name for name in builtin if op_kind(name) == "other")
    assert not unknown, ("ops without a timeline kind (add their module to _MODULE_KIND): "
                         f"{unknown}")
    assert [op_kind(op) for op in ("gelu", "erf", "softmax", "layer_norm", "nll_loss", "triu",
                                   "einsum", "cumsum")] == [
        "elementwise", "elementwise", "reduction", "reduction", "reduction", "shape / index",
        "matmul / conv", "reduction"]


def test_step_lines_tooltips_and_transfer_arrows():
    prof = two_device_profile()
    root = ET.fromstring(lk.viz.timeline(prof).svg())
    steps = _groups(root, "lk-step")
    assert [g.get("data-step") for g in steps] == ["0", "1"]
    xs = [float(g.find(SVG + "line").get("x1")) for g in steps]
    assert xs[0] < xs[1]
    tip = next(g.find(SVG + "title").text for g in _groups(root, "lk-op")
               if g.get("data-op") == "matmul")
    assert "cpu:0 · main · step 0" in tip and "3 us" in tip and "in 1 KiB" in tip
    arrows = _groups(root, "lk-transfer")
    assert len(arrows) == 2            # one send -> recv per step
    line = arrows[0].find(SVG + "line")
    assert float(line.get("y1")) < float(line.get("y2"))     # from cpu:0's lane down to cpu:1's
    assert "send_h (cpu:0)" in arrows[0].find(SVG + "title").text


def test_one_step_and_errors():
    prof = two_device_profile()
    root = ET.fromstring(lk.viz.timeline(prof, step=1).svg())
    assert {g.get("data-step") for g in _groups(root, "lk-op")} == {"1"}
    with pytest.raises(ValueError, match="step 5 has no events"):
        lk.viz.timeline(prof, step=5)
    with pytest.raises(TypeError, match="draws a Profile"):
        lk.viz.timeline([1, 2])
    assert "empty profile" in lk.viz.timeline(Profile()).svg()


def test_real_profile_renders_itself():
    with lk.profile() as prof:
        for _ in range(2):
            (lk.ones(8, 8) @ lk.ones(8, 8)).relu().sum()
            prof.step()
    bundle = prof._repr_mimebundle_()
    page = bundle["image/svg+xml"]                       # the static picture, for nbval
    assert page == lk.viz.timeline(prof).svg() and "matmul" in page and "lk-step" in page
    assert bundle["text/plain"].startswith("<timeline picture of <Profile: 6 op events")
    assert not hasattr(prof, "_repr_html_")              # no second copy of the picture
    ET.fromstring(page)


def test_graph_run_across_two_devices_pairs_send_and_recv():
    lk.devices.configure(cpus=2)
    try:
        @lk.function
        def f(x):
            with lk.device("cpu:1"):
                b = (x * 2.0).exp()
            return (x + b.to("cpu:0")).sum()

        x = lk.ones(16, 16)
        f(x)
        with lk.profile() as prof:
            f(x)
    finally:
        lk.devices.configure(cpus=1)
    if not any(e.op == "recv" for e in prof.events):
        pytest.skip("graph runs do not record send/recv events yet")
    root = ET.fromstring(lk.viz.timeline(prof).svg())
    assert len({g.get("data-device") for g in _groups(root, "lk-lane")}) == 2
    assert _groups(root, "lk-transfer")


@pytest.mark.skipif(importlib.util.find_spec("anywidget") is None,
                    reason="anywidget is not installed")
def test_timeline_widget_is_the_explorer():
    prof = two_device_profile()
    w = lk.viz.TimelineWidget(prof, step=1)
    assert lk.viz.TimelineWidget is lk.viz.timeline_explorer
    assert w.data["n"] == len(prof.events) and "export" in w.get_state()["_esm"]
    assert w.step == 1 and len(w.events) == len(prof.events)
    w.selected = 3
    assert w.selected_event is w.events[3]


def test_lanes_sort_by_device_then_main_then_numbers_in_number_order():
    from labkit.viz.timeline import _lane_key
    keys = [("gpu:0", "stream 10"), ("cpu:0", "labkit-cpu:0"), ("gpu:0", "stream 2"),
            ("cpu:0", "main"), ("gpu:0", "stream 0")]
    assert sorted(keys, key=_lane_key) == [
        ("cpu:0", "main"), ("cpu:0", "labkit-cpu:0"), ("gpu:0", "stream 0"),
        ("gpu:0", "stream 2"), ("gpu:0", "stream 10")]
