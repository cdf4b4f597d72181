"""Autocast: a mode on the dispatch stack that casts an op's inputs by the op's precision class.

Inside ``with lk.autocast("cpu", dtype=lk.bfloat16):`` every op that declares a precision class
(``amp=`` beside its kernel, ``labkit.tensor.op``; ``@precision(...)`` on a function written in
ops, such as ``F.linear``) has its floating-point inputs on that device type cast before it runs:

- ``"low"``: to the autocast dtype (bfloat16 or float16): matmul, einsum, linear, convolutions,
  attention;
- ``"float32"``: to float32: losses, ``prod``, linear algebra;
- ``"float32_gpu"`` / ``"low_gpu"``: as ``"float32"`` / ``"low"`` under a GPU autocast only:
  PyTorch's CUDA lists hold exp, log, pow, softmax, sum, layer_norm (float32) and mv, dot
  (low), its CPU lists do not;
- ``"promote"``: to the widest float dtype among them (bilinear);
- no class: the op runs on what it gets, and mixed inputs promote as usual (bfloat16 + float32
  is float32).

float64 inputs are never cast. The casts are ``cast`` ops like any other, so a gradient comes
back through each in its input's dtype, and under ``lk.function`` they are nodes of the graph.
As in PyTorch, the ops a declared function is made of run with autocast off (the function
decided the dtypes), the backward pass runs with autocast off (gradients keep the forward's
dtypes), and a parameter (a leaf that requires grad) is cast to the low dtype once per region.

The state (which device types autocast, to what) is per thread; the mode only applies it, so
``lk.function`` can put a fresh one over its capture mode when it traces inside a region.

>>> import labkit as lk
>>> a, w = lk.ones(2, 3), lk.ones(3, 4)
>>> with lk.autocast("cpu", dtype=lk.bfloat16):
...     y = a @ w                        # low precision
...     z = lk.nn.functional.mse_loss(y, lk.zeros(2, 4))   # float32
>>> y.dtype, z.dtype, (a @ w).dtype
(lk.bfloat16, lk.float32, lk.float32)
"""
import contextlib
import functools
import threading

from ..errors import DTypeError
from . import dispatch
from .dispatch import WrappingMode
from .dtypes import as_dtype, bfloat16, float16, float32, float64, promote_types
from .ops.elementwise import cast
from .tensor import Tensor

# precision class -> (what a CPU autocast does, what a GPU autocast does)
_POLICIES = {"low": ("low", "low"), "float32": ("float32", "float32"),
             "low_gpu": (None, "low"), "float32_gpu": (None, "float32"),
             "promote": ("promote", "promote")}
_DEVICE_TYPES = {"cpu": "cpu", "cuda": "gpu", "gpu": "gpu"}
_DEFAULT_DTYPES = {"cpu": bfloat16, "gpu": float16}     # PyTorch's defaults
LOW_DTYPES = (bfloat16, float16)                         # the dtypes autocast runs ops in


class _State(threading.local):
    def __init__(self):
        self.dtypes = {"cpu": None, "gpu": None}   # the low dtype per device type; None: off
        self.off = 0          # > 0 inside a declared function's own ops, or a backward pass
        self.depth = 0        # regions entered; the cast cache lasts as long as the outermost
        # id(parameter) -> (parameter, its version, the mode the cast was made in, the cast):
        # a cast made while capturing belongs to that graph only
        self.cache = {}
        self.cache_enabled = True
        self.exits = []       # what each region entered restores when it ends


_state = _State()


def active():
    """Whether some device type autocasts on this thread now."""
    st = _state
    return not st.off and (st.dtypes["cpu"] is not None or st.dtypes["gpu"] is not None)


def key():
    """What a trace of a function depends on: None when autocast is off, else the low dtype of
    each device type (``lk.function`` keys its traces by it)."""
    if not active():
        return None
    return tuple(d.name if d is not None else None for d in _state.dtypes.values())


def device_type_of(name):
    """labkit's device type ('cpu' or 'gpu') of a PyTorch device type name ('cuda'...)."""
    t = _DEVICE_TYPES.get(str(name).split(":")[0])
    if t is None:
        raise ValueError(f"autocast: device_type must be 'cpu' or 'cuda' (labkit's 'gpu'), not "
                         f"{name!r}")
    return t


def is_enabled(device_type="cuda"):
    """Whether autocast is on for ``device_type`` on this thread (PyTorch's
    ``torch.is_autocast_enabled``)."""
    return _state.dtypes[device_type_of(device_type)] is not None


def get_dtype(device_type):
    """The dtype autocast casts to on ``device_type`` (its default where off: bfloat16 on the
    CPU, float16 on a GPU)."""
    t = device_type_of(device_type)
    return _state.dtypes[t] or _DEFAULT_DTYPES[t]


def _target(policy, device_type, widest):
    if policy == "low":
        return _state.dtypes[device_type]
    return float32 if policy == "float32" else widest


def _eligible(a):
    """Whether autocast casts tensor ``a``: a float type other than float64, on a device type
    autocast is on for."""
    d = a.dtype
    return d.is_floating and d is not float64 and _state.dtypes[a._device.type] is not None


