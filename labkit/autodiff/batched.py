"""``lk.vmap``: a function written for one example, run on a batch of examples at once.

vmap is one more mode on the dispatch stack, as in JAX's batching interpreter. Inside
``lk.vmap(f)(xs)``, ``f`` sees each mapped argument as a ``BatchedTensor``: a tensor whose shape
is one example's, holding the whole batch (its *physical* tensor) and where the batch dimension
is in it. Every op ``f`` applies reaches ``VmapMode.apply`` through ``bind``; the mode runs the
op's batching rule (``Op.batch``, declared beside its vjp) on the physical tensors, once for the
whole batch, with the mode below it as the current mode. An op without a rule runs once per
example (with a one-time warning naming it). Ops on tensors that are not batched by this vmap
go straight to the mode below, so nested vmaps are levels of one stack; and when no vmap runs,
nothing of this runs at all.

Autodiff composes both ways:

- grad of vmap: the rules' ops are ordinary ops on physical tensors, taped as usual;
- vmap of grad (per-example gradients): when an input of a batched op requires grad, the mode
  records a tape entry on the *logical* result, so the engine walks one example's computation,
  with one example's shapes; the vjp rules it runs get batched cotangents, which go through this
  mode again and come out batched.

>>> import labkit as lk
>>> W = lk.tensor([[1.0, 2.0], [3.0, 4.0]])
>>> lk.vmap(lambda x: W @ x)(lk.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])).tolist()
[[1.0, 3.0], [2.0, 4.0], [3.0, 7.0]]
>>> loss = lambda w, x: ((x * w).sum() - 1.0) ** 2
>>> lk.vmap(lk.grad(loss), in_axes=(None, 0))(lk.ones(2), lk.eye(2)).tolist()   # per example
[[0.0, 0.0], [0.0, 0.0]]
"""
import functools
import inspect
import math
import sys
import warnings

from ..errors import GradError, LabkitError, ShapeError, VmapError, describe, user_frame
from ..tensor import dispatch
from ..tensor.dispatch import WrappingMode
from ..tensor.ops.composite import stack
from ..tensor.ops.elementwise import cast
from ..tensor.ops.index import _FULL, _getitem
from ..tensor.ops.shape import batch_size, broadcast_to, expand_dims, materialized, moved
from ..tensor.tape import TapeNode
from ..tensor.tensor import Tensor
from . import trees


class VmapFallbackWarning(UserWarning):
    """An op without a batching rule ran once per example under lk.vmap (said once per op)."""


class BatchedTensor(Tensor):
    """What a function vmapped by ``lk.vmap`` sees: one example's shape (``shape``, ``ndim``,
    ``size``), holding the whole batch. Ops on it run on the batch at once; anything that needs
    one example's value now (``item()``, ``bool()``, ``numpy()``) is an error saying what to do
    instead."""

    __slots__ = ("_value", "_bdim", "_level")

    @classmethod
    def _wrap(cls, value, bdim, level):
        t = cls._make(None, value._device)
        t._value, t._bdim, t._level = value, bdim, level
        return t

    @property
    def shape(self):
        s, d = tuple(self._value.shape), self._bdim
        return s[:d] + s[d + 1:]

    @property
    def ndim(self):
        return self._value.ndim - 1

    @property
    def dtype(self):
        return self._value.dtype

    def numel(self):
        return math.prod(self.shape)

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        for i in range(self.shape[0]):
            yield self[i]

    def detach(self):
        return BatchedTensor._wrap(self._value.detach(), self._bdim, self._level)

    def _concrete(self, what, instead):
        raise VmapError(
            f"{what} needs the value of one example, but inside lk.vmap this tensor (per-example "
            f"shape {self.shape}, {self.dtype}) holds a whole batch of {self._level.size} "
            f"examples at once. {instead}")

    def __repr__(self):
        return (f"BatchedTensor(lvl={self._level.depth}, bdim={self._bdim}, "
                f"value={self._value!r})")

    def _repr_html_(self):
        return None


def _refusal(what, instead):
    def method(self, *args, **kwargs):
        self._concrete(what, instead)
    return method


