"""Data-dependent control flow in the graph: ``lk.cond``, ``lk.while_loop``, ``lk.scan``.

Eagerly each one is plain Python (an ``if``, a ``while``, a ``for``), so the tape records what
ran and gradients come for free. While a graph is being built, each traces its functions into
sub-graphs (see ``labkit.graph.subgraph``) and adds one control-flow node, declared with the same
``lk.op`` API as every op, whose attributes hold the sub-graphs:

- ``cond``: its kernel runs the compiled plan of the chosen branch only. The other branch does
  not run at all (Switch/Merge semantics): an ``assign_add`` in it does not happen.
- ``while``: its kernel runs the body's plan while the condition's plan says true (at most
  ``max_iterations`` times), carrying the loop variables; the number of iterations is decided
  when the graph runs.
- ``scan``: its kernel runs the body once per slice of ``xs`` along the leading axis, carrying
  state and stacking the per-step outputs.

Tensors the functions use from outside (closures) become extra operands of the node, so nesting
works and gradients reach them. Gradients: the vjp of ``cond`` is a ``cond`` over the branches'
vjps; the vjp of ``while`` / ``scan`` is a node whose kernel runs the loop forward again, keeping
each iteration's carried state, then runs the body's vjp (built by ``lk.gradients`` on the body's
sub-graph, from the same vjp rules) in reverse.
"""
from ..autodiff.trees import text as spec_text, unflatten
from ..errors import DTypeError, GradError, GraphError, LabkitError, ShapeError
from ..tensor import dispatch
from ..tensor.creation import tensor
from ..tensor.op import op
from ..tensor.tensor import Tensor
from .capture import current_graph
from .node import Node
from .subgraph import (Like, OutputsToken, Subgraph, align_lifted, bind_multi, check_scalar,
                       collect_cotangents, flatten_values, next_name, node_text, trace,
                       output, type_text, wants_grad)
from .symbolic import SymbolicTensor

__all__ = ["cond", "while_loop", "scan"]


# ---- small helpers -------------------------------------------------------------------------------
def _truth(array):
    return bool(array.reshape(()))


def _tensors(leaves, like=None):
    """Numbers among ``leaves`` as tensors (of ``like``'s dtypes where given)."""
    out = []
    for i, v in enumerate(leaves):
        if isinstance(v, Tensor):
            out.append(v)
        else:
            ref = like[i] if like is not None and i < len(like) else None
            out.append(tensor(v, dtype=ref.dtype if ref is not None else None,
                              device=ref.device if ref is not None else None))
    return out


def _norm(spec):
    """A structure spec with lists and tuples alike (a body may return a list for a tuple)."""
    if not isinstance(spec, tuple):
        return spec
    kind = spec[0]
    if kind is dict:
        return (dict, spec[1], tuple(_norm(s) for s in spec[2]))
    return ("seq", tuple(_norm(s) for s in spec[1]))


def _eager_truth(value, what):
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ShapeError(f"{what} must be a single value, but it is a tensor of shape "
                             f"{value.shape}; reduce it first (e.g. (x > 0).all() or x.sum() > 0)")
        return bool(value)
    return bool(value)


def _check_carried(where, k, before, after):
    """``after`` (what the body made of loop variable ``k``) keeps ``before``'s shape and dtype."""
    if after.shape != before.shape or after.dtype is not before.dtype:
        changed = "shape" if after.shape != before.shape else "dtype"
        err = ShapeError if changed == "shape" else DTypeError
        made = f" ({node_text(after)})" if isinstance(after, SymbolicTensor) else ""
        raise err(
            f"{where}: the body changes the {changed} of loop variable {k} from "
            f"{type_text(before)} to {type_text(after)}{made}. A carried value "
            f"must keep its shape and dtype from one iteration to the next: "
            + ("pad or slice it to a fixed shape, or collect growing results with lk.scan."
               if changed == "shape" else f"cast it back, e.g. .to(dtype=lk.{before.dtype.name})."))


