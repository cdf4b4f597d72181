"""A fuzzer for both explorers in a real browser: seeded random sequences of what a person does
(graph: open and close scopes, collapse all, the pass slider back and forth, colour modes,
search, zoom, pan, fit, node clicks, the minimap; timeline: zoom, pan, W/A/S/D, bar clicks,
range selection, filter, step change, the overview, hover), checking after every action that
the page raised no error and still draws: the graph's boxes, with the count the status line
gives, each box with its text; the timeline's bars wherever events are in view.

The way back matters as much as the way forward: a layout cached on the way forward and
reused on the way back once blanked the graph (``Cannot read properties of undefined``).
``LABKIT_UI_FUZZ_SEED`` picks another seed (default 0); ``LABKIT_UI_FUZZ_ACTIONS`` the number of
actions per explorer (default 50: 250 in all over five payloads). A failure names the seed,
the step and the actions so far, so that it can be replayed.
"""
import json
import os
import random
import shutil

import pytest

import labkit as lk
from labkit.viz.graph_data import graph_payload
from labkit.viz.timeline_data import timeline_payload
from labkit.viz.timeline_explorer import STATIC
from labkit.viz.widgets import pass_stages
from tests.ui import test_jupyterlab as lab
from tests.ui.test_graph_explorer import PAGE as GRAPH_PAGE
from tests.ui.test_graph_explorer import captured_step, small_function, training_step
from tests.ui.test_timeline_explorer import PAGE as TIMELINE_PAGE
from tests.ui.test_timeline_explorer import (_block_outside, _encode, browser,  # noqa: F401
                                             ps_like_profile, serve_folder, synthetic_profile)

SEED = int(os.environ.get("LABKIT_UI_FUZZ_SEED", "0"))
ACTIONS = int(os.environ.get("LABKIT_UI_FUZZ_ACTIONS", "50"))
WIDTH = 1000          # about a notebook's output area in JupyterLab


def timed_cnn():
    """A small CNN's captured training step (AdamW), with a profile of it: colour by time."""
    lk.manual_seed(0)
    model = lk.nn.Sequential(lk.nn.Conv2d(1, 4, 3, padding=1), lk.nn.ReLU(), lk.nn.MaxPool2d(2),
                             lk.nn.Flatten(), lk.nn.Linear(4 * 4 * 4, 10))
    step = captured_step(model, lk.optim.AdamW(model.parameters(), lr=1e-3))
    x, y = lk.randn(8, 1, 8, 8), lk.tensor([0, 1, 2, 3, 4, 5, 6, 7])
    step(x, y)
    with lk.profile() as prof:
        step(x, y)
    stages = pass_stages(step, x, y)
    return graph_payload(None, stages=stages, profile=prof), prof


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    """Both pages, the bundles and the payloads served from 127.0.0.1: {name: URL}."""
    missing = lab._requirements()
    if missing:
        pytest.skip(missing)
    root = tmp_path_factory.mktemp("fuzz-site")
    for name in ("graph", "timeline"):
        shutil.copy(STATIC / f"{name}.js", root / f"{name}.js")
    (root / "graph.html").write_text(GRAPH_PAGE % {"width": WIDTH}, encoding="utf-8")
    (root / "timeline.html").write_text(TIMELINE_PAGE % {"width": WIDTH}, encoding="utf-8")
    cnn, prof = timed_cnn()
    graphs = {"small": graph_payload(None, stages=small_function()),
              "cnn": cnn, "big": graph_payload(training_step())}
    for name, payload in graphs.items():
        (root / f"{name}.json").write_text(json.dumps(payload), encoding="utf-8")
    timelines = {"synthetic": synthetic_profile(), "dist": ps_like_profile(), "cnn": prof}
    for name, p in timelines.items():
        (root / f"t-{name}.json").write_text(_encode(timeline_payload(p)[0]), encoding="utf-8")
    with serve_folder(root) as base:
        yield {**{name: f"{base}/graph.html?payload={name}" for name in graphs},
               **{f"t-{name}": f"{base}/timeline.html?payload=t-{name}.json"
                  for name in timelines}}


class Fuzz:
    """One page, one random stream; ``step(action)`` runs an action and checks the page."""

    def __init__(self, page, seed, root):
        self.page, self.rng, self.root = page, random.Random(seed), root
        self.errors, self.done = [], []
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def data(self):
        return self.page.evaluate(f"() => ({{...document.querySelector('{self.root}').dataset}})")

    def canvas_box(self, selector):
        return self.page.locator(selector).bounding_box()

    def point_in(self, box, margin=4):
        return (box["x"] + self.rng.uniform(margin, box["width"] - margin),
                box["y"] + self.rng.uniform(margin, box["height"] - margin))

    def run(self, actions, count, check):
        names = sorted(actions)
        for k in range(count):
            name = self.rng.choice(names)
            self.done.append(name)
            try:
                actions[name]()
                self.page.wait_for_timeout(40)
                assert not self.errors, f"errors in the page: {self.errors}"
                check()
            except Exception as e:
                raise AssertionError(f"seed {SEED}, action {k + 1} ({name}) after "
                                     f"{self.done[:-1]}: {e}") from e


