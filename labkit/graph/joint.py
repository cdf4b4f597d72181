"""A captured call that the eager tape differentiates: ``lk.compile`` of a model that trains.

``loss.backward()`` after ``model = lk.compile(model); loss = model(x)`` needs the compiled
forward pass to be one entry on the eager tape. When a trace's results need gradients (grad
mode on, some result computed from a parameter or an argument that requires grad) and the
function ran no backward pass of its own, ``add_backward`` traces the backward pass into the
same graph, from the results' cotangents (placeholders) to the gradients of the arguments and
the outside tensors (parameters) that require grad. ``split`` cuts the graph where the
backward pass began:

- the forward plan runs the nodes before the cut and also fetches the forward values that
  backward nodes read (*saved*: what eager autodiff keeps on its tape; nothing is computed
  twice, and a dropout mask is drawn once);
- the backward graph is the nodes after the cut, with a placeholder for each saved value and
  each cotangent, compiled by the same pipeline (``compile.compile_graph``).

Each call then ties its results to a ``Region`` (``labkit.autodiff.regions``) whose inputs
are those arguments and parameters: the backward pass runs the backward plan once and hands
each gradient to the engine, which puts it into ``.grad`` and runs the hooks (so
``DistributedDataParallel``'s bucket hooks fire) as for any op.

>>> import labkit as lk
>>> _ = lk.manual_seed(0)
>>> layer = lk.nn.Linear(3, 2)
>>> fast = lk.compile(layer)
>>> fast(lk.ones(4, 3)).sum().backward()
>>> layer.bias.grad.tolist(), len(fast.forward.traces[0].joint.backward_graph) > 0
([4.0, 4.0], True)
"""
from ..autodiff.engine import run_backward
from ..autodiff.regions import Region, region_ops
from ..errors import GradError
from ..tensor import dispatch
from ..tensor.tensor import Tensor
from .compile import compile_graph
from .guards import guard_flag
from .node import CAPTURE, CONSTANT, PLACEHOLDER, Node
from .passes.base import Rewriter
from .symbolic import SymbolicTensor

_OPS = region_ops("compiled_call")


class JointSpec:
    """What the trace's backward pass is: where it begins in the graph (``boundary``), the
    results differentiated (their indexes) and their cotangent placeholders, and the
    gradients: ``[(("arg", position) or ("outside", tensor), gradient node)]``."""

    def __init__(self, boundary, roots, cotangents, grads):
        self.boundary, self.roots, self.cotangents, self.grads = \
            boundary, roots, cotangents, grads


def add_backward(graph, mode, out_leaves, arguments):
    """Trace the backward pass of the results ``out_leaves`` into ``graph`` (being captured
    by ``mode``); ``arguments``: the trace's symbolic tensor arguments, by position. None when
    there is nothing to differentiate, or the function ran a backward pass itself."""
    if not dispatch.is_grad_enabled() or mode.grads.entries or mode.argument_grads:
        return None
    roots = [i for i, t in enumerate(out_leaves) if isinstance(t, SymbolicTensor)
             and t._requires_grad and t.dtype.is_floating]
    if not roots or any(n.role == "update" for n in graph.nodes):
        return None
    targets = [(("arg", i), t) for i, t in enumerate(arguments)
               if t._requires_grad and t.dtype.is_floating]
    for n in graph.nodes:
        if n.kind == CAPTURE and isinstance(n.value, Tensor) and n.value.is_leaf:
            guard_flag(n.value, n.name)      # a parameter frozen or unfrozen: trace again
            if n.value._requires_grad and n.value.dtype.is_floating:
                targets.append((("outside", n.value), n.value))
    if not targets:
        return None
    boundary = len(graph.nodes)
    with dispatch.current_mode().phase("backward"), graph.name_scope("backward"):
        cots = [SymbolicTensor._of(graph.add_node(
            PLACEHOLDER, None, (), {}, out_leaves[i].shape, out_leaves[i].dtype,
            out_leaves[i].device, name=f"grad_output{i}")) for i in roots]
        grads = run_backward([out_leaves[i] for i in roots], cots, [t for _, t in targets],
                             retain_graph=True, create_graph=False, accumulate=False)
        kept = [(which, g if isinstance(g, SymbolicTensor) else
                 SymbolicTensor._of(graph.capture(g)))
                for (which, _), g in zip(targets, grads) if g is not None]
    return JointSpec(boundary, roots, [c.node for c in cots], kept)


