"""The first views of the tutorials' explorers, as a person opening them sees them: screenshots
(saved as CI artifacts) checked for readable text, nothing cut off and a legend in view.

A notebook executed with anywidget installed saves each widget's state (its traits, the
payload with them) in its metadata; this test takes the explorers of the cells named below
from the committed notebooks and draws each in a plain page at the width of a JupyterLab
output area, with the built bundles and a stand-in for anywidget's model (as
``test_graph_explorer.py`` does): the same data and code that the notebook shows. The
screenshots go to ``LABKIT_UI_ARTIFACTS`` (else pytest's ``tmp_path``) as
``notebook-<notebook>-<view>.png``.
"""
import base64
import json
import pathlib
import shutil

import pytest

from labkit.viz.timeline_explorer import STATIC
from tests.ui import test_jupyterlab as lab
from tests.ui.test_timeline_explorer import _block_outside, browser, serve_folder  # noqa: F401

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[2] / "notebooks"
WIDTH = 980           # a JupyterLab output area beside the file browser, about
WIDGETS = "application/vnd.jupyter.widget-view+json"
STATE = "application/vnd.jupyter.widget-state+json"

# (notebook, view name, a line of the cell that shows it); a cell may show several (08)
VIEWS = [
    ("03_graph_capture", "raw-graph", "raw"),
    ("05_devices_placement_timelines", "placement", "lk.viz.placement(graph)"),
    ("06_training_digits", "training-step", "lk.viz.graph(train_step, images, labels)"),
    ("11_transformer_from_scratch", "step", "lk.viz.graph(train_step, x, y)"),
    ("11_transformer_from_scratch", "block", "lk.viz.graph(model.blocks[0]"),
    ("12_randomness_and_state", "step", "lk.viz.graph(train_step, images, labels"),
    ("08_parameter_servers", "timeline", "lk.viz.timeline("),
    # and the other explorers the tutorials show, so that every picture's text can be read
    # against its first view
    ("03_graph_capture", "optimised-graph", "lk.viz.graph(fast, x)"),
    ("03_graph_capture", "timeline", "lk.viz.timeline(prof)"),
    ("04_control_flow", "while", "lk.viz.graph(looped"),
    ("04_control_flow", "cond", "lk.viz.graph(clip"),
    ("04_control_flow", "scan", "lk.viz.graph(all_states"),
    ("05_devices_placement_timelines", "timeline", "lk.viz.timeline(prof)"),
    ("11_transformer_from_scratch", "timeline", "lk.viz.timeline(prof)"),
    ("12_randomness_and_state", "draws", "lk.viz.graph(captured_layer"),
    ("14_one_notebook_to_a_cluster", "timeline", "lk.viz.timeline("),
]

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>notebook view</title>
<style>body { margin: 8px; width: %(width)spx; font-family: sans-serif; }</style></head>
<body><div id="root"></div><script type="module">
const q = new URLSearchParams(location.search);
const widget = (await import("./" + q.get("bundle") + ".js")).default;
const saved = await (await fetch(q.get("view"))).json();
const state = saved.state;
for (const b of saved.buffers || []) {        // binary columns, as the widget state keeps them
  const raw = atob(b.data), bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  let at = state;
  for (const k of b.path.slice(0, -1)) at = at[k];
  at[b.path[b.path.length - 1]] = new DataView(bytes.buffer);
}
class Model {
  constructor(s) { this.state = s; this.handlers = {}; }
  get(k) { return this.state[k]; }
  set(k, v) { this.state[k] = v; (this.handlers["change:" + k] || []).forEach((f) => f()); }
  on(e, f) { (this.handlers[e] = this.handlers[e] || []).push(f); }
  off(e, f) { this.handlers[e] = (this.handlers[e] || []).filter((g) => g !== f); }
  save_changes() {}
  send() {}
}
window.model = new Model(state);
widget.render({model: window.model, el: document.getElementById("root")});
const root = () => document.querySelector(".lk-gx, .lk-tl");
while (root()?.dataset.ready !== "1") await new Promise((r) => requestAnimationFrame(r));
await new Promise((r) => setTimeout(r, 200));        // a resize pass, if the page makes one
window.shown = true;
</script></body></html>"""


def saved_views(notebook, marker):
    """The saved widget states of the explorers the cells with line ``marker`` show."""
    nb = json.loads((NOTEBOOKS / f"{notebook}.ipynb").read_text(encoding="utf-8"))
    states = nb["metadata"].get("widgets", {}).get(STATE, {}).get("state", {})
    found = []
    for cell in nb["cells"]:
        lines = [line.strip() for line in "".join(cell.get("source", "")).splitlines()]
        if cell["cell_type"] != "code" or not any(line.startswith(marker) and
                                                  (marker != "raw" or line == "raw")
                                                  for line in lines):
            continue
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get(WIDGETS)
            if view and view["model_id"] in states:
                found.append(states[view["model_id"]])
    return found


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    missing = lab._requirements()
    if missing:
        pytest.skip(missing)
    root = tmp_path_factory.mktemp("notebook-views")
    for name in ("graph", "timeline"):
        shutil.copy(STATIC / f"{name}.js", root / f"{name}.js")
    (root / "index.html").write_text(PAGE % {"width": WIDTH}, encoding="utf-8")
    with serve_folder(root) as base:
        yield root, base


@pytest.mark.timeout(300)
@pytest.mark.parametrize("notebook,name,marker", VIEWS,
                         ids=[f"{n[:2]}-{v}" for n, v, _ in VIEWS])
def test_first_view_is_readable_whole_and_explained(site, browser, notebook, name, marker,  # noqa: F811
                                                   tmp_path):
    root, base = site
    views = saved_views(notebook, marker)
    assert views, (f"notebook {notebook} saves no explorer for the cell with {marker!r}: "
                   f"execute it with anywidget installed")
    out = lab._artifacts(tmp_path)
    for k, saved in enumerate(views):
        bundle = "graph" if saved["state"]["_anywidget_id"].endswith("GraphExplorerWidget") \
            else "timeline"
        view_file = f"{notebook}-{name}-{k}.json"
        (root / view_file).write_text(json.dumps({
            "state": saved["state"],
            "buffers": [{"path": b["path"], "data": b["data"]} for b in saved.get("buffers", [])
                        if b.get("encoding", "base64") == "base64"]}), encoding="utf-8")
        page = browser.new_page(viewport={"width": WIDTH + 40, "height": 1100})
        outside = _block_outside(page)
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        try:
            page.goto(f"{base}/index.html?bundle={bundle}&view={view_file}")
            page.wait_for_function("() => window.shown === true", timeout=60_000)
            suffix = f"-{k + 1}" if len(views) > 1 else ""
            shot = out / f"notebook-{notebook[:2]}-{name}{suffix}.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"{notebook} {name}{suffix}: {shot}")
            (check_graph if bundle == "graph" else check_timeline)(page)
            assert not errors and not outside, (errors, outside)
        finally:
            page.close()


def _in_view(page, selector):
    box = page.locator(selector).first.bounding_box()
    size = page.viewport_size
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= size["height"] \
        and box["x"] >= 0 and box["x"] + box["width"] <= size["width"]


def check_graph(page):
    d = page.evaluate("() => ({...document.querySelector('.lk-gx').dataset})")
    assert float(d["textPx"]) >= 10, f"box text {d['textPx']} px high"
    assert d["fits"] == "true", "the first view does not hold the whole graph"
    canvas = page.locator(".lk-gx-canvas").bounding_box()
    for rect in page.locator("g.lk-gx-box > rect:first-child").all():
        b = rect.bounding_box()
        assert canvas["x"] - 1 <= b["x"] and b["x"] + b["width"] <= canvas["x"] + canvas["width"] + 1
        assert canvas["y"] - 1 <= b["y"] and b["y"] + b["height"] <= canvas["y"] + canvas["height"] + 1
    assert int(page.locator(".lk-gx-legend").get_attribute("data-items")) >= 1
    assert _in_view(page, ".lk-gx-legend") and _in_view(page, ".lk-gx-canvas")


def check_timeline(page):
    d = page.evaluate("() => ({...document.querySelector('.lk-tl').dataset})")
    # every lane's name fits its column (11 px text, as wide as the longest name needs)
    need = page.evaluate("""() => {
      const ctx = document.createElement('canvas').getContext('2d');
      const font = "11px system-ui, -apple-system, 'Segoe UI', sans-serif";
      return Math.max(...window.model.get('data').lanes.map((l) => {
        ctx.font = 'bold ' + font; const a = ctx.measureText(l.device).width;
        ctx.font = font; return 12 + a + 6 + ctx.measureText(l.lane).width;
      }));}""")
    assert float(d["labelW"]) >= need, (d["labelW"], need)
    assert page.locator(".lk-tl-legend span").count() >= 1
    assert _in_view(page, ".lk-tl-legend") and _in_view(page, "canvas.lk-tl-main")
    steps = page.evaluate("() => window.model.get('data').steps")
    lo, hi = float(d["viewLo"]), float(d["viewHi"])
    if len(steps) > 3:          # the first steps, up to where the next begin: not the whole run
        assert hi <= min(s["start"] for s in steps[3:]) * 1.02 + 1, (lo, hi)