def _cast_one(a, policy, mode, widest=None):
    """``a`` cast for ``policy`` ('low', 'float32' or 'promote' to ``widest``) through
    ``mode``, or as it is."""
    if not _eligible(a):
        return a
    d = a.dtype
    target = _target(policy, a._device.type, widest)
    if target is None or d is target:
        return a
    st = _state
    cached = policy == "low" and st.cache_enabled and a._requires_grad and a._node is None \
        and a._data is not None
    if cached:
        hit = st.cache.get(id(a))
        version = getattr(a, "_version", None)
        version = version[1] if version is not None else 0
        if hit is not None and hit[0] is a and hit[1] == version and hit[2] is mode and \
                hit[3].dtype is target:
            return hit[3]
    out = mode.apply(cast, (a,), {"dtype": target.name})
    if cached:
        st.cache[id(a)] = (a, version, mode, out)
    return out


def _cast_inputs(policies, inputs, mode):
    out = None
    widest = None
    if "promote" in policies:
        for a in inputs:
            if isinstance(a, Tensor) and _eligible(a):
                widest = a.dtype if widest is None else promote_types(widest, a.dtype)
    for i, a in enumerate(inputs):
        if isinstance(a, Tensor):
            policy = policies[a._device.type == "gpu"]
            if policy is not None:
                c = _cast_one(a, policy, mode, widest)
                if c is not a:
                    if out is None:
                        out = list(inputs)
                    out[i] = c
    return inputs if out is None else tuple(out)


class AutocastMode(WrappingMode):
    """Casts the inputs of each op that declares a precision class (``Op.amp``), then hands the
    op to the mode below it."""

    def apply(self, op, inputs, attrs):
        if op.amp is None or not active():
            return self.below.apply(op, inputs, attrs)
        return self.below.apply(op, _cast_inputs(_POLICIES[op.amp], inputs, self.below), attrs)

    @contextlib.contextmanager
    def phase(self, name):
        with self.below.phase(name):
            if name != "backward":
                yield
                return
            _state.off += 1          # gradients keep the dtypes the forward pass chose
            try:
                yield
            finally:
                _state.off -= 1


def over(mode):
    """A context putting an autocast mode over ``mode`` (just pushed, e.g. graph capture's) when
    autocast is on, so that ops captured inside a region are cast as eager ones are."""
    if not active():
        return contextlib.nullcontext()
    return dispatch.push_mode(AutocastMode(mode))


def enter(device_type, dtype, enabled, cache_enabled):
    """Start an autocast region on this thread (``lk.autocast.__enter__``)."""
    st = _state
    t = device_type_of(device_type)
    previous = (dict(st.dtypes), st.cache_enabled)
    if enabled:
        d = as_dtype(dtype) if dtype is not None else _DEFAULT_DTYPES[t]
        if d not in LOW_DTYPES:
            raise DTypeError(f"autocast: dtype must be lk.bfloat16 or lk.float16 (the low "
                             f"precision ops run in), not {d}")
        st.dtypes[t] = d
    else:
        st.dtypes[t] = None
    if cache_enabled is not None:
        st.cache_enabled = bool(cache_enabled)
    pushed = None
    if any(d is not None for d in st.dtypes.values()) and \
            type(dispatch._state.mode) is not AutocastMode:
        pushed = dispatch.push_mode(AutocastMode(dispatch._state.mode))
        pushed.__enter__()
    st.depth += 1
    st.exits.append((previous, pushed))


def leave():
    """End the innermost autocast region of this thread."""
    st = _state
    (dtypes, cache_enabled), pushed = st.exits.pop()
    st.depth -= 1
    if pushed is not None:
        pushed.__exit__(None, None, None)
    st.dtypes.update(dtypes)
    st.cache_enabled = cache_enabled
    if st.depth == 0:
        st.cache.clear()


@contextlib.contextmanager
def suspended():
    """Run the block with autocast off (a declared function's own ops)."""
    _state.off += 1
    try:
        yield
    finally:
        _state.off -= 1




def precision(cls):
    """Declare the precision class of a function written in ops (``F.linear``, ``F.mse_loss``):
    under autocast its tensor arguments are cast by ``cls`` (see the module's docstring) and its
    own ops run with autocast off, as PyTorch's autocast treats an op of its lists.

    >>> import labkit as lk
    >>> from labkit.tensor.autocast import precision
    >>> @precision("float32")
    ... def my_loss(a, b):
    ...     return ((a - b) ** 2).mean()
    >>> with lk.autocast("cpu"):
    ...     my_loss(lk.ones(2, dtype=lk.bfloat16), lk.zeros(2, dtype=lk.bfloat16)).dtype
    lk.float32
    """
    if cls not in _POLICIES:
        raise ValueError(f"precision: {cls!r} is not a precision class; use one of "
                         f"{tuple(_POLICIES)}")
    policies = _POLICIES[cls]

    def declare(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            if not active():
                return fn(*args, **kwargs)
            names = list(kwargs)
            cast = _cast_inputs(policies, tuple(args) + tuple(kwargs[k] for k in names),
                                dispatch._state.mode)
            args, kwargs = cast[:len(args)], dict(zip(names, cast[len(args):]))
            with suspended():
                return fn(*args, **kwargs)
        run.amp = cls
        return run
    return declare
