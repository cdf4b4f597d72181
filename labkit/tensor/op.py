"""The op declaration: one object holds an op's kernel, its shape/dtype rule and its vjp rule.

This is the heart of labkit. An op is declared once, in one place:

- ``kernel(xp, *inputs, **attrs)``: the forward computation, written once against the array
  module ``xp`` (numpy or cupy), so the same kernel runs on CPU and GPU;
- ``shape(*inputs, **attrs) -> (shape, dtype)``: the output's shape and labkit dtype, computed
  from the inputs' ``.shape`` / ``.dtype`` alone (graph capture uses it without running anything;
  eager mode uses it to explain a kernel failure);
- ``vjp(g, out, *inputs, **attrs) -> tuple``: one cotangent per input (None where there is
  none), written in labkit ops, so gradients work eagerly, inside a captured graph, and to any
  order. The engine sums broadcast gradients back to each input's shape and adds fan-in, so a
  rule returns the plain cotangent. A rule marked ``holomorphic`` (``labkit.tensor.ops.
  elementwise``) is written for real values and serves complex ones too: the engine gives a
  complex cotangent PyTorch's gradient ``conj(vjp(conj(g)))``;
- ``batch(inputs, bdims, **attrs) -> (out, bdim)`` (optional): the batching rule ``lk.vmap`` uses.
  It gets the inputs with their batch dimension still in them and, for each, where that
  dimension is (None for an input that is the same for every example), and computes the whole
  batch at once in labkit ops, returning the output and where its batch dimension is. Rules
  shared by a family of ops (elementwise, reductions) are in ``labkit.tensor.batching``. An op
  without one still works under vmap, one example at a time (with a warning naming it);
- ``amp`` (optional): the op's precision class under autocast (``lk.autocast``,
  ``labkit.tensor.autocast``): ``"low"`` (run in the low precision: matmul), ``"float32"``
  (run in float32: losses, ``prod``), ``"float32_gpu"`` / ``"low_gpu"`` (so under a GPU
  autocast only, as PyTorch's lists differ: exp, softmax, sum), ``"promote"`` (the widest
  input's float type), or None (the op runs on what it gets, and mixed inputs promote as
  usual);
- ``moves=True`` (optional): the kernel only moves or views values (reshape, indexing, casts),
  so it takes float16/bfloat16 arrays as they are; every other op computes them in float32
  and rounds its result back (``labkit.tensor.low_precision``).

Inputs are Tensors or Python scalars; attributes are keyword arguments (hashable values).
Calling the Op object applies it through the single dispatch function ``bind``.

The same API is public: a researcher declares a new op from a notebook exactly as the built-in
ones are declared, and it works eagerly, under autodiff and under capture.

>>> import labkit as lk
>>> from labkit.tensor.shape_rules import same_as_first
>>> @lk.op("cube", shape=same_as_first, vjp=lambda g, out, x: (g * 3 * x * x,))
... def cube(xp, x):
...     return x * x * x
>>> lk.grad(lambda x: cube(x))(lk.tensor(2.0)).item()
12.0
"""
from ..errors import GradError, hide_internal_frames
from . import dispatch
from .tensor import Tensor

REGISTRY = {}


def registered(name):
    """The op registered as ``name`` (how a pickled op comes back)."""
    return REGISTRY[name]


class Op:
    """A primitive op. Call it like a function: ``op(*inputs, **attrs)`` returns a Tensor."""

    __slots__ = ("name", "kernel", "shape", "vjp", "doc", "out_device", "stateful", "into",
                 "writes", "vjp_into", "batch", "family", "holomorphic", "amp", "moves",
                 "shape_only", "__weakref__")

    def __init__(self, name, kernel, shape, vjp=None, doc=None, stateful=False, into=None,
                 writes=None, vjp_into=None, batch=None, amp=None, moves=False, shape_only=()):
        if not callable(kernel) or not callable(shape):
            raise TypeError(f"op {name!r}: kernel and shape rule must be callable")
        self.name = name
        self.kernel = kernel
        self.shape = shape
        self.vjp = vjp
        # a real vjp rule that holds for complex inputs through the conjugate (see ``vjp``)
        self.holomorphic = getattr(vjp, "holomorphic", False)
        self.doc = doc or kernel.__doc__
        # Ops whose output lives on another device than their inputs (transfers) set this to
        # ``attrs -> Device``; every other op's output stays on its inputs' device.
        self.out_device = None
        # Stateful ops (assign, queue ops...) have side effects: a captured function runs every
        # one of them, in program order, whether or not its result is fetched.
        self.stateful = stateful
        # ``into(xp, **attrs) -> f`` where ``f(*inputs, out=array)`` computes the kernel into a
        # given array (graph plans write into reused buffers through it); None (as the field,
        # or as what it returns for some attributes): the op cannot.
        self.into = into
        # the index of the input the kernel writes into in place (assign ops), or None
        self.writes = writes
        # ``vjp_into(xp, acc, g, out, *inputs, **attrs)``: adds the vjp's cotangent of input 0
        # into the array ``acc`` in place (for an op whose only differentiable input is the
        # first and whose cotangent is mostly zeros, such as indexing); None: the engine uses
        # ``vjp``. Only a backward that is not itself recorded uses it.
        self.vjp_into = vjp_into
        # the batching rule (``lk.vmap``), or None: vmap then runs the op once per example
        self.batch = batch.make(self) if isinstance(batch, BatchFamily) else batch
        if amp not in AMP_CLASSES:
            raise ValueError(f"op {name!r}: amp={amp!r} is not a precision class; use one of "
                             f"{AMP_CLASSES}")
        # the precision class autocast casts the inputs by (labkit.tensor.autocast)
        self.amp = amp
        # True: float16/bfloat16 inputs reach the kernel as they are (it only moves values)
        self.moves = moves or writes is not None
        # the indices of inputs whose values the kernel never reads, only their shape, dtype
        # and device (``zeros_like``): a backward pass may pass them after an in-place write
        self.shape_only = frozenset(shape_only)
        # the family the op was declared in (``labkit.tensor.batching``: ELEMENTWISE,
        # REDUCTION...), or None; other rules shared by families (how a distributed tensor's
        # placements pass through the op) are looked up by it
        self.family = batch if isinstance(batch, BatchFamily) else None

    def __call__(self, *inputs, **attrs):
        try:
            return dispatch.bind(self, inputs, attrs)
        except Exception as e:       # an error leaves labkit here: hide labkit's frames
            hide_internal_frames(e)
            raise

    def __repr__(self):
        return f"<op {self.name}>"

    def __reduce__(self):
        """Pickled by its name (a model holding ``lk.tanh`` saves, as one holding
        ``torch.tanh`` does); an op that is not the registered one of its name is not."""
        if REGISTRY.get(self.name) is not self:
            raise TypeError(f"cannot pickle {self!r}: it is not the registered op of its name")
        return registered, (self.name,)

    @property
    def differentiable(self):
        return self.vjp is not None and not getattr(self.vjp, "missing", False)


