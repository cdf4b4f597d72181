"""The single dispatch function ``bind`` and the stack of modes it hands ops to.

``bind(op, inputs, attrs)`` gives the op to the mode on top of the (thread-local) stack. The
bottom mode is eager execution; graph capture pushes its own mode, so capture is a second branch
here, not a second library, and no op ever asks which mode it is in. Each ``lk.vmap`` call
pushes one too: it runs ops' batching rules, whose own ops go to the mode beneath it.

Grad mode (whether eager execution records tape entries) lives here too, so that labkit.autodiff
and graph capture, which sit above this layer, switch it without this layer importing them.
"""
import contextlib
import threading


_NO_PHASE = contextlib.nullcontext()


class Mode:
    """A way of applying ops. Subclasses implement ``apply(op, inputs, attrs) -> Tensor``."""

    def apply(self, op, inputs, attrs):
        raise NotImplementedError

    def phase(self, name):
        """Ops applied inside the block belong to ``name`` ('backward' while the autodiff engine
        runs vjp rules); capture records it on each node so pictures can tell the parts apart."""
        return _NO_PHASE

    def set_grad(self, tensor, value):
        """``tensor.grad = value`` (capture records it when ``tensor`` is from outside)."""
        tensor._grad = value

    def get_grad(self, tensor):
        """The gradient that an update of ``tensor`` uses (optimisers, gradient clipping): its
        ``.grad``. Under capture, a gradient from before the trace is read when the graph runs
        (and a run that finds none is an error), not fixed at its traced value."""
        return tensor._grad

    def accumulate_grad(self, leaf, g):
        """Add a cotangent of this mode (a symbolic one, under capture) to ``leaf.grad``."""
        leaf._grad = g if leaf._grad is None else leaf._grad + g

    def value_before_write(self, target):
        """``target``'s value before an in-place write, as a tensor object of its own, for the
        out-of-place computation to take while autodiff records (its tape entry must not name
        ``target``, which is about to take the result's history); None lets the caller make one
        from ``target``'s memory."""
        return None

    def rematerialize(self, target, value):
        """Give ``target`` (a tensor saved for backward whose memory was released, as FSDP
        does with gathered parameters between forward and backward) ``value``'s contents,
        computed again: eagerly its array, under capture its graph node. Not a write: the
        value is the same, so no version changes."""
        target._data = value._data

    def write_inplace(self, target, result):
        """An in-place op's last step: give ``target`` the value ``result`` holds. Return True
        if the mode did it itself (capture rebinds a symbolic tensor to ``result``'s node);
        False lets the caller write ``target``'s memory with the ``assign`` op."""
        return False


class WrappingMode(Mode):
    """A mode over another one, ``below``: ``apply`` and every hook go to ``below`` unless the
    subclass changes them, so a mode that watches ops on their way down (the profiler's),
    checks them (the autodiff engine's) or rewrites some (``lk.vmap``'s) keeps everything else
    the mode under it does, hooks added to ``Mode`` later included. Subclass it for a new such
    mode and override what it changes.

    >>> import labkit as lk
    >>> from labkit.tensor import dispatch
    >>> class CountOps(dispatch.WrappingMode):
    ...     def __init__(self, below):
    ...         super().__init__(below)
    ...         self.names = []
    ...     def apply(self, op, inputs, attrs):
    ...         self.names.append(op.name)
    ...         return self.below.apply(op, inputs, attrs)
    >>> x = lk.ones(2)
    >>> with dispatch.push_mode(CountOps(dispatch.current_mode())) as counting:
    ...     y = (x * 3.0).exp()
    >>> counting.names
    ['mul', 'exp']
    """

    def __init__(self, below):
        self.below = below

    def apply(self, op, inputs, attrs):
        return self.below.apply(op, inputs, attrs)

    def phase(self, name):
        return self.below.phase(name)

    def set_grad(self, tensor, value):
        self.below.set_grad(tensor, value)

    def get_grad(self, tensor):
        return self.below.get_grad(tensor)

    def accumulate_grad(self, leaf, g):
        self.below.accumulate_grad(leaf, g)

    def value_before_write(self, target):
        return self.below.value_before_write(target)

    def write_inplace(self, target, result):
        return self.below.write_inplace(target, result)

    def rematerialize(self, target, value):
        self.below.rematerialize(target, value)