# ---- the graph explorer ---------------------------------------------------------------------
def graph_actions(f):
    page = f.page

    def visible(selector):
        """Centres of the elements matching selector that lie inside the canvas."""
        return page.evaluate("""(sel) => {
          const c = document.querySelector('.lk-gx-canvas').getBoundingClientRect();
          return [...document.querySelectorAll(sel)].map((g) => {
            const r = g.querySelector('rect').getBoundingClientRect();
            return [r.x + r.width / 2, r.y + Math.min(r.height / 2, 8), r.width, r.height];
          }).filter(([x, y]) => x > c.x + 2 && x < c.right - 2 && y > c.y + 2 && y < c.bottom - 2);
        }""", selector)

    def click_one(selector):
        found = visible(selector)
        if not found:
            page.locator("button.lk-gx-fit").click()
            found = visible(selector)
        if found:
            x, y, _, _ = f.rng.choice(found)
            page.mouse.click(x, y)

    def slider():
        stages = int(page.locator("input.lk-gx-slider").get_attribute("max") or 0)
        if page.locator("input.lk-gx-slider").is_visible():
            page.locator("input.lk-gx-slider").fill(str(f.rng.randint(0, stages)))
        else:      # a pipeline that changed nothing has no slider: move the stage from Python
            page.evaluate("(k) => window.model.set('stage', k)", f.rng.randint(0, stages))

    def colour():
        options = page.locator("select.lk-gx-color option").all_inner_texts()
        page.locator("select.lk-gx-color").select_option(f.rng.choice(options))

    def search():
        names = page.evaluate("() => { const d = window.model.get('data');"
                              " return d.nodes.name.map((k) => d.strings[k]); }")
        box = page.locator("input.lk-gx-search")
        box.fill(f.rng.choice(names + [""]) if f.rng.random() < 0.8 else "no such node")
        box.press("Enter")

    def wheel():
        x, y = f.point_in(f.canvas_box(".lk-gx-canvas"))
        page.mouse.move(x, y)
        page.mouse.wheel(0, f.rng.choice([-600, -300, 300, 600]))

    def drag():
        x, y = f.point_in(f.canvas_box(".lk-gx-canvas"), 40)
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x + f.rng.uniform(-200, 200), y + f.rng.uniform(-200, 200), steps=3)
        page.mouse.up()

    def minimap():
        if page.locator(".lk-gx-mini").is_visible():
            page.mouse.click(*f.point_in(f.canvas_box(".lk-gx-mini")))

    return {"open a scope": lambda: click_one("g.lk-gx-group"),
            "close a scope by its title": lambda: click_one("g.lk-gx-open"),
            "click a node": lambda: click_one("g.lk-gx-node"),
            "collapse all": lambda: page.locator("button.lk-gx-collapse").click(),
            "fit": lambda: page.locator("button.lk-gx-fit").click(),
            "pass slider": slider, "colour mode": colour, "search": search,
            "zoom": wheel, "pan": drag, "minimap": minimap}


def graph_check(f):
    """Boxes are drawn, as many as the status line says, each with its text."""
    got = f.page.evaluate("""() => {
      const boxes = [...document.querySelectorAll('g.lk-gx-box:not(.lk-gx-open)')];
      return {drawn: boxes.length,
              empty: boxes.filter((g) => !(g.querySelector('text')?.textContent || '').trim()).length,
              status: document.querySelector('.lk-gx-status').textContent,
              boxes: document.querySelector('.lk-gx').dataset.boxes};
    }""")
    assert got["drawn"] > 0, f"nothing drawn: {got}"
    assert got["empty"] == 0, f"boxes without text: {got}"
    assert got["status"].startswith(f"{int(got['boxes']):,} boxes"), got
    assert int(got["boxes"]) == got["drawn"], got


def fuzz(browser, url, root, name, actions, check, count, tmp_path):
    """Open ``url`` in a fresh page and run ``count`` random ``actions(f)``, each followed by
    ``check(f)``; a screenshot is saved when it fails."""
    page = browser.new_page(viewport={"width": WIDTH + 40, "height": 1000})
    outside = _block_outside(page)
    f = Fuzz(page, f"{SEED}-{name}", root)
    try:
        page.goto(url)
        page.wait_for_function("() => window.timings !== undefined", timeout=60_000)
        check(f)
        f.run(actions(f), count, lambda: check(f))
        assert not outside, f"requests left localhost: {outside}"
    except Exception:
        page.screenshot(path=str(lab._artifacts(tmp_path) / f"fuzz-{name}-failure.png"))
        raise
    finally:
        page.close()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("which", ["small", "cnn", "big"])