def _check_structure(where, who, expected, got):
    if _norm(expected) != _norm(got):
        raise GraphError(f"{where}: {who} returns {spec_text(got)}, but the loop variables are "
                         f"{spec_text(expected)}; return the same structure, one value per "
                         f"loop variable.")


def _tuple_rule(*inputs, **attrs):
    """Shape rule of the control-flow ops: their value is a tuple (its ``output`` nodes carry
    the shapes and dtypes, checked when the functions are traced)."""
    return None, None


# ---- lk.cond -------------------------------------------------------------------------------------
def _cond_vjp(g, out, pred, *operands, branches):
    cots = collect_cotangents(g, len(branches[0].outputs))
    outs = branches[0].outputs
    out_idx = [i for i, c in enumerate(cots) if c is not None and outs[i].dtype.is_floating]
    in_idx = [j for j, x in enumerate(operands) if wants_grad(x)]
    if not out_idx or not in_idx:
        return (None,) * (1 + len(operands))
    what = f"the gradient of lk.cond '{out.node.name}'"
    bwd = tuple(b.backward(out_idx, in_idx, what) for b in branches)
    specs = [(operands[j].shape, operands[j].dtype) for j in in_idx]
    _, grads = bind_multi(cond_op, (pred, *operands, *[cots[i] for i in out_idx]),
                          {"branches": bwd}, specs)
    result = [None] * len(operands)
    for j, gj in zip(in_idx, grads):
        result[j] = gj
    return (None, *result)


@op("cond", shape=_tuple_rule, vjp=_cond_vjp, register=False)
def cond_op(xp, pred, *operands, branches):
    """Run the true branch's plan if ``pred`` holds, else the false branch's; the other branch
    does not run."""
    return branches[0].plan()(*operands) if _truth(pred) else branches[1].plan()(*operands)


def _check_branches(name, t, f):
    if _norm(t.spec) != _norm(f.spec):
        raise GraphError(
            f"lk.cond '{name}': the branches return different structures: true_fn returns "
            f"{spec_text(t.spec)}, false_fn returns {spec_text(f.spec)}. Whichever branch runs, "
            f"the result is one value per output: return the same structure from both.")
    for i, (a, b) in enumerate(zip(t.outputs, f.outputs)):
        if a.shape != b.shape or a.dtype is not b.dtype or a.device is not b.device:
            what = "shapes" if a.shape != b.shape else \
                "dtypes" if a.dtype is not b.dtype else "devices"
            err = ShapeError if what == "shapes" else DTypeError if what == "dtypes" \
                else GraphError
            fix = {"shapes": "reshape or broadcast one of them (e.g. lk.broadcast_to(y, "
                             f"{a.shape}))",
                   "dtypes": f"cast one of them (e.g. y.to(dtype=lk.{a.dtype.name}))",
                   "devices": f"move one of them (e.g. y.to('{a.device}'))"}[what]
            on_a, on_b = (f" on {a.device}", f" on {b.device}") if what == "devices" else ("", "")
            raise err(
                f"lk.cond '{name}': the branches return different {what} for output {i}: "
                f"true_fn gives {node_text(a)}{on_a}, false_fn gives {node_text(b)}{on_b}. Both "
                f"branches must return the same shapes, dtypes and devices (the result is one "
                f"tensor whichever branch runs): {fix}.")


