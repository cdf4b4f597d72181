"""UI tests: a real JupyterLab driven by a real browser (Debian's Chromium through Playwright).

They are marked ``ui`` (``pytest -m "not ui"`` leaves them out) and skip, saying why, where
Chromium, Playwright or JupyterLab is missing. Screenshots go to the folder named by the
environment variable ``LABKIT_UI_ARTIFACTS`` (CI can upload it), else to pytest's ``tmp_path``.
"""
import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "/tests/ui/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.ui)
