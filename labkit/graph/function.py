"""``lk.function``: trace a Python function into a graph once per input signature, then run the
compiled plan.

The signature of a call is, for each tensor argument, its shape, dtype, device and requires_grad,
and for every other argument its Python value. A call with a new signature traces again, and the
retrace explains itself: ``f.traces`` lists every trace with what changed (``x: shape (32, 10) ->
(16, 10)``), and a function that retraces often warns, naming the calling line.

Every other Python value the trace read is guarded (``labkit.graph.guards``): globals, closure
variables, the attributes and dict entries the code reads, the attributes, mode and hooks of
the modules it calls, an optimiser's flags. A call that finds one changed uses a trace made with
the values it finds, or traces again, the reason naming the value (``global scale: 2.0 ->
3.0``). A signature keeps ``lk.config.set_cache_size_limit`` traces (8); past that the oldest is
dropped, the value that keeps changing is warned about by name, and tracing goes on (values are
never frozen; ``lk.compile`` runs such calls eagerly instead). An optimiser's numbers (``lr``)
are inputs of the graph, not guards: setting them never retraces.

The Python body runs once per trace, so what plain Python or NumPy computes there is fixed in the
graph: a trace that draws from NumPy's or Python's random generators, or reads an outside
tensor's value into Python (``t.item()``, ``float(t)``), warns (``FrozenValueWarning``) and
``trace.frozen`` lists every value it fixed (``labkit.graph.frozen``).

Tensors the function uses from outside (a model's parameters, optimiser slots) are captured by
reference: each run reads their current values, and ``assign`` ops inside the function update them
in place. ``loss.backward()`` inside the function puts the backward pass into the graph; the
gradients it gives to outside tensors become ``.grad`` after each run, as eagerly.

Each trace is optimised by the graph passes (``labkit.graph.passes``: pruning, constant folding,
CSE, dead-code elimination, elementwise fusion, buffer reuse) before its plan is compiled; the
results and ``.grad`` s are the outputs the passes keep. ``f.graph(*args)`` is the optimised
graph, ``f.graph(*args, passes=[])`` the raw trace; ``lk.config.disable_pass(name)`` switches a
pass off (traces are re-optimised, not retraced).

A trace that spans devices, or asks for one (``with lk.device(...)`` or ``lk.colocate_with``
inside the function), is placed first (the ``placement`` pass: every node gets a device and a
reason, ``f.graph(*args).placement()``), and its plan is partitioned into one part per device,
joined by Send/Recv pairs. A ``with lk.device(...)`` around a *call* does not place the
function's ops: put it inside the function.

Under ``lk.profile()`` each call runs an instrumented plan (one event per op, on the device and
thread that ran it) and marks the end of a profiler step.
"""
import functools
import inspect
import sys
import threading
import warnings
import weakref

from .. import config
from ..autodiff import trees
from ..autodiff.batched import BatchedTensor, VmapMode, vmap
from ..devices.device import no_device_request
from ..errors import GraphError, LabkitError, api_boundary, describe_named, source_text, user_frame
from ..profiler.profile import _active as _profiles
from ..tensor import autocast, dispatch
from ..tensor.tensor import Tensor
from .capture import current_graph, enter_graph, restore_attributes
from .compile import compile_graph
from .executor import feed_array
from .frozen import FrozenWatch
from .guards import GuardRecorder, Guards
from .ir import PLACEHOLDER, Graph
from .passes import run_passes
from .symbolic import SymbolicTensor

def _is_tensor(obj):
    return isinstance(obj, Tensor)


def _flatten(obj, leaves, path="", paths=None):
    """Structure spec of ``obj`` (hashable: Python values in it are part of a trace's
    signature); tensors go to ``leaves`` (their paths to ``paths``)."""
    return trees.flatten_into(obj, leaves, _is_tensor, trees.value, path, paths)


def _tensor_spec(t):
    return (t.shape, t.dtype.name, t.device.name, t._requires_grad)


def _describe_spec(spec):
    shape, dtype, device, rg = spec
    return f"shape {shape}, {dtype}, {device}{', requires_grad' if rg else ''}"


_NO_GUARDS = Guards(())