_KEEP = "Keep it a tensor (return it from the vmapped function)."
for _name, _what, _instead in (
        ("__bool__", "Python control flow on a tensor (if/while/and/or, bool(t))",
         "Choose per example with lk.where(cond, a, b), or take the decision outside the "
         "vmapped function."),
        ("item", "t.item()", _KEEP), ("numpy", "t.numpy()", _KEEP), ("tolist", "t.tolist()", _KEEP),
        ("__array__", "NumPy (np.asarray, a NumPy function)", "Use labkit ops inside lk.vmap."),
        ("__float__", "float(t)", _KEEP), ("__int__", "int(t)", _KEEP),
        ("__index__", "using a tensor as a Python int (an index, a size)",
         "To index per example, use lk.gather / lk.take or x[idx] with idx a tensor."),
        ("__dlpack__", "DLPack export", _KEEP)):
    setattr(BatchedTensor, _name, _refusal(_what, _instead))


class BatchedTapeNode(TapeNode):
    """A tape entry on the logical (per-example) result of a batched op: its ``out`` is the
    physical tensor, given to the vjp rule as a BatchedTensor again."""

    __slots__ = ("bdim", "level")

    def __init__(self, op, inputs, attrs, out, bdim, level):
        super().__init__(op, inputs, attrs, out, out._device)
        self.bdim = bdim
        self.level = level

    def output_tensor(self, linked):
        t = BatchedTensor._wrap(self.out, self.bdim, self.level)
        if linked:
            t._requires_grad = True
            t._node = self
        return t


_warned = set()


def _warn_once(name, size):
    if name in _warned:
        return
    _warned.add(name)
    _, level = user_frame(sys._getframe(0))     # the warning names the user's line
    level += 1
    warnings.warn(
        f"lk.vmap: op '{name}' has no batching rule (for inputs like these), so it runs once "
        f"per example (a Python loop over the {size} examples) and the results are stacked. "
        f"Give it a rule to run the batch at once: lk.op({name!r}, ..., batch=rule), see "
        f"labkit.tensor.batching.", VmapFallbackWarning, stacklevel=level)


def one_by_one(fn, name, inputs, bdims):
    """``fn`` applied to each example of a batch in turn, the results stacked: ``(batch, 0)``.
    What vmap does for an op without a batching rule (``name``: the op, for the warning)."""
    size = batch_size(inputs, bdims)
    _warn_once(name, size)
    outs = []
    for i in range(size):
        example = [x if d is None else _getitem(x, spec=(_FULL,) * d + (("i", i),))
                   for x, d in zip(inputs, bdims)]
        outs.append(fn(*example))
    shapes = {tuple(o.shape) for o in outs}
    if len(shapes) > 1:
        raise VmapError(
            f"lk.vmap: op {name} gives the examples results of different shapes "
            f"({', '.join(str(s) for s in sorted(shapes))}), which cannot be stacked into one "
            f"batch (a boolean mask that differs from example to example?). Keep shapes "
            f"fixed: lk.where(mask, x, 0) instead of x[mask].")
    return stack(outs), 0


def _same_shape(got, rule):
    if rule is None:
        return True
    return len(got) == len(rule) and all(r is None or g == r for g, r in zip(got, rule))


