"""Guards: the Python values a trace read and baked into its graph, checked before the trace is
used again.

A trace runs the function's Python once; every Python value it read then (a global float, a
closure variable, ``self.eps``, a module's ``training`` flag, an optimiser's ``nesterov``) is
fixed in the graph it made. A ``GuardRecorder`` follows the trace and notes each such value
with where it came from; ``Guards`` checks them all before a later call reuses the trace, and a
changed value makes the caller trace again, with the change as the reason (``global scale:
2.0 -> 3.0``), as PyTorch's compiled code guards on what Dynamo read.

What is recorded, while the trace runs:

- for every frame of the user's code the trace runs (labkit's own files, the standard library
  and NumPy excluded; seen through ``sys.setprofile``, on this thread only): the globals its
  code loads, its closure variables, and, one and two attributes deep from those and from its
  arguments (``self.scale``, ``self.config.n_head``, ``cfg["lr"]``), the attributes whose
  names, and the dict entries whose string keys, the code mentions;
- for every ``nn.Module`` the trace calls: its plain attributes (numbers, strings, flags,
  tensors kept as attributes...), its mode and its hooks (``record_attributes``);
- what other layers declare (``guard_entry``): an optimiser's non-numeric hyperparameters and
  whether each zero/non-zero switch (``weight_decay``) is zero.

Numbers, strings, None, bools and tuples of them are guarded by value (and type: ``1`` is not
``1.0``), anything else by identity (``is``). Modules are not guarded by value (a module object
read by a global is guarded by identity; its attributes through the rules above). The contents
of lists, and of dicts under keys the code does not spell, are not guarded.

Checking is one generated Python function per trace (a chain of ``is`` / ``==`` tests).
Attributes of modules and optimiser groups are checked only when one changed since the last
check: ``Module.__setattr__``, ``train()`` / ``eval()``, hooks and ``param_groups`` assignments
bump a counter (``module_changed``, ``group_changed``), so a training step pays for them only
on the call after something changed.

>>> import labkit as lk
>>> scale = 2.0
>>> @lk.function
... def f(x):
...     return x * scale
>>> _ = f(lk.ones(2))
>>> scale = 3.0
>>> f(lk.ones(2)).tolist(), len(f.traces), f.traces[1].reason
([3.0, 3.0], 2, 'global scale: 2.0 -> 3.0')
"""
import dis
import gc
import os
import sys
import sysconfig
import threading
import types

import numpy as np

from ..errors import _LABKIT, source_text
from ..tensor.tensor import FLAG_CHANGES, Tensor
from .symbolic import SymbolicTensor

MODULES = [0]     # bumped at each change of a module's attributes, mode or hooks
GROUPS = [0]      # bumped at each assignment to an optimiser's param_groups entry


def module_changed():
    """Say that some module's attributes, mode or hooks changed (guards look again)."""
    MODULES[0] += 1


def group_changed():
    """Say that some optimiser parameter group's entry changed (guards look again)."""
    GROUPS[0] += 1


class _Missing:
    __slots__ = ()

    def __repr__(self):
        return "(absent)"


MISSING = _Missing()
CELL, LENGTH = object(), object()      # Guard.key for a closure cell, for the size of a container


class Attribute(str):
    """Guard.key for an attribute read with ``getattr`` (an object without a ``__dict__``)."""
    __slots__ = ()

VALUE, IDENTITY, TRUTH = "value", "identity", "truth"
_SCALARS = (bool, int, float, complex, str, bytes, type(None), np.generic)


def is_plain_value(v):
    """Whether ``v`` is guarded by value: a number, string, None, or a tuple/frozenset of such."""
    if isinstance(v, _SCALARS):
        return True
    if type(v) in (tuple, frozenset) or (isinstance(v, tuple) and hasattr(v, "_fields")):
        return len(v) <= 64 and all(is_plain_value(x) for x in v)
    return False