class _State(threading.local):
    def __init__(self):
        self.stack = [_eager_mode]
        self.mode = _eager_mode
        self.grad_enabled = True
        self.grad_all = False   # True while lk.gradients wants cotangents for every input
        self.inference = False  # True inside lk.inference_mode() (labkit/tensor/inference.py)
        self.watch = None       # what lk.function's tracing watches (labkit/graph/frozen.py)


_eager_mode = None   # set by labkit.tensor.eager at import
_state = None


def _install_eager(mode):
    global _eager_mode, _state
    _eager_mode = mode
    _state = _State()


def made_from_host(t):
    """Creation functions call this with each tensor they make from host data; a trace being
    watched (``lk.function`` tracing) records it as a value fixed at trace time."""
    watch = _state.watch
    if watch is not None:
        watch.made(t)
    return t


def read_to_host(t, how, frame):
    """``t.item()``, ``t.numpy()`` and ``np.asarray(t)`` call this; a trace being watched records
    a read of a value from outside it (``frame`` is the caller's, to find the user's line)."""
    watch = _state.watch
    if watch is not None:
        watch.read(t, how, frame)


# Tensor types made of other tensors (a DTensor holds one local tensor per device) handle the
# ops applied to them themselves: ``type -> handler(op, inputs, attrs)``. Empty unless such a
# type was registered, so that ``bind`` then costs one test more.
_type_handlers = {}


def register_tensor_type(cls, handler):
    """Let ``handler(op, inputs, attrs)`` apply every op that has an input of type ``cls`` (a
    Tensor subclass made of other tensors, such as ``labkit.distributed.tensor.DTensor``). The
    handler applies ops to the tensors inside, which go through ``bind`` as usual: eager,
    captured, differentiated. As PyTorch's ``__torch_dispatch__``, one level below the op."""
    _type_handlers[cls] = handler


def bind(op, inputs, attrs):
    """Apply ``op`` to ``inputs`` (a tuple) with ``attrs`` (a dict) in the current mode."""
    if _type_handlers:
        for a in inputs:
            handler = _type_handlers.get(type(a))
            if handler is not None:
                return handler(op, inputs, attrs)
    return _state.mode.apply(op, inputs, attrs)


def current_mode():
    return _state.mode


@contextlib.contextmanager
def push_mode(mode):
    """Run the block with ``mode`` on top of this thread's mode stack."""
    st = _state
    previous = st.mode    # not always stack[-1]: a vmap rule runs with the mode below its own
    st.stack.append(mode)
    st.mode = mode
    try:
        yield mode
    finally:
        st.stack.pop()
        st.mode = previous


def enter_mode(mode):
    """Put ``mode`` on top of this thread's mode stack until ``leave_mode(mode)``: for a mode
    switched on and off by two calls (a profile's start and stop) rather than a ``with``
    block (``push_mode``)."""
    st = _state
    st.stack.append(mode)
    st.mode = mode


def leave_mode(mode):
    """Take ``mode`` off this thread's stack, wherever it is in it; the mode on top becomes the
    current one."""
    st = _state
    if mode in st.stack:
        st.stack.remove(mode)
    st.mode = st.stack[-1]


@contextlib.contextmanager
def lowered(mode):
    """Run the block with ``mode`` (one below the top) as the current mode: a mode that handles
    an op by applying other ops (vmap's batching rules) hands those to the mode beneath it."""
    st = _state
    previous = st.mode
    st.mode = mode
    try:
        yield
    finally:
        st.mode = previous


def is_grad_enabled():
    """Whether eager ops record tape entries for autodiff (False inside ``lk.no_grad()``)."""
    return _state.grad_enabled


def set_grad_enabled(flag):
    _state.grad_enabled = bool(flag)


class grad_enabled:
    """``with grad_enabled(flag):`` runs the block with grad mode on or off, then restores it
    (a class, not a generator: the backward pass enters one per call)."""
    __slots__ = ("flag", "previous")

    def __init__(self, flag):
        self.flag = bool(flag)

    def __enter__(self):
        st = _state
        self.previous = st.grad_enabled
        st.grad_enabled = self.flag

    def __exit__(self, *exc):
        _state.grad_enabled = self.previous
        return False
