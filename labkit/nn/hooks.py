"""Module hooks: the handle that removes one, and the gate that gives a module's full backward
hooks the gradients of its inputs and outputs.

A module with backward hooks passes its tensor inputs, and then its tensor outputs, through one
identity op each side (``module_backward_hook``). Several tensors are first packed into one
vector, so that a single node sees every gradient of a side at once, as PyTorch's
``BackwardHookFunction`` does: the output side records ``grad_output`` (after the backward
pre-hooks, which may replace it), the input side calls the hooks with ``grad_input`` and
``grad_output`` and passes on what they return. The gate's vjp is written in labkit ops, so
under graph capture it runs when the backward pass is traced (the hooks then see symbolic
tensors, once).
"""
import itertools
import warnings
import weakref

from ..errors import GradError
from ..tensor import dispatch
from ..tensor.op import Op
from ..tensor.ops.elementwise import cast
from ..tensor.ops.index import getitem_slices, zeros_like
from ..tensor.ops.shape import concat, reshape
from ..tensor.shape_rules import same_as_first
from ..tensor.tensor import Tensor

_ids = itertools.count()


class RemovableHandle:
    """What ``register_*_hook`` returns: ``remove()`` unregisters the hook (also usable as a
    context manager: the hook is removed when the block ends)."""

    __slots__ = ("_table", "id")

    def __init__(self, table):
        self._table = weakref.ref(table)
        self.id = next(_ids)

    def remove(self):
        table = self._table()
        if table is not None:
            table.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def add_hook(table, hook, prepend=False, **options):
    """Put ``hook`` (with its ``options``) into the ordered ``table``; returns its handle."""
    if not callable(hook):
        raise TypeError(f"a hook must be callable, got {type(hook).__name__}")
    handle = RemovableHandle(table)
    table[handle.id] = (hook, options)
    if prepend:
        for key in [k for k in table if k != handle.id]:
            table[key] = table.pop(key)
    return handle


# ---- full backward hooks ----------------------------------------------------------------------
class BackwardHookCall:
    """One call of a module that has backward hooks: where its tensors are among the
    arguments and outputs, and the gradient of its outputs once the backward pass has it."""

    __slots__ = ("module", "n_inputs", "input_index", "n_outputs", "output_index",
                 "grad_outputs")

    def __init__(self, module):
        self.module = module
        self.input_index = self.output_index = None
        self.n_inputs = self.n_outputs = 0
        self.grad_outputs = None

    def setup_inputs(self, args):
        self.n_inputs = len(args)
        args, self.input_index = _gate(self, "input", args)
        return args

    def setup_outputs(self, result):
        single = not isinstance(result, tuple)
        outputs = (result,) if single else result
        self.n_outputs = len(outputs)
        outputs, self.output_index = _gate(self, "output", outputs)
        return outputs[0] if single else outputs

    def run_output_side(self, grads):
        """Backward reached the outputs: record (and let pre-hooks replace) ``grad_output``."""
        grad_outputs = _with_none(self.output_index, grads, self.n_outputs)
        for hook, _ in list(self.module._backward_pre_hooks.values()):
            new = hook(self.module, grad_outputs)
            if new is None:
                continue
            _check_count("backward pre-hook", "grad_output", new, len(grad_outputs))
            grad_outputs = tuple(new)
        self.grad_outputs = grad_outputs
        if self.input_index is None:          # no input wants a gradient: fire the hooks now
            if self.module._backward_hooks:
                warnings.warn(f"{type(self.module).__name__}: a full backward hook fires with "
                              f"grad_input of Nones, since no input requires grad",
                              stacklevel=2)
            grad_inputs = (None,) * self.n_inputs
            for hook, _ in list(self.module._backward_hooks.values()):
                new = hook(self.module, grad_inputs, grad_outputs)
                if new is not None and any(g is not None for g in new):
                    raise GradError(f"{type(self.module).__name__}: a backward hook of a module "
                                    f"none of whose inputs requires grad must return None")
            self.grad_outputs = None
        return [grad_outputs[i] for i in self.output_index]

    def run_input_side(self, grads):
        """Backward reached the inputs: call the hooks with grad_input and grad_output."""
        if self.grad_outputs is None:   # reached the inputs without the outputs (double backward)
            return grads
        grad_inputs = _with_none(self.input_index, grads, self.n_inputs)
        for hook, _ in list(self.module._backward_hooks.values()):
            new = hook(self.module, grad_inputs, self.grad_outputs)
            if new is None:
                continue
            _check_count("backward hook", "grad_input", new, len(grad_inputs))
            grad_inputs = tuple(new)
        self.grad_outputs = None
        return [grad_inputs[i] for i in self.input_index]