class Guard:
    """One value a trace read: ``what`` it is (``global scale``), ``where`` the code read it,
    and how to read it again: ``container.get(key)`` (a dict: globals, an object's
    ``__dict__``, a module's, a parameter group), a closure cell's contents (``key`` is
    ``CELL``), ``len(container)`` (``key`` is ``LENGTH``) or an attribute (``key`` an
    ``Attribute``)."""

    __slots__ = ("what", "where", "container", "key", "expected", "how", "epoch", "mode")

    def __init__(self, what, where, container, key, expected, how, epoch=None, mode=None):
        self.what, self.where = what, where
        self.container, self.key = container, key
        self.expected, self.how, self.epoch = expected, how, epoch
        self.mode = mode       # a module whose ``training`` this guard is (for the reason text)

    def current(self):
        if self.key is CELL:
            try:
                return self.container.cell_contents
            except ValueError:
                return MISSING
        if self.key is LENGTH:
            return len(self.container)
        if type(self.key) is Attribute:
            return getattr(self.container, self.key, MISSING)
        return dict.get(self.container, self.key, MISSING)

    def holds(self, value):
        if self.how == TRUTH:
            return value is not MISSING and bool(value) is self.expected
        if self.how == IDENTITY:
            return value is self.expected
        return value is self.expected or (type(value) is type(self.expected) and
                                          value == self.expected)

    def change(self, value):
        """``global scale: 2.0 -> 3.0``: this guard's change to ``value``."""
        if self.how == TRUTH:
            now = "non-zero" if value is not MISSING and value else "zero"
            return (f"{self.what} is {now} now ({_short(value)}); the trace was made with it "
                    f"{'non-zero' if self.expected else 'zero'}, which decided its ops")
        if self.how == IDENTITY:
            if value is MISSING:
                return f"{self.what}: deleted"
            return f"{self.what}: now another {type(value).__name__} object"
        return f"{self.what}: {_short(self.expected)} -> {_short(value)}"

    def __repr__(self):
        where = f" (read at {source_text(self.where)})" if self.where else ""
        shown = f"a {type(self.expected).__name__} object" if self.how == IDENTITY \
            else _short(self.expected)
        return f"<guard {self.what} {'is' if self.how == IDENTITY else '=='} {shown}{where}>"


def _short(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Guards:
    """The guards of one trace, and the generated function checking them all (``holds()``)."""

    def __init__(self, guards):
        self.guards = list(guards)
        self.holds = _compile(self.guards) if self.guards else _always

    def __len__(self):
        return len(self.guards)

    def __iter__(self):
        return iter(self.guards)

    def failed(self):
        """``[(guard, value now)]`` for every guard that no longer holds."""
        out = []
        for g in self.guards:
            try:
                value = g.current()
                ok = g.holds(value)
            except Exception:          # a comparison that raises: treated as changed
                value, ok = MISSING, False
            if not ok:
                out.append((g, value))
        return out

    def reason(self):
        """Why this trace no longer fits, naming each changed value (modules whose mode changed
        are summed up: "Dropout is in eval mode, traced in train mode")."""
        failures = self.failed()
        modes = {True: [], False: []}
        parts = []
        for g, value in failures:
            if g.mode is not None and isinstance(value, bool):
                modes[value].append(type(g.mode).__name__)
            else:
                parts.append(g.change(value))
        for training, names in modes.items():
            if names:
                now, was = ("train", "eval") if training else ("eval", "train")
                shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
                what = f"{len(names)} modules ({shown}) are" if len(names) > 1 else f"{shown} is"
                parts.insert(0, f"{what} in {now} mode, traced in {was} mode")
        return "; ".join(parts) or "guards changed"

    def describe(self):
        """One line per guard: what is checked, its value, and where the code read it."""
        return "\n".join(repr(g)[1:-1] for g in self.guards)


def _always():
    return True


_CHECK = """def check():
    try:
{body}
    except Exception:
        return False
"""


def _compile(guards):
    """One function testing every guard: ``is`` / ``==`` chains, grouped by epoch counter
    (those groups are tested only when their counter moved since they last held)."""
    ns = {"M": MISSING, "_get": dict.get}
    groups = {}
    for i, g in enumerate(guards):
        c, k, e = f"c{i}", f"k{i}", f"e{i}"
        ns[c], ns[k], ns[e] = g.container, g.key, g.expected
        read = f"{c}.cell_contents" if g.key is CELL else f"len({c})" if g.key is LENGTH \
            else f"{c}.{g.key}" if type(g.key) is Attribute else f"_get({c}, {k}, M)"
        if g.how == TRUTH:
            test = f"bool({read}) is {e}"
        elif g.how == IDENTITY or g.expected is None or type(g.expected) is bool \
                or g.expected is MISSING:
            test = f"{read} is {e}"
        else:
            ns[f"t{i}"] = type(g.expected)
            test = f"((v := {read}) is {e} or (type(v) is t{i} and v == {e}))"
        groups.setdefault(id(g.epoch) if g.epoch is not None else None,
                          (g.epoch, []))[1].append(test)
    lines = []
    plain = groups.pop(None, (None, []))[1]
    for n, (epoch, tests) in enumerate(groups.values()):
        ns[f"E{n}"], ns[f"S{n}"] = epoch, [-1]
        lines += [f"if E{n}[0] != S{n}[0]:",
                  f"    if not ({' and '.join(tests)}):",
                  "        return False",
                  f"    S{n}[0] = E{n}[0]"]
    lines.append(f"return {' and '.join(plain) or 'True'}")
    body = "\n".join("        " + ln for ln in lines)
    exec(compile(_CHECK.format(body=body), "<labkit guards>", "exec"), ns)
    return ns["check"]


# ---- recording, while a trace runs -----------------------------------------------------------
_SKIP_DIRS = tuple({_LABKIT + os.sep, os.path.dirname(np.__file__) + os.sep} |
                   {os.path.join(sysconfig.get_paths()[k], "") for k in ("stdlib", "platstdlib")
                    if sysconfig.get_paths().get(k)})
_UNGUARDED = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType,
              types.MethodType, Tensor, np.ndarray)