class Trace:
    """One trace of a function: its signature, graph, compiled plan, and why it was made;
    ``guards``: the Python values it read and baked in, checked before each reuse."""

    def __init__(self, number, signature, graph, reason):
        self.number = number
        self.signature = signature
        self.graph = graph         # the optimised graph the plan runs (see raw_graph)
        self.raw_graph = graph     # the graph as traced, before the passes
        self.reason = reason
        self.plan = None
        self.passes_version = None     # lk.config's pass settings the plan was made with
        self.raw_feeds = []            # placeholders of raw_graph, one per tensor argument
        self.out_spec = None
        self.grad_outputs = []     # outside tensors whose .grad each run sets
        self.grad_clears = []      # tensors whose .grad the function sets to None
        self.grad_guards = []      # tensors whose .grad this trace assumes is None at a call
        self.accumulating = None   # the trace for calls that find a guarded .grad set
        self.guards = _NO_GUARDS   # the Python values it read (labkit/graph/guards.py)
        self.argument_grads = []   # (position, replaces, fetched): .grad of tensor arguments
        self.n_argument_grads = 0  # how many of those the plan fetches (after grad_outputs)
        self.attribute_outputs = []    # (weakref to a module, name, device): set after each run
        self.frozen = []           # FrozenValue: what the trace fixed (labkit/graph/frozen.py)
        self.n_results = 0         # how many of the plan's fetches are the function's results
        self.joint = None          # lk.compile: how the eager tape differentiates a call
        self.breaks = []           # lk.compile: why this signature runs eagerly (GraphBreak)

    def __repr__(self):
        fixed = f"; {len(self.frozen)} value(s) fixed at trace time, see .frozen" \
            if self.frozen else ""
        return f"<trace {self.number}: {self.reason}{fixed}>"


