"""The reverse-mode engine: walks tape entries backwards, applying each op's vjp rule.

Everything that is done once for every op lives here and nowhere else: summing a broadcast
cotangent back to its input's shape, casting it back to the input's dtype, and adding up fan-in.
vjp rules are labkit ops, so with ``create_graph=True`` the backward pass is itself recorded
and can be differentiated again (grad of grad).

The walk is iterative (no recursion limit on deep graphs). Unless ``retain_graph`` is set, each
node drops what it saved as soon as its vjp has run, so memory falls during backward.
"""
import heapq
import operator
from contextlib import nullcontext

from ..errors import GradError, describe
from ..tensor import dispatch, versions
from ..tensor.ops.elementwise import add, cast, conj, to_device
from ..tensor.ops.reduce import sum_to_shape
from ..tensor.tape import TapeNode, history_at, view_base
from ..tensor.tensor import Tensor
from ..tensor.versions import epoch as _epoch
from . import hooks


class _Edges:
    """Where the inputs of tape entries recorded before some in-place write lead: to the
    history each input had when the entry was recorded (``tape.history_at``), not the one a
    later write gave it; and for a view read after another alias of its memory was written, to
    a copy of the view's entry that reads its base as written (PyTorch rebases such views).
    Entries recorded after the last write read ``inp._node`` directly (the common case)."""

    def __init__(self):
        self.now = _epoch[0]
        self.parents = {}     # entry -> [(parent entry or None, requires_grad) per input]
        self.rebased = {}     # (view entry, version of its memory) -> its copy

    def root(self, tensor):
        """The entry a backward pass from ``tensor`` starts at (a copy, for a view whose memory
        was written after it was made)."""
        return self._resolve(tensor, self.now)[0]

    def of(self, node):
        found = self.parents.get(node)
        if found is None:
            when = node.epoch
            found = self.parents[node] = [self._resolve(inp, when) if isinstance(inp, Tensor)
                                          else (None, False) for inp in node.inputs]
        return found

    def _resolve(self, inp, when):
        parent, requires_grad = history_at(inp, when)
        if parent is None or parent.epoch >= when or type(parent) is not TapeNode:
            return parent, requires_grad
        counter = parent.out_version
        if counter is None or counter[0] <= parent.epoch or view_base(parent) is None:
            return parent, requires_grad
        version = versions.version_at(counter, when)
        recent = counter[2]
        exact = len(recent) < versions._RECENT or recent[0] <= parent.epoch
        if exact and version == versions.version_at(counter, parent.epoch):
            return parent, requires_grad      # its memory was not written in between
        key = (parent, version)
        copy = self.rebased.get(key)
        if copy is None:
            copy = self.rebased[key] = TapeNode(parent.op, parent.inputs, parent.attrs,
                                                parent.out, parent.device, counter)
            copy.epoch = when
        return copy, requires_grad


def _topological(roots, edges):
    """Tape nodes reachable from ``roots``, each after every node that consumes its output,
    and otherwise latest recorded first, as PyTorch's engine: the forward pass's order reversed.
    A computation spread over several devices in one process then goes back layer by layer on
    all of them together, so each layer's saved values are freed before the previous layer's
    are needed. (Kahn's order with the latest-recorded ready entry next: an entry rebased by
    ``_Edges`` is recorded during the backward pass, so its ``seq`` alone would misplace it;
    where there is none, every entry comes after the ones it reads, and sorting by ``seq`` gives
    the same order for less.)"""
    parents_of = {}
    stack = list(roots)
    pop, push = stack.pop, stack.append
    now = edges.now
    in_order = True       # every parent recorded before its consumers (no rebased entry)
    while stack:
        node = pop()
        if node in parents_of:
            continue
        parents = ()
        if node.inputs is not None:
            parents = _current_parents(node) if node.epoch == now else None
            if parents is None:                # recorded before some in-place write
                parents = [parent for parent, _ in edges.of(node) if parent is not None]
        parents_of[node] = parents
        seq = node.seq
        for parent in parents:
            if parent.seq >= seq:
                in_order = False
            push(parent)
    if in_order:    # then the latest recorded entry left is always ready: Kahn's order is this
        return sorted(parents_of, key=_by_seq, reverse=True)
    consumers = {}
    for parents in parents_of.values():
        for parent in parents:
            consumers[parent] = consumers.get(parent, 0) + 1
    ready = [(-node.seq, node) for node in parents_of if node not in consumers]
    heapq.heapify(ready)
    order = []
    while ready:
        node = heapq.heappop(ready)[1]
        order.append(node)
        for parent in parents_of[node]:
            left = consumers[parent] - 1
            consumers[parent] = left
            if not left:
                heapq.heappush(ready, (-parent.seq, parent))
    return order