def test_random_actions_on_the_graph_explorer(sites, browser, which, tmp_path):  # noqa: F811
    fuzz(browser, sites[which], ".lk-gx", f"graph-{which}", graph_actions, graph_check,
         ACTIONS if which != "big" else max(ACTIONS // 2, 10), tmp_path)


# ---- the timeline explorer ------------------------------------------------------------------
def timeline_actions(f):
    page = f.page

    def plot_point(margin=4):
        box = f.canvas_box("canvas.lk-tl-main")
        label = float(f.data()["labelW"])
        x = box["x"] + f.rng.uniform(label + margin, box["width"] - margin)
        return x, box["y"] + f.rng.uniform(float(f.data()["axisH"]), box["height"] - margin)

    def drag(shift):
        x, y = plot_point(60)
        if shift:
            page.keyboard.down("Shift")
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x + f.rng.uniform(-250, 250), y, steps=4)
        page.mouse.up()
        if shift:
            page.keyboard.up("Shift")

    def key():
        page.mouse.click(*plot_point())          # focus, as a person clicks first
        for _ in range(f.rng.randint(1, 4)):
            page.keyboard.press(f.rng.choice(["w", "a", "s", "d", "ArrowUp", "ArrowDown",
                                              "ArrowLeft", "ArrowRight", "Escape"]))

    def step():
        options = page.locator("select.lk-tl-step option").all_inner_texts()
        page.locator("select.lk-tl-step").select_option(label=f.rng.choice(options))

    def search():
        ops = page.evaluate("() => window.model.get('data').strings.op")
        page.locator("input.lk-tl-search").fill(f.rng.choice(ops + ["", "", "nothing"])[:4])

    def overview():
        box = f.canvas_box("canvas.lk-tl-overview")
        x = box["x"] + f.rng.uniform(float(f.data()["labelW"]) + 2, box["width"] - 10)
        page.mouse.move(x, box["y"] + 15)
        page.mouse.down()
        page.mouse.move(x + f.rng.uniform(-150, 150), box["y"] + 15, steps=3)
        page.mouse.up()

    def wheel():
        page.mouse.move(*plot_point())
        page.mouse.wheel(0, f.rng.choice([-600, -300, 300, 600]))

    def axis_click():
        box = f.canvas_box("canvas.lk-tl-main")
        page.mouse.click(box["x"] + float(f.data()["labelW"]) + 30, box["y"] + 8)

    return {"zoom": wheel, "pan": lambda: drag(False), "select a range": lambda: drag(True),
            "click a bar": lambda: page.mouse.click(*plot_point()),
            "hover": lambda: page.mouse.move(*plot_point()), "keys": key, "step": step,
            "filter": search, "overview": overview, "clear the range": axis_click,
            "whole run": lambda: page.locator("button.lk-tl-reset").click()}


def timeline_check(f):
    """The view is a real interval; where filtered events are in view, bars are drawn."""
    f.page.wait_for_function("() => new Promise((r) => requestAnimationFrame(() => r(true)))")
    got = f.page.evaluate("""() => {
      const d = document.querySelector('.lk-tl').dataset;
      const c = document.querySelector('canvas.lk-tl-main');
      const ratio = c.width / c.clientWidth, x0 = Math.ceil(Number(d.labelW) * ratio);
      const px = c.getContext('2d').getImageData(x0, 0, c.width - x0, c.height).data;
      let bars = 0;
      for (let i = 0; i < px.length; i += 4) {
        const hi = Math.max(px[i], px[i + 1], px[i + 2]), lo = Math.min(px[i], px[i + 1], px[i + 2]);
        if (hi - lo > 40) bars++;
      }
      return {lo: Number(d.viewLo), hi: Number(d.viewHi), inView: Number(d.inView), bars};
    }""")
    assert got["lo"] < got["hi"] and all(map(lambda v: v == v, got.values())), got
    if got["inView"] > 0:
        assert got["bars"] > 0, f"events in view but nothing drawn: {got}"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("which", ["synthetic", "dist", "cnn"])
def test_random_actions_on_the_timeline_explorer(sites, browser, which, tmp_path):  # noqa: F811
    fuzz(browser, sites[f"t-{which}"], ".lk-tl", f"timeline-{which}", timeline_actions,
         timeline_check, ACTIONS if which != "cnn" else max(ACTIONS // 2, 10), tmp_path)