_INSIDE = (types.ModuleType, SymbolicTensor)     # never guarded: modules, the trace's values
_codes = {}       # code object -> _CodeInfo, or None for code that is not the user's


class _CodeInfo:
    """What a code object of the user's reads: the globals it loads, the attribute names and
    the string constants it uses, each with the lines it does so on."""

    __slots__ = ("globals", "cells", "attrs", "keys", "args", "first")

    def __init__(self, code):
        self.globals, self.cells, self.attrs, self.keys = {}, {}, {}, {}
        for ins in dis.get_instructions(code):
            line = ins.positions.lineno if ins.positions else None
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                self.globals.setdefault(ins.argval, set()).add(line)
            elif ins.opname in ("LOAD_DEREF", "LOAD_CLASSDEREF"):
                self.cells.setdefault(ins.argval, set()).add(line)
            elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD"):
                self.attrs.setdefault(ins.argval, set()).add(line)
            elif ins.opname == "LOAD_CONST" and isinstance(ins.argval, str):
                self.keys.setdefault(ins.argval, set()).add(line)
        n = code.co_argcount + code.co_kwonlyargcount
        self.args = code.co_varnames[:n]
        self.first = code.co_firstlineno


def _info(code):
    info = _codes.get(code, False)
    if info is False:
        name = code.co_filename
        info = None if name.startswith(_SKIP_DIRS) or name.startswith("<frozen") \
            else _CodeInfo(code)
        _codes[code] = info
    return info


class _Recording(threading.local):
    def __init__(self):
        self.stack = []


_recording = _Recording()


def recording():
    """Whether a trace is recording guards on this thread."""
    return bool(_recording.stack)


