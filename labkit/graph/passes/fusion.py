"""Elementwise fusion: a chain (or tree) of elementwise ops becomes one ``fused`` node whose
kernel makes one pass over the data, with no intermediate arrays.

The fused node carries a ``FusedProgram``: the steps it replaces, over its inputs ``x0, x1...``
and literals. Its kernel evaluates the program

- on the CPU as one numexpr expression (numexpr compiles it to a small bytecode program run
  block by block in cache, so intermediates never reach memory), and
- on a GPU as one ``cupy.ElementwiseKernel`` (generated CUDA C, one statement per step, built
  once per program).

Fusable ops: add, sub, mul, div, neg, exp, log, sqrt, tanh, abs, maximum, minimum, where, relu,
sigmoid, pow with a literal exponent, and the comparisons, on float32/float64 values (bool for
conditions and comparison results), with broadcasting. A group grows backwards from its last op
over producers whose every user is in the group, that are not outputs, that live on the same
device, and that read no mutable value (a capture or a view of it) across a side effect. On the
CPU a value the numexpr text would name twice (``relu`` and ``maximum`` name their argument twice)
stays an input, so nothing is computed twice.

Literals become typed variables of the program (a float32 expression stays float32: numexpr
would compute ``x * 0.5`` in float64, as it types a Python float as a double).

When it pays: one numexpr call costs about 0.7 µs and then about 0.33 ns per element per op on
these CPUs, NumPy about 0.3 µs per op plus 0.08 ns per element per op (its loops use wider
vector instructions). So fusing pays for small tensors (up to about a thousand elements), where
per-call overhead dominates, and costs time on large ones. On the CPU a group is fused only when
this cost model says it is faster (``lk.config.set_cpu_fusion("always")`` fuses every group,
e.g. to see what fusion would do); the history notes each group left alone and why. On a GPU
every group is fused (one kernel launch instead of many).
"""
import functools
import threading

import numpy as np

from ... import config
from ...tensor.dtypes import as_dtype
from ...tensor.op import op
from ...tensor.ops import elementwise as ew
from ...tensor.shape_rules import broadcast_shapes
from ..node import Node
from .base import (FRESH_OPS, Rewriter, epochs, graph_pass, mutable_values, output_indices,
                   reads_mutable, users)

_numexpr = []            # [module or None] once looked for; imported on first use (~0.15 s)


def load_numexpr():
    """The numexpr module (the CPU evaluator), or None when it is not installed."""
    if not _numexpr:
        try:
            import numexpr
            import numexpr.necompiler   # noqa: F401
        except ImportError:     # pragma: no cover
            numexpr = None
        _numexpr.append(numexpr)
    return _numexpr[0]

MAX_STEPS = 64           # numexpr parses the text with Python's parser: nesting stays < 200
MAX_ARGS = 32            # inputs plus literals of one program

