"""The one family of errors labkit raises.

Every error is written for the person at the notebook: it names the op, the shapes, dtypes and
devices involved, and says what would fix it. Each class also derives from the matching built-in
exception, so ``except ValueError`` in existing code keeps working.

>>> import labkit as lk
>>> try:
...     lk.ones((2, 3)) @ lk.ones((2, 3))
... except lk.ShapeError as e:
...     print(type(e).__name__)
ShapeError
"""
import linecache
import os
import sys


class LabkitError(Exception):
    """Base class of every error labkit raises on purpose."""


class GraphError(LabkitError, ValueError):
    """A malformed graph, or a graph used wrongly (unfed placeholder, foreign fetch...)."""


class ShapeError(LabkitError, ValueError):
    """Shapes that do not fit an op (matmul inner dims, broadcasting, reshape sizes...)."""


class DTypeError(LabkitError, TypeError):
    """A dtype an op cannot take (gradients of integer tensors, unknown dtypes...)."""


class DeviceError(LabkitError, RuntimeError):
    """Unknown device names, a GPU asked for where none is, tensors on different devices."""


class GradError(LabkitError, RuntimeError):
    """Autodiff misuse: backward on a non-scalar without a gradient, a freed graph, ..."""


class CheckpointError(LabkitError, ValueError):
    """A checkpoint file that is truncated, corrupted, or holds something labkit cannot store."""


class NumericsError(LabkitError, FloatingPointError):
    """NaN or Inf produced by an op, found by the ``LABKIT_DEBUG=1`` checking mode."""


class LinAlgError(LabkitError, RuntimeError):
    """A matrix a decomposition cannot take: singular for ``inv`` / ``solve``, not positive-
    definite for ``cholesky`` (PyTorch's ``torch.linalg.LinAlgError``)."""


class VmapError(LabkitError, RuntimeError):
    """What lk.vmap cannot do: read one example's value (``item()``, ``bool()``, NumPy) inside
    the vmapped function, or stack examples whose results differ in shape."""


class DataDependentShapeError(VmapError):
    """An op whose result's shape depends on each example's values (nonzero, unique, a boolean
    mask, repeat_interleave by a tensor), refused by lk.vmap as PyTorch's vmap refuses it.
    ``op`` names the op."""

    def __init__(self, op, message):
        super().__init__(message)
        self.op = op


_LABKIT = os.path.dirname(os.path.abspath(__file__))


def user_frame(frame=None):
    """The innermost frame outside labkit's own files (the user's line that led here), and how
    many frames up from ``frame`` (default: the caller's) it is; ``(None, depth)`` if none is."""
    frame = sys._getframe(1) if frame is None else frame
    depth = 0
    while frame is not None and frame.f_code.co_filename.startswith(_LABKIT):
        frame, depth = frame.f_back, depth + 1
    return frame, depth


def user_line(frame=None):
    """``(filename, line)`` of the user's line that led here (the first frame outside labkit's
    files, from ``frame``, default the caller's), or None; ``source_text`` writes it out."""
    frame, _ = user_frame(sys._getframe(1) if frame is None else frame)
    return None if frame is None else (frame.f_code.co_filename, frame.f_lineno)


def source_text(where):
    """``where`` (a ``(filename, line)`` pair, as graph nodes keep it) as ``file:line: code``."""
    if where is None:
        return "an unknown line"
    filename, line = where
    code = linecache.getline(filename, line).strip()
    cell = _notebook_cell(filename)
    place = f"{cell}, line {line}" if cell else f"{filename}:{line}"
    return place + (f": {code}" if code else "")


def _notebook_cell(filename):
    """``"Cell In[5]"`` for code a notebook cell ran (as IPython's tracebacks name it), else
    None; the kernel's file name for a cell is a temporary path that means nothing to a reader."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    label = getattr(getattr(shell, "compile", None), "format_code_name", lambda name: None)(
        filename)
    return " ".join(label) if label else None


def describe(value):
    """A short description of an op argument for error messages: shape, dtype and device."""
    shape = getattr(value, "shape", None)
    if shape is None:
        return f"{type(value).__name__} {value!r}"
    dtype = getattr(value, "dtype", "?")
    device = getattr(value, "device", None)
    where = f" on {device}" if device is not None else ""
    return f"Tensor(shape={tuple(shape)}, dtype={dtype}{where})"


def describe_named(value):
    """``describe(value)`` after the tensor's name in quotes, where it has one (a parameter or
    an ``lk.Variable``), for messages that point at one tensor."""
    name = getattr(value, "name", None)
    return f"'{name}' ({describe(value)})" if isinstance(name, str) and name else describe(value)