class VmapMode(WrappingMode):
    """The mode of one ``lk.vmap`` call: applies batching rules to ops on its BatchedTensors."""

    def __init__(self, below, size, depth):
        super().__init__(below)   # the mode under this one: rules' ops and unbatched ops go there
        self.size = size
        self.depth = depth

    def apply(self, op, inputs, attrs):
        for a in inputs:
            if type(a) is BatchedTensor and a._level is self:
                return self._batched(op, inputs, attrs)
        return self.below.apply(op, inputs, attrs)

    def _batched(self, op, inputs, attrs):
        shape, dtype = op.shape(*inputs, **attrs)     # errors name one example's shapes
        args, bdims = [], []
        for a in inputs:
            if type(a) is BatchedTensor and a._level is self:
                args.append(a._value)
                bdims.append(a._bdim)
            else:
                args.append(a)
                bdims.append(None)
        st = dispatch._state
        tape = op.vjp is not None and st.grad_enabled and any(
            isinstance(a, Tensor) and a._requires_grad for a in inputs)
        with dispatch.lowered(self.below):
            result = NotImplemented if op.batch is None else op.batch(tuple(args), tuple(bdims),
                                                                      **attrs)
            if result is NotImplemented:
                result = self._one_by_one(op, args, bdims, attrs, shape, dtype)
            out, d = result
            if out.dtype is not dtype:    # promotion that sees one example's ranks
                out = cast(out, dtype=dtype.name)
            if d is None:
                if not tape:
                    return out
                out, d = materialized(out, None, self.size), 0
        batched = BatchedTensor._wrap(out, d, self)
        if not _same_shape(batched.shape, shape):
            raise LabkitError(
                f"lk.vmap: the batching rule of op {op.name} gave one example a result of shape "
                f"{batched.shape}, but the op's shape rule says {tuple(shape)} (inputs: "
                f"{', '.join(describe(a) for a in inputs)}, attributes {attrs}). The rule is "
                f"wrong: fix it, or declare the op without one (batch=None) meanwhile.")
        if tape:
            batched._requires_grad = True
            batched._node = BatchedTapeNode(op, inputs, attrs, out, d, self)
        return batched

    def _one_by_one(self, op, args, bdims, attrs, shape, dtype):
        if not self.size:
            _warn_once(op.name, 0)
            from ..tensor.creation import zeros
            device = next(a._device for a in args if isinstance(a, Tensor))
            return zeros((0,) + tuple(shape), dtype=dtype, device=device), 0
        return one_by_one(functools.partial(op, **attrs), op.name, args, bdims)

    def set_grad(self, tensor, value):
        if type(value) is BatchedTensor and value._level is self:
            raise _backward_inside(tensor)
        self.below.set_grad(tensor, value)

    def accumulate_grad(self, leaf, g):
        if type(g) is BatchedTensor and g._level is self:
            raise _backward_inside(leaf)
        self.below.accumulate_grad(leaf, g)


def _backward_inside(leaf):
    return GradError(
        f"backward() inside lk.vmap: the gradient of {describe(leaf)} differs from example to "
        f"example, and .grad holds one tensor. Use lk.grad inside the vmap instead "
        f"(per-example gradients: lk.vmap(lk.grad(loss), in_axes=(None, 0))(params, xs)).")


# ---- lk.vmap ----------------------------------------------------------------------------------
_UNSET = object()


def vmap(fun, in_axes=0, out_axes=0, randomness="error", *, chunk_size=None, axis_size=None,
         in_dims=_UNSET, out_dims=_UNSET):
    """``fun`` of one example made a function of a batch (JAX's ``vmap``; PyTorch's
    ``torch.vmap`` spellings ``in_dims=`` / ``out_dims=`` are accepted too).

    ``in_axes``: for each positional argument, the dimension holding the examples (an int,
    negative counting from the end), or None for an argument shared by every example; one int
    or None for all of them, or a tuple with one entry per argument, each an int, None, or a
    tuple/list/dict matching that argument's structure (``(None, 0)``, ``({'w': None}, 0)``).
    Keyword arguments are shared by all examples (as in ``torch.vmap``). ``out_axes``: where
    each result gets the example dimension (the same forms, matching the results). ``axis_size``:
    the number of examples, needed only when no argument is mapped.

    ``randomness``: labkit's random functions called inside draw one value shared by every
    example, PyTorch's ``'same'``; ``'error'`` (PyTorch's default) and ``'same'`` are accepted,
    ``'different'`` is refused. ``chunk_size`` is accepted and changes nothing: the whole batch
    runs at once, with the same values.

    The vmapped function sees one example's shapes, so it is written as for one example; every
    op runs once on the whole batch (an op without a batching rule runs once per example, with
    a warning naming it). Composes with ``lk.grad`` / ``lk.jvp`` / ``lk.vjp`` either way round,
    with ``lk.function``, and with itself.

    >>> import labkit as lk
    >>> dot = lambda a, b: (a * b).sum()
    >>> lk.vmap(dot)(lk.ones(3, 2), lk.ones(3, 2)).tolist()
    [2.0, 2.0, 2.0]
    >>> lk.vmap(dot, in_axes=(0, None))(lk.eye(2), lk.tensor([5.0, 7.0])).tolist()
    [5.0, 7.0]
    >>> lk.vmap(lk.vmap(dot))(lk.ones(4, 3, 2), lk.ones(4, 3, 2)).shape   # nested
    (4, 3)
    """
    where = f"lk.vmap({getattr(fun, '__name__', 'fun')})"
    in_name, in_axes = _spelling(where, "in_axes", in_axes, "in_dims", in_dims)
    out_name, out_axes = _spelling(where, "out_axes", out_axes, "out_dims", out_dims)
    check_options(where, randomness, chunk_size)

    @functools.wraps(fun)
    def batched(*args, **kwargs):
        return call(fun, args, kwargs, in_axes, out_axes, axis_size, where, in_name, out_name)
    return batched