# op -> (name in programs, numexpr template, CUDA template); {0}, {1}... are the arguments, {T}
# the C type of the step's result.
_ARITH = {
    ew.add: ("add", "({0} + {1})", "{0} + {1}"),
    ew.sub: ("sub", "({0} - {1})", "{0} - {1}"),
    ew.mul: ("mul", "({0} * {1})", "{0} * {1}"),
    ew.div: ("div", "({0} / {1})", "({T}){0} / ({T}){1}"),
    ew.pow: ("pow", "({0} ** {1})", "pow(({T}){0}, ({T}){1})"),
    ew.neg: ("neg", "(-{0})", "-{0}"),
    ew.exp: ("exp", "exp({0})", "exp(({T}){0})"),
    ew.log: ("log", "log({0})", "log(({T}){0})"),
    ew.sqrt: ("sqrt", "sqrt({0})", "sqrt(({T}){0})"),
    ew.tanh: ("tanh", "tanh({0})", "tanh(({T}){0})"),
    ew.abs: ("abs", "abs({0})", "fabs(({T}){0})"),
    ew.sigmoid: ("sigmoid", "(1 / (1 + exp(-{0})))",
                 "({0} >= 0 ? ({T})1 / (({T})1 + exp(-({T}){0})) "
                 ": exp(({T}){0}) / (({T})1 + exp(({T}){0})))"),
    # NaN-propagating like NumPy's maximum/minimum (numexpr's own compute in float64)
    ew.relu: ("relu", "where({0} < 0, 0, {0})", "(({0} > 0 || {0} != {0}) ? ({T}){0} : ({T})0)"),
    ew.maximum: ("maximum", "where(({0} < {1}) | ({1} != {1}), {1}, {0})",
                 "(({0} > {1} || {0} != {0}) ? ({T}){0} : ({T}){1})"),
    ew.minimum: ("minimum", "where(({0} > {1}) | ({1} != {1}), {1}, {0})",
                 "(({0} < {1} || {0} != {0}) ? ({T}){0} : ({T}){1})"),
    ew.where: ("where", "where({0}, {1}, {2})", "({0} ? ({T}){1} : ({T}){2})"),
}
_COMPARE = {
    ew.eq: ("eq", "({0} == {1})", "{0} == {1}"),
    ew.ne: ("ne", "({0} != {1})", "{0} != {1}"),
    ew.lt: ("lt", "({0} < {1})", "{0} < {1}"),
    ew.le: ("le", "({0} <= {1})", "{0} <= {1}"),
    ew.gt: ("gt", "({0} > {1})", "{0} > {1}"),
    ew.ge: ("ge", "({0} >= {1})", "{0} >= {1}"),
}
FUSABLE = {**_ARITH, **_COMPARE}
_BY_NAME = {name: (o, ne_t, c_t) for o, (name, ne_t, c_t) in FUSABLE.items()}
_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**", "eq": "==", "ne": "!=",
          "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_PREC = {"eq": 1, "ne": 1, "lt": 1, "le": 1, "gt": 1, "ge": 1, "add": 2, "sub": 2, "mul": 3,
         "div": 3, "pow": 5}
_FLOATS = ("float32", "float64")
_NE_TYPE = {"float32": float, "float64": np.float64, "bool_": bool}   # numexpr's type names
_C_TYPE = {"float32": "float", "float64": "double", "bool_": "bool"}
_CUPY_TYPE = {"float32": "float32", "float64": "float64", "bool_": "bool"}


def _as_evaluated(step):
    """A step as the generated code evaluates it: ``x ** 0.5`` as ``sqrt(x)``, as NumPy and
    PyTorch compute it (there ``(-inf) ** 0.5`` is NaN and ``(-0.) ** 0.5`` is -0., where C's
    and numexpr's ``pow`` give +inf and +0.); any other step as it is."""
    name, args, dtype = step
    if name == "pow" and args[1][0] == "c" and float(args[1][1]) == 0.5:
        return "sqrt", args[:1], dtype
    return step


