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

Tracebacks show the user's code, not labkit's (as JAX filters its own frames): an error that
leaves labkit carries a traceback without labkit's internal frames, and a note saying how to
see them (``lk.config.set_traceback_filtering("off")`` or ``LABKIT_TRACEBACK_FILTERING=off``).
"""
import linecache
import os
import sys
import types


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


class ConstraintError(LabkitError, ValueError):
    """Values outside what they must be: a distribution's parameter or sample outside its
    constraint (PyTorch raises ValueError there), found by the ``check_all`` op."""


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
_PREFIX = _LABKIT + os.sep


# ---- tracebacks that show the user's code -------------------------------------------------------
# "on": labkit's frames are left out of the tracebacks of errors that leave it; "off": kept.
_filtering = {"mode": "off" if os.environ.get("LABKIT_TRACEBACK_FILTERING", "on").lower()
              in ("off", "0", "false", "no") else "on"}
FILTERED_NOTE = ("(labkit hid its internal frames from this traceback; "
                 "lk.config.set_traceback_filtering('off') shows them)")


def internal_file(filename):
    """Whether ``filename`` is one of labkit's own source files."""
    return filename.startswith(_PREFIX)


def filter_traceback(tb):
    """The traceback ``tb`` without labkit's own frames (None when nothing else is left)."""
    kept = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_PREFIX):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(kept):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def hide_internal_frames(exc, frame=None):
    """Leave labkit's frames out of ``exc``'s traceback; called by each place where a user's
    call enters labkit (an API boundary, as JAX's ``api_boundary``) from its ``except`` block,
    which then re-raises with a bare ``raise``. ``frame``: that boundary's frame (default:
    the caller's). The labkit frames still on the stack above it, which the traceback gains
    as the error unwinds through them, are marked ``__tracebackhide__`` (IPython and pytest
    leave such frames out); the outermost boundary removes them for every other reader.
    Does nothing when ``lk.config.set_traceback_filtering("off")``."""
    if _filtering["mode"] == "off" or isinstance(exc, (StopIteration, GeneratorExit)):
        return
    tb = exc.__traceback__
    filtered = filter_traceback(tb)
    removed = filtered is not tb
    if removed:
        exc.__traceback__ = filtered
    f = (sys._getframe(1) if frame is None else frame).f_back
    while f is not None and f.f_code.co_filename.startswith(_PREFIX):
        f.f_locals["__tracebackhide__"] = True
        f = f.f_back
    if removed and not getattr(exc, "_labkit_filtered", False):
        exc._labkit_filtered = True
        if hasattr(exc, "add_note"):
            exc.add_note(FILTERED_NOTE)


def api_boundary(fn):
    """Decorator: ``fn`` is where a user's call enters labkit; an error leaving it has a
    traceback without labkit's internal frames (``hide_internal_frames``). For entry points
    that are not on a hot path; hot ones (tensor operators, ``Op.__call__``) do the same in
    their own ``except`` block, which costs nothing until something fails."""
    import functools

    @functools.wraps(fn)
    def boundary(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            hide_internal_frames(e)
            raise
    return boundary


def set_traceback_filtering(mode):
    """``"on"`` (default): tracebacks of labkit's errors show the user's frames only; ``"off"``:
    labkit's own frames too (for debugging labkit itself). ``LABKIT_TRACEBACK_FILTERING=off``
    in the environment starts with it off."""
    if mode in (True, False):
        mode = "on" if mode else "off"
    if mode not in ("on", "off"):
        raise ValueError(f"set_traceback_filtering: mode must be 'on' or 'off', not {mode!r}")
    _filtering["mode"] = mode


def traceback_filtering():
    """``"on"`` or ``"off"``: see ``set_traceback_filtering``."""
    return _filtering["mode"]


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
    where = f" on {getattr(device, 'name', device)}" if device is not None else ""
    return f"Tensor(shape={tuple(shape)}, dtype={dtype}{where})"


def describe_named(value):
    """``describe(value)`` after the tensor's name in quotes, where it has one (a parameter or
    an ``lk.Variable``), for messages that point at one tensor."""
    name = getattr(value, "name", None)
    return f"'{name}' ({describe(value)})" if isinstance(name, str) and name else describe(value)
