"""A person presses Stop on the live training view while the loop runs, in a real JupyterLab.

JupyterLab (started by the ``jupyterlab`` fixture of ``test_jupyterlab.py``: 127.0.0.1, a
random token, every Jupyter folder temporary) opens a one-cell notebook written here: a loop of
``STEPS`` slow steps (``STEP_S`` each) under ``lk.viz.live()``. Debian's Chromium, driven
headless by Playwright, runs the cell, waits until a few steps have run, and clicks Stop. The
button must read "stopping…" in the same instant (the page relabels it, before the kernel can
answer), the kernel must go idle within ``STOP_WITHIN_S`` of the click, and the cell must say
it stopped at a step well before the end, then run the code after the loop. The cell's output
shows the curves once (the live widget, no second static copy). A second cell's loop is
stopped by the kernel's interrupt (Kernel > Interrupt Kernel): it too ends after a step and the
cell goes on. A screenshot is saved (see ``conftest.py`` for where).
"""
import json
import re
import time

import pytest

from tests.ui.test_jupyterlab import (KERNEL_IDLE_JS, _artifacts, chromium,  # noqa: F401
                                      jupyterlab, open_notebook)

STEPS, STEP_S = 600, 0.1          # a minute of training, if nobody pressed Stop
STOP_AFTER_STEPS = 10             # press Stop once this many steps have run
STOP_WITHIN_S = 2.0
CELL = f"""\
import time
import labkit as lk

view = lk.viz.live(title="slow loop", refresh=0.2)
for step in view.steps({STEPS}):
    time.sleep({STEP_S})                       # one slow training step
    view.log(loss=1.0 / (step + 1), accuracy=step / {STEPS})
print(f"after the loop: {{len(view.history['loss'])}} steps logged")
"""
INTERRUPTED_CELL = f"""\
view = lk.viz.live(title="interrupted", refresh=0.2)
for step in view.steps({STEPS}):
    time.sleep({STEP_S})
    view.log(loss=1.0 / (step + 1))
print("the kernel still runs cells:", 6 * 7)
"""

# the Stop button and the status line of the live widget in cell ``k``
WIDGET_JS = r"""
(k) => {
  const cell = document.querySelectorAll('.jp-CodeCell')[k];
  const button = cell && cell.querySelector('.jp-OutputArea-output .lk-live-stop');
  const status = cell && cell.querySelector('.jp-OutputArea-output .lk-live-status');
  return {button: button ? button.textContent : null, disabled: button ? button.disabled : null,
          status: status ? status.textContent : null};
}
"""
# true once the widget of cell ``k`` says at least ``n`` steps have run
RAN_STEPS_JS = f"""
([k, n]) => {{
  const m = (({WIDGET_JS})(k).status || '').match(/step (\\d+)\\//);
  return m !== null && +m[1] >= n;
}}
"""
CLICK_STOP_JS = r"""
() => {
  const button = document.querySelector('.jp-OutputArea-output .lk-live-stop');
  button.click();
  return button.textContent;     // read in the same instant: no kernel could have answered
}
"""
COUNT_CURVES_JS = r"""
() => {
  let inline = document.querySelectorAll('.jp-OutputArea-output svg.lk-live').length;
  document.querySelectorAll('.jp-OutputArea-output img').forEach((img) => {
    const src = img.getAttribute('src') || '';
    if (src.startsWith('data:image/svg+xml') && decodeURIComponent(src).includes('lk-live'))
      inline += 1;
  });
  return inline;
}
"""


def _notebook(path):
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "source": source, "outputs": [],
                     "execution_count": None} for source in (CELL, INTERRUPTED_CELL)],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                      "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb, indent=1), encoding="utf-8")


@pytest.mark.ui
@pytest.mark.timeout(180)
def test_stop_button_ends_a_running_loop_in_jupyterlab(jupyterlab, tmp_path, record_property):
    pytest.importorskip("anywidget", reason="the live view's widget needs anywidget "
                                            "(pip install anywidget)")
    from playwright.sync_api import sync_playwright

    base, token, server, processes = jupyterlab
    out = _artifacts(tmp_path)
    name = "live_stop.ipynb"
    _notebook(tmp_path / "notebooks" / name)      # the fixture serves that folder
    shot = out / "jupyterlab-live-stop.png"
    with sync_playwright() as pw, chromium(pw) as browser:
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        try:
            open_notebook(page, base, token, name, server, processes)

            page.locator(".jp-CodeCell .cm-content").first.click()
            page.keyboard.press("Shift+Enter")
            page.wait_for_selector(".jp-OutputArea-output .lk-live-stop", timeout=60 * 1000)
            page.wait_for_function(RAN_STEPS_JS, arg=[0, STOP_AFTER_STEPS], timeout=60 * 1000)
            before = page.evaluate(WIDGET_JS, 0)
            assert before["button"] == "Stop" and not before["disabled"], before

            clicked = time.monotonic()
            label = page.evaluate(CLICK_STOP_JS)
            assert label == "stopping…", f"the button read {label!r} right after the click"
            page.wait_for_function(KERNEL_IDLE_JS, timeout=30 * 1000, polling=50)
            took = time.monotonic() - clicked

            text = page.locator(".jp-CodeCell .jp-OutputArea").first.inner_text()
            stopped = re.search(r"stopped at step (\d+)/(\d+) by the Stop button", text)
            assert stopped, f"the cell did not say it stopped; its output:\n{text}"
            at, total = int(stopped.group(1)), int(stopped.group(2))
            assert total == STEPS and STOP_AFTER_STEPS <= at <= STEPS // 4, stopped.group(0)
            assert f"after the loop: {at} steps logged" in text, text
            assert took <= STOP_WITHIN_S, f"the loop ended {took:.2f} s after the click"
            after = page.evaluate(WIDGET_JS, 0)
            assert after["button"] == "stopped" and after["disabled"], after
            assert page.evaluate(COUNT_CURVES_JS) == 1, "the curves are shown more than once"
            errors = page.locator('.jp-OutputArea-output[data-mime-type='
                                  '"application/vnd.jupyter.stderr"]').all_inner_texts()
            assert not errors, f"the cell wrote to stderr: {errors[0][:2000]}"
            page.screenshot(path=str(shot))

            # the next cell (selected after Shift+Enter): the kernel's interrupt ends its loop
            # after the current step too, and the cell goes on
            page.keyboard.press("Shift+Enter")
            page.wait_for_function(RAN_STEPS_JS, arg=[1, 5], timeout=60 * 1000)
            page.locator("li.lm-MenuBar-item").filter(has_text=re.compile(r"^Kernel$")).click()
            page.locator("li.lm-Menu-item").filter(
                has_text=re.compile(r"^Interrupt Kernel")).click()
            page.wait_for_function(KERNEL_IDLE_JS, timeout=30 * 1000, polling=50)
            text = page.locator(".jp-CodeCell .jp-OutputArea").nth(1).inner_text()
            assert re.search(r"interrupted: stopped at step \d+/600 by an interrupt", text), text
            assert "the kernel still runs cells: 42" in text, text
        except Exception:
            failure = out / "jupyterlab-live-stop-failure.png"
            page.screenshot(path=str(failure))
            print(f"screenshot of the page when the test failed: {failure}")
            raise
    record_property("screenshot_live_stop", str(shot))
    print(f"Stop pressed after step {STOP_AFTER_STEPS}: the loop stopped at step {at} of "
          f"{STEPS}, the kernel idle {took:.2f} s after the click; screenshot: {shot}")
