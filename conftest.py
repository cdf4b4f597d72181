"""Doctests of labkit's public functions: those that ``labkit`` exports under its own name run in
the ``labkit`` module's namespace, where ``bool``, ``int``, ``float``, ``sum``, ``max``... are
labkit's (dtypes and ops, as in ``torch``). An example's bare names mean Python's builtins."""
import builtins

import pytest


@pytest.fixture(autouse=True)
def _python_builtins_in_labkits_own_doctests(request, doctest_namespace):
    if not request.node.nodeid.startswith("labkit/__init__.py::"):
        yield
        return
    shadowed = [n for n in dir(builtins) if not n.startswith("_") and n not in doctest_namespace]
    doctest_namespace.update({n: getattr(builtins, n) for n in shadowed})
    yield
    for n in shadowed:
        doctest_namespace.pop(n, None)
