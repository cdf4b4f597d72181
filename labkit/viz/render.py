"""Running graphviz's ``dot`` on DOT text, and ``GraphPicture``, the object a drawing returns.

``dot`` is run as a subprocess (no Python binding needed) with a time limit. When it is not
installed, drawing still works as far as the DOT text: ``picture.dot`` holds it, the notebook
display shows it with a note saying what to install, and ``svg()`` / ``save()`` raise
``GraphvizNotFound`` naming the install command.

>>> pic = GraphPicture('digraph { a -> b }')
>>> pic.dot.startswith('digraph')
True
>>> pic.svg()[:4]    # doctest: +SKIP
'<svg'
"""
import os
import shutil
import subprocess

from ..errors import LabkitError

TIMEOUT = 30.0       # seconds dot may take before we give up
EXPLORABLE = ("graph", "placement")   # pictures shown as the graph explorer in a live notebook

INSTALL_HINT = ("Install graphviz: 'apt-get install graphviz' (Debian/Ubuntu), 'brew install "
                "graphviz' (macOS) or 'conda install -c conda-forge graphviz', so that 'dot' is "
                "on PATH.")


class GraphvizNotFound(LabkitError, RuntimeError):
    """graphviz's ``dot`` program is not installed (or not on PATH)."""


class RenderError(LabkitError, RuntimeError):
    """``dot`` failed or took too long on a picture."""


def find_dot():
    """The path of graphviz's ``dot`` program, or None when it is not on PATH."""
    return shutil.which("dot")


def run_dot(dot_text, fmt="svg", timeout=TIMEOUT):
    """Lay out ``dot_text`` with ``dot -T<fmt>`` and return the output bytes."""
    exe = find_dot()
    if exe is None:
        raise GraphvizNotFound(f"cannot draw the picture as {fmt.upper()}: graphviz's 'dot' "
                               f"program was not found on PATH. {INSTALL_HINT} The DOT text "
                               f"is available without it as picture.dot.")
    try:
        done = subprocess.run([exe, f"-T{fmt}"], input=dot_text.encode("utf-8"),
                              capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        n = dot_text.count(" [label=")
        raise RenderError(f"graphviz 'dot' took longer than {timeout:g} s to lay out a picture "
                          f"of about {n} boxes. Draw fewer: collapse name scopes "
                          f"(collapse=True), lower max_nodes=, or pass a larger timeout.") from None
    if done.returncode != 0:
        err = done.stderr.decode("utf-8", "replace").strip()
        raise RenderError(f"graphviz 'dot -T{fmt}' failed (exit code {done.returncode}): "
                          f"{err[:2000]}")
    return done.stdout


class GraphPicture:
    """A drawing: DOT text, rendered to SVG on demand, displayed inline in a notebook.

    ``.dot``: the DOT text; ``.svg()``: the SVG as a string; ``.save(path)``: write ``.svg``,
    ``.png``, ``.pdf`` or ``.dot`` / ``.gv`` (chosen by the extension); ``.graph``: what was drawn.
    """

    def __init__(self, dot, graph=None, kind="graph", timeout=TIMEOUT, source=None,
                 explore=None):
        self.dot = dot
        self.graph = graph
        self.source = source          # (obj, example args, example kwargs) it was drawn from
        self.explore = dict(explore or {})   # graph_explorer's options (collapse, profile...)
        self.kind = kind
        self.timeout = timeout
        self._svg = None

    def svg(self):
        """The picture as SVG text (runs ``dot`` once; the result is kept)."""
        if self._svg is None:
            self._svg = run_dot(self.dot, "svg", self.timeout).decode("utf-8")
        return self._svg

    def save(self, path, format=None):
        """Write the picture to ``path``; the format comes from the extension unless given."""
        path = os.fspath(path)
        fmt = (format or os.path.splitext(path)[1].lstrip(".") or "svg").lower()
        if fmt in ("dot", "gv"):
            data = self.dot.encode("utf-8")
        elif fmt == "svg":
            data = self.svg().encode("utf-8")
        elif fmt in ("png", "pdf", "jpg", "jpeg"):
            data = run_dot(self.dot, "jpg" if fmt == "jpeg" else fmt, self.timeout)
        else:
            raise ValueError(f"GraphPicture.save: unknown format {fmt!r}; use svg, png, pdf or "
                             f"dot")
        with open(path, "wb") as f:
            f.write(data)
        return path

    # ---- notebook display -------------------------------------------------------------------
    def _inline_svg(self):
        """The SVG without its XML prologue (for embedding in a page), or None if unavailable."""
        try:
            text = self.svg()
        except (GraphvizNotFound, RenderError):
            return None
        start = text.find("<svg")
        return text[start:] if start >= 0 else text

    def _repr_svg_(self):
        return self._inline_svg()

    def explorer(self):
        """The interactive graph explorer of what this picture draws (needs anywidget; see
        ``labkit.viz.graph_explorer``); a placement picture opens coloured by device. The
        picture of an ``lk.function`` drawn with example arguments gets the pass slider."""
        from ..graph import Function
        from .graph_explorer import graph_explorer
        options = dict(self.explore)
        if self.kind == "placement":
            options.setdefault("color_by", "device")
        if self.source is not None and isinstance(self.source[0], Function) and (
                self.source[1] or self.source[2]):
            obj, args, kwargs = self.source
            return graph_explorer(obj, *args, **options, **kwargs)
        return graph_explorer(self.graph, stages=False, **options)

    def _repr_mimebundle_(self, include=None, exclude=None):
        """The SVG, and for a graph or placement picture with anywidget installed the graph
        explorer too: a live notebook shows the explorer, anything without a widget front end
        (nbval, nbconvert, GitHub) the SVG. Without graphviz: the DOT text and what to install."""
        from .timeline_explorer import have_anywidget
        from .widgets import widget_bundle
        box = (self.explorer() if self.kind in EXPLORABLE and self.graph is not None
               and getattr(self.graph, "nodes", None) and have_anywidget() else None)
        try:
            svg = self.svg()
        except (GraphvizNotFound, RenderError) as e:
            return widget_bundle(box, None, f"{e}\n\n{self.dot}")
        start = svg.find("<svg")
        return widget_bundle(box, svg[start:] if start >= 0 else svg, repr(self),
                             mime="image/svg+xml")

    def __repr__(self):
        name = getattr(self.graph, "name", None)
        n = len(getattr(self.graph, "nodes", ())) if self.graph is not None else None
        what = f" of {name!r} ({n} nodes)" if name is not None else ""
        return f"<{self.kind} picture{what}: .svg(), .save(path), .dot>"