def cond(pred, true_fn, false_fn, *operands):
    """``true_fn(*operands)`` if ``pred`` holds, else ``false_fn(*operands)``.

    Eagerly this is a Python ``if``. Inside a graph (``lk.function``, ``with lk.Graph()``) both
    branches are traced, and only the chosen one runs when the graph runs: a side effect in the
    other (an ``assign_add``) does not happen. Both must return the same structure of tensors
    with the same shapes and dtypes. ``pred`` is a one-element tensor (or a Python bool, which
    picks a branch at trace time). Differentiable in both modes.

    >>> import labkit as lk
    >>> @lk.function
    ... def f(x):
    ...     return lk.cond(x.sum() > 0, lambda v: v * 2.0, lambda v: -v, x)
    >>> f(lk.tensor([1.0, 2.0])).tolist(), f(lk.tensor([-1.0, -2.0])).tolist()
    ([2.0, 4.0], [1.0, 2.0])
    """
    if not isinstance(pred, Tensor):
        return (true_fn if pred else false_fn)(*operands)
    graph = current_graph()
    if graph is None:
        return (true_fn if _eager_truth(pred, "lk.cond: pred") else false_fn)(*operands)
    check_scalar(pred, "lk.cond: pred", "Reduce it to one boolean first, e.g. (x > 0).all().")
    name = next_name(graph, "cond")
    t = trace(true_fn, list(operands), f"{name}/true", f"lk.cond '{name}': true_fn")
    f = trace(false_fn, list(operands), f"{name}/false", f"lk.cond '{name}': false_fn")
    _check_branches(name, t, f)
    lifted, extra = align_lifted([t, f])
    tb = Subgraph(t.graph, t.inputs + extra[0], t.outputs, f"{name}/true")
    fb = Subgraph(f.graph, f.inputs + extra[1], f.outputs, f"{name}/false")
    operand_tensors = [v for a in operands for v in flatten_values(a, "lk.cond operands")[0]
                       if isinstance(v, Tensor)]
    node, outs = bind_multi(cond_op, (pred, *operand_tensors, *lifted),
                            {"branches": (tb, fb)}, [(o.shape, o.dtype) for o in t.outputs])
    node.stateful = tb.stateful or fb.stateful
    return unflatten(t.spec, outs)


# ---- lk.while_loop -------------------------------------------------------------------------------
def _while_vjp(g, out, *inputs, cond, body, n_vars, max_iterations):
    cots = collect_cotangents(g, n_vars)
    fv = tuple(i for i in range(n_vars) if inputs[i].dtype.is_floating)
    given = tuple(i for i in fv if cots[i] is not None)
    caps = inputs[n_vars:]
    fc = tuple(j for j, c in enumerate(caps) if wants_grad(c))
    if not given or not (fc or any(wants_grad(inputs[i]) for i in fv)):
        return (None,) * len(inputs)
    what = f"the gradient of lk.while_loop '{out.node.name}'"
    cond.pure_plan(what)
    bwd = body.backward(fv, fv + tuple(n_vars + j for j in fc), what)
    specs = [(inputs[i].shape, inputs[i].dtype) for i in fv] + \
        [(caps[j].shape, caps[j].dtype) for j in fc]
    _, grads = bind_multi(while_grad_op, (*inputs, *[cots[i] for i in given]),
                          dict(cond=cond, body=body, bwd=bwd, n_vars=n_vars,
                               max_iterations=max_iterations, fv=fv, given=given, fc=fc), specs)
    result = [None] * len(inputs)
    for k, i in enumerate(fv):
        if wants_grad(inputs[i]):
            result[i] = grads[k]
    for k, j in enumerate(fc):
        result[n_vars + j] = grads[len(fv) + k]
    return tuple(result)


@op("while", shape=_tuple_rule, vjp=_while_vjp, register=False)
def while_op(xp, *inputs, cond, body, n_vars, max_iterations):
    """Run the body's plan while the condition's plan says true, carrying the loop variables
    (the first ``n_vars`` inputs; the rest are values the functions use from outside)."""
    values, outside = inputs[:n_vars], inputs[n_vars:]
    test, step = cond.plan(), body.plan()
    i = 0
    while (max_iterations is None or i < max_iterations) and _truth(test(*values, *outside)[0]):
        values = step(*values, *outside)
        i += 1
    return tuple(values)


def _loop_forward(test, step, values, outside, max_iterations):
    """Run a loop again, keeping the state before each iteration."""
    states = []
    i = 0
    while (max_iterations is None or i < max_iterations) and _truth(test(*values, *outside)[0]):
        states.append(values)
        values = step(*values, *outside)
        i += 1
    return states