class GuardRecorder:
    """Notes what the trace of ``fn`` reads (a context manager around the trace);
    ``result()`` is its ``Guards``.

    The user's frames are followed with ``sys.settrace`` (their 'call' and 'line' events; no
    line events in labkit's frames), so a value counts as read only if a line that loads it
    ran: a global named in a branch not taken is not guarded. Where a debugger or coverage
    tool holds the tracer, ``sys.setprofile`` sees the frames instead and every name the code
    mentions is guarded (correct, and sometimes a retrace too many); where both are taken,
    only the traced function's own code is."""

    def __init__(self, fn):
        self.fn = fn
        self.guards = []            # [(Guard, code, lines)]: kept if a line of them ran
        self._seen = set()          # (id(container), key) already guarded
        self._functions = {}        # code -> the function last found running it (or None)
        self._lines = {}            # code -> lines that ran (None: not followed line by line)
        self._undo = None
        self._root = None           # the frame the trace was started from

    def __enter__(self):
        _recording.stack.append(self)
        self._root = sys._getframe(1)
        if sys.gettrace() is None:
            sys.settrace(self._call)
            self._undo = lambda: sys.settrace(None)
        elif sys.getprofile() is None:
            sys.setprofile(self._profile)
            self._undo = lambda: sys.setprofile(None)
        elif self.fn is not None:
            fn = getattr(self.fn, "__func__", self.fn)
            code = getattr(fn, "__code__", None)
            info = _info(code) if code is not None else None
            if info is not None:
                self._code(code, info, fn.__globals__,
                           list(zip(code.co_freevars, fn.__closure__ or ())))
        return self

    def __exit__(self, *exc):
        if self._undo is not None:
            self._undo()
        _recording.stack.remove(self)
        return False

    def result(self):
        """The guards whose value some line that ran read."""
        ran = self._lines
        kept = []
        for guard, code, lines in self.guards:
            done = ran.get(code) if code is not None else None
            if lines is None or done is None or not done.isdisjoint(lines):
                kept.append(guard)
        return Guards(kept)

    def add(self, guard, code=None, lines=None):
        mark = (id(guard.container), guard.key)
        if mark not in self._seen:
            self._seen.add(mark)
            self.guards.append((guard, code, lines))

    # ---- the user's frames ------------------------------------------------------------------
    def _call(self, frame, event, arg):
        """The tracer (called for 'call' events only): looks at each frame of the user's code,
        follows its lines."""
        code = frame.f_code
        info = _codes.get(code, False)
        if info is None:                   # most frames: labkit's own
            return None
        if info is False:
            info = _info(code)
            if info is None:
                return None
        self._lines.setdefault(code, set())
        try:
            self._frame(frame, info)
        except Exception:          # recording never breaks the user's code
            pass
        return self._line

    def _line(self, frame, event, arg):
        if event == "line":
            self._lines[frame.f_code].add(frame.f_lineno)
        return self._line

    def _profile(self, frame, event, arg):
        if event == "call":
            info = _info(frame.f_code)
            if info is not None:
                try:
                    self._frame(frame, info)
                except Exception:
                    pass

    def _frame(self, frame, info):
        code = frame.f_code
        cells = self._cells(frame, code) if code.co_freevars and \
            not self._made_here(frame, code) else None
        self._code(code, info, frame.f_globals, cells)
        if info.args:
            local = frame.f_locals
            scope = _scope(code)
            for name in info.args:
                value = local.get(name, MISSING)
                if value is not MISSING and not isinstance(value, _SCALARS):
                    self._inside(("", f" (in {scope})"), name, value, code, info, 1)

    def _made_here(self, frame, code):
        """Whether the function running ``code`` was defined while tracing (by a frame that
        the trace runs): its closure then holds the trace's own values."""
        f = frame.f_back
        while f is not None and f is not self._root:
            if code in f.f_code.co_consts:
                return True
            f = f.f_back
        return False

    def _cells(self, frame, code):
        """The closure of the function running in ``frame`` (``[(name, cell)]``), or None."""
        local = frame.f_locals
        known = self._functions.get(code, MISSING)
        if known is None:
            return None              # looked for once already, in vain
        if known is not MISSING and _fits(known, code, local):
            return list(zip(code.co_freevars, known.__closure__))
        fn = _running(frame, code, self.fn, local)
        self._functions[code] = fn
        return None if fn is None else list(zip(code.co_freevars, fn.__closure__))

    def _code(self, code, info, glob, cells):
        filename = code.co_filename
        for name, lines in info.globals.items():
            if name in glob and (id(glob), name) not in self._seen:
                self._bound(("global ", ""), name, (filename, _first(lines)), glob, name,
                            glob[name], code, info, lines)
        for name, cell in cells or ():
            if (id(cell), CELL) in self._seen:
                continue
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            lines = info.cells.get(name)
            self._bound(("closure variable ", f" (of {_scope(code)})"), name,
                        (filename, _first(lines) or info.first), cell, CELL, value, code, info,
                        lines)

    def _bound(self, origin, path, where, container, key, value, code, info, lines, depth=0,
               epoch=None):
        """Guard ``value``, read from ``container[key]`` (by value or identity), and below it
        what the code reads inside it."""
        if isinstance(value, _INSIDE):
            return
        how = VALUE if is_plain_value(value) else IDENTITY
        self.add(Guard(f"{origin[0]}{path}{origin[1]}", where, container, key, value, how,
                       epoch), code, lines)
        if how is IDENTITY and depth < 2:
            self._inside(origin, path, value, code, info, depth + 1)

    def _inside(self, origin, path, value, code, info, depth):
        """Guard what the code reads inside ``value``: the attributes it names, the dict entries
        under string keys it spells."""
        if type(value) is dict:
            for key in info.keys.keys() & value.keys():
                if (id(value), key) not in self._seen:
                    self._bound(origin, f"{path}[{key!r}]", None, value, key, value[key], code,
                                info, info.keys[key], depth)
            return
        if isinstance(value, _UNGUARDED):
            return
        attrs = getattr(value, "__dict__", None)
        if type(attrs) is not dict:
            return
        epoch = getattr(type(value), "_guard_epoch", None)
        for name in info.attrs.keys() & attrs.keys():
            if (id(attrs), name) not in self._seen:
                lines = info.attrs[name]
                self._bound(origin, f"{path}.{name}", (code.co_filename, _first(lines)), attrs,
                            name, attrs[name], code, info, lines, depth, epoch)


