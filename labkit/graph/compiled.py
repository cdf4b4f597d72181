"""``lk.compile`` of a function: ``torch.compile``'s contract on ``lk.function``'s capture.

A ``Compiled`` function is an ``lk.function`` that never refuses to run:

- **Graph breaks.** What a graph cannot hold (a Python ``if`` on a tensor's value, ``t.item()``,
  ``print(t)`` of a traced tensor, ``t.numpy()``, a draw from NumPy's or Python's random
  generators, a call of a function marked ``lk.compiler.disable``, or any other error while
  tracing) ends the trace, and that call runs the whole function eagerly: labkit does not split
  the function into graphs around the break. The break is recorded with the user's line and
  the reason (``f.breaks``, ``f.explain()``), and later calls with the same signature (and
  the same guarded Python values) go straight to eager, with no new trace. The Python that
  ran before the break ran twice on that first call (once traced, once eagerly).
  ``fullgraph=True`` raises ``GraphBreak`` instead, naming the line.
- **Guards** (``labkit.graph.guards``) as for ``lk.function``; past
  ``cache_size_limit`` traces (8, as Dynamo's) a warning names the function and the last
  reason, and calls that fit none of the traces made run eagerly.
- **Training.** When the results need gradients (grad mode on, computed from parameters or
  arguments that require grad), the backward pass is compiled too and the call is one entry
  on the eager tape (``labkit.graph.joint``): ``loss.backward()`` after the compiled forward
  fills ``.grad`` and runs gradient hooks, as eagerly.

``backend``: PyTorch's names are accepted; ``"eager"`` and ``"aot_eager"`` run the traced graph
without labkit's optimisation passes, every other backend with them. ``mode``, ``options`` and
``dynamic`` are checked as PyTorch checks them and change nothing else (shapes are always
specialised: a new shape traces again, counted against the limit).

>>> import labkit as lk
>>> @lk.compile
... def f(x):
...     if x.sum() > 0:          # a Python branch on a tensor's value: a graph break
...         return x * 2.0
...     return x
>>> f(lk.ones(2)).tolist()
[2.0, 2.0]
>>> f.explain().graph_break_count, f.breaks[0].reason.split(" needs")[0]
(1, 'Python control flow on a tensor (if/while/and/or, bool(t))')
"""
import functools
import traceback
import warnings
import weakref

from .. import config
from ..errors import _LABKIT, LabkitError, source_text
from .function import Function, Trace, _user_stacklevel
from .joint import add_backward, split
from .symbolic import GraphBreak, TracingError, breaking

BACKENDS = ("inductor", "eager", "aot_eager", "aot_eager_decomp_partition", "cudagraphs",
            "openxla", "tvm", "onnxrt", "tensorrt", "torch_tensorrt", "tvm_meta_schedule")
LISTED_BACKENDS = ("cudagraphs", "inductor", "openxla", "tvm")   # list_backends(), PyTorch's
MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
_UNOPTIMISED = ("eager", "aot_eager")
_all = weakref.WeakSet()      # every Compiled function (lk.compiler.reset)


class InvalidBackend(LabkitError, RuntimeError):
    """``lk.compile(backend=...)`` with a name PyTorch does not know."""


def check_options(backend, mode, options, dynamic):
    """PyTorch's checks of ``torch.compile``'s arguments, with its messages."""
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be "
                           "specified at the same time.")
    if mode is not None and mode not in MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(MODES)}")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"options must be a dict of inductor options, got "
                        f"{type(options).__name__}")
    if callable(backend):
        raise InvalidBackend(
            f"lk.compile(backend={getattr(backend, '__name__', backend)!r}): a custom backend "
            f"is given an FX graph in PyTorch; labkit has none to give it. Use one of the "
            f"named backends (labkit compiles with its own graph passes).")
    if backend is None:
        backend = "inductor"
    if backend not in BACKENDS:
        raise InvalidBackend(f"Invalid backend: {backend!r}, see `lk._dynamo.list_backends()` "
                             f"for available backends.")
    if dynamic not in (None, True, False):
        raise TypeError(f"dynamic must be None, True or False, got {dynamic!r}")
    return backend