def _no_second_order(loop):
    def vjp(g, out, *inputs, **attrs):
        raise GradError(
            f"differentiating the gradient of {loop} (node '{out.node.name}'): second-order "
            f"gradients through {loop} are not supported (its gradient is a kernel that loops "
            f"in Python, with no vjp of its own). Differentiate the loop once, or write it as a "
            f"Python loop (unrolled at trace time) to take higher-order gradients.")
    return vjp


@op("while_grad", shape=_tuple_rule, vjp=_no_second_order("lk.while_loop"), register=False)
def while_grad_op(xp, *arrays, cond, body, bwd, n_vars, max_iterations, fv, given, fc):
    """The vjp of ``while``: rerun the loop keeping each iteration's state, then run the body's
    vjp from the last iteration to the first, adding up the gradients of outside values."""
    n_in = len(body.inputs)
    inputs, cot = arrays[:n_in], dict(zip(given, arrays[n_in:]))
    values, outside = inputs[:n_vars], inputs[n_vars:]
    states = _loop_forward(cond.plan(False), body.plan(False), values, outside, max_iterations)
    back = bwd.plan(False)
    g = [cot[i] if i in cot else xp.zeros_like(inputs[i]) for i in fv]
    g_out = [xp.zeros_like(outside[j]) for j in fc]
    nf = len(fv)
    for state in reversed(states):
        res = back(*state, *outside, *g)
        g = res[:nf]
        g_out = [a + b for a, b in zip(g_out, res[nf:])]
    return tuple(xp.asarray(a) for a in (*g, *g_out))


def while_loop(cond_fn, body_fn, loop_vars, max_iterations=None):
    """Repeat ``loop_vars = body_fn(*loop_vars)`` while ``cond_fn(*loop_vars)`` holds.

    TensorFlow's spelling: ``loop_vars`` is a tuple/list of tensors (or nested structures of
    them; numbers become tensors), or a single tensor; ``body_fn`` returns the same structure
    with the same shapes and dtypes; the result has it too. At most ``max_iterations`` iterations
    run. Inside a graph the number of iterations is decided when the graph runs (for example by
    a fed value), and gradients flow through the loop to the initial values and to every tensor
    the functions use.

    >>> import labkit as lk
    >>> with lk.Graph() as g:
    ...     n = lk.placeholder((), lk.int64, name="n")
    ...     i, x = lk.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x * 2.0), (0, 1.0))
    >>> g.run(x, {n: 5}).item()
    32.0
    """
    single = not isinstance(loop_vars, (list, tuple))
    structure = (loop_vars,) if single else loop_vars
    leaves, spec = flatten_values(structure, "lk.while_loop: loop_vars")
    leaves = _tensors(leaves)
    if not leaves:
        raise GraphError("lk.while_loop needs at least one loop variable")
    if max_iterations is not None:
        max_iterations = int(max_iterations)
        if max_iterations < 0:
            raise ValueError(f"lk.while_loop: max_iterations must be >= 0, got {max_iterations}")

    def body(*args):
        r = body_fn(*args)
        if single and not (isinstance(r, (list, tuple)) and len(r) == 1):
            r = (r,)
        return r

    graph = current_graph()
    if graph is None:
        values = leaves
        i = 0
        while max_iterations is None or i < max_iterations:
            if not _eager_truth(cond_fn(*unflatten(spec, values)), "lk.while_loop: cond_fn's "
                                "result"):
                break
            new, new_spec = flatten_values(body(*unflatten(spec, values)), "lk.while_loop: body_fn")
            _check_structure("lk.while_loop", "body_fn", spec, new_spec)
            new = _tensors(new, values)
            for k, (a, b) in enumerate(zip(values, new)):
                _check_carried("lk.while_loop", k, a, b)
            values = new
            i += 1
        result = unflatten(spec, values)
        return result[0] if single else result

    name = next_name(graph, "while")
    where = f"lk.while_loop '{name}'"
    args = list(unflatten(spec, leaves))
    c = trace(cond_fn, args, f"{name}/cond", f"{where}: cond_fn")
    if len(c.outputs) != 1:
        raise GraphError(f"{where}: cond_fn must return one boolean value; it returns "
                         f"{spec_text(c.spec)}")
    check_scalar(c.outputs[0], f"{where}: cond_fn's result",
                 "Reduce it to one boolean, e.g. (x > 0).all().")
    b = trace(body, args, f"{name}/body", f"{where}: body_fn", like=leaves)
    _check_structure(where, "body_fn", spec, b.spec)
    for k, (before, after) in enumerate(zip(leaves, b.outputs)):
        _check_carried(where, k, before, after)
    lifted, extra = align_lifted([c, b])
    cs = Subgraph(c.graph, c.inputs + extra[0], c.outputs, f"{name}/cond")
    bs = Subgraph(b.graph, b.inputs + extra[1], b.outputs, f"{name}/body")
    node, outs = bind_multi(while_op, (*leaves, *lifted),
                            dict(cond=cs, body=bs, n_vars=len(leaves),
                                 max_iterations=max_iterations),
                            [(t.shape, t.dtype) for t in leaves])
    node.stateful = cs.stateful or bs.stateful
    result = unflatten(spec, outs)
    return result[0] if single else result