class Joint:
    """A trace's backward pass, made by ``split``: the backward graph and plan, where the
    saved values are among the forward plan's fetches, and the inputs of each call's region."""

    def __init__(self, name, spec, first_saved, backward_graph, plan, cotangents):
        self.name = name
        self.roots = spec.roots
        self.targets = [which for which, _ in spec.grads]
        self.first_saved = first_saved
        self.backward_graph = backward_graph
        self.plan = plan
        self.cotangents = cotangents      # (shape, dtype, device) of each root's cotangent

    def tie(self, outs, leaves, results):
        """Make this call's results (``outs``, replaced in place) differentiable."""
        if not dispatch.is_grad_enabled():
            return
        inputs = [leaves[which[1]] if which[0] == "arg" else which[1]
                  for which in self.targets]
        call = _Call(self, results[self.first_saved:])
        tied = call.tie(inputs, [outs[i] for i in self.roots])
        for i, t in zip(self.roots, tied):
            outs[i] = t


class _Call(Region):
    """One call on the tape: its saved values, until its backward pass has run."""

    def __init__(self, joint, saved):
        super().__init__(_OPS)
        self.joint, self.saved = joint, saved

    def __repr__(self):
        return f"<compiled call of {self.joint.name}>"

    def gradients(self, cotangents):
        joint = self.joint
        if dispatch.is_grad_enabled():
            raise GradError(
                f"{self!r}: a backward pass that is itself differentiated (create_graph=True, "
                f"lk.grad of a gradient) cannot go through a compiled call, whose backward pass "
                f"is a compiled plan. Call the model without lk.compile for higher-order "
                f"gradients.")
        arrays = list(self.saved)
        for k, (shape, dtype, device) in enumerate(joint.cotangents):
            g = cotangents.get(k)
            arrays.append(device.xp.zeros(shape, dtype.np) if g is None else
                          g.to(device)._data if g.device is not device else g._data)
        results = joint.plan(*arrays)
        return {id(t): Tensor._make(a, t.device) for t, a in zip(self.inputs, results)}


def split(graph, spec, fetches, name, passes=None):
    """Cut ``graph`` at ``spec.boundary``: the forward values the backward nodes read (to be
    fetched after ``fetches`` by the forward plan), and the backward graph compiled; returns
    ``(saved nodes, Joint)``."""
    b = spec.boundary
    saved, seen = [], set()

    def keep(a):
        if isinstance(a, Node) and a.index < b and a.kind not in (CAPTURE, CONSTANT) and \
                a.index not in seen:
            seen.add(a.index)
            saved.append(a)
    for n in graph.nodes[b:]:
        for a in n.inputs:
            keep(a)
    for _, g in spec.grads:
        keep(g.node)
    rw = Rewriter(graph)
    new = rw.new
    new.name = f"{graph.name}/backward"
    feeds = []
    for n in saved + list(spec.cotangents):
        rw.map[n.index] = p = rw.add(PLACEHOLDER, None, (), {}, n.shape, n.dtype, n.device,
                                     name=n.name, like=n, exact_name=True)
        feeds.append(p)
    for n in graph.nodes[b:]:
        if n.index in rw.map:
            continue
        for a in n.inputs:
            if isinstance(a, Node) and a.index not in rw.map:     # a parameter, a constant
                rw.copy(a)
        rw.copy(n)
    outputs = []
    for _, g in spec.grads:
        if g.node.index not in rw.map:     # a gradient that is a parameter, a constant
            rw.copy(g.node)
        outputs.append(rw.map[g.node.index])
    new._captures = {id(n.value): n for n in new.nodes if n.kind == CAPTURE}
    new.outputs = outputs
    new.lint()
    backward_graph, plan = compile_graph(new, outputs, feeds, passes=passes,
                                         include_stateful=True,
                                         what=f"lk.compile {name} (backward)")
    cotangents = [(n.shape, n.dtype, n.device) for n in spec.cotangents]
    return saved, Joint(name, spec, len(fetches), backward_graph, plan, cotangents)
