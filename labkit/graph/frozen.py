"""What a trace fixes that eager code computes at every call, said when the trace is made.

``lk.function`` runs the function's Python once and keeps the graph of labkit ops it called.
labkit's own random functions are graph ops that draw at every call, but whatever plain Python
or NumPy computes while tracing is taken once and kept as a constant. A ``FrozenWatch`` follows
each trace and records, for ``trace.frozen``:

- ``"constant"``: a tensor made from host data during the trace (``lk.tensor``, ``lk.from_numpy``,
  ``lk.zeros``...) that the graph uses: the same value at every call;
- ``"read"``: the user's code read the value of a tensor from outside the function
  (``t.item()``, ``float(t)``, ``bool(t)``, ``t.numpy()``, ``np.asarray(t)``): the trace keeps what
  it read then, and later changes to the tensor do not reach it;
- ``"random"``: the function drew from NumPy's global generator (``np.random.*``) or Python's
  ``random`` module: the draws are fixed in the trace.

Reads and random draws also raise a ``FrozenValueWarning`` at trace time, naming the lines.

>>> import warnings, numpy as np, labkit as lk
>>> @lk.function
... def noisy(x):
...     return x + lk.tensor(np.random.randn(3).astype(np.float32))
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     _ = noisy(lk.zeros(3))
>>> caught[0].category.__name__, [f.kind for f in noisy.traces[0].frozen]
('FrozenValueWarning', ['random', 'constant'])
"""
import random
import sys
import warnings

import numpy as np

from ..errors import _LABKIT, describe_named, source_text, user_frame, user_line
from ..tensor import dispatch
from ..tensor.tensor import Tensor
from .node import CAPTURE

_TENSOR_FILE = Tensor.item.__code__.co_filename
# what a user wrote, by the Tensor method that read the value on their behalf
_HOW = {"__float__": "float(t)", "__int__": "int(t)", "__index__": "t used as an index",
        "__bool__": "bool(t) (an if, while, and/or on a tensor)", "tolist": "t.tolist()",
        "__format__": "formatting t", "__array__": "np.asarray(t)"}


class FrozenValueWarning(UserWarning):
    """A traced function used a value that eager code would compute afresh at each call, and the
    trace fixed it (see ``trace.frozen``)."""


class FrozenValue:
    """One value a trace fixed: ``kind`` ("constant", "read" or "random"), the user's ``source``
    line ``(file, line)`` where known, and ``what`` was fixed."""

    __slots__ = ("kind", "source", "what")

    def __init__(self, kind, source, what):
        self.kind, self.source, self.what = kind, source, what

    def __str__(self):
        return f"{source_text(self.source)}: {self.what}" if self.source else self.what

    def __repr__(self):
        return f"<frozen {self.kind}: {self}>"


def _random_states():
    state = np.random.get_state()
    return (state[1].tobytes(), state[2], state[3], state[4]), random.getstate()


class FrozenWatch:
    """Installed on this thread while ``lk.function`` traces ``name`` (a context manager)."""

    def __init__(self, name):
        self.name = name
        self.made_at = {}      # id(tensor) -> (tensor, source line): made from host data
        self.reads = []        # FrozenValue("read", ...) in program order
        self._outer = None
        self._random = None

    def __enter__(self):
        self._outer = dispatch._state.watch
        dispatch._state.watch = self
        self._random = _random_states()
        return self

    def __exit__(self, *exc):
        dispatch._state.watch = self._outer
        return False

    # ---- what the tensor layer reports (labkit.tensor.dispatch) ---------------------------
    def made(self, t):
        self.made_at[id(t)] = (t, user_line())

    def read(self, t, how, frame):
        if id(t) in self.made_at:
            return                  # a value made in this trace: fixed anyway, nothing lost
        while frame is not None and frame.f_code.co_filename == _TENSOR_FILE:
            how = _HOW.get(frame.f_code.co_name, how)
            frame = frame.f_back
        if frame is None or frame.f_code.co_filename.startswith(_LABKIT):
            return                  # labkit's own use of a value, not the user's
        self.reads.append(FrozenValue(
            "read", (frame.f_code.co_filename, frame.f_lineno),
            f"{how} read the value of {describe_named(t)} from outside the function; the trace keeps "
            f"the value it had then"))

    # ---- after the trace --------------------------------------------------------------------
    def report(self, graph, number):
        """The trace's ``frozen`` list; warns about reads and random draws."""
        constants = []
        for node in graph.nodes:
            if node.op_name == CAPTURE and id(node.value) in self.made_at:
                t, source = self.made_at[id(node.value)]
                if t is node.value:
                    constants.append(FrozenValue(
                        "constant", source, f"{node.dtype.name}{list(node.shape)} made from "
                        f"host data while tracing (node '{node.name}')"))
        drew = []
        numpy_state, python_state = _random_states()
        if numpy_state != self._random[0]:
            drew.append("NumPy's global random generator (np.random)")
        if python_state != self._random[1]:
            drew.append("Python's random module")
        randoms = [FrozenValue("random", None, f"the function drew from {what} while tracing; "
                               f"those draws are fixed in the trace") for what in drew]
        frozen = randoms + self.reads + constants
        problems = randoms + self.reads
        if problems:
            lines = "\n".join(f"  - {p}" for p in problems)
            if randoms:
                made = "\n".join(f"  - {c}" for c in constants) or "  (none: the draws " \
                    "steered Python code, whose path is now fixed)"
                lines += f"\n  Values made from host data in this trace:\n{made}"
            advice = []
            if randoms:
                advice.append("draw with labkit's random functions (lk.rand, lk.randn, "
                              "lk.randint, F.dropout...), which are graph ops that draw anew at "
                              "each call")
            if self.reads:
                advice.append("use the tensor itself in labkit ops rather than its Python "
                              "value, or pass the value as an argument (a new value retraces)")
            warnings.warn(FrozenValueWarning(
                f"lk.function {self.name} (trace {number}) fixed values that eager code computes "
                f"at every call:\n{lines}\n  To keep them per call: {'; '.join(advice)}. "
                f"{self.name}.traces[{number - 1}].frozen lists what the trace fixed."),
                stacklevel=user_frame(sys._getframe(0))[1] + 1)   # at the line that called f
        return frozen