# ---- lk.scan -------------------------------------------------------------------------------------
def _grad_indices(inputs, outputs, n_carry, n_xs, n_ys):
    """Where a scan's gradient goes through its body: the floating carries and the floating
    ys (as the body's output indices), the xs and captured tensors that want a gradient (as
    positions among the xs and among the captures), and all those inputs as the body's input
    indices."""
    n_caps = len(inputs) - n_carry - n_xs
    fcar = tuple(i for i in range(n_carry) if inputs[i].dtype.is_floating)
    fy = tuple(n_carry + k for k in range(n_ys) if outputs[n_carry + k].dtype.is_floating)
    fx = tuple(j for j in range(n_xs) if wants_grad(inputs[n_carry + j]))
    fc = tuple(j for j in range(n_caps) if wants_grad(inputs[n_carry + n_xs + j]))
    in_idx = fcar + tuple(n_carry + j for j in fx) + tuple(n_carry + n_xs + j for j in fc)
    return fcar, fy, fx, fc, in_idx


def _scan_vjp(g, out, *inputs, body, n_carry, n_xs, length, n_saved=0):
    n_ys = len(body.outputs) - n_carry - n_saved
    cots = collect_cotangents(g, n_carry + n_ys)
    carry, xs, caps = inputs[:n_carry], inputs[n_carry:n_carry + n_xs], inputs[n_carry + n_xs:]
    fcar, fy, fx, fc, in_idx = _grad_indices(inputs, body.outputs, n_carry, n_xs, n_ys)
    given = tuple(i for i in fcar + fy if cots[i] is not None)
    if not given or not (fx or fc or any(wants_grad(carry[i]) for i in fcar)):
        return (None,) * len(inputs)
    what = f"the gradient of lk.scan '{out.node.name}'"
    bwd = body.backward(fcar + fy, in_idx, what)
    specs = [(carry[i].shape, carry[i].dtype) for i in fcar] + \
        [(xs[j].shape, xs[j].dtype) for j in fx] + [(caps[j].shape, caps[j].dtype) for j in fc]
    kept = []
    if n_saved:    # the forward loop kept, per step, the carry and what the gradient reads
        bwd = _reading_saved(body, bwd, n_carry + n_ys, n_saved)
        tok = OutputsToken._of(out.node, False)
        first = n_carry + n_ys + n_saved
        for k in range(first, first + n_carry):
            c = inputs[k - first]
            kept.append(output(tok, index=k, shape=(length, *c.shape), dtype=c.dtype.name))
        for k in range(n_carry + n_ys, first):
            r = body.outputs[k]
            kept.append(output(tok, index=k, shape=(length, *r.shape), dtype=r.dtype.name))
    _, grads = bind_multi(scan_grad_op, (*inputs, *[cots[i] for i in given], *kept),
                          dict(body=body, bwd=bwd, n_carry=n_carry, n_xs=n_xs, length=length,
                               fcar=fcar, fy=fy, given=given, fx=fx, fc=fc,
                               n_saved=n_saved), specs)
    result = [None] * len(inputs)
    for k, i in enumerate(fcar):
        if wants_grad(carry[i]):
            result[i] = grads[k]
    for k, j in enumerate(fx):
        result[n_carry + j] = grads[len(fcar) + k]
    for k, j in enumerate(fc):
        result[n_carry + n_xs + j] = grads[len(fcar) + len(fx) + k]
    return tuple(result)