# ---- the program a fused node runs ------------------------------------------------------------
class FusedProgram:
    """What a fused node computes: ``steps``, each ``(op name, args, dtype name)``, where an arg
    is ``("x", i)`` (input i), ``("t", j)`` (the result of step j) or ``("c", value, dtype)``
    (a literal); the last step is the result. ``in_dtypes``: the inputs' dtype names.

    >>> p = FusedProgram((("mul", (("x", 0), ("c", 2.0, "float32")), "float32"),
    ...                   ("exp", (("t", 0),), "float32")), ("float32",))
    >>> p
    <exp(x0 * 2.0)>
    >>> import numpy as np
    >>> p.run_cpu((np.zeros(2, np.float32),)).tolist()
    [1.0, 1.0]
    """

    __slots__ = ("steps", "in_dtypes", "_hash", "_numexpr", "_cuda", "_lock")

    def __init__(self, steps, in_dtypes):
        self.steps = tuple(steps)
        self.in_dtypes = tuple(in_dtypes)
        self._hash = hash((self.steps, self.in_dtypes))
        self._numexpr = None
        self._cuda = {}
        self._lock = threading.Lock()

    @property
    def out_dtype(self):
        return as_dtype(self.steps[-1][2])

    @property
    def ops(self):
        """The op names of the steps, in order."""
        return [s[0] for s in self.steps]

    def __eq__(self, other):
        return (isinstance(other, FusedProgram) and self.steps == other.steps
                and self.in_dtypes == other.in_dtypes)

    def __hash__(self):
        return self._hash

    def __len__(self):
        return len(self.steps)

    def __repr__(self):
        text = self.expression()
        if len(text) > 72:
            text = f"{len(self.steps)} ops: {text[:56]}..."
        return f"<{text}>"

    def _evaluated(self):
        """The steps as the generated code (numexpr's and CUDA's) evaluates them."""
        return [_as_evaluated(step) for step in self.steps]

    def _render(self, fmt_step, fmt_arg):
        texts = []
        for name, args, dtype in self._evaluated():
            parts = [texts[a[1]] if a[0] == "t" else fmt_arg(a) for a in args]
            texts.append(fmt_step(name, parts, dtype))
        return texts[-1]

    def expression(self):
        """The program as one readable formula, e.g. ``relu(x0 + x1) * 0.5``."""
        texts = []              # (text, precedence) of each step
        for name, args, _ in self.steps:
            parts = [texts[a[1]] if a[0] == "t" else
                     (f"x{a[1]}" if a[0] == "x" else repr(a[1]), 9) for a in args]
            if name in _INFIX:
                prec = _PREC[name]
                lp, rp = (prec + 1, prec) if name == "pow" else (prec, prec + 1)
                left = parts[0][0] if parts[0][1] >= lp else f"({parts[0][0]})"
                right = parts[1][0] if parts[1][1] >= rp else f"({parts[1][0]})"
                texts.append((f"{left} {_INFIX[name]} {right}", prec))
            elif name == "neg":
                inner = parts[0][0] if parts[0][1] >= 5 else f"({parts[0][0]})"
                texts.append((f"-{inner}", 4))
            else:
                texts.append((f"{name}({', '.join(t for t, _ in parts)})", 9))
        return texts[-1][0]

    # ---- CPU: numexpr ------------------------------------------------------------------------
    def _literals(self):
        """Each distinct (value, dtype) literal and its variable name."""
        names = {}
        for _, args, _ in self._evaluated():
            for a in args:
                if a[0] == "c":
                    names.setdefault((repr(a[1]), a[2]), (f"k{len(names)}", a[1], a[2]))
        return names

    def numexpr_text(self):
        """(numexpr expression, [(variable, value, dtype)] for the literals)."""
        lits = self._literals()

        def arg(a):
            return f"x{a[1]}" if a[0] == "x" else lits[(repr(a[1]), a[2])][0]
        text = self._render(lambda name, parts, dtype: _BY_NAME[name][1].format(*parts), arg)
        return text, list(lits.values())

    def _compiled_numexpr(self):
        compiled = self._numexpr
        if compiled is None:
            text, lits = self.numexpr_text()
            sig = [(f"x{i}", _NE_TYPE[d]) for i, d in enumerate(self.in_dtypes)]
            sig += [(name, _NE_TYPE[d]) for name, _, d in lits]
            numexpr = load_numexpr()
            nx = numexpr.NumExpr(text, signature=sig)
            uses_vml = numexpr.necompiler.getExprNames(text, {})[1]
            consts = tuple(np.asarray(v, dtype=as_dtype(d).np) for _, v, d in lits)
            compiled = self._numexpr = (nx, consts, uses_vml, self.out_dtype.np)
        return compiled

    def run_cpu(self, inputs, out=None):
        """Evaluate with numexpr (into ``out`` if given)."""
        nx, consts, uses_vml, dtype = self._compiled_numexpr()
        if out is not None:
            return nx(*inputs, *consts, out=out, order="K", casting="unsafe",
                      ex_uses_vml=uses_vml)
        result = nx(*inputs, *consts)
        return result if result.dtype == dtype else result.astype(dtype)

    # ---- GPU: one CuPy ElementwiseKernel -----------------------------------------------------
    def cuda_source(self):
        """(in_params, out_params, operation) of the ``cupy.ElementwiseKernel``."""
        lits = self._literals()
        params = [f"{_CUPY_TYPE[d]} x{i}" for i, d in enumerate(self.in_dtypes)]
        params += [f"{_CUPY_TYPE[d]} {name}" for name, _, d in lits.values()]
        lines = []

        def arg(a):
            if a[0] == "x":
                return f"x{a[1]}"
            if a[0] == "t":
                return f"t{a[1]}"
            return lits[(repr(a[1]), a[2])][0]
        for j, (name, args, dtype) in enumerate(self._evaluated()):
            ctype = _C_TYPE[dtype]
            expr = _BY_NAME[name][2].replace("{T}", ctype).format(*[arg(a) for a in args])
            lines.append(f"{ctype} t{j} = ({ctype})({expr});")
        lines.append(f"y = t{len(self.steps) - 1};")
        return ", ".join(params), f"{_CUPY_TYPE[self.steps[-1][2]]} y", "\n".join(lines)

    def run_gpu(self, xp, inputs, out=None):
        """Evaluate with one generated CuPy ElementwiseKernel (into ``out`` if given)."""
        device = xp.cuda.Device().id
        kernel = self._cuda.get(device)
        if kernel is None:
            with self._lock:
                kernel = self._cuda.get(device)
                if kernel is None:
                    in_params, out_params, operation = self.cuda_source()
                    kernel = xp.ElementwiseKernel(in_params, out_params, operation,
                                                  "labkit_fused")
                    consts = tuple(as_dtype(d).np.type(v)
                                   for _, v, d in self._literals().values())
                    kernel = self._cuda[device] = (kernel, consts)
        kern, consts = kernel
        if out is not None:
            return kern(*inputs, *consts, out)
        return kern(*inputs, *consts)

    # ---- reference ---------------------------------------------------------------------------
    def run_reference(self, xp, inputs):
        """Evaluate step by step with the ops' own kernels (what the unfused graph computes)."""
        values = []
        for name, args, _ in self.steps:
            vals = [inputs[a[1]] if a[0] == "x" else values[a[1]] if a[0] == "t" else a[1]
                    for a in args]
            values.append(xp.asarray(_BY_NAME[name][0].kernel(xp, *vals)))
        return values[-1]


