"""A person's view of a tutorial: JupyterLab in a real browser runs notebook 03 and shows its
pictures.

The test starts JupyterLab on 127.0.0.1 (a free port, a random token, every Jupyter and
IPython folder in a temporary directory) on a copy of ``notebooks/03_graph_capture.ipynb``
with its outputs removed, so that any picture on the page was made by this run. Debian's
Chromium, driven headless by Playwright, opens the notebook, waits for the kernel to be idle
(keys and clicks sent before that are lost), runs every cell from the Run menu, and then
looks for the graph picture (graphviz's SVG) and the profile's timeline (labkit's SVG) among
the rendered outputs. Screenshots of both are saved (see ``conftest.py`` for where) and
their paths printed. At the end JupyterLab is stopped by its PID with SIGTERM, which also
shuts down its kernel, and no process of it may be left.

Needs: ``chromium`` on PATH (``apt-get install chromium``), ``pip install playwright
jupyterlab``. Never ``playwright install``: the system Chromium is used.
"""
import contextlib
import json
import os
import pathlib
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from urllib.parse import unquote

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "03_graph_capture.ipynb"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic"]
# JupyterLab settings for a quiet, predictable page: no news or update toasts, and every
# cell kept in the page (no windowing), so that outputs far up the notebook can be found.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}
SERVER_START_S = 60      # JupyterLab answering HTTP
KERNEL_IDLE_S = 60       # the page loaded and the kernel started
RUN_ALL_S = 60           # every cell run

# The kernel is ready when the status bar names it and says Idle. (The notebook's execution
# indicator alone says "idle" for a moment before any kernel exists.)
KERNEL_IDLE_JS = r"""
() => {
  const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator');
  const bar = document.querySelector('.jp-StatusBar-Widget');
  const text = bar ? bar.innerText : '';
  return indicator !== null && indicator.getAttribute('data-status') === 'idle'
      && /\|\s*Idle/.test(text) && !/No Kernel/.test(text);
}
"""

# Each rendered SVG output is an <img> whose src is the SVG as a data: URL. Which of them is
# which: graphviz writes <g id="graph0" class="graph">, labkit's timeline <svg class="lk-timeline">.
INLINE_TIMELINES = ('.jp-OutputArea-output svg.lk-timeline, '
                    '.jp-OutputArea-output .lk-tl[data-ready="1"]')
