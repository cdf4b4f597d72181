"""Notebook tests: the tutorials in ``notebooks/`` are run under nbval in the same pytest call as
the unit tests (pyproject's ``testpaths`` includes ``notebooks`` and ``addopts`` has
``--nbval --nbval-current-env --nbval-sanitize-with tests/notebooks/sanitize.cfg``).

nbval re-runs every notebook top to bottom in a fresh kernel of this Python environment and
compares each cell's output with the saved one, after the substitutions of ``sanitize.cfg``
(addresses, timings). A cell whose output cannot be stable (timings, graphviz pictures, the list
of devices of the machine) starts with ``# NBVAL_IGNORE_OUTPUT``: it still runs and must not
raise. ``test_notebooks_saved.py`` checks that every cell was saved executed, since nbval skips
cells without saved outputs.

Every notebook cell (and every test in this folder) gets the ``notebooks`` marker, so
``pytest -m "not notebooks"`` leaves them out.
"""
import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "notebooks: runs or checks the tutorial notebooks (nbval)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if str(item.fspath).endswith(".ipynb"):
            item.add_marker(pytest.mark.notebooks)