class Function:
    """A Python function captured into graphs. Make one with ``@lk.function``.

    >>> import labkit as lk
    >>> @lk.function
    ... def f(x):
    ...     return (x * 2.0).sum()
    >>> f(lk.ones(3)).item()
    6.0
    >>> len(f.traces)
    1
    """

    def __init__(self, fn, name=None):
        functools.update_wrapper(self, fn, updated=())
        self.fn = fn
        self.name = name or getattr(fn, "__name__", type(fn).__name__)
        self.traces = []
        self._cache = {}
        self._by_signature = {}   # every trace of a signature (one per set of module modes)
        self._lock = threading.RLock()   # one trace per signature when threads call at once
        self._batched = {}               # lk.vmap of this function, per way of batching
        self._blame = {}                 # guarded value -> retraces it caused
        self._recorder = self._watch = None     # of the trace being made
        try:
            self._params = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            self._params = []

    def __repr__(self):
        return f"<lk.function {self.name}: {len(self.traces)} trace(s)>"

    def __get__(self, obj, objtype=None):   # used as a method: one Function per instance
        if obj is None:
            return self
        bound = obj.__dict__.get(f"__lk_function_{self.name}")
        if bound is None:
            bound = self._like(self.fn.__get__(obj, objtype))
            obj.__dict__[f"__lk_function_{self.name}"] = bound
        return bound

    def _like(self, fn):
        """A function of this kind, with these options, capturing ``fn``."""
        return Function(fn, self.name)

    # ---- calling ---------------------------------------------------------------------------
    @api_boundary
    def __call__(self, *args, **kwargs):
        if config._state["functions_eagerly"] or current_graph() is not None:
            return self.fn(*args, **kwargs)    # (called while tracing another: traced inline)
        if type(dispatch._state.mode) is VmapMode:
            return self._call_batched(args, kwargs)
        leaves = []
        structure = _flatten((args, kwargs), leaves)
        key = _key(structure, leaves, self._grad_keyed)
        trace = self._cache.get(key)
        if trace is None or not trace.guards.holds():
            with self._lock:
                trace = self._lookup(key, args, kwargs)
        if trace.plan is None:            # lk.compile: a graph break, or past the limit
            return self.fn(*args, **kwargs)
        if trace.passes_version != config._state["passes_version"]:
            self._optimize(trace)
        if trace.grad_guards:
            for t in trace.grad_guards:
                if t._grad is not None:
                    trace = self._accumulating(trace, t, args, kwargs)
                    if trace.plan is None:
                        return self.fn(*args, **kwargs)
                    break
        if _profiles:
            out = self._run(trace, leaves)
            _profiles[-1].step()          # each call of a captured function is one step
            return out
        return self._run(trace, leaves)

    def _call_batched(self, args, kwargs):
        """A call inside lk.vmap: the function is captured vmapped (once per way its arguments
        are batched, then per signature as usual) and runs on the whole batch."""
        mode = dispatch._state.mode
        leaves = []
        structure = _flatten((args, kwargs), leaves)
        bdims = tuple(t._bdim if type(t) is BatchedTensor and t._level is mode else None
                      for t in leaves)
        with dispatch.lowered(mode.below):
            if all(d is None for d in bdims):
                return self(*args, **kwargs)
            key = (structure, bdims)
            batched = self._batched.get(key)
            if batched is None:
                def per_example(*tensors):
                    a, k = trees.unflatten(structure, tensors)
                    return self.fn(*a, **k)
                per_example.__name__ = self.name
                batched = self._batched[key] = Function(vmap(per_example, in_axes=bdims),
                                                        name=f"vmap({self.name})")
            out = batched(*[t._value if d is not None else t for t, d in zip(leaves, bdims)])
        out_leaves = []
        spec = trees.flatten_into(out, out_leaves, _is_tensor, trees.value)
        return trees.unflatten(spec, [BatchedTensor._wrap(t, 0, mode)
                                           for t in out_leaves])

    def _run(self, trace, leaves):
        arrays = [t._data if t._data is not None else feed_array(n, t)
                  for t, n in zip(leaves, trace.plan.feed_nodes)]
        results = trace.plan(*arrays)
        n_out = trace.n_results
        for tensor, array in zip(trace.grad_outputs, results[n_out:]):
            tensor._grad = Tensor._make(array, tensor._device)
        if trace.argument_grads:
            first = n_out + len(trace.grad_outputs)
            self._set_argument_grads(
                trace, leaves, iter(results[first:first + trace.n_argument_grads]))
        if trace.attribute_outputs:
            first = n_out + len(trace.grad_outputs) + trace.n_argument_grads
            for (ref, name, device), array in zip(trace.attribute_outputs, results[first:]):
                owner = ref()
                if owner is not None:
                    setattr(owner, name, Tensor._make(array, device))
        for tensor in trace.grad_clears:
            tensor._grad = None
        outs = [Tensor._make(a, n.device) for a, n in
                zip(results[:n_out], trace.plan.fetch_nodes)]
        if trace.joint is not None:
            trace.joint.tie(outs, leaves, results)
        return trees.unflatten(trace.out_spec, outs)

    @staticmethod
    def _set_argument_grads(trace, leaves, arrays):
        """``.grad`` of the tensor arguments the function differentiated, as eagerly: added to
        a gradient the argument already has, unless the function set or cleared it first."""
        for position, replaces, fetched in trace.argument_grads:
            leaf = leaves[position]
            if not fetched:
                leaf._grad = None
                continue
            g = Tensor._make(next(arrays), leaf._device)
            leaf._grad = g if replaces or leaf._grad is None else leaf._grad + g

    # ---- tracing -----------------------------------------------------------------------------
    def _lookup(self, key, args, kwargs):
        """The trace for a call with signature ``key``: one made for it whose guards hold (the
        Python values it read are unchanged), or a new one, whose reason names what changed."""
        cached = self._cache.get(key)
        if cached is not None and cached.guards.holds():
            return cached
        earlier = self._by_signature.get(key, ())
        for trace in reversed(earlier):
            if trace.guards.holds():
                self._cache[key] = trace
                return trace
        if not earlier:
            return self._trace(key, args, kwargs)
        last = cached or earlier[-1]
        return self._retrace(key, args, kwargs, last, last.guards.failed())

    def _retrace(self, key, args, kwargs, last, failed):
        """Trace again for a signature whose traces' guards no longer hold (``failed``: the
        guards of ``last`` that changed). Traces of one signature beyond the cache size limit
        are dropped (oldest first); a value that caused that many retraces is warned about,
        once, by name. (``lk.compile`` runs such calls eagerly instead.)"""
        limit = config._state["cache_size_limit"]
        for guard, _ in failed:
            n = self._blame[guard.what] = self._blame.get(guard.what, 0) + 1
            if n == limit:
                self._warn_limit(guard, last)
        earlier = self._by_signature.get(key, [])
        while len(earlier) >= limit:
            _release(earlier.pop(0))
        self._guard_retrace = True     # (its own warning above, not the count of traces)
        try:
            return self._trace(key, args, kwargs, reason=last.guards.reason())
        finally:
            self._guard_retrace = False

    def _warn_limit(self, guard, last):
        where = f" (read at {source_text(guard.where)})" if guard.where else ""
        warnings.warn(
            f"lk.function {self.name} has been traced {config._state['cache_size_limit']} times "
            f"because {guard.what}{where} keeps changing (latest: {last.guards.reason()}); each "
            f"trace builds and compiles a new graph. Pass the value as a tensor argument, or, "
            f"for an optimiser's hyperparameter, set param_groups[...] outside the function "
            f"(the captured step reads it as an input). lk.function keeps tracing for each new "
            f"value; see {self.name}.traces.", stacklevel=_user_stacklevel())

    def _paths(self, args, kwargs):
        leaves, paths = [], []
        names = self._params
        for i, a in enumerate(args):
            _flatten(a, leaves, names[i] if i < len(names) else f"args[{i}]", paths)
        for k, v in kwargs.items():
            _flatten(v, leaves, k, paths)
        return leaves, paths

    def _explain(self, key, args, kwargs):
        if not self.traces:
            return "first call"
        # compare with the closest earlier trace: the one whose signature differs least
        def distance(signature):
            struct, specs = signature[:2]
            if struct != key[0]:
                return (1, 0)
            return (0, sum(a != b for old, new in zip(specs, key[1]) for a, b in zip(old, new)))
        previous = min((t.signature for t in reversed(self.traces)), key=distance)
        if previous[:2] == key[:2] and previous[2:] != key[2:]:
            return _state_changes(dict(previous[2:]), dict(key[2:]))
        (old_struct, old_specs), (new_struct, new_specs) = previous[:2], key[:2]
        leaves, paths = self._paths(args, kwargs)
        if old_struct != new_struct:
            changes = _python_changes(old_struct, new_struct, self._params)
            if not changes:
                changes = ["the structure of the arguments changed (number of tensors or "
                           "nesting)"]
            return "; ".join(changes)
        changes = []
        for path, old, new in zip(paths, old_specs, new_specs):
            if old == new:
                continue
            parts = []
            for what, a, b in zip(("shape", "dtype", "device", "requires_grad"), old, new):
                if a != b:
                    parts.append(f"{what} {a} -> {b}")
            changes.append(f"{path}: {', '.join(parts)}")
        return "; ".join(changes) or "a new signature"

    def _accumulating(self, trace, tensor, args, kwargs):
        """The trace for a call that finds the ``.grad`` of ``tensor`` set although ``trace``
        assumed it None: traced once (per signature), reading every such ``.grad`` at run time
        and adding the new gradients to it."""
        if trace.accumulating is not None and not trace.accumulating.guards.holds():
            trace.accumulating = None       # made when some Python value was different
        if trace.accumulating is None:
            with self._lock:
                if trace.accumulating is None:
                    reason = (f"the .grad of {describe_named(tensor)} was None when trace "
                              f"{trace.number} was made and is set now: this trace adds the "
                              f"new gradients to it (gradient accumulation across calls)")
                    trace.accumulating = self._trace(trace.signature, args, kwargs,
                                                     reason=reason, assume_none=False)
        elif trace.accumulating.passes_version != config._state["passes_version"]:
            self._optimize(trace.accumulating)
        return trace.accumulating

    def _trace(self, key, args, kwargs, reason=None, assume_none=True):
        if reason is None:
            reason = self._explain(key, args, kwargs)
        graph = Graph(f"{self.name}#{len(self.traces) + 1}")
        leaves, paths = self._paths(args, kwargs)
        symbolic = {}
        with no_device_request(), FrozenWatch(self.name, strict=self._breaks) as watch, \
                GuardRecorder(self.fn) as recorder, enter_graph(graph) as mode:
            self._recorder, self._watch = recorder, watch   # for a trace that fails (lk.compile)
            try:
                mode.grads.assume_none = assume_none
                for position, (t, path) in enumerate(zip(leaves, paths)):
                    node = graph.add_node(PLACEHOLDER, None, (), {}, t.shape, t.dtype, t.device,
                                          name=path.replace("[", "_").replace("]", "")
                                          .replace("'", "") or "arg")
                    symbolic[id(t)] = SymbolicTensor._of(node, t._requires_grad)
                    mode.arguments[id(symbolic[id(t)])] = position
                sym_args = _substitute(args, symbolic)
                sym_kwargs = _substitute(kwargs, symbolic)
                result = self.fn(*sym_args, **sym_kwargs)
                out_leaves = []
                out_spec = _flatten(result, out_leaves)
                joint = self._in_trace(graph, mode, out_leaves, [symbolic[id(t)] for t in leaves])
            except BaseException:
                mode.grads.finish()        # outside tensors get their .grad back
                restore_attributes(mode)   # and modules their attributes
                raise
        trees.check_rebuildable(out_spec, f"lk.function {self.name}")
        fetches = []
        for t in out_leaves:
            if isinstance(t, SymbolicTensor):
                fetches.append(t.node)
            else:   # an outside tensor returned as is
                fetches.append(graph.capture(t))
        trace = Trace(len(self.traces) + 1, key, graph, reason)
        trace.guards = recorder.result()
        sets, trace.grad_clears = mode.grads.finish()
        trace.frozen = watch.report(graph, trace.number)
        trace.grad_guards = mode.grads.guards
        for tensor, value in sets:
            trace.grad_outputs.append(tensor)
            fetches.append(value.node if isinstance(value, SymbolicTensor)
                           else graph.capture(value))
        for position, (value, replaces) in sorted(mode.argument_grads.items()):
            if value is None:
                trace.argument_grads.append((position, replaces, False))
                continue
            trace.argument_grads.append((position, replaces, True))
            trace.n_argument_grads += 1
            fetches.append(value.node if isinstance(value, SymbolicTensor)
                           else graph.capture(value))
        for owner, name, _ in mode.attribute_writes.values():
            value = getattr(owner, name, None)
            if isinstance(value, SymbolicTensor) and value.node.graph is graph:
                trace.attribute_outputs.append((weakref.ref(owner), name, value.device))
                fetches.append(value.node)
        trace.out_spec = out_spec
        trace.n_results = len(out_leaves)
        trace.raw_feeds = [symbolic[id(t)].node for t in leaves]
        if joint is not None:
            fetches += self._split(trace, joint, fetches)
        graph.outputs = fetches     # results and .grads: what the passes must keep
        self._optimize(trace)
        self.traces.append(trace)
        if assume_none:
            self._cache[key] = trace
            self._by_signature.setdefault(key, []).append(trace)
        limit = config._state["retrace_warning"]
        if len(self.traces) == limit and self._warn_traces and not self._guard_retrace:
            warnings.warn(
                f"lk.function {self.name} has been traced {limit} times; each trace builds and "
                f"compiles a new graph. Latest reason: {reason}. See {self.name}.traces; pass "
                f"tensors of one shape, or make changing Python values tensors.",
                stacklevel=3)
        return trace

    _breaks = False        # lk.compile: a value read into Python breaks the graph (frozen.py)
    _warn_traces = True    # warn at config retrace_warning traces (lk.compile has its limit)
    _guard_retrace = False
    _grad_keyed = False    # lk.compile: grad mode is part of the signature (a trace may be
    _passes = None         # differentiable); the passes: None for the default pipeline

    def _in_trace(self, graph, mode, out_leaves, arguments):
        """Called at the end of a trace, still capturing (``lk.compile`` adds the backward pass
        of a differentiable call here); returns what ``_split`` needs, or None."""
        return None

    def _optimize(self, trace):
        """Compile the trace's raw graph with the enabled passes (``labkit.graph.compile``):
        ``trace.graph`` is the optimised graph, ``trace.plan`` what runs."""
        trace.graph, trace.plan = compile_graph(
            trace.raw_graph, trace.raw_graph.outputs, trace.raw_feeds, passes=self._passes,
            include_stateful=True, what=f"lk.function {self.name}")
        trace.passes_version = config._state["passes_version"]

    # ---- inspection ----------------------------------------------------------------
    def graph(self, *args, passes=None, **kwargs):
        """The graph for these arguments (traced now if this signature is new): the optimised
        one that runs, or with ``passes=[]`` the raw trace, or with ``passes=["cse", ...]`` the
        raw trace after just those passes. ``.history`` says what each pass did.

        >>> import labkit as lk
        >>> @lk.function
        ... def f(x):
        ...     return (x.exp() + x.exp()).sum()
        >>> len(f.graph(lk.ones(3), passes=[])), len(f.graph(lk.ones(3)))
        (5, 4)
        """
        leaves = []
        structure = _flatten((args, kwargs), leaves)
        key = _key(structure, leaves, self._grad_keyed)
        trace = self._lookup(key, args, kwargs)
        if trace.raw_graph is None:
            raise GraphError(f"{self.name} runs eagerly for these arguments (see "
                             f"{self.name}.traces[{trace.number - 1}].breaks): it has no graph")
        if passes is None:
            if trace.passes_version != config._state["passes_version"]:
                self._optimize(trace)
            return trace.graph
        return run_passes(trace.raw_graph, passes)

    def explain_traces(self):
        """One line per trace: its number and why it was made."""
        return "\n".join(f"trace {t.number}: {t.reason}" for t in self.traces)


