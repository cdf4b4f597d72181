"""The corpus of public PyTorch programs (``examples/programs``) runs on labkit by its imports.

For every program: the port changes its import lines and nothing else; its training step (the
body of its training loop, ``benchmarks/corpus/programs.py``) gives PyTorch's losses step for step
from PyTorch's initial weights and the same batches, eagerly and captured (``lk.function``), and
so do the word language model's other models (``--model GRU``, ``RNN_TANH``, ``Transformer``, an
LSTM with ``--tied`` weights); and the program itself runs to its end on labkit, as a user runs
it with a short command line. The ``# LABKIT:`` edits (what labkit still lacks) are counted
against the corpus's README.
"""
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from benchmarks.corpus import porting
from labkit.devices import host_dnnl
from benchmarks.corpus.programs import PROGRAMS, VARIANTS, check_run

NAMES = sorted(PROGRAMS)
CHECKED = {**PROGRAMS, **VARIANTS}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("corpus")


def sources():
    return sorted(p for p in porting.CORPUS.rglob("*.py") if p.name != "offline.py")


def test_the_corpus_holds_ten_programs_with_their_licences():
    folders = {p.name for p in porting.CORPUS.iterdir() if p.is_dir() and p.name[0] != "_"}
    assert folders == set(NAMES)
    readme = (porting.CORPUS / "README.md").read_text()
    for name in NAMES:
        assert f"`{name}/`" in readme, name
    for licence in ("LICENSE.pytorch-examples", "LICENSE.torchvision", "LICENSE.nanoGPT"):
        assert "Redistribution" in (porting.CORPUS / licence).read_text() or \
            "Permission is hereby granted" in (porting.CORPUS / licence).read_text()


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(porting.CORPUS)))
def test_the_port_changes_the_import_lines_only(path):
    source = path.read_text()
    ported = porting.port(source)
    assert len(ported.splitlines()) == len(source.splitlines())
    for before, after in porting.changed_lines(source, ported):
        assert re.match(r"\s*(import|from) torch\b", before), before
        assert re.match(r"\s*(import|from) labkit\b", after), after
    assert not re.search(r"^\s*(import|from) torch\b", ported, re.M)
    compile(ported, str(path), "exec")


def test_port_of_each_import_form():
    assert porting.port("import torch\n") == "import labkit as torch\n"
    assert porting.port("import torch.nn as nn  # layers\n") == \
        "import labkit.nn as nn  # layers\n"
    assert porting.port("import torch.utils.data\n") == \
        "import labkit.utils.data, labkit as torch\n"
    assert porting.port("    from torch.nn import functional as F\n") == \
        "    from labkit.nn import functional as F\n"
    assert porting.port("x = torch.ones(2)  # import torch\n") == \
        "x = torch.ones(2)  # import torch\n"


def test_labkit_edits_are_marked_with_a_reason_and_counted_in_the_readme():
    edits = []
    for path in sources():
        for line in path.read_text().splitlines():
            if "# LABKIT:" in line:
                reason = line.split("# LABKIT:", 1)[1].strip()
                assert len(reason) > 10, line
                edits.append(path)
    readme = (porting.CORPUS / "README.md").read_text()
    stated = int(re.search(r"There are \*\*(\d+)\*\*", readme).group(1))
    assert len(edits) == stated, f"{len(edits)} `# LABKIT:` edits, the README says {stated}"
    table = sum(int(n) for n in re.findall(r"^ *\| [^|]+ \| (\d+) \| [^|]+ \|$", readme, re.M))
    assert table == stated


# (TransformerModel.forward keeps the causal mask it makes on the module, ``self.src_mask``:
# captured, that is a value set after each run, not the trace's symbolic tensor)
@pytest.mark.parametrize("name", sorted(CHECKED))
def test_steps_give_pytorchs_losses(name, workdir):
    program = CHECKED[name]
    batches = program.check_batches(np.random.default_rng(0))
    state, theirs = check_run(program, "torch", workdir, None, batches)
    _, ours = check_run(program, "labkit", workdir, state, batches)
    print(f"{name} losses (torch, labkit eager):", list(zip(theirs, ours)))
    assert len(theirs) == program.check_steps
    assert all(math.isfinite(v) for step in theirs for v in step)
    np.testing.assert_allclose(ours, theirs, rtol=program.rtol, err_msg="eager")
    _, captured = check_run(program, "labkit", workdir, state, batches, captured=True)
    print(f"{name} losses, labkit captured:", captured)
    np.testing.assert_allclose(captured, theirs, rtol=program.rtol, err_msg="captured")