INLINE_GRAPHS = '.jp-OutputArea-output .lk-gx[data-ready="1"]'   # the graph explorer, laid out
FIND_PICTURES_JS = r"""
() => {
  const INLINE_TIMELINES = '""" + INLINE_TIMELINES + r"""';
  const INLINE_GRAPHS = '""" + INLINE_GRAPHS + r"""';
  const found = {graph: [], timeline: []};
  document.querySelectorAll('.jp-OutputArea-output img').forEach((img, i) => {
    const src = img.getAttribute('src') || '';
    if (!src.startsWith('data:image/svg+xml')) return;
    const svg = decodeURIComponent(src.slice(src.indexOf(',') + 1));
    const facts = {index: i, complete: img.complete, width: img.naturalWidth,
                   height: img.naturalHeight};
    if (svg.includes('class="graph"')) found.graph.push(facts);
    if (svg.includes('class="lk-timeline"')) found.timeline.push(facts);
  });
  // pictures written inline (HTML outputs) count too, and so does the timeline explorer
  // (the widget a live notebook shows for lk.viz.timeline, once it has drawn)
  document.querySelectorAll(INLINE_TIMELINES).forEach(
      (s, k) => found.timeline.push({index: -1, inline: k, complete: true,
                                     width: s.clientWidth, height: s.clientHeight}));
  // the graph explorer (what a live notebook shows for lk.viz.graph), once laid out
  document.querySelectorAll(INLINE_GRAPHS).forEach(
      (s, k) => found.graph.push({index: -1, inline: k, complete: true,
                                  width: s.clientWidth, height: s.clientHeight}));
  return found;
}
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _requirements():
    """The reason to skip, or None when everything this test needs is here."""
    chromium = shutil.which("chromium")
    if chromium is None:
        return "no 'chromium' on PATH (Debian: apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed (pip install playwright; do not run playwright install)"
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        return "JupyterLab is not installed (pip install jupyterlab)"
    return None


def _without_outputs(src, dst):
    """Copy a notebook with every output and execution count removed."""
    nb = json.loads(src.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    dst.write_text(json.dumps(nb, indent=1), encoding="utf-8")


def _artifacts(tmp_path):
    folder = os.environ.get("LABKIT_UI_ARTIFACTS")
    path = pathlib.Path(folder) if folder else tmp_path / "artifacts"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def jupyterlab(tmp_path):
    """A JupyterLab server on a copy of notebook 03: yields (base URL, token, the server's
    Popen, a list to which the test adds the processes it must outlive: its kernel)."""
    missing = _requirements()
    if missing:
        pytest.skip(missing)
    psutil = pytest.importorskip("psutil", reason="psutil is needed to check for leftover "
                                                  "server and kernel processes")
    home = tmp_path / "jupyter"
    work = tmp_path / "notebooks"
    work.mkdir()
    _without_outputs(NOTEBOOK, work / NOTEBOOK.name)
    settings = home / "lab-user-settings"
    for name, values in LAB_SETTINGS.items():
        path = settings / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")
    env = dict(os.environ,
               JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_DATA_DIR=str(home / "data"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"), IPYTHONDIR=str(home / "ipython"),
               JUPYTERLAB_SETTINGS_DIR=str(settings),
               JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
               JUPYTER_PLATFORM_DIRS="1",
               PYTHONPATH=os.pathsep.join(
                   p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    port, token = _free_port(), secrets.token_hex(16)
    log = open(tmp_path / "jupyterlab.log", "wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.open_browser=False",
         "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work}"]
        + (["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),
        cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    processes = []
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if server.poll() is not None:
                pytest.fail(f"JupyterLab exited with code {server.returncode} on start:\n"
                            + (tmp_path / "jupyterlab.log").read_text(errors="replace")[-3000:])
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not answer on {base} within {SERVER_START_S} s")
                time.sleep(0.3)
        yield base, token, server, processes
    finally:
        # the server and its kernels, as they are now: all must be gone after SIGTERM
        try:
            processes.extend(psutil.Process(server.pid).children(recursive=True))
        except psutil.NoSuchProcess:
            pass
        if server.poll() is None:
            os.kill(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
            log.close()
            pytest.fail("JupyterLab did not stop within 30 s of SIGTERM (killed)")
        log.close()
        deadline = time.monotonic() + 10
        left = [p for p in processes if _alive(p)]
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = [p for p in left if _alive(p)]
        names = [(p.pid, _name(p)) for p in left]
        for p in left:
            p.kill()
        assert not left, (f"processes of JupyterLab still running 10 s after it stopped "
                          f"(killed now): {names}")



@contextlib.contextmanager
def chromium(pw):
    """Debian's Chromium, headless, through Playwright ``pw``; closed afterwards."""
    browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS,
                                 headless=True)
    try:
        yield browser
    finally:
        browser.close()


def open_notebook(page, base, token, name, server, processes):
    """Open the served notebook ``name`` in ``page`` and wait until its kernel is idle (keys and
    clicks sent before that are lost); adds the kernel to ``processes``, which must all be gone
    once the server stops."""
    page.goto(f"{base}/lab/tree/{name}?token={token}")
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=KERNEL_IDLE_S * 1000)
    page.wait_for_function(KERNEL_IDLE_JS, timeout=KERNEL_IDLE_S * 1000)
    processes.extend(_children(server.pid))    # the kernel is up: remember it