_by_seq = operator.attrgetter("seq")


def _current_parents(node):
    """The entries ``node``'s inputs lead to through their present history, or None where one
    of them is a view made before an in-place write (``_Edges.of`` decides those)."""
    parents = []
    epoch = node.epoch
    for inp in node.inputs:
        if isinstance(inp, Tensor):
            parent = inp._node
            if parent is not None:
                if parent.epoch < epoch and parent.out_version is not None:
                    return None
                parents.append(parent)
    return parents


def _freed_error(node):
    return GradError(
        f"backward through op '{node.op.name}' a second time: its saved values were freed after "
        f"the first backward. Pass retain_graph=True to the first backward (or lk.grad) if you "
        f"need to differentiate the same graph twice, or recompute the forward pass.")


def _fit(g, like):
    """Cotangent ``g`` summed back to ``like``'s shape, cast to its dtype and moved to its device
    (a 0-d CPU tensor read by a GPU op gets its gradient on the CPU): the engine-wide rule."""
    a, b = g._data, like._data
    if a is not None and b is not None and a.shape == b.shape and a.dtype == b.dtype and \
            g._device is like._device:
        return g                               # the common case, decided from the arrays
    if g.shape != like.shape and g.shape is not None and like.shape is not None:
        g = sum_to_shape(g, like.shape)
    if g._device is not like._device and g._device is not None and like._device is not None:
        g = to_device(g, device=like._device.name)
    a, b = g._data, like._data
    if (a.dtype != b.dtype) if (a is not None and b is not None) else (g.dtype is not like.dtype):
        g = cast(g, dtype=like.dtype.name)
    return g


def _own(g, handed):
    """``g`` detached, in an array of its own: each leaf's ``.grad`` may be updated in place
    (clipping, zeroing) without touching another leaf's, a read-only broadcast view, or the
    caller's gradient. Copies only arrays that are views or already handed out."""
    arr = g._data
    if arr.base is not None or id(arr) in handed:
        arr = arr.copy()
    handed.add(id(arr))
    return Tensor._make(arr, g._device)


