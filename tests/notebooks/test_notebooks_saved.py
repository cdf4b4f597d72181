"""The tutorial notebooks are committed executed, top to bottom, with their outputs.

nbval (run with ``--nbval``, see ``conftest.py``) re-runs each notebook and compares every cell's
fresh output with the saved one, but a cell saved without outputs (``execution_count: null``) is
not compared at all: a notebook committed unexecuted would pass while checking nothing. These
tests make sure that cannot happen, and that the saved outputs are clean (no errors, no warnings
on stderr, no paths of the machine that ran them). They read the files only, so they are fast
and need no Jupyter kernel.
"""
import ast
import json
import pathlib
import re

import pytest

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[2] / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))
TUTORIALS = ["01_tensors_and_eager", "02_autodiff", "03_graph_capture", "04_control_flow",
             "05_devices_placement_timelines", "06_training_digits", "07_data_parallel",
             "08_parameter_servers", "09_checkpoints_and_failures", "10_sparse_embeddings",
             "11_transformer_from_scratch", "12_randomness_and_state",
             "13_training_to_serving", "14_one_notebook_to_a_cluster",
             "15_bring_your_own_pytorch_program", "16_parallelism_strategies",
             "17_mixed_precision_and_memory"]
# Paths of whatever machine ran the notebook must not be saved in it.
MACHINE_PATH = re.compile(r"(/home/|/root/|/tmp/|/work/|/Users/|site-packages|[A-Z]:\\\\)")

pytestmark = pytest.mark.notebooks


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]


def output_text(output):
    """Every text an output holds (stream text, plain text, HTML...), joined."""
    parts = [output.get("text", "")] + list(output.get("data", {}).values())
    parts += output.get("traceback", [])
    return "".join("".join(p) if isinstance(p, list) else str(p) for p in parts)


def must_show_something(source):
    """Whether a cell obviously produces output: it prints, or ends in an expression that is
    not a call (a call may return None) and is not silenced with ';'."""
    if re.search(r"\bprint\(", source):
        return True
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    if not tree.body or source.rstrip().endswith(";"):
        return False
    last = tree.body[-1]
    return isinstance(last, ast.Expr) and not isinstance(last.value, ast.Call)


def test_the_tutorials_are_there():
    names = [p.stem for p in PATHS]
    missing = [t for t in TUTORIALS if t not in names]
    assert not missing, f"tutorial notebooks missing from {NOTEBOOKS.name}/: {missing}"


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_every_code_cell_was_executed_in_order(path):
    cells = code_cells(load(path))
    assert cells, f"{path.name} has no code cells"
    counts = [c.get("execution_count") for c in cells]
    unexecuted = [i for i, n in enumerate(counts) if n is None]
    assert not unexecuted, (
        f"{path.name}: code cell(s) {unexecuted} (0-based, among code cells) were saved without "
        f"being executed, so nbval would not check them. Run the whole notebook, e.g. "
        f"jupyter nbconvert --to notebook --execute --inplace notebooks/{path.name}")
    assert counts == list(range(1, len(cells) + 1)), (
        f"{path.name}: execution counts {counts} are not 1, 2, 3... in order: the notebook was "
        f"not run top to bottom in one fresh kernel (restart and run all, then save)")


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_cells_that_print_have_outputs(path):
    empty = [i for i, c in enumerate(code_cells(load(path)))
             if must_show_something("".join(c["source"])) and not c.get("outputs")]
    assert not empty, (f"{path.name}: code cell(s) {empty} print or show a value but were saved "
                       f"without outputs")


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_saved_outputs_are_clean(path):
    nb = load(path)
    problems = []
    for i, cell in enumerate(code_cells(nb)):
        source = "".join(cell["source"])
        for out in cell.get("outputs", []):
            if out["output_type"] == "error" and "NBVAL_RAISES_EXCEPTION" not in source:
                problems.append(f"cell {i} raised {out.get('ename')}: {out.get('evalue')}")
            if out["output_type"] == "stream" and out.get("name") == "stderr":
                text = "".join(out.get("text", ""))
                problems.append(f"cell {i} wrote to stderr (a warning?): {text[:200]!r}")
            found = MACHINE_PATH.search(output_text(out))
            if found:
                problems.append(f"cell {i} output names a machine path ({found.group(0)!r})")
    for i, cell in enumerate(nb["cells"]):
        found = MACHINE_PATH.search("".join(cell["source"]))
        if found:
            problems.append(f"cell {i} (0-based, all cells) names a machine path "
                            f"({found.group(0)!r})")
    found = MACHINE_PATH.search(json.dumps(nb["metadata"]))
    if found:
        problems.append(f"notebook metadata names a machine path ({found.group(0)!r})")
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_notebook_runs_in_the_python3_kernel(path):
    spec = load(path)["metadata"].get("kernelspec", {})
    assert spec.get("name") == "python3", (
        f"{path.name}: kernelspec {spec!r}; use the standard 'python3' kernel so that nbval "
        f"(--nbval-current-env) and readers run it in labkit's environment")