def _key(structure, leaves, grad_keyed=False):
    """The cache key of a call: its signature, then the state the trace depends on as
    ``(name, value)`` pairs: the autocast state when autocast is on (a trace made inside an
    autocast region holds its casts), and for ``lk.compile`` whether grad mode is on (a trace
    made with it is differentiable)."""
    key = (structure, tuple(_tensor_spec(t) for t in leaves))
    amp = autocast.key()
    if amp is not None:
        key += (("autocast", amp),)
    if grad_keyed:
        key += (("grad", dispatch._state.grad_enabled),)
    return key


def _state_changes(old, new):
    """Why a signature's state differs: ``autocast changed: off -> bfloat16 on cpu``, ``grad
    mode on -> off``."""
    parts = []
    if old.get("autocast") != new.get("autocast"):
        parts.append(f"autocast changed: {_autocast_text(old.get('autocast'))} -> "
                     f"{_autocast_text(new.get('autocast'))}")
    if old.get("grad") != new.get("grad"):
        parts.append(f"grad mode {'on' if old.get('grad') else 'off'} -> "
                     f"{'on' if new.get('grad') else 'off'}")
    return "; ".join(parts)


def _autocast_text(amp):
    if amp is None:
        return "off"
    cpu, gpu = amp
    return ", ".join(f"{d} on {t}" for t, d in (("cpu", cpu), ("gpu", gpu)) if d) or "off"