@op("scan", shape=_tuple_rule, vjp=_scan_vjp, register=False)
def scan_op(xp, *inputs, body, n_carry, n_xs, length, n_saved=0):
    """Run the body's plan on each slice of the ``xs`` along their leading axis, carrying
    ``n_carry`` values; returns the final carry and the stacked per-step outputs (with
    ``n_saved``, the body's last outputs are values its gradient reads, and the carry each
    step started from is stacked after them)."""
    carry, xs = inputs[:n_carry], inputs[n_carry:n_carry + n_xs]
    outside = inputs[n_carry + n_xs:]
    step = body.plan()
    y_nodes = body.out_nodes[n_carry:]
    # each step's ys (and, with n_saved, the carry it started from) written into the stacked
    # results as they come: no per-step lists, no stacking afterwards
    ys = [xp.empty((length, *n.shape), dtype=n.dtype.np) for n in y_nodes]
    starts = [xp.empty((length, *c.shape), dtype=c.dtype) for c in carry] if n_saved else []
    for t in range(length):
        for acc, c in zip(starts, carry):
            acc[t] = c
        out = step(*carry, *[x[t] for x in xs], *outside)
        carry = out[:n_carry]
        for acc, y in zip(ys, out[n_carry:]):
            acc[t] = y
    return (*carry, *ys, *starts)


def _reading_saved(body, bwd, first, n_saved):
    """``bwd`` (the body's vjp) taking the body's saved outputs ``first ..`` as inputs after its
    own: what the forward loop kept is read, not recomputed (cached on ``bwd``)."""
    reading = getattr(bwd, "reading_saved", None)
    if reading is None:
        saved = body.outputs[first:first + n_saved]
        reading = bwd.reading_saved = Subgraph(bwd.graph, bwd.inputs + saved, bwd.outputs,
                                               f"{bwd.label}/saved", stateful=False,
                                               backward_of=body)
    return reading


