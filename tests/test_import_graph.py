"""The shape of labkit's imports, read from the source (an ``ast`` walk, lazy imports inside
functions included): no import circle over 15 files, the executor imports no graph pass, no pass
imports the executor, and ``lk.config`` imports nothing above the tensor layer.

A circle is a set of modules each of which reaches every other through imports; one large circle
means a change anywhere in it can break an import anywhere else, and a newcomer has to learn all
of it at once. ``from .x import name`` counts as importing the module ``x.name`` when that is a
module, and ``x`` (for a package: its ``__init__``) otherwise.
"""
import ast
import os
import textwrap

import pytest

import labkit

MAX_CIRCLE = 15


def module_imports(root, package):
    """``{module: {imported module: line}}`` for every module of the package at ``root``."""
    files = {}
    for folder, _, names in os.walk(root):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                parts = [package] + os.path.relpath(path[:-3], root).split(os.sep)
                if parts[-1] == "__init__":
                    parts.pop()
                files[".".join(parts)] = path
    edges = {}
    for module, path in files.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        is_package = path.endswith("__init__.py")
        found = edges[module] = {}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(module, node, is_package, files):
                    if target != module:
                        found.setdefault(target, node.lineno)
    return edges


def _targets(module, node, is_package, files):
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            base = module.split(".")
            base = base[:len(base) - node.level + (1 if is_package else 0)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module
        names = [f"{source}.{a.name}" if f"{source}.{a.name}" in files else source
                 for a in node.names]
    out = []
    for name in names:
        while name and name not in files:      # a name inside a module: that module
            name = name.rpartition(".")[0]
        if name:
            out.append(name)
    return out


def circles(edges):
    """The strongly connected components with more than one module, largest first (Tarjan's
    algorithm, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for start in edges:
        if start in index:
            continue
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        work = [(start, iter(edges[start]))]
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(edges[w])))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found, key=len, reverse=True)


def _describe(edges, circle):
    inside = set(circle)
    return "\n".join(f"  {m} -> " + ", ".join(f"{t} (line {line})" for t, line in
                                               sorted(edges[m].items()) if t in inside)
                     for m in circle)


@pytest.fixture(scope="module")
def edges():
    return module_imports(os.path.dirname(labkit.__file__), "labkit")


def test_no_import_circle_over_15_files(edges):
    found = circles(edges)
    assert found, "the walk found no circle at all: it is not reading the imports"
    largest = found[0]
    assert len(largest) <= MAX_CIRCLE, (
        f"{len(largest)} modules import each other in a circle (at most {MAX_CIRCLE}): a "
        f"layer importing one above it (lazily too) is the usual cause; let the higher layer "
        f"register with the lower one instead.\n" + _describe(edges, largest))


def test_the_executor_imports_no_graph_pass(edges):
    bad = sorted(t for t in edges["labkit.graph.executor"] if t.startswith("labkit.graph.passes"))
    assert not bad, f"labkit/graph/executor.py imports {bad}: plans get ready graphs from " \
                    f"labkit/graph/compile.py"


def test_no_graph_pass_imports_the_executor(edges):
    bad = sorted(m for m, targets in edges.items()
                 if m.startswith("labkit.graph.passes") and "labkit.graph.executor" in targets)
    assert not bad, f"{bad} import labkit/graph/executor.py: a pass changes graphs and never " \
                    f"runs them (labkit/graph/kernels.py says how a node's kernel is called)"


def test_config_imports_nothing_above_the_tensor_layer(edges):
    allowed = ("labkit.devices", "labkit.profiler", "labkit.tensor", "labkit.errors",
               "labkit.display")
    bad = sorted(t for t in edges["labkit.config"] if not t.startswith(allowed))
    assert not bad, f"labkit/config.py imports {bad}: layers above the tensor layer register " \
                    f"with config instead (as graph passes do, config.register_pass)"


def test_the_walk_sees_lazy_imports_and_names_from_packages(tmp_path):
    files = {
        "pkg/__init__.py": "from .a import f\n",
        "pkg/a.py": "from . import b\n\ndef f():\n    return b\n",
        "pkg/b.py": "def g():\n    from .sub import c\n    return c\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/c.py": "from ..a import f\n",
        "pkg/alone.py": "import os\n",
    }
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    edges = module_imports(str(tmp_path / "pkg"), "pkg")
    assert edges["pkg.b"] == {"pkg.sub.c": 2}          # the lazy import, by its module
    assert circles(edges) == [["pkg.a", "pkg.b", "pkg.sub.c"]]
