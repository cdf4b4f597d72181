"""The graph explorer in a real browser (Debian's Chromium driven by Playwright).

The tests load the built bundle (``labkit/viz/static/graph.js``) into a plain page served from
127.0.0.1, with a small stand-in for anywidget's model holding the payload Python makes: that
is the widget's whole interface (traits in, traits out, custom messages), and it starts in a
fraction of a second. The page blocks every request that leaves localhost, and the tests check
none was made. One payload is a 2,000-node captured training step (a deep MLP with Adam), whose
first render and scope expansion are timed in the browser with ``performance.now`` and printed
(measured, never asserted but for generous sanity bounds); the other a small function with
every pass stage and an ``lk.cond``. One test runs a notebook in JupyterLab and checks that
``lk.viz.graph(...)`` shows the explorer there.

Screenshots go to ``LABKIT_UI_ARTIFACTS`` (else pytest's ``tmp_path``), as in
``test_jupyterlab.py``.
"""
import json
import shutil
import time

import pytest

import labkit as lk
from labkit.viz.timeline_explorer import STATIC
from labkit.viz.graph_data import graph_payload
from labkit.viz.widgets import pass_stages
from tests.ui import test_jupyterlab as lab
from tests.ui.test_timeline_explorer import _block_outside, serve_folder
from tests.ui.test_timeline_explorer import browser as _timeline_browser

WIDTH = 1300


def training_step(layers=47, width=16):
    """A deep MLP's captured training step (Adam): about 2,000 nodes."""
    lk.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [lk.nn.Linear(width, width), lk.nn.ReLU()]
    model = lk.nn.Sequential(*mods, lk.nn.Linear(width, 4))
    step = captured_step(model, lk.optim.Adam(model.parameters(), lr=1e-3))
    return step.graph(lk.randn(8, width), lk.tensor([0, 1, 2, 3, 0, 1, 2, 3]))


def captured_step(model, opt):
    """``model``'s training step with ``opt`` under cross-entropy, as an ``lk.function``."""
    @lk.function
    def step(x, y):
        opt.zero_grad()
        loss = lk.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def small_function():
    @lk.function
    def f(x):
        y = x.exp() + x.exp()                    # cse merges the two exps
        z = lk.cond(y.sum() > 0, lambda a: a * 2.0, lambda a: a - 1.0, y)
        return ((z * 2.0).tanh() + 1.0).sum()    # fusion fuses the elementwise chain
    return pass_stages(f, lk.ones(3, 2))


PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>graph explorer</title>
<style>body { margin: 8px; width: %(width)spx; }</style></head>
<body><div id="root"></div><script type="module">
import widget from "./graph.js";
const which = new URLSearchParams(location.search).get("payload");
const data = await (await fetch(which + ".json")).json();
class Model {                                  // what anywidget's model offers a render()
  constructor(state) { this.state = state; this.handlers = {}; this.sent = []; }
  get(k) { return this.state[k]; }
  set(k, v) { this.state[k] = v; (this.handlers["change:" + k] || []).forEach((f) => f()); }
  on(e, f) { (this.handlers[e] = this.handlers[e] || []).push(f); }
  off(e, f) { this.handlers[e] = (this.handlers[e] || []).filter((g) => g !== f); }
  save_changes() {}
  send(msg) { this.sent.push(msg); }
  reply(msg) { (this.handlers["msg:custom"] || []).forEach((f) => f(msg)); }
}
window.model = new Model({data, expanded: data.expanded, selected: "", query: "",
                          color_by: "role", stage: data.stages.length - 1});