@op("scan_grad", shape=_tuple_rule, vjp=_no_second_order("lk.scan"), register=False)
def scan_grad_op(xp, *arrays, body, bwd, n_carry, n_xs, length, fcar, fy, given, fx, fc,
                 n_saved=0):
    """The vjp of ``scan``: the body's vjp from the last step to the first, from each step's
    carry (kept by the forward loop when ``n_saved``, else found by running the loop again)."""
    n_in = len(body.inputs)
    inputs, cot = arrays[:n_in], dict(zip(given, arrays[n_in:n_in + len(given)]))
    kept = arrays[n_in + len(given):]
    carry, xs = inputs[:n_carry], inputs[n_carry:n_carry + n_xs]
    outside = inputs[n_carry + n_xs:]
    back = bwd.plan(False)
    if n_saved:
        starts, values = kept[:n_carry], kept[n_carry:]
        carries = [[c[t, ...] for c in starts] for t in range(length)]
        saved = [[v[t, ...] for v in values] for t in range(length)]
    else:
        step = body.plan(False)
        carries, saved = [], [()] * length
        for t in range(length):
            carries.append(carry)
            carry = step(*carry, *(x[t, ...] for x in xs), *outside)[:n_carry]
    g = [cot[i] if i in cot else xp.zeros_like(inputs[i]) for i in fcar]
    y_nodes = body.out_nodes
    g_ys = [cot.get(k) for k in fy]
    zero_ys = [xp.zeros(y_nodes[k].shape, dtype=y_nodes[k].dtype.np) for k in fy]
    g_xs = [xp.zeros_like(xs[j]) for j in fx]
    g_out = [xp.zeros_like(outside[j]) for j in fc]
    nf, nx = len(fcar), len(fx)
    for t in reversed(range(length)):
        cy = [z if gy is None else gy[t, ...] for gy, z in zip(g_ys, zero_ys)]
        res = back(*carries[t], *[x[t] for x in xs], *outside, *g, *cy, *saved[t])
        g = res[:nf]
        for acc, r in zip(g_xs, res[nf:nf + nx]):
            acc[t] = r
        for acc, r in zip(g_out, res[nf + nx:]):
            acc += r                      # accumulators of the loop's own: added in place
    return tuple(xp.asarray(a) for a in (*g, *g_xs, *g_out))


def scan(fn, init, xs, length=None):
    """Loop ``carry, y = fn(carry, x)`` over the slices ``x`` of ``xs`` along their leading axis.

    JAX's spelling: returns ``(final carry, ys)`` with the per-step ``y`` s stacked along a new
    leading axis. ``init``, ``xs`` and ``y`` may be tensors or nested tuples/lists/dicts of
    them (``y`` may be None); ``xs=None`` with ``length=n`` runs ``n`` steps with ``x=None``.
    The carry must keep its shapes and dtypes. Differentiable in both modes; inside a graph it
    is one ``scan`` node.

    >>> import labkit as lk
    >>> total, partial = lk.scan(lambda c, x: (c + x, c + x), lk.tensor(0.0),
    ...                          lk.tensor([1.0, 2.0, 3.0]))
    >>> total.item(), partial.tolist()
    (6.0, [1.0, 3.0, 6.0])
    """
    c_leaves, c_spec = flatten_values(init, "lk.scan: init")
    c_leaves = _tensors(c_leaves)
    x_leaves, x_spec = flatten_values(xs, "lk.scan: xs")
    for x in x_leaves:
        if not isinstance(x, Tensor) or x.ndim == 0:
            raise ShapeError(f"lk.scan: every leaf of xs must be a tensor with a leading axis to "
                             f"scan over; got {x!r}")
    lengths = sorted({x.shape[0] for x in x_leaves})
    if length is not None:
        lengths = sorted(set(lengths) | {int(length)})
    if len(lengths) != 1:
        raise ShapeError(f"lk.scan: the leaves of xs (and length=) disagree on the number of "
                         f"steps: leading sizes {lengths}" if lengths else
                         "lk.scan: pass xs, or length= when there is nothing to scan over")
    n = lengths[0]

    def split(r):
        if not (isinstance(r, (list, tuple)) and len(r) == 2):
            raise GraphError(f"lk.scan: fn must return a pair (new carry, y); it returned "
                             f"{type(r).__name__} {r!r}")
        return r

    graph = current_graph()
    if graph is None:
        carry = c_leaves
        steps, y_spec = [], None
        for t in range(n):
            x_t = unflatten(x_spec, [x[t] for x in x_leaves])
            new_c, y = split(fn(unflatten(c_spec, carry), x_t))
            new, new_spec = flatten_values(new_c, "lk.scan: fn's new carry")
            _check_structure("lk.scan", "fn (as its new carry)", c_spec, new_spec)
            new = _tensors(new, carry)
            for k, (a, b) in enumerate(zip(carry, new)):
                _check_carried("lk.scan", k, a, b)
            carry = new
            y_leaves, y_spec = flatten_values(y, "lk.scan: fn's y")
            steps.append(_tensors(y_leaves))
        if n == 0:
            raise ShapeError("lk.scan over zero steps cannot know the shapes of its outputs "
                             "eagerly; give xs at least one step")
        from ..tensor.ops.composite import stack
        ys = [stack([s[k] for s in steps]) for k in range(len(steps[0]))]
        return unflatten(c_spec, carry), unflatten(y_spec, ys)

    name = next_name(graph, "scan")
    where = f"lk.scan '{name}'"
    slices = [Like(x.shape[1:], x.dtype, x.device, x._requires_grad,
                   x.name if hasattr(x, "name") else "x") for x in x_leaves]
    b = trace(lambda c, x: split(fn(c, x)), [unflatten(c_spec, c_leaves),
                                             unflatten(x_spec, slices)],
              f"{name}/body", f"{where}: fn", like=c_leaves)
    out_c_spec, y_spec = b.spec[1]
    _check_structure(where, "fn (as its new carry)", c_spec, out_c_spec)
    nc = len(c_leaves)
    for k, (before, after) in enumerate(zip(c_leaves, b.outputs[:nc])):
        _check_carried(where, k, before, after)
    lifted, extra = align_lifted([b])
    bs = Subgraph(b.graph, b.inputs + extra[0], b.outputs, f"{name}/body")
    n_ys = len(b.outputs) - nc
    saved = _residuals(bs, nc, len(x_leaves), (*c_leaves, *x_leaves, *lifted), where)
    if saved:      # the body also returns what its gradient reads, stacked over the steps
        bs = _with_outputs(bs, saved, f"{name}/body")
    specs = [(t.shape, t.dtype) for t in c_leaves] + \
        [((n, *y.shape), y.dtype) for y in bs.outputs[nc:]] + \
        ([((n, *t.shape), t.dtype) for t in c_leaves] if saved else [])
    node, outs = bind_multi(scan_op, (*c_leaves, *x_leaves, *lifted),
                            dict(body=bs, n_carry=nc, n_xs=len(x_leaves), length=n,
                                 n_saved=len(saved)), specs)
    node.stateful = bs.stateful
    return unflatten(c_spec, outs[:nc]), unflatten(y_spec, outs[nc:nc + n_ys])