def _spelling(where, name, value, alias, alias_value):
    """(the name the caller used, its value): JAX's ``name`` or PyTorch's ``alias``."""
    if alias_value is _UNSET:
        return name, value
    if value != 0:
        raise TypeError(f"{where}: got both {name}= and {alias}= (PyTorch's name for it); pass "
                        f"one of them")
    return alias, alias_value


def check_options(where, randomness, chunk_size):
    """PyTorch's ``randomness`` and ``chunk_size`` arguments, checked (see ``vmap``)."""
    if randomness not in ("error", "same", "different"):
        raise ValueError(f"{where}: randomness must be 'error', 'same' or 'different', got "
                         f"{randomness!r}")
    if randomness == "different":
        raise VmapError(f"{where}: randomness='different' is not supported: random functions "
                        f"inside lk.vmap draw one value shared by every example "
                        f"(randomness='same'). Draw the batch's random numbers outside and pass "
                        f"them in, mapped over their first dimension.")
    if chunk_size is not None and (isinstance(chunk_size, bool) or
                                   not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"{where}: chunk_size must be a positive int or None, got "
                         f"{chunk_size!r}")


def _arg_names(fun, n):
    try:
        names = [p.name for p in inspect.signature(fun).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    return [names[i] if i < len(names) else f"args[{i}]" for i in range(n)]


def _axes_per_arg(in_axes, args, names, where, in_name):
    if in_axes is None or isinstance(in_axes, int):
        return [in_axes] * len(args)
    if not isinstance(in_axes, (tuple, list)):
        raise ValueError(f"{where}: {in_name} must be an int, None, or a tuple with one entry per "
                         f"positional argument; got {in_axes!r}")
    if len(in_axes) != len(args):
        raise ValueError(f"{where}: {in_name}={in_axes!r} has {len(in_axes)} entries, but the "
                         f"function was called with {len(args)} positional argument(s) "
                         f"({', '.join(names)}): give one entry per argument")
    return list(in_axes)


def call(fun, args, kwargs, in_axes, out_axes, axis_size, where, in_name="in_axes",
         out_name="out_axes"):
    """``fun(*args, **kwargs)`` vmapped (the body of ``lk.vmap`` and ``lk.func.vmap``)."""
    names = _arg_names(fun, len(args))
    leaves, specs, mapped = [], [], []
    for arg, name, axes in zip(args, names, _axes_per_arg(in_axes, args, names, where, in_name)):
        arg_leaves, spec, paths = trees.flatten(arg, name)
        specs.append((spec, len(arg_leaves)))
        for leaf, path, ax in zip(arg_leaves, paths,
                                  trees.broadcast_prefix(axes, arg, f"{where}: {in_name}", name)):
            leaves.append(leaf)
            mapped.append(None if ax is None else _in_axis(leaf, ax, path, where, in_name))
    sizes = [(m[0], m[1], leaf.shape[m[1]]) for leaf, m in zip(leaves, mapped) if m is not None]
    size = _batch_size(sizes, axis_size, where, in_name)
    mode = VmapMode(dispatch.current_mode(), size,
                    1 + sum(isinstance(m, VmapMode) for m in dispatch._state.stack))
    inner = [leaf if m is None else BatchedTensor._wrap(leaf, m[1], mode)
             for leaf, m in zip(leaves, mapped)]
    it = iter(inner)
    new_args = [trees.unflatten(spec, [next(it) for _ in range(n)]) for spec, n in specs]
    with dispatch.push_mode(mode):
        out = fun(*new_args, **kwargs)
    return _unbatch(out, out_axes, mode, where, out_name)


def _in_axis(leaf, ax, path, where, in_name):
    if isinstance(ax, bool) or not isinstance(ax, int):
        raise ValueError(f"{where}: {in_name} entries are ints or None; got {ax!r} for {path}")
    if not isinstance(leaf, Tensor):
        raise ValueError(f"{where}: {in_name} maps {path} over its dimension {ax}, but it is a "
                         f"{type(leaf).__name__}, not a tensor: give it None to share it across "
                         f"the examples")
    nd = leaf.ndim
    if not -nd <= ax < nd:
        raise ShapeError(f"{where}: {in_name}={ax} for {path} ({describe(leaf)}) is out of range: "
                         f"a tensor with {nd} dimension(s) has dims {-nd}..{nd - 1}"
                         if nd else
                         f"{where}: {in_name}={ax} for {path} ({describe(leaf)}): a 0-d tensor "
                         f"has no dimension to map over; give it None")
    return path, ax % nd


def _batch_size(sizes, axis_size, where, in_name):
    distinct = {n for _, _, n in sizes}
    if len(distinct) > 1:
        parts = ", ".join(f"{path} has size {n} at dim {ax}" for path, ax, n in sizes)
        raise ShapeError(f"{where}: the mapped dimensions differ in size ({parts}); every "
                         f"argument mapped over must have one size along its {in_name}")
    if not sizes:
        if axis_size is None:
            raise ValueError(f"{where}: {in_name} maps no argument (every entry is None), so "
                             f"there is no batch size: map at least one tensor, or pass "
                             f"axis_size=")
        return int(axis_size)
    size = sizes[0][2]
    if axis_size is not None and axis_size != size:
        raise ShapeError(f"{where}: axis_size={axis_size}, but the mapped arguments have size "
                         f"{size}")
    return size


def _unbatch(out, out_axes, mode, where, out_name):
    leaves, spec, paths = trees.flatten(out, "output")
    axes = trees.broadcast_prefix(out_axes, out, f"{where}: {out_name}", "output")
    result = []
    for leaf, path, ax in zip(leaves, paths, axes):
        if ax is not None and (isinstance(ax, bool) or not isinstance(ax, int)):
            raise ValueError(f"{where}: {out_name} entries are ints or None; got {ax!r} for "
                             f"{path}")
        batched = type(leaf) is BatchedTensor and leaf._level is mode
        if not isinstance(leaf, Tensor):
            if ax is not None:
                raise VmapError(f"{where}: {path} is a {type(leaf).__name__}, not a tensor: a "
                                f"vmapped function returns tensors (or give it {out_name} None)")
            result.append(leaf)
            continue
        if ax is None:
            if batched:
                raise VmapError(f"{where}: {out_name} is None for {path}, but it differs from "
                                f"example to example; give it an axis")
            result.append(leaf)
            continue
        nd = leaf.ndim + 1
        if not -nd <= ax < nd:
            raise ShapeError(f"{where}: {out_name}={ax} for {path} (per example "
                             f"{describe(leaf)}) is out of range: the batched result has "
                             f"{nd} dimension(s), dims {-nd}..{nd - 1}")
        ax %= nd
        if batched:
            result.append(moved(leaf._value, leaf._bdim, ax))
        else:                      # the same for every example: repeated (a broadcast view)
            shape = tuple(leaf.shape)
            result.append(broadcast_to(expand_dims(leaf, axes=(ax,)),
                                       shape=shape[:ax] + (mode.size,) + shape[ax:]))
    return trees.unflatten(spec, result)
