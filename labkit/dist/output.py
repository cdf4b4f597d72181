"""Where the workers' stdout and stderr go while a launched function runs.

- ``"widget"``: a tab per rank (ipywidgets), filled live; the default in a live notebook.
- ``"text"``: plain lines prefixed with the rank, ``[rank 1] loss 0.31``, stdout to stdout and
  stderr to stderr; the default elsewhere (terminals, scripts, tests, CI-run notebooks).
- ``"none"``: nothing shown.

>>> from labkit.dist.output import make_output
>>> out = make_output(2, "text")
>>> out.write(1, "stdout", "hello\\nwor")
[rank 1] hello
>>> out.close()
[rank 1] wor
"""
import sys
import time

MODES = ("auto", "widget", "text", "none")


def in_live_notebook():
    """True inside a Jupyter kernel (where widgets can draw)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def make_output(n, mode="auto"):
    """An output sink for ``n`` ranks; see the module docstring for the modes."""
    if mode not in MODES:
        raise ValueError(f"lk.dist: output={mode!r} is not one of {', '.join(map(repr, MODES))}")
    if mode == "auto":
        mode = "widget" if in_live_notebook() and _have_widgets() else "text"
    if mode == "widget":
        return WidgetOutput(n)
    if mode == "none":
        return NullOutput()
    return TextOutput(n)


def _have_widgets():
    try:
        import ipywidgets  # noqa: F401  (only whether it imports)
    except ImportError:
        return False
    return True


class NullOutput:
    def write(self, rank, stream, text):
        pass

    def tick(self):
        pass

    def close(self):
        pass


class TextOutput:
    """Complete lines, prefixed with the rank; a partial line waits for its end (or close)."""

    def __init__(self, n, stdout=None, stderr=None):
        self._files = {"stdout": stdout, "stderr": stderr}
        self._partial = {}

    def _file(self, stream):
        f = self._files.get(stream)
        return f if f is not None else (sys.stderr if stream == "stderr" else sys.stdout)

    def write(self, rank, stream, text):
        key = (rank, stream)
        text = self._partial.pop(key, "") + text
        *lines, rest = text.split("\n")
        if rest:
            self._partial[key] = rest
        if lines:
            f = self._file(stream)
            f.write("".join(f"[rank {rank}] {line}\n" for line in lines))
            f.flush()

    def tick(self):
        pass

    def close(self):
        for (rank, stream), rest in sorted(self._partial.items()):
            f = self._file(stream)
            f.write(f"[rank {rank}] {rest}\n")
            f.flush()
        self._partial.clear()


class WidgetOutput:
    """A ``Tab`` with one ``Output`` per rank, displayed in the cell that launched.

    Updates are throttled (at most every ``interval`` seconds) and consecutive text of one
    stream is merged into one output, keeping the last ``max_chars`` characters: a widget
    re-sends all its outputs on every change, so a long training log must not grow without end.
    """

    def __init__(self, n, interval=0.2, max_chars=200_000):
        import ipywidgets as widgets
        from IPython.display import display
        self.interval = interval
        self.max_chars = max_chars
        self.outputs = [widgets.Output() for _ in range(n)]
        self.tab = widgets.Tab(children=self.outputs)
        titles = [f"rank {r}" for r in range(n)]
        if hasattr(self.tab, "titles"):            # ipywidgets 8
            self.tab.titles = tuple(titles)
        else:                                       # ipywidgets 7
            for r, title in enumerate(titles):
                self.tab.set_title(r, title)
        self._pending = [[] for _ in range(n)]      # per rank: [(stream, text), ...]
        self._last_flush = 0.0
        display(self.tab)

    def write(self, rank, stream, text):
        self._pending[rank].append((stream, text))
        self.tick()

    def tick(self):
        """Show pending text if the last update is ``interval`` old (called while waiting)."""
        if time.monotonic() - self._last_flush >= self.interval and any(self._pending):
            self.flush()

    def flush(self):
        self._last_flush = time.monotonic()
        for out, pending in zip(self.outputs, self._pending):
            if not pending:
                continue
            items = [dict(o) for o in out.outputs]
            for stream, text in pending:
                last = items[-1] if items else None
                if last is not None and last.get("output_type") == "stream" and \
                        last.get("name") == stream:
                    last["text"] = (last["text"] + text)[-self.max_chars:]
                else:
                    items.append({"output_type": "stream", "name": stream, "text": text})
            pending.clear()
            out.outputs = tuple(items)

    def close(self):
        self.flush()