@pytest.mark.ui
@pytest.mark.timeout(180)
def test_notebook_03_shows_graph_and_timeline_in_jupyterlab(jupyterlab, tmp_path,
                                                             record_property):
    from playwright.sync_api import sync_playwright

    base, token, server, processes = jupyterlab
    out = _artifacts(tmp_path)
    started = time.monotonic()
    with sync_playwright() as pw, chromium(pw) as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            open_notebook(page, base, token, NOTEBOOK.name, server, processes)
            assert page.locator(".jp-OutputArea-output").count() == 0   # a clean copy

            # Run > Run All Cells; once more if no cell started (a click lost while the
            # page was still settling); a second click after a start would run cells twice
            first_prompt = page.locator(".jp-CodeCell .jp-InputArea-prompt").first
            for attempt in range(3):
                page.locator("li.lm-MenuBar-item").filter(has_text=re.compile(r"^Run$")).click()
                page.locator("li.lm-Menu-item").filter(
                    has_text=re.compile(r"^Run All Cells")).click()
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and "[" not in first_prompt.inner_text()\
                        .replace("[ ]", ""):
                    time.sleep(0.2)
                if "[" in first_prompt.inner_text().replace("[ ]", ""):
                    break
            else:
                pytest.fail("Run > Run All Cells, clicked 3 times, started no cell")
            page.wait_for_function(f"() => ({FIND_PICTURES_JS})().timeline.length > 0",
                                   timeout=RUN_ALL_S * 1000)
            page.wait_for_function(KERNEL_IDLE_JS, timeout=RUN_ALL_S * 1000)
            run_s = time.monotonic() - started

            prompts = page.locator(".jp-CodeCell .jp-InputArea-prompt").all_inner_texts()
            unrun = [p for p in prompts if not re.search(r"\[\d+\]", p)]
            assert not unrun, f"cells not run (prompts {unrun}) of {len(prompts)}"
            errors = page.locator('.jp-OutputArea-output[data-mime-type='
                                  '"application/vnd.jupyter.stderr"]').all_inner_texts()
            assert not errors, f"a cell wrote to stderr or raised: {errors[0][:2000]}"

            found = page.evaluate(FIND_PICTURES_JS)
            assert len(found["graph"]) >= 2, f"graph pictures (graphviz SVG) found: {found}"
            assert len(found["timeline"]) == 1, f"timeline pictures found: {found}"
            images = page.locator(".jp-OutputArea-output img")
            shots = {}
            for kind in ("graph", "timeline"):
                facts = found[kind][0]
                assert facts["complete"] and facts["width"] > 100 and facts["height"] > 50, (
                    f"the {kind} picture did not load as an image: {facts}")
                inline = INLINE_TIMELINES if kind == "timeline" else INLINE_GRAPHS
                image = images.nth(facts["index"]) if facts["index"] >= 0 else \
                    page.locator(inline).nth(facts["inline"])
                image.evaluate("e => e.scrollIntoView({block: 'start'})")
                page.wait_for_timeout(300)       # let the notebook finish scrolling
                box = image.bounding_box()
                assert box and box["width"] > 100 and box["height"] > 50, (
                    f"the {kind} picture takes no room on the page: {box}")
                shots[kind] = out / f"jupyterlab-03-{kind}.png"
                page.screenshot(path=str(shots[kind]))
                image.screenshot(path=str(out / f"jupyterlab-03-{kind}-picture.png"))
        except Exception:
            failure = out / "jupyterlab-03-failure.png"
            page.screenshot(path=str(failure))
            (out / "jupyterlab-03-failure.html").write_text(page.content(), encoding="utf-8")
            print(f"screenshot of the page when the test failed: {failure}")
            raise
    for kind, path in shots.items():
        record_property(f"screenshot_{kind}", str(path))
        print(f"screenshot of the {kind} in JupyterLab: {path}")
    print(f"notebook 03 opened and run in JupyterLab in {run_s:.1f} s")


def _alive(process):
    import psutil
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _name(process):
    try:
        return " ".join(process.cmdline()[:3])
    except Exception:   # noqa: BLE001 - gone meanwhile
        return "?"


def _children(pid):
    import psutil
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