def _fused_rule(*inputs, program):
    return broadcast_shapes("fused", *inputs), program.out_dtype


def _fused_into(xp, program):
    return functools.partial(fused.kernel, xp, program=program)


@op("fused", shape=_fused_rule, vjp=None, register=False, into=_fused_into)
def fused(xp, *inputs, program, out=None):
    """Run a ``FusedProgram`` over ``inputs``: numexpr on the CPU, one CUDA kernel on a GPU."""
    if xp is np:
        if load_numexpr() is None:
            result = program.run_reference(xp, inputs)
            if out is None:
                return result
            out[...] = result
            return out
        return program.run_cpu(inputs, out)
    return program.run_gpu(xp, inputs, out)


FRESH_OPS.add(fused)        # its result is a new array (or the out= given)


# ---- the pass ---------------------------------------------------------------------------------
def cpu_fusion_pays(steps, size):
    """The cost model above: whether one numexpr call beats ``steps`` NumPy calls on ``size``
    elements (times in µs, fitted to timings on the CI machines' CPUs, one thread).

    >>> cpu_fusion_pays(100, 64), cpu_fusion_pays(2, 64), cpu_fusion_pays(5, 65536)
    (True, False, False)
    """
    numexpr_us = 0.72 + steps * (0.015 + 0.00033 * size)
    numpy_us = steps * (0.30 + 0.00008 * size)
    return numexpr_us < numpy_us


