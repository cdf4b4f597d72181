"""Run a PyTorch program on labkit by rewriting its import lines, and nothing else.

``port(source)`` turns every ``import torch...`` / ``from torch... import`` line into labkit's;
``materialize`` copies a program's folder (ported or as written) to a working folder, so that
whatever the program writes (checkpoints, pictures, prepared data) lands there and the sources
stay clean; ``load`` imports a program's module from that copy, optionally running its top-level
code only up to a given statement (a script's setup, without its training loop); ``run`` runs
it whole, as ``python main.py ARGS`` would.

>>> print(port("import torch\\nimport torch.nn as nn\\nfrom torch import optim\\n"
...            "import torch.utils.data\\n    x = torch.ones(2)\\n"), end="")
import labkit as torch
import labkit.nn as nn
from labkit import optim
import labkit.utils.data, labkit as torch
    x = torch.ones(2)
"""
import ast
import contextlib
import importlib.util
import io
import os
import pathlib
import re
import runpy
import shutil
import sys

CORPUS = pathlib.Path(__file__).resolve().parents[2] / "examples" / "programs"
FRAMEWORKS = ("torch", "labkit")

_IMPORT = re.compile(r"^(\s*)import torch((?:\.\w+)*)( as \w+)?\s*(#.*)?$")
_FROM = re.compile(r"^(\s*)from torch((?:\.\w+)*) import ")


def port(source):
    """``source`` with its torch imports turned into labkit's, and nothing else touched.

    ``import torch`` -> ``import labkit as torch``; ``import torch.nn as nn`` -> ``import
    labkit.nn as nn``; ``import torch.utils.data`` (which binds ``torch``) -> ``import
    labkit.utils.data, labkit as torch``; ``from torch.x import y`` -> ``from labkit.x import
    y``."""
    lines = []
    for line in source.splitlines(keepends=True):
        m = _IMPORT.match(line)
        if m:
            indent, sub, alias, comment = m.groups()
            if alias:
                line = f"{indent}import labkit{sub}{alias}"
            elif sub:
                line = f"{indent}import labkit{sub}, labkit as torch"
            else:
                line = f"{indent}import labkit as torch"
            line += (f"  {comment}" if comment else "") + "\n"
        elif _FROM.match(line):
            line = line.replace("from torch", "from labkit", 1)
        lines.append(line)
    return "".join(lines)


def changed_lines(a, b):
    """The (before, after) pairs of lines that differ between two sources of the same length."""
    return [(x, y) for x, y in zip(a.splitlines(), b.splitlines()) if x != y]


def materialize(program, framework, workdir):
    """Copy ``examples/programs/<program>`` under ``workdir`` (beside a link to the shared
    ``offline.py``), every Python file ported when ``framework`` is "labkit"; returns the copy's
    folder.
    Done once per (program, framework, workdir)."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"framework must be one of {FRAMEWORKS}, not {framework!r}")
    root = pathlib.Path(workdir) / framework
    dest = root / program
    if dest.exists():
        return dest
    root.mkdir(parents=True, exist_ok=True)
    if not (root / "offline.py").exists():
        (root / "offline.py").symlink_to(CORPUS / "offline.py")
    ignore = shutil.ignore_patterns("__pycache__", "*.bin", "*.pkl", "out")
    shutil.copytree(CORPUS / program, dest, ignore=ignore)
    if framework == "labkit":
        for path in dest.rglob("*.py"):
            path.write_text(port(path.read_text()))
    return dest


@contextlib.contextmanager
def program_context(folder, argv, quiet=False):
    """Run inside ``folder`` as ``python <file> argv`` would: that folder first on ``sys.path``
    and current, ``sys.argv`` set, the modules it imports from its own folder (``model``,
    ``data``, ``offline``...) kept apart from other programs' and from the other framework's
    copy of the same program; everything put back afterwards."""
    folder = pathlib.Path(folder)
    own = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir() if p.is_dir()}
    own |= {"offline"}

    def mine(name):
        return name.split(".")[0] in own

    saved_modules = {n: m for n, m in sys.modules.items() if mine(n)}
    for n in saved_modules:
        del sys.modules[n]
    saved = (list(sys.path), list(sys.argv), os.getcwd())
    sys.path.insert(0, str(folder))
    sys.argv[:] = argv
    os.chdir(folder)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out) if quiet else contextlib.nullcontext():
            yield
    finally:
        sys.path[:], sys.argv[:] = saved[0], saved[1]
        os.chdir(saved[2])
        for n in [n for n in sys.modules if mine(n)]:
            del sys.modules[n]
        sys.modules.update(saved_modules)


def load(program, framework, workdir, entry="main.py", argv=(), stop_at=None, quiet=True):
    """The program's ``entry`` file as a module, from its copy for ``framework`` under
    ``workdir``, run with ``argv`` as its command line; not as ``__main__``, so a
    ``if __name__ == '__main__':`` block does not run.

    ``stop_at``: for a script whose training loop is top-level code, the start of the first
    top-level statement not to run (``"for epoch in range(opt.niter)"``): the module then holds
    everything the script set up before it (models, optimisers, data). ``quiet`` keeps what
    the setup prints out of the way."""
    folder = materialize(program, framework, workdir)
    path = folder / entry
    name = f"corpus_{program}_{framework}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    source = path.read_text()
    tree = ast.parse(source, str(path))
    if stop_at is not None:
        starts = [i for i, node in enumerate(tree.body)
                  if ast.get_source_segment(source, node).startswith(stop_at)]
        if not starts:
            raise ValueError(f"{program}/{entry} has no top-level statement starting with "
                             f"{stop_at!r}")
        tree.body = tree.body[:starts[0]]
    code = compile(tree, str(path), "exec")
    with program_context(folder, [str(path), *argv], quiet=quiet):
        exec(code, module.__dict__)
    module.FOLDER = folder
    return module


def run(program, framework, workdir, entry="main.py", argv=()):
    """Run the program whole, as ``python <entry> argv`` from its folder; returns what it
    printed."""
    folder = materialize(program, framework, workdir)
    out = io.StringIO()
    with program_context(folder, [str(folder / entry), *argv]), contextlib.redirect_stdout(out):
        runpy.run_path(str(folder / entry), run_name="__main__")
    return out.getvalue()