def _check_count(what, name, got, expected):
    if len(got) != expected:
        raise GradError(f"a module {what} returned {len(got)} {name} values, expected "
                        f"{expected} (one per tensor, None where there is none)")


def _with_none(index, values, size):
    out = [None] * size
    for i, v in zip(index, values):
        out[i] = v
    return tuple(out)


def _gate(call, side, items):
    """``items`` with its tensors replaced by views of one gated vector, and their positions
    (None, and ``items`` unchanged, when no tensor among them requires grad)."""
    index = [i for i, t in enumerate(items) if isinstance(t, Tensor)]
    tensors = [items[i] for i in index]
    if not (dispatch.is_grad_enabled() and any(t.requires_grad for t in tensors)):
        return items, None
    wanted = [t.requires_grad for t in tensors]
    flat = [reshape(t, shape=(-1,)) for t, w in zip(tensors, wanted) if w]
    dtypes = [t.dtype for t, w in zip(tensors, wanted) if w]
    common = dtypes[0]
    for d in dtypes[1:]:
        if d.itemsize > common.itemsize:
            common = d
    flat = [f if f.dtype is common else cast(f, dtype=common.name) for f in flat]
    packed = flat[0] if len(flat) == 1 else concat(*flat, dim=0)
    gated = _GATE(packed, call=call, side=side, layout=tuple(
        (tuple(t.shape), t.dtype.name) for t, w in zip(tensors, wanted) if w),
        wanted=tuple(wanted))
    parts = iter(_unpack(gated, [(tuple(t.shape), t.dtype.name) for t, w in zip(tensors, wanted)
                                 if w]))
    out = list(items)
    for i, t, w in zip(index, tensors, wanted):
        if w:
            out[i] = next(parts)
    return (tuple(out) if isinstance(items, tuple) else type(items)(out)), index


def _unpack(vector, layout):
    if len(layout) == 1 and vector.dtype.name == layout[0][1]:
        return [reshape(vector, shape=layout[0][0])]
    parts, start = [], 0
    for shape, dtype in layout:
        n = 1
        for s in shape:
            n *= s
        part = reshape(getitem_slices(vector, 0, start, start + n), shape=shape)
        parts.append(part if part.dtype.name == dtype else cast(part, dtype=dtype))
        start += n
    return parts


def _gate_vjp(g, out, x, call, side, layout, wanted):
    parts = _unpack(g, layout)                  # one per tensor that wants a gradient
    given = iter(parts)
    full = [next(given) if w else None for w in wanted]
    new = (call.run_output_side if side == "output" else call.run_input_side)(full)
    chosen = [n if n is not None else zeros_like(p)           # a hook's None: no gradient
              for n, p in zip((n for n, w in zip(new, wanted) if w), parts)]
    flat = [reshape(c, shape=(-1,)) for c in chosen]
    flat = [f if f.dtype is g.dtype else cast(f, dtype=g.dtype.name) for f in flat]
    return (flat[0] if len(flat) == 1 else concat(*flat, dim=0),)


_GATE = Op("module_backward_hook", lambda xp, x, **attrs: x, same_as_first, _gate_vjp,
           moves=True)