def _first(lines):
    return min((n for n in lines or () if n), default=None)


def _scope(code):
    return getattr(code, "co_qualname", code.co_name)


def _running(frame, code, fn, local):
    """The function object running in ``frame``: the traced function itself, one of its
    caller's locals or globals, or else one the garbage collector finds holding ``code``."""
    candidates = [fn] if fn is not None else []
    back = frame.f_back
    if back is not None:
        candidates.extend(back.f_locals.values())
        candidates.append(back.f_globals.get(code.co_name))
    for c in candidates:
        c = getattr(c, "__func__", c)
        if _fits(c, code, local):
            return c
    for c in gc.get_referrers(code):
        if _fits(c, code, local):
            return c
    return None


def _fits(fn, code, local):
    if not isinstance(fn, types.FunctionType) or fn.__code__ is not code or not fn.__closure__:
        return False
    for name, cell in zip(code.co_freevars, fn.__closure__):
        try:
            if local.get(name, MISSING) is not cell.cell_contents:
                return False
        except ValueError:
            pass
    return True


# ---- what other layers declare ------------------------------------------------------------------
def guard_entry(container, key, what, how=VALUE, epoch=None):
    """Guard ``container[key]`` (a dict) in every trace being recorded on this thread;
    ``how``: VALUE, IDENTITY or TRUTH (whether it is zero); ``epoch``: the counter whose move
    says it may have changed (default: the container type's ``_guard_epoch``, or none: checked
    at every call)."""
    stack = _recording.stack
    if not stack:
        return
    value = dict.get(container, key, MISSING)
    if how == TRUTH:
        value = bool(value)
    epoch = epoch or getattr(type(container), "_guard_epoch", None)
    for r in stack:
        r.add(Guard(what, None, container, key, value, how, epoch))


def guarded(container):
    """Whether the size of ``container`` is guarded already in the traces being recorded."""
    return all((id(container), LENGTH) in r._seen for r in _recording.stack)


def guard_size(container, what, epoch=MODULES):
    """Guard ``len(container)`` (e.g. a module's table of hooks: one added after the trace
    was made would never run)."""
    for r in _recording.stack:
        r.add(Guard(f"number of {what}", None, container, LENGTH, len(container), VALUE, epoch))


def guard_flag(tensor, what):
    """Guard whether ``tensor`` requires grad (a captured call differentiates the tensors that
    did when it was traced)."""
    for r in _recording.stack:
        r.add(Guard(f"{what}.requires_grad", None, tensor, Attribute("_requires_grad"),
                    tensor._requires_grad, VALUE, FLAG_CHANGES))


def record_attributes(obj, label, skip=(), mode_key=None):
    """Guard every plain attribute of ``obj`` (a module the trace calls): numbers, strings and
    None by value, other objects by identity. ``label``: (before, after) the attribute's name
    in messages; ``skip``: bookkeeping left out; ``mode_key``: the attribute whose change is
    told as a change of mode (``training``)."""
    stack = _recording.stack
    if not stack:
        return
    attrs = vars(obj)
    epoch = getattr(type(obj), "_guard_epoch", None)
    for r in stack:
        for key, value in attrs.items():
            if key in skip or key.startswith("__lk_") or isinstance(value, _INSIDE):
                continue
            how = VALUE if is_plain_value(value) else IDENTITY
            r.add(Guard(f"{label[0]}{key}{label[1]}", None, attrs, key, value, how, epoch,
                        obj if key == mode_key else None))