def _fusable(n):
    """Whether node ``n`` may be part of a fused group."""
    entry = FUSABLE.get(n.op) if n.kind == "op" else None
    # an empty result has nothing to fuse (and numexpr broadcasts (1, 0) with (0, 1) to (1, 0))
    if entry is None or n.stateful or n.shape is None or None in n.shape or 0 in n.shape:
        return False
    dt = n.dtype.name
    ins = n.inputs
    for i, a in enumerate(ins):
        if isinstance(a, Node):
            if a.dtype is None or a.dtype.name not in _NE_TYPE or a.device is not n.device:
                return False
        elif type(a) not in (bool, int, float):
            return False
    node_ins = [a for a in ins if isinstance(a, Node)]
    if not node_ins:
        return False
    if n.op in _COMPARE:
        return dt == "bool_" and all(_dtype_of(a) in _FLOATS for a in ins if isinstance(a, Node))
    if dt not in _FLOATS:
        return False
    if n.op is ew.pow and isinstance(ins[1], Node):
        return False
    if n.op is ew.where:
        return _dtype_of(ins[0]) == "bool_" and all(
            _dtype_of(a) in _FLOATS for a in ins[1:] if isinstance(a, Node))
    # arithmetic on floats; a bool operand (a mask) only in add and mul; never ints
    allowed = _FLOATS + ("bool_",) if n.op in (ew.add, ew.mul) else _FLOATS
    return all(_dtype_of(a) in allowed for a in node_ins)


def _dtype_of(a):
    if isinstance(a, Node):
        return a.dtype.name
    return "bool_" if isinstance(a, bool) else "literal"


def _literal_dtype(node, pos):
    """The dtype a literal argument computes in (NumPy treats Python numbers as weak)."""
    if node.op in _COMPARE:
        other = node.inputs[1 - pos]
        return other.dtype.name
    if node.op is ew.where and pos == 0:
        return "bool_"
    return node.dtype.name


def _refs(node, pos, cpu):
    """How many times the program text names argument ``pos`` of ``node``."""
    if not cpu:
        return 1
    template = FUSABLE[node.op][1]
    return template.count("{%d}" % pos)


def _grow(root, graph, ok, taken, outs, use, mutable, epoch, cpu):
    """The indices of the group whose last op is ``root``."""
    nodes = graph.nodes
    members = {root.index}
    ext = set()

    def count_args():       # external inputs (in ``ext``) and distinct literals
        ext.clear()
        lits = set()
        for i in members:
            for a in nodes[i].inputs:
                if isinstance(a, Node):
                    if a.index not in members:
                        ext.add(a.index)
                else:
                    lits.add((type(a), repr(a), nodes[i].dtype))
        return len(lits)
    count_args()
    changed = True
    while changed:
        changed = False
        for i in sorted(members, reverse=True):
            for a in nodes[i].inputs:
                if not isinstance(a, Node) or a.index in members:
                    continue
                m = a
                if (not ok[m.index] or m.index in taken or m.index in outs
                        or m.device is not root.device
                        or not all(u in members for u in use[m.index])
                        or (reads_mutable(m, mutable) and epoch[m.index] != epoch[root.index])):
                    continue
                refs = sum(_refs(nodes[u], p, cpu) for u in use[m.index]
                           for p, x in enumerate(nodes[u].inputs)
                           if isinstance(x, Node) and x.index == m.index)
                if refs != 1 or len(members) >= MAX_STEPS:
                    continue
                members.add(m.index)
                n_lits = count_args()
                if len(ext) + n_lits > MAX_ARGS:
                    members.discard(m.index)
                    count_args()
                    continue
                changed = True
    return members, sorted(ext)