def run_backward(roots, cotangents, targets, retain_graph, create_graph, accumulate,
                 follow_all=False):
    """Core of every reverse-mode entry point.

    ``follow_all``: differentiate through every recorded input, not only those that require
    grad (graph-mode ``lk.gradients`` asks for any tensor of a graph).

    roots / cotangents: output tensors and their incoming gradients. targets: tensors whose
    gradient to return (None: accumulate into every leaf's ``.grad`` instead). Returns the list
    of gradients for ``targets`` (None where a target was not reached).
    """
    grads = {}        # node -> cotangent of that node's output
    leaf_grads = {}   # id(leaf) -> (leaf, cotangent)
    target_keys = {}
    if targets is not None:
        for i, t in enumerate(targets):
            target_keys.setdefault(t._node if t._node is not None else id(t), []).append(i)
    results = [None] * (len(targets) if targets is not None else 0)

    root_nodes = []
    edges = _Edges()
    for r, g in zip(roots, cotangents):
        if r._node is None:
            leaf_grads[id(r)] = (r, g if id(r) not in leaf_grads else add(leaf_grads[id(r)][1], g))
            continue
        key = edges.root(r)
        grads[key] = g if key not in grads else add(grads[key], g)
        root_nodes.append(key)

    st = dispatch._state
    grad_all, st.grad_all = st.grad_all, follow_all
    handed = {id(g._data) for g in cotangents}   # arrays .grad must not share
    with_hooks = accumulate and hooks.has_hooks()
    # Leaves with a post-accumulate hook get their .grad as soon as their last contribution is
    # in, during the walk, so a hook (DataParallel's) can start work while backward goes on.
    early = _EarlyLeaves(leaf_grads, handed) if with_hooks and not create_graph else None
    with hooks.callbacks_of_pass() if with_hooks else nullcontext():
        try:
            _walk(root_nodes, grads, leaf_grads, target_keys, results, retain_graph,
                  create_graph, follow_all, edges, early)
        finally:
            st.grad_all = grad_all
        if accumulate and hooks._leaf_grads_hooks:
            for fn in hooks._leaf_grads_hooks:
                fn(leaf_grads, early.done if early is not None else ())
        _finish(leaf_grads, handed, target_keys, results, create_graph, accumulate,
                early.done if early is not None else ())
    return results


class _EarlyLeaves:
    """Counts, for each leaf that has a post-accumulate hook, the tape nodes of this walk still
    to run that read it; when the count reaches zero its gradient is complete, so it is handed
    out (into ``.grad``, hooks run) at once rather than after the whole walk."""

    def __init__(self, leaf_grads, handed):
        self.leaf_grads, self.handed = leaf_grads, handed
        self.uses, self.done = {}, set()

    def count(self, order):
        uses = self.uses
        for node in order:
            for inp in node.inputs or ():
                if isinstance(inp, Tensor) and inp._node is None and hooks.has_hook(inp):
                    uses[id(inp)] = uses.get(id(inp), 0) + 1

    def ran(self, inputs):
        """A node reading ``inputs`` has run (or was skipped): release its leaves."""
        uses = self.uses
        for inp in inputs:
            n = uses.get(id(inp)) if isinstance(inp, Tensor) else None
            if n is None:
                continue
            key = id(inp)
            if n > 1:
                uses[key] = n - 1
                continue
            del uses[key]
            entry = self.leaf_grads.get(key)
            if entry is not None and entry[1]._data is not None:
                leaf, g = entry[0], _fit(entry[1], entry[0])
                self.leaf_grads[key] = (leaf, g)
                self.done.add(key)
                _accumulate(leaf, g, self.handed, False)