# autocast's precision classes (labkit.tensor.autocast); None: the op is not cast
AMP_CLASSES = (None, "low", "float32", "low_gpu", "float32_gpu", "promote")


class BatchFamily:
    """A batching rule shared by a family of ops: ``make(op)`` gives each op of the family its
    own rule (which calls that op), when the op is declared: ``@op(..., batch=family)``."""
    __slots__ = ("make",)

    def __init__(self, make):
        self.make = make


_UNSET = object()


def _missing_vjp(name):
    """The vjp of an op declared without ``vjp=``: backward through it is an error."""
    def vjp(g, out, *inputs, **attrs):
        raise GradError(
            f"backward through {name}: the op was declared without a gradient rule. Give it one "
            f"(lk.op({name!r}, shape=..., vjp=lambda g, out, *inputs: (...))), or declare "
            f"vjp=None if it has no gradient (its result then never requires grad).")
    vjp.missing = True
    return vjp


def op(name, *, shape, vjp=_UNSET, register=True, stateful=False, into=None, writes=None,
       vjp_into=None, batch=None, amp=None, moves=False, shape_only=()):
    """Decorator declaring a primitive op from its kernel.

    ``shape`` is the shape/dtype rule, ``vjp`` the gradient rule. ``vjp=None`` says the op has
    no gradient (comparisons, argmax: its result never requires grad); leaving ``vjp`` out
    makes a backward pass through the op an error naming it, rather than a silent zero.
    ``into`` (optional): ``into(xp, **attrs)`` gives a function computing the kernel into a
    given array, ``f(*inputs, out=array)``, for graph plans that reuse buffers. ``writes`` (optional): the
    index of the input the kernel changes in place (autodiff then checks that no value it saved
    was changed before the backward pass). ``vjp_into`` (optional): the same cotangent of input
    0 as ``vjp`` gives, added in place into a gradient array the engine owns, so that many
    slices of one tensor (an RNN's time steps) each cost their slice, not a tensor-sized array.
    ``batch`` (optional): the batching rule ``lk.vmap`` uses (see the module's docstring), or a
    ``BatchFamily`` from ``labkit.tensor.batching``. ``amp`` (optional): the op's precision
    class under autocast; ``moves=True``: the kernel takes float16/bfloat16 arrays as they are
    (see the module's docstring). ``shape_only`` (optional): the indices of inputs whose values
    the kernel never reads, only their shape, dtype and device.
    Registered ops are walked by the test suite, so each one needs a test entry. Redeclaring a
    name replaces the earlier op (handy while iterating in a notebook).
    """
    if vjp is _UNSET:
        vjp = _missing_vjp(name)

    def declare(kernel):
        o = Op(name, kernel, shape, vjp, stateful=stateful, into=into, writes=writes,
               vjp_into=vjp_into, batch=batch, amp=amp, moves=moves, shape_only=shape_only)
        if register:
            REGISTRY[name] = o
        return o
    return declare


def needs_grad(x):
    """For use in vjp rules: whether input ``x`` wants a cotangent.

    A rule may return None for inputs that don't (Python scalars, tensors that do not require
    grad) instead of computing a cotangent the engine would throw away: ``x @ W`` with data ``x``
    then costs one matmul in backward, not two.
    """
    return isinstance(x, Tensor) and (x._requires_grad or dispatch._state.grad_all)