def _release(trace):
    """Forget a trace's graphs and plan (dropped from a full cache; ``f.traces`` keeps its
    number and reason)."""
    trace.plan = trace.graph = trace.raw_graph = trace.accumulating = None
    trace.joint = None


def _user_stacklevel():
    """The ``stacklevel`` that makes a warning point at the user's line that called in."""
    return user_frame(sys._getframe(1))[1] + 1


def _substitute(obj, symbolic):
    if isinstance(obj, Tensor):
        made_of = trees.tensor_parts(obj)
        if made_of is not None:       # a DTensor argument: its local tensors become symbolic
            parts, context = made_of
            return type(obj).__tensor_unflatten__([_substitute(p, symbolic) for p in parts],
                                                  context)
        return symbolic.get(id(obj), obj)
    if isinstance(obj, list):
        return [_substitute(v, symbolic) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_substitute(v, symbolic) for v in obj)
    if isinstance(obj, dict):
        return {k: _substitute(v, symbolic) for k, v in obj.items()}
    return obj


def _python_changes(old, new, names):
    """Which Python-valued arguments changed between two structures, as readable lines."""
    changes = []
    (old_args, old_kwargs), (new_args, new_kwargs) = trees.items(old), trees.items(new)
    old_args, new_args = trees.items(old_args), trees.items(new_args)
    if len(old_args) != len(new_args):
        return [f"number of positional arguments {len(old_args)} -> {len(new_args)}"]
    for i, (a, b) in enumerate(zip(old_args, new_args)):
        if a != b:
            name = names[i] if i < len(names) else f"args[{i}]"
            changes.append(f"{name}: {_value_text(a)} -> {_value_text(b)}")
    old_d, new_d = trees.items(old_kwargs), trees.items(new_kwargs)
    for k in sorted(set(old_d) | set(new_d), key=str):
        if old_d.get(k) != new_d.get(k):
            changes.append(f"{k}: {_value_text(old_d.get(k))} -> {_value_text(new_d.get(k))}")
    return changes


def _value_text(spec):
    if spec is None:
        return "(absent)"
    if spec == trees.LEAF:
        return "a tensor"
    if spec[0] == "value":
        return f"Python value {spec[2]!r}"
    if spec[0] == "object":
        return "an object"
    if spec[0] == trees.PARTS:
        return f"a {spec[1].__name__} laid out as {spec[2]}"
    return f"a {spec[0].__name__}"


def function(fn=None, *, name=None):
    """Capture ``fn`` into a graph on first call per input signature; then run the compiled plan.

    Use as ``@lk.function``, ``lk.function(fn)``, ``lk.function(model)`` (a Module) or
    ``lk.function(obj.method)``. ``f.traces`` explains every trace; ``f.graph(*args)`` returns
    the captured graph; ``lk.config.run_functions_eagerly(True)`` runs every function eagerly.
    """
    if fn is None:
        return lambda f: Function(f, name)
    return Function(fn, name)