def _walk(root_nodes, grads, leaf_grads, target_keys, results, retain_graph, create_graph,
          follow_all, edges, early=None):
    """Apply the vjp rule of every node reachable from ``root_nodes``, in reverse order."""
    pop = grads.pop
    owned = set()     # ids of gradient arrays made here and held nowhere else: safe to add into
    now = edges.now
    order = _topological(root_nodes, edges)
    if early is not None:
        early.count(order)
    last = None       # (early) the inputs of the node handled before this one
    with dispatch.grad_enabled(create_graph), dispatch.current_mode().phase("backward"):
        for node in order:
            if early is not None:
                if last:
                    early.ran(last)
                last = node.inputs
            g = pop(node, None)
            if g is None:
                continue
            owned.discard(id(g._data))   # handed to a vjp now, which may pass it on as it is
            if target_keys:
                for i in target_keys.get(node, ()):
                    results[i] = g
            inputs = node.inputs
            if inputs is None:
                raise _freed_error(node)
            # writes since the node was recorded that touch none of its values (an optimiser's
            # or BatchNorm's running statistics') do not take it off the fast paths
            fresh = node.epoch == now or not _written_since(node)
            # (not for a vmap's per-example entry, whose output is a whole batch)
            if node.op.vjp_into is not None and not create_graph and g._data is not None and \
                    fresh and type(node) is TapeNode and _reads_current(node, edges):
                x = inputs[0]
                if isinstance(x, Tensor) and (x._requires_grad or follow_all):
                    _add_into(node, g, x, grads, leaf_grads, owned)
                if not retain_graph:
                    node.free()
                continue
            if not fresh:                      # one of its values was written in place since
                input_grads = _vjp_checking_writes(node, g, create_graph)
            elif node.op.holomorphic and (g.dtype.is_complex if g._data is None else
                                          g._data.dtype.kind == "c"):
                input_grads = _holomorphic_vjp(node.op, g, node.output_tensor(create_graph),
                                               inputs, node.attrs)
            else:
                input_grads = node.op.vjp(g, node.output_tensor(create_graph), *inputs,
                                          **node.attrs)
            parents = edges.parents.get(node)      # (set for entries read before a write)
            for i, (inp, gi) in enumerate(zip(inputs, input_grads)):
                if gi is None or not isinstance(inp, Tensor):
                    continue
                if parents is None:
                    parent, requires_grad = inp._node, inp._requires_grad
                else:
                    parent, requires_grad = parents[i]
                if not (requires_grad or follow_all):
                    continue
                if parent is not None:
                    gi = _fit(gi, inp)
                    prev = grads.get(parent)
                    if prev is None:
                        grads[parent] = gi
                    elif id(prev._data) in owned:
                        _add_in_place(prev, gi)
                    else:
                        grads[parent] = _sum(prev, gi, inp, owned, create_graph)
                    continue
                # A leaf's cotangents are summed back to its shape once, after the walk: the
                # fan-in of a bias broadcast at every step of a loop is added up first, then
                # reduced once instead of once per use.
                key = id(inp)
                prev = leaf_grads.get(key)
                if prev is None:
                    leaf_grads[key] = (inp, gi)
                    continue
                pg = prev[1]
                if id(pg._data) in owned:
                    _add_in_place(pg, _fit(gi, inp))
                    continue
                if pg.shape != gi.shape or gi.shape is None or None in gi.shape:
                    pg, gi = _fit(pg, inp), _fit(gi, inp)
                leaf_grads[key] = (inp, _sum(pg, gi, inp, owned, create_graph))
            if not retain_graph:
                node.free()
        if last:
            early.ran(last)
        for key, (leaf, g) in leaf_grads.items():
            leaf_grads[key] = (leaf, _fit(g, leaf))


def _is_complex(g):
    data = g._data
    return data.dtype.kind == "c" if data is not None else g.dtype.is_complex


def _holomorphic_vjp(op, g, out, inputs, attrs):
    """PyTorch's gradient ``g * conj(f'(z))`` of an op whose vjp is a real rule that extends
    holomorphically (``Op.holomorphic``): the conjugate of the rule's cotangents for ``conj(g)``."""
    return tuple(c if c is None else conj(c) for c in op.vjp(conj(g), out, *inputs, **attrs))


def _sum(a, b, like, owned, create_graph):
    """``add(a, b)``: two cotangents of ``like``. Where no graph of the gradient is being built
    and the sum already has ``like``'s shape, dtype and device, its array is noted in ``owned``
    (made here, held nowhere else), so that the next cotangent is added into it in place rather
    than by another op and array (a weight used at every step of a loop)."""
    total = add(a, b)
    data, want = total._data, like._data
    if not create_graph and data is not None and want is not None and \
            data.shape == want.shape and data.dtype == want.dtype and \
            total._device is like._device:
        owned.add(id(data))
    return total


def _add_in_place(acc, g):
    """``acc += g`` into an accumulator of ``_add_into`` (already of the input's shape)."""
    acc._device.xp.add(acc._data, g._data, out=acc._data, casting="same_kind")