const t1 = performance.now();
widget.render({model: window.model, el: document.getElementById("root")});
const ready = () => document.querySelector(".lk-gx")?.dataset.ready === "1";
while (!ready()) await new Promise((r) => requestAnimationFrame(r));
window.timings = {render_ms: performance.now() - t1};
</script></body></html>"""


@pytest.fixture(scope="module")
def graphs():
    big = training_step()
    stages = small_function()
    return {"big": (big, graph_payload(big)),
            "small": (stages, graph_payload(None, stages=stages))}


@pytest.fixture(scope="module")
def site(tmp_path_factory, graphs):
    """The page, the bundle and the payloads served from 127.0.0.1; yields the base URL."""
    missing = lab._requirements()
    if missing:
        pytest.skip(missing)
    root = tmp_path_factory.mktemp("graph-explorer-site")
    shutil.copy(STATIC / "graph.js", root / "graph.js")
    (root / "index.html").write_text(PAGE % {"width": WIDTH}, encoding="utf-8")
    for name, (_, payload) in graphs.items():
        (root / f"{name}.json").write_text(json.dumps(payload), encoding="utf-8")
    with serve_folder(root) as base:
        yield f"{base}/index.html"


browser = _timeline_browser     # the module's one Chromium (test_timeline_explorer's fixture)


def _page(browser, site, which, tmp_path):
    """A fresh page with the explorer of payload ``which`` drawn: yields (page, the list of
    outside requests); a screenshot is saved when the test fails."""
    page = browser.new_page(viewport={"width": WIDTH + 40, "height": 900})
    outside = _block_outside(page)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"{site}?payload={which}")
        page.wait_for_function("() => window.timings !== undefined", timeout=60_000)
        yield page, outside
        assert not errors, f"errors in the page: {errors}"
    except Exception:
        page.screenshot(path=str(lab._artifacts(tmp_path) / f"graph-explorer-{which}-failure.png"))
        raise
    finally:
        page.close()


@pytest.fixture
def big(site, browser, tmp_path):
    yield from _page(browser, site, "big", tmp_path)


@pytest.fixture
def small(site, browser, tmp_path):
    yield from _page(browser, site, "small", tmp_path)


def _data(page, key):
    return page.evaluate(f"() => document.querySelector('.lk-gx').dataset.{key}")


def _relayout(page, action):
    """Do ``action`` and wait for the relayout it causes; returns its time in ms (browser)."""
    before = int(_data(page, "layouts"))
    action()
    page.wait_for_function(f"() => Number(document.querySelector('.lk-gx').dataset.layouts)"
                           f" > {before}", timeout=60_000)
    return float(_data(page, "layoutMs"))


def _group_box(page, path, graphs):
    _, payload = graphs["big"]
    k = [g["path"] for g in payload["groups"]].index(path)
    return page.locator(f'g.lk-gx-box[data-box="g{k}"]')


# ---- the tests ----------------------------------------------------------------------------
@pytest.mark.timeout(180)
def test_a_2000_node_graph_renders_and_expands_in_the_browser(big, graphs, tmp_path,
                                                               record_property):
    page, outside = big
    g, payload = graphs["big"]
    assert len(g.nodes) >= 2000
    first = page.evaluate("window.timings.render_ms")
    boxes = int(_data(page, "boxes"))
    assert 10 < boxes < 200           # collapsed: the layers, gradients and Adam as boxes
    shot = lab._artifacts(tmp_path) / "graph-explorer-2000.png"
    page.screenshot(path=str(shot), full_page=True)
    # click a collapsed layer scope: it opens in place and more nodes are drawn
    nodes_before = int(_data(page, "visibleNodes"))
    layer = _group_box(page, "10", graphs)
    expand_ms = _relayout(page, lambda: layer.click())
    assert int(_data(page, "visibleNodes")) > nodes_before
    assert "10" in page.evaluate("window.model.state.expanded")
    # the biggest scope (Adam's update, most of the graph), opened from Python
    adam = next(grp for grp in payload["groups"] if grp["path"] == "Adam")
    big_ms = _relayout(page, lambda: page.evaluate(
        "() => window.model.set('expanded', [...window.model.state.expanded, 'Adam'])"))
    page.screenshot(path=str(lab._artifacts(tmp_path) / "graph-explorer-2000-adam.png"))
    for k, v in (("first_render_ms_2000_nodes", first), ("expand_layer_ms", expand_ms),
                 (f"expand_adam_{adam['count']}_nodes_ms", big_ms)):
        record_property(k, v)
    print(f"{len(g.nodes):,}-node graph in Chromium: first render {first:.0f} ms ({boxes} "
          f"boxes); opening a layer scope {expand_ms:.0f} ms; opening Adam ({adam['count']} "
          f"nodes) {big_ms:.0f} ms; screenshot {shot}")
    assert first < 30_000 and expand_ms < 30_000 and big_ms < 60_000     # sanity only
    assert not outside, f"requests left localhost: {outside}"


@pytest.mark.timeout(120)
def test_wheel_zooms_and_drag_pans(big):
    page, _ = big
    view = lambda: [float(v) for v in _data(page, "view").split(",")]   # noqa: E731
    x, y, k = view()
    box = page.locator(".lk-gx-canvas").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, -500)
    page.wait_for_timeout(100)
    x2, y2, k2 = view()
    assert k2 > 1.5 * k
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2 - 150, box["y"] + box["height"] / 2, steps=5)
    page.mouse.up()
    x3, y3, k3 = view()
    assert k3 == k2 and abs((x2 - x3) - 150) < 2


@pytest.mark.timeout(120)
def test_clicking_a_node_shows_its_details(small, graphs, tmp_path):
    page, _ = small
    stages, payload = graphs["small"]
    g = stages[-1].after
    # the small graph opens every group (the cond is an open box with its branches inside)
    assert page.locator("g.lk-gx-open").count() >= 3
    target = next(n for n in g.nodes if n.op_name == "sum" and n.shape == ())
    page.locator(f'g.lk-gx-node[data-node="{target.name}"]').click()
    page.wait_for_timeout(100)
    assert page.evaluate("window.model.state.selected") == target.name
    details = page.locator(".lk-gx-details")
    text = details.inner_text()
    assert target.name in text and "f32 scalar" in text and "cpu:0" in text
    assert "inputs (1)" in text
    # others not on its path are dimmed; its inputs are lit
    assert page.locator("g.lk-gx-dim").count() > 0
    # value statistics on request: the button sends a message, the answer is shown
    page.locator("button.lk-gx-value").click()
    sent = page.evaluate("window.model.sent")
    assert sent[-1]["event"] == "value" and sent[-1]["name"] == target.name
    page.evaluate("(n) => window.model.reply({event: 'value', name: n, text: 'value: min 1'})",
                  target.name)
    assert "min 1" in page.locator(".lk-gx-valuetext").inner_text()
    page.screenshot(path=str(lab._artifacts(tmp_path) / "graph-explorer-details.png"),
                    full_page=True)


@pytest.mark.timeout(120)
def test_search_finds_opens_and_centres_a_node(big, graphs, tmp_path):
    page, _ = big
    g, _ = graphs["big"]
    target = next(n for n in g.nodes if n.scope == "20" and n.op_name == "matmul")
    page.locator("input.lk-gx-search").fill(target.name)
    page.locator("input.lk-gx-search").press("Enter")
    page.wait_for_function(f"() => document.querySelector('.lk-gx').dataset.centred === "
                           f"{json.dumps(target.name)}", timeout=60_000)
    assert "20" in page.evaluate("window.model.state.expanded")        # its scope opened
    node = page.locator(f'g.lk-gx-node[data-node="{target.name}"]')
    assert "lk-gx-found" in node.get_attribute("class")
    nb, cb = node.bounding_box(), page.locator(".lk-gx-canvas").bounding_box()
    cx, cy = nb["x"] + nb["width"] / 2, nb["y"] + nb["height"] / 2
    assert abs(cx - (cb["x"] + cb["width"] / 2)) < 30
    assert abs(cy - (cb["y"] + cb["height"] / 2)) < 30
    page.screenshot(path=str(lab._artifacts(tmp_path) / "graph-explorer-search.png"))


@pytest.mark.timeout(120)
def test_the_pass_slider_shows_each_pass_and_what_it_changed(small, graphs, tmp_path):
    page, _ = small
    stages, payload = graphs["small"]
    names = [s["name"] for s in payload["stages"]]
    k = names.index("cse")
    slider = page.locator("input.lk-gx-slider")
    _relayout(page, lambda: slider.fill(str(k)))
    label = page.locator(".lk-gx-passlabel").inner_text()
    assert "cse" in label and f"{k}/{len(names) - 1}" in label
    assert page.evaluate("window.model.state.stage") == k
    # the node cse merged away is drawn with the 'merged' mark's colour
    merged = next(a for a, _ in stages[k - 1].record.merged)
    rect = page.locator(f'g.lk-gx-node[data-node="{merged}"] rect').first
    assert rect.get_attribute("stroke") == payload["colors"]["marks"]["merged"][0]
    page.screenshot(path=str(lab._artifacts(tmp_path) / "graph-explorer-pass.png"),
                    full_page=True)
    _relayout(page, lambda: slider.fill(str(names.index("fusion"))))
    assert "fusion" in page.locator(".lk-gx-passlabel").inner_text()
    assert page.locator("g.lk-gx-node[data-node^='fused']").count() >= 1


def _view_of(page):
    return [float(v) for v in _data(page, "view").split(",")]


@pytest.mark.timeout(120)
def test_first_views_are_readable_with_a_legend(small, big):
    """Text at least 10 px high, the small graph whole inside the canvas, a legend shown."""
    for page, _ in (small, big):
        assert float(_data(page, "textPx")) >= 10
        legend = page.locator(".lk-gx-legend")
        assert legend.is_visible() and int(legend.get_attribute("data-items")) >= 2
        assert "forward" in legend.inner_text()
    page, _ = small
    assert _data(page, "fits") == "true"
    canvas = page.locator(".lk-gx-canvas").bounding_box()
    for box in page.locator("g.lk-gx-box rect").all():
        b = box.bounding_box()
        assert canvas["x"] <= b["x"] and b["x"] + b["width"] <= canvas["x"] + canvas["width"] + 1
        assert canvas["y"] <= b["y"] and b["y"] + b["height"] <= canvas["y"] + canvas["height"] + 1
    # the minimap sits beside the canvas, over none of it
    mini = page.locator(".lk-gx-mini")
    if mini.is_visible():
        m = mini.bounding_box()
        assert m["x"] >= canvas["x"] + canvas["width"]


@pytest.mark.timeout(120)
def test_opening_a_scope_moves_the_view_to_it(big, graphs):
    page, _ = big
    layer = _group_box(page, "3", graphs)
    layer.scroll_into_view_if_needed()
    _relayout(page, lambda: layer.click())
    opened = page.locator('g.lk-gx-open[data-box="' + layer.get_attribute("data-box") + '"]')
    box, canvas = opened.bounding_box(), page.locator(".lk-gx-canvas").bounding_box()
    assert canvas["x"] <= box["x"] and box["x"] + box["width"] <= canvas["x"] + canvas["width"]
    assert canvas["y"] <= box["y"] < canvas["y"] + canvas["height"] / 2
    assert float(_data(page, "textPx")) >= 10


@pytest.mark.timeout(120)
def test_the_pass_slider_takes_arrow_keys(small, graphs):
    page, _ = small
    slider = page.locator("input.lk-gx-slider")
    last = int(slider.get_attribute("max"))
    slider.focus()
    _relayout(page, lambda: page.keyboard.press("ArrowLeft"))
    assert page.evaluate("window.model.state.stage") == last - 1
    _relayout(page, lambda: page.keyboard.press("ArrowRight"))
    assert page.evaluate("window.model.state.stage") == last
