"""The widgets' front end (frontend/): its own unit tests (``node --test``) of the pure logic
(time scale, pan and zoom, lane rows, filters, range totals, hit tests), and the committed
bundle being the build of the committed sources."""
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FRONTEND = ROOT / "frontend"


def test_node_unit_tests_of_the_front_end_pass():
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the front end's unit tests (node --test) need it")
    tests = sorted(str(p.relative_to(FRONTEND)) for p in (FRONTEND / "test").glob("*.test.js"))
    assert tests, "no front-end tests found in frontend/test"
    done = subprocess.run([node, "--test", *tests], cwd=FRONTEND, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, f"node --test failed:\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
    assert "# fail 0" in done.stdout


WIDGETS = ("live", "timeline", "graph")
# Identifiers that only name an XML namespace (SVG's): strings compared, never requested.
NAMESPACES = ("http://www.w3.org/",)


@pytest.mark.parametrize("name", WIDGETS)
def test_the_bundle_is_shipped_in_the_package(name):
    bundle = ROOT / "labkit" / "viz" / "static" / f"{name}.js"
    text = bundle.read_text(encoding="utf-8")
    assert "export" in text and "render" in text        # an ES module for anywidget
    # it loads nothing from the network: no URL to fetch or import from (the browser tests
    # also block and count outside requests)
    urls = re.findall(r"https?://[^\"'\s)`]*", text)
    assert [u for u in urls if not u.startswith(NAMESPACES)] == []


def test_the_committed_bundle_is_the_build_of_the_sources(tmp_path):
    node = shutil.which("node")
    if node is None or not (FRONTEND / "node_modules" / "esbuild").exists():
        pytest.skip("needs node and the front end's build tools (npm install in frontend/)")
    subprocess.run([node, "build.js", "--outdir", str(tmp_path)], cwd=FRONTEND, check=True,
                   capture_output=True, timeout=120)
    for name in WIDGETS:
        built = (tmp_path / f"{name}.js").read_text(encoding="utf-8")
        shipped = (ROOT / "labkit" / "viz" / "static" / f"{name}.js").read_text(encoding="utf-8")
        assert built == shipped, (f"labkit/viz/static/{name}.js is stale: run npm run build in "
                                  f"frontend/ and commit it")