def _add_into(node, g, x, grads, leaf_grads, owned):
    """Add ``node``'s cotangent for its input ``x`` into x's gradient in place (``vjp_into``),
    in an array of x's shape and dtype that only this walk holds (made on first use)."""
    parent = x._node
    prev = grads.get(parent) if parent is not None else leaf_grads.get(id(x), (None, None))[1]
    if prev is not None and id(prev._data) in owned:
        acc = prev
    else:
        xp = x._device.xp
        if prev is None:
            data = xp.zeros(x.shape, dtype=x._data.dtype)
        else:
            data = xp.array(_fit(prev, x)._data, dtype=x._data.dtype, copy=True)
        acc = Tensor._make(data, x._device)
        owned.add(id(data))
        if parent is not None:
            grads[parent] = acc
        else:
            leaf_grads[id(x)] = (x, acc)
    args = [a._data if isinstance(a, Tensor) else a for a in node.inputs]
    node.op.vjp_into(x._device.xp, acc._data, g._data, node.out, *args, **node.attrs)


def _reads_current(node, edges):
    """Whether ``node``'s first input leads where its tensor's history leads now (the fast path
    adds into ``x._node``); not so for a view's entry rebased after a write into its base, whose
    input is itself such a view (``_Edges``)."""
    parents = edges.parents.get(node)
    return parents is None or parents[0][0] is getattr(node.inputs[0], "_node", None)


def _written_since(node):
    """Whether one of ``node``'s inputs or its output was written in place after the node was
    recorded (their version counters' last writes against the node's epoch)."""
    for t in node.inputs:
        c = getattr(t, "_version", None)
        if c is not None and c[0] > node.epoch:
            return True
    c = node.out_version
    return c is not None and c[0] > node.epoch


def _vjp_checking_writes(node, g, create_graph):
    """``node``'s vjp, raising if it reads a saved value written in place after the node was
    recorded (``labkit.tensor.versions``); a vjp that only looks at shapes runs as usual."""
    written = {}
    for i, t in enumerate(node.inputs):
        c = getattr(t, "_version", None)
        if isinstance(t, Tensor) and c is not None and c[0] > node.epoch:
            written[versions.value_key(t)] = (f"its input {i}, {describe(t)},", c)
    c = node.out_version
    if c is not None and c[0] > node.epoch:
        written[id(node.out)] = (f"its output ({node.op.name}'s result),", c)
    out = node.output_tensor(create_graph)
    check = dispatch.push_mode(_WriteCheck(dispatch.current_mode(), written, node)) \
        if written else nullcontext()
    with check:
        if node.op.holomorphic and _is_complex(g):
            return _holomorphic_vjp(node.op, g, out, node.inputs, node.attrs)
        return node.op.vjp(g, out, *node.inputs, **node.attrs)


class _WriteCheck(dispatch.WrappingMode):
    """The mode a vjp runs under when values it may read were written in place: every op it
    applies is checked for such a value among its inputs, then passed to the mode below."""

    def __init__(self, below, written, node):
        super().__init__(below)
        self.written, self.node = written, node

    def apply(self, op, inputs, attrs):
        for i, a in enumerate(inputs):
            hit = self.written.get(versions.value_key(a)) if isinstance(a, Tensor) and \
                i not in op.shape_only else None
            if hit is not None:
                what, counter = hit
                name = self.node.op.name
                raise GradError(
                    f"backward through {name}: one of the values it saved for its gradient, "
                    f"{what} was modified by an in-place operation (add_, mul_, +=, copy_, "
                    f"assign..., or an optimiser step) after {name} used it: it is at version "
                    f"{counter[1]}; {name} saved version "
                    f"{versions.version_at(counter, self.node.epoch)}. Change a copy instead "
                    f"(t = t.clone() before the in-place op, or the out-of-place form t = t + 1), "
                    f"or make the change after backward().")
        return self.below.apply(op, inputs, attrs)