def _program(graph, members, ext):
    nodes = graph.nodes
    order = sorted(members)
    pos_of = {i: j for j, i in enumerate(order)}
    ext_pos = {i: k for k, i in enumerate(ext)}
    steps = []
    for i in order:
        n = nodes[i]
        args = []
        for p, a in enumerate(n.inputs):
            if isinstance(a, Node):
                args.append(("t", pos_of[a.index]) if a.index in pos_of
                            else ("x", ext_pos[a.index]))
            else:
                args.append(("c", a, _literal_dtype(n, p)))
        steps.append((FUSABLE[n.op][0], tuple(args), n.dtype.name))
    return FusedProgram(steps, [nodes[i].dtype.name for i in ext])


@graph_pass("fusion")
def fusion(graph, record, policy=None):
    """Replace groups of elementwise ops by single ``fused`` nodes.

    ``policy`` (default: ``lk.config``'s, set by ``lk.config.set_cpu_fusion``): on the CPU,
    ``"cost"`` fuses a group only when it is faster, ``"always"`` every group, ``"never"`` none.

    >>> import labkit as lk
    >>> from labkit.graph import passes
    >>> with lk.Graph() as g:
    ...     x = lk.placeholder((4, 4), name="x")
    ...     y = ((x * 2.0 + 1.0).tanh() - x).exp()
    >>> print(passes.fusion(g).history[-1])
    fusion: 6 -> 2 nodes; fused 1
      fused    fused = mul + add + tanh + sub + exp
    >>> passes.fusion(g).nodes[-1].attrs["program"]
    <exp(tanh(x0 * 2.0 + 1.0) - x0)>
    """
    policy = policy or config._state["cpu_fusion"]
    if policy not in ("cost", "always", "never"):
        raise ValueError(f"fusion: policy must be 'cost', 'always' or 'never', not {policy!r}")
    ok = [_fusable(n) for n in graph.nodes]
    use = users(graph)
    outs = output_indices(graph)
    mutable = mutable_values(graph)
    epoch = epochs(graph)
    taken = {}          # member index -> root index
    groups = {}         # root index -> (members, ext)
    skipped = 0
    for root in reversed(graph.nodes):
        if not ok[root.index] or root.index in taken:
            continue
        cpu = root.device.type == "cpu"
        members, ext = _grow(root, graph, ok, taken, outs, use, mutable, epoch, cpu)
        if len(members) < 2:
            continue
        if cpu:
            size = int(np.prod(root.shape))
            if policy == "cost" and not cpu_fusion_pays(len(members), size):
                record.notes.append(
                    f"{root.name}: {len(members)} ops on {size} elements left unfused (NumPy "
                    f"is faster there than one numexpr pass)")
                continue
            if policy == "never" or load_numexpr() is None:
                skipped += 1
                continue
        for i in members:
            taken[i] = root.index
        groups[root.index] = (members, ext)
    if skipped:
        record.notes.append(f"{skipped} CPU group(s) left unfused: "
                            + ("policy 'never'" if policy == "never"
                               else "numexpr is not installed"))
    rw = Rewriter(graph)
    for n in graph.nodes:
        root = taken.get(n.index)
        if root is None:
            rw.copy(n)
        elif root == n.index:
            members, ext = groups[root]
            prog = _program(graph, members, ext)
            base = f"{n.scope}/fused" if n.scope else "fused"
            new = rw.add("op", fused, [rw.arg(graph.nodes[i]) for i in ext], {"program": prog},
                         n.shape, n.dtype, n.device, base, like=n)
            rw.map[n.index] = new
            record.fused.append((new.name, [graph.nodes[i].name for i in sorted(members)]))
    return rw.finish()


# doctest does not look inside pass objects
__test__ = {"fusion": fusion.__doc__}