def _residuals(body, n_carry, n_xs, inputs, where):
    """The values of the body's forward computation that its gradient reads (as tensors of the
    body's graph), for the forward loop to keep per step so that the backward loop neither runs
    the forward again nor recomputes them; none when no input requires grad (``lk.gradients``
    asked of other values recomputes them), or the body has side effects (its gradient is then
    refused anyway)."""
    if not dispatch._state.grad_enabled or body.stateful or \
            not any(isinstance(x, Tensor) and x._requires_grad for x in inputs):
        return []
    fcar, fy, _, _, in_idx = _grad_indices(inputs, body.outputs, n_carry, n_xs,
                                           len(body.outputs) - n_carry)
    if not fcar + fy or not in_idx:
        return []
    try:      # the vjp's own indices: _scan_vjp finds this gradient in the body's cache
        bwd = body.backward(fcar + fy, in_idx, f"the gradient of {where}")
    except LabkitError:
        return []                  # said again, where it matters, when a gradient is asked for
    forward = {id(n) for n in body.plan(False).nodes} - {id(n) for n in body.in_nodes}
    saved, seen = [], set()
    for n in bwd.plan(False).nodes:
        if id(n) in forward:
            continue
        for a in n.inputs:
            if isinstance(a, Node) and id(a) in forward and a.kind == "op" and \
                    id(a) not in seen:
                seen.add(id(a))
                saved.append(SymbolicTensor._of(a))
    return saved


def _with_outputs(body, extra, label):
    """``body`` with ``extra`` outputs after its own (its gradients, already built, kept)."""
    out = Subgraph(body.graph, body.inputs, body.outputs + extra, label)
    out._backward = body._backward
    return out