def _accumulate(leaf, g, handed, create_graph):
    """Add ``g`` into ``leaf.grad`` (or make it), then run the leaf's post-accumulate hooks."""
    if create_graph:
        leaf.grad = g if leaf.grad is None else add(leaf.grad, g)
    elif leaf.grad is None:
        leaf.grad = _own(g, handed)
    else:
        leaf.grad = Tensor._make(leaf.grad._data + g._data, leaf.grad._device)
    hooks.run_post_accumulate_hooks(leaf)


def _finish(leaf_grads, handed, target_keys, results, create_graph, accumulate, done=()):
    """Hand the leaves' cotangents out: into ``.grad`` (backward) and/or to ``results``;
    ``done``: ids of leaves already handed out during the walk."""
    if accumulate:
        for key, (leaf, g) in leaf_grads.items():
            if key in done:
                continue
            if g._data is None:   # a symbolic gradient: backward() inside graph capture
                dispatch.current_mode().accumulate_grad(leaf, g)
                continue
            _accumulate(leaf, g, handed, create_graph)
    for key, (leaf, g) in leaf_grads.items():
        for i in target_keys.get(key, ()):
            results[i] = g


def _root_cotangent(t, gradient):
    if gradient is None and t.dtype.is_complex:
        raise GradError(
            f"backward() on the complex tensor {describe(t)} needs a gradient argument: the "
            f"implicit gradient is only defined for a real value, as in PyTorch. Make the "
            f"result real first (z.abs().sum(), z.real.sum()) or pass gradient=...")
    if gradient is None:
        if t.numel() != 1:
            raise GradError(
                f"backward() on a tensor with {t.numel()} elements (shape {t.shape}) needs a "
                f"gradient argument: the implicit gradient is only defined for a single value. "
                f"Reduce it first (y.sum().backward()) or pass y.backward(gradient=...) with the "
                f"shape {t.shape}.")
        data = t._data
        if data is not None and t._device.type == "cpu" and dispatch._state.watch is None:
            return Tensor._make(t._device.xp.ones(data.shape, data.dtype), t._device)
        from ..tensor.creation import ones_like
        return ones_like(t)
    if not isinstance(gradient, Tensor):
        from ..tensor.creation import tensor
        gradient = tensor(gradient, dtype=t.dtype, device=t.device)
    if gradient.shape != t.shape:
        raise GradError(f"backward: gradient {describe(gradient)} does not match the output "
                        f"{describe(t)}")
    return gradient


def backward(t, gradient=None, retain_graph=None, create_graph=False):
    """``t.backward()``: add d(t)/d(leaf) to ``leaf.grad`` for every leaf requiring grad."""
    if not t._requires_grad:
        raise GradError(
            f"backward() on {describe(t)}, which does not require grad: either no input of the "
            f"computation had requires_grad=True (or it ran under lk.no_grad()), or the last op "
            f"has no gradient (comparisons, argmax, a detach, or an lk.op declared with vjp=None). "
            f"Create the inputs with requires_grad=True, or give the op a vjp rule.")
    if retain_graph is None:
        retain_graph = create_graph
    run_backward([t], [_root_cotangent(t, gradient)], None, retain_graph, create_graph, True)


def gradients(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False):
    """d(outputs)/d(inputs) as a list (like ``torch.autograd.grad``), without touching ``.grad``.

    An input that the outputs do not depend on gets zeros. With ``create_graph=True`` the
    returned gradients are themselves differentiable.
    """
    outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    for x in inputs:
        if not x._requires_grad:
            raise GradError(f"cannot differentiate with respect to {describe(x)}: it does not "
                            f"require grad")
    roots, cots = [], []
    for y, g in zip(outputs, grad_outputs):
        if y._requires_grad:
            roots.append(y)
            cots.append(_root_cotangent(y, g))
    if retain_graph is None:
        retain_graph = create_graph
    results = run_backward(roots, cots, inputs, retain_graph, create_graph, False)
    from ..tensor.creation import zeros_like
    out = []
    for x, g in zip(inputs, results):
        if g is None:
            g = zeros_like(x)
        elif not create_graph and g._node is not None:
            g = g.detach()
        out.append(g)
    return out