# labkit takes oneDNN's kernels at one OpenMP thread only (``host_dnnl``), and CI runs at the
# machine's threads: here the float32 programs with convolutions, GELU, LayerNorm, large
# softmaxes or large matrix products run as at one thread, so that every run checks them on
# oneDNN against PyTorch's losses too
_ONEDNN = {"mnist": {"conv2d", "conv2d_input_grad", "conv2d_weight_grad", "matmul"},
           "super_resolution": {"conv2d", "conv2d_input_grad", "conv2d_weight_grad"},
           "nanogpt": {"gelu", "gelu_backward", "layer_norm", "layer_norm_backward", "softmax",
                       "softmax_backward", "matmul"},
           "word_language_model": {"softmax", "softmax_backward", "matmul"}}


@pytest.mark.skipif(host_dnnl.available() is None, reason="oneDNN's library is not installed")
@pytest.mark.parametrize("name", sorted(_ONEDNN))
def test_steps_on_onednns_kernels_give_pytorchs_losses(name, workdir, monkeypatch):
    program = PROGRAMS[name]
    batches = program.check_batches(np.random.default_rng(0))
    state, theirs = check_run(program, "torch", workdir, None, batches)
    monkeypatch.setattr(host_dnnl, "threads", lambda: 1)
    served = set()
    for kernel in set().union(*_ONEDNN.values()):
        monkeypatch.setattr(host_dnnl, kernel, lambda *a, f=getattr(host_dnnl, kernel), k=kernel,
                            **kw: _noted(served, k, f(*a, **kw)))
    for captured in (False, True):
        served.clear()
        _, ours = check_run(program, "labkit", workdir, state, batches, captured=captured)
        np.testing.assert_allclose(ours, theirs, rtol=program.rtol, err_msg=f"{captured=}")
        assert served == _ONEDNN[name], served


def _noted(served, kernel, result):
    if result is not None:
        served.add(kernel)
    return result


@pytest.mark.parametrize("name", NAMES)
def test_the_program_runs_to_its_end_on_labkit(name, tmp_path):
    program = PROGRAMS[name]
    out = ""
    for entry, argv in program.runs:
        out += porting.run(name, "labkit", tmp_path, entry, argv)
    numbers = [float(v) for v in re.findall(r"[Ll]oss[:_ a-zA-Z]*?:? +(-?[0-9.]+(?:e[-+]\d+)?)",
                                            out)]
    print(out[-1500:])
    assert numbers, out[-2000:]
    assert all(math.isfinite(v) for v in numbers)


def test_resnet18_runs_its_multiprocessing_distributed_branch(tmp_path):
    """``--multiprocessing-distributed``: ``torch.multiprocessing.spawn(main_worker, ...)``
    starts the worker, which joins a gloo process group by ``--dist-url`` and evaluates; run
    as a user runs it, in a process of its own (spawn re-imports ``__main__``)."""
    folder = porting.materialize("resnet18", "labkit", tmp_path)
    root = str(porting.CORPUS.parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p))
    done = subprocess.run(
        [sys.executable, "main.py", "-a", "resnet18", "--evaluate", "-b", "64", "-j", "0",
         "-p", "1", "--multiprocessing-distributed", "--world-size", "1", "--rank", "0",
         "--dist-url", "tcp://127.0.0.1:29563", "--dist-backend", "gloo"],
        cwd=folder, capture_output=True, text=True, env=env, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    losses = [float(v) for v in re.findall(r"Loss ([0-9.e+-]+) \(", done.stdout)]
    assert len(losses) == 5 and all(math.isfinite(v) for v in losses), done.stdout
    assert " *   Acc@1 " in done.stdout


def test_the_corpus_table_has_a_dash_for_an_implementation_not_run():
    # (``run.py --impl labkit_eager`` measures one implementation: its table must still render)
    from benchmarks.corpus import run
    rows = run.table(["regression"], {"regression": {"labkit_eager": {"value": 0.135}}})
    assert rows[-1].startswith("| regression | - | 0.135 | - | - | - |")