class Break:
    """One graph break: ``reason``, the user's ``source`` line ``(file, line)`` where it
    happened, and the ``trace`` it ended (as Dynamo's ``GraphCompileReason``)."""

    __slots__ = ("reason", "source", "trace")

    def __init__(self, reason, source, trace):
        self.reason, self.source, self.trace = reason, source, trace

    @property
    def user_stack(self):
        return [self.source] if self.source else []

    def __str__(self):
        return f"{source_text(self.source)}: {self.reason}" if self.source else self.reason

    def __repr__(self):
        return f"<graph break: {self}>"


class Explanation:
    """What ``f.explain()`` returns, with the fields of Dynamo's ``ExplainOutput``:
    ``graph_count``, ``graph_break_count``, ``break_reasons``, ``ops_per_graph``, the
    ``traces`` with their reasons and ``out_guards`` (the guards of each trace)."""

    def __init__(self, fn):
        traces = list(fn.traces)
        graphs = [t for t in traces if t.plan is not None]
        self.graphs = [t.graph for t in graphs]
        self.graph_count = len(graphs)
        self.break_reasons = [b for t in traces for b in t.breaks]
        self.graph_break_count = len(self.break_reasons)
        self.ops_per_graph = [[n.op_name for n in g.nodes if n.kind == "op"]
                              for g in self.graphs]
        self.out_guards = [g for t in traces for g in t.guards]
        self.traces = traces
        self.name = fn.name

    def __str__(self):
        lines = [f"lk.compile {self.name}", f"Graph Count: {self.graph_count}",
                 f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {sum(len(ops) for ops in self.ops_per_graph)}"]
        if self.break_reasons:
            lines.append("Break Reasons:")
            for i, b in enumerate(self.break_reasons, 1):
                lines += [f"  Break Reason {i}:", f"    Reason: {b.reason}"]
                if b.source:
                    lines.append(f"    User Stack: {source_text(b.source)}")
        lines.append("Traces:")
        for t in self.traces:
            what = "eager (graph break)" if t.breaks else \
                "eager (cache size limit)" if t.plan is None else f"{len(t.graph)} nodes"
            n = len(t.guards)
            lines.append(f"  trace {t.number}: {t.reason} -> {what}, "
                         f"{n} guard{'' if n == 1 else 's'}")
        return "\n".join(lines)

    __repr__ = __str__


class Compiled(Function):
    """A function compiled by ``lk.compile`` (see the module's docstring). ``f.traces``,
    ``f.breaks``, ``f.explain()``; ``f.fn`` is the original function."""

    _breaks = True
    _grad_keyed = True
    _warn_traces = False

    def __init__(self, fn, name=None, fullgraph=False, backend="inductor", mode=None,
                 options=None, dynamic=None):
        super().__init__(fn, name)
        self.fullgraph = bool(fullgraph)
        self.backend, self.mode, self.options, self.dynamic = backend, mode, options, dynamic
        self._passes = [] if backend in _UNOPTIMISED else None
        self._warned_limit = False
        _all.add(self)

    def __repr__(self):
        return f"<lk.compile {self.name}: {len(self.traces)} trace(s), " \
               f"{len(self.breaks)} graph break(s)>"

    def _like(self, fn):
        return Compiled(fn, self.name, self.fullgraph, self.backend, self.mode, self.options,
                        self.dynamic)

    @property
    def breaks(self):
        """Every graph break so far (``Break``: reason, user's line, trace)."""
        return [b for t in self.traces for b in t.breaks]

    def explain(self):
        """What was captured and where it broke, as Dynamo's ``explain`` tells it
        (an ``Explanation``; ``print`` it)."""
        return Explanation(self)

    def reset(self):
        """Forget every trace (``lk.compiler.reset()`` does it for all compiled functions)."""
        with self._lock:
            self.traces, self._cache, self._by_signature, self._blame = [], {}, {}, {}
            self._warned_limit = False

    # ---- tracing ---------------------------------------------------------------------------
    def _retrace(self, key, args, kwargs, last, failed):
        return self._trace(key, args, kwargs, reason=last.guards.reason())

    def _trace(self, key, args, kwargs, reason=None, assume_none=True):
        limit = config._state["cache_size_limit"]
        if len(self.traces) >= limit:
            self._warn_limit_once(reason or self._explain(key, args, kwargs))
            return _EAGER
        breaking.depth += 1
        try:
            return super()._trace(key, args, kwargs, reason, assume_none)
        except Exception as exc:
            if self._watch is not None:
                self._watch.restore_random()      # the eager call draws what the trace drew
            if self.fullgraph and isinstance(exc, TracingError):
                brk = _break_of(exc, 0)
                raise GraphBreak(
                    f"lk.compile(fullgraph=True) {self.name}: {brk.reason}\n  at "
                    f"{source_text(brk.source)}\nWithout fullgraph=True this call would run "
                    f"eagerly.") from exc
            if self.fullgraph:
                raise
            return self._broken(key, reason or self._explain(key, args, kwargs), exc)
        finally:
            breaking.depth -= 1
            self._recorder = self._watch = None

    def _broken(self, key, reason, exc):
        """A trace that ended in a graph break: an entry for the signature (with the guards of
        what the trace read before it broke) whose calls run eagerly."""
        trace = Trace(len(self.traces) + 1, key, None, reason)
        trace.breaks = [_break_of(exc, trace.number)]
        if self._recorder is not None:
            trace.guards = self._recorder.result()
        self.traces.append(trace)
        self._cache[key] = trace
        self._by_signature.setdefault(key, []).append(trace)
        return trace

    def _warn_limit_once(self, reason):
        if self._warned_limit:
            return
        self._warned_limit = True
        code = getattr(getattr(self.fn, "__func__", self.fn), "__code__", None)
        where = f" ({code.co_filename}:{code.co_firstlineno})" if code else ""
        warnings.warn(
            f"lk.compile hit config.cache_size_limit ({config._state['cache_size_limit']})\n"
            f"   function: {self.name!r}{where}\n   last reason: {reason}\n"
            f"Calls that fit none of its {len(self.traces)} traces run eagerly from now on. "
            f"See {self.name}.explain() for every trace's reason; a value that keeps "
            f"changing is better passed as a tensor.", stacklevel=_user_stacklevel())

    def _in_trace(self, graph, mode, out_leaves, arguments):
        return add_backward(graph, mode, out_leaves, arguments)

    def _split(self, trace, spec, fetches):
        saved, trace.joint = split(trace.raw_graph, spec, fetches, self.name, self._passes)
        return saved


class _Eager:
    """The entry for calls past the cache size limit: they run eagerly."""

    plan = raw_graph = None
    breaks = ()
    number = 0

    class guards:
        @staticmethod
        def holds():
            return False


_EAGER = _Eager()


def _break_of(exc, number):
    """The ``Break`` for an exception raised while tracing: its short reason, and the user's
    innermost line in its traceback."""
    reason = getattr(exc, "what", None)
    if reason is None:
        text = str(exc).strip().split("\n")[0]
        reason = text if isinstance(exc, GraphBreak) else f"{type(exc).__name__}: {text}"
    source = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if not frame.filename.startswith(_LABKIT):
            source = (frame.filename, frame.lineno)
    return Break(reason, source, number)


def disable(fn=None, recursive=True, *, reason=None):
    """``fn`` runs eagerly: inside a function ``lk.compile`` traces, calling it is a graph
    break (the call runs eagerly); elsewhere it is ``fn``. PyTorch's
    ``torch.compiler.disable``; ``lk.compiler.disable(compiled)`` gives back the original.

    >>> import labkit as lk
    >>> @lk.compiler.disable
    ... def log(x):
    ...     return x
    >>> f = lk.compile(lambda x: log(x) * 2.0)
    >>> f(lk.ones(1)).tolist(), len(f.breaks)
    ([2.0], 1)
    """
    if fn is None:
        return lambda f: disable(f, recursive, reason=reason)
    if isinstance(fn, Compiled):
        return fn.fn
    why = f" ({reason})" if reason else ""
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))

    def run_eagerly(*args, **kwargs):
        if breaking.depth:
            raise GraphBreak(f"call of {name}, which lk.compiler.disable keeps out of "
                             f"graphs{why}")
        return fn(*args, **kwargs)
    try:
        run_eagerly = functools.wraps(fn)(run_eagerly)
    except (AttributeError, TypeError):
        pass
    run_eagerly._lk_disabled = True
    return run_eagerly


def reset():
    """Forget the traces of every compiled function (``torch._dynamo.reset()``)."""
    for f in list(_all):
        f.reset()


def is_compiling():
    """Whether ``lk.compile`` is tracing on this thread (``torch.compiler.is_compiling``)."""
    return breaking.depth > 0

