"""The pieces every op case is made of: ``Sample``, ``Case``, value generators, shape strategies,
the ``unary`` / ``binary`` / reduction builders, and PyTorch as an oracle.

``op_cases.py`` and the modules of ``tests/tensor/cases/`` build their tables from these.

PyTorch is an oracle where it defines the op (it is a test and benchmark dependency, never one of
labkit's): ``torch_ref(f)`` turns ``f(*torch_tensors, **kwargs)`` into a NumPy-in, NumPy-out
oracle, and a case whose ``ref`` is one also has its gradients compared with PyTorch's autograd.
"""
import math
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

MAX_SIDE = 3


# ---- the case table ---------------------------------------------------------------------------
@dataclass
class Sample:
    """Inputs for one call: ``args`` (NumPy arrays become tensors; Python scalars stay scalars),
    ``kwargs`` (attributes, passed to both the op and the oracle)."""
    args: tuple
    kwargs: dict = field(default_factory=dict)
    grad: tuple = None   # positions to differentiate; None: every floating-point array


@dataclass
class Case:
    name: str
    fn: object                   # labkit: fn(*tensors_or_scalars, **kwargs) -> Tensor (or tuple)
    ref: object                  # NumPy oracle: ref(*arrays_or_scalars, **kwargs) -> array(s)
    build: object                # build(rng, **params) -> Sample
    params: object               # hypothesis strategy of params dicts
    edges: list                  # params dicts always checked
    op: str = None               # the registered primitive this case tests (None: a composite)
    differentiable: bool = True
    rtol: float = 1e-7
    atol: float = 1e-9
    grad_kw: dict = field(default_factory=dict)   # extra gradcheck arguments
    second_order: bool = True    # also check the gradient of the vjp

    def sample(self, rng, params):
        return self.build(rng, **params)

    def __repr__(self):
        return self.name


# ---- value generators (float64; kept away from kinks so finite differences are exact) --------
def _arr(x, dtype=np.float64):
    return np.asarray(x, dtype=dtype)


def normal(rng, shape):
    return _arr(rng.standard_normal(shape))


def positive(rng, shape):
    return _arr(rng.uniform(0.5, 2.0, shape))


def nonzero(rng, shape):
    return _arr(rng.choice([-1.0, 1.0], shape) * rng.uniform(0.25, 2.0, shape))


def grid_plus(rng, shape):
    """Integers + 0.25: never within 0.5 of ``grid_minus`` values, nor within 0.25 of an int."""
    return _arr(rng.integers(-2, 3, shape) + 0.25)


def grid_minus(rng, shape):
    return _arr(rng.integers(-2, 3, shape) - 0.25)


def small_ints(rng, shape):
    """Floats holding small integers: comparisons see ties."""
    return _arr(rng.integers(-2, 3, shape))


def distinct(rng, shape):
    """All values distinct and at least 0.3 apart: max/min have a unique winner."""
    n = math.prod(shape)
    return _arr((rng.permutation(n) - n / 2) * 0.37 + rng.uniform(-0.03, 0.03, n)).reshape(shape)


def ints_below(rng, shape, high):
    return _arr(rng.integers(0, max(high, 1), shape), np.int64)


# ---- shape strategies ---------------------------------------------------------------------
def shapes(min_dims=0, max_dims=3, min_side=0, max_side=MAX_SIDE):
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


def broadcast_shapes(n, min_dims=0, max_dims=3):
    return hnp.mutually_broadcastable_shapes(num_shapes=n, min_dims=min_dims, max_dims=max_dims,
                                             min_side=0, max_side=MAX_SIDE).map(
        lambda r: tuple(r.input_shapes))


UNARY_EDGES = [dict(shape=()), dict(shape=(0,)), dict(shape=(1,)), dict(shape=(2, 0, 3)),
               dict(shape=(1, 1)), dict(shape=(2, 3))]
BINARY_EDGES = [dict(shapes=((), ())), dict(shapes=((3,), ())), dict(shapes=((), (2, 1))),
                dict(shapes=((0,), (1,))), dict(shapes=((2, 1, 3), (4, 1))),
                dict(shapes=((1,), (1, 1))), dict(shapes=((2, 0), (2, 1))),
                dict(shapes=((2, 3), None)), dict(shapes=(None, (3,))),
                dict(shapes=((0, 2), None))]


# ---- elementwise ---------------------------------------------------------------------------
def unary(name, fn, ref, gen=normal, differentiable=True, op=None, edges=(), **kw):
    def build(rng, shape):
        return Sample((gen(rng, shape),))
    return Case(name, fn, ref, build, st.fixed_dictionaries({"shape": shapes()}),
                UNARY_EDGES + list(edges), op=op or name, differentiable=differentiable, **kw)


def _binary_params():
    """Two broadcastable shapes; sometimes one operand is a Python scalar (shape None)."""
    @st.composite
    def draw(draw_):
        a, b = draw_(broadcast_shapes(2))
        which = draw_(st.sampled_from([None, None, None, 0, 1]))
        return {"shapes": (None if which == 0 else a, None if which == 1 else b)}
    return draw()


def binary(name, fn, ref, gen_a=normal, gen_b=normal, differentiable=True, op=None, **kw):
    def build(rng, shapes):
        args = []
        for shape, gen in zip(shapes, (gen_a, gen_b)):
            args.append(float(gen(rng, ())) if shape is None else gen(rng, shape))
        return Sample(tuple(args))
    return Case(name, fn, ref, build, _binary_params(), list(BINARY_EDGES), op=op or name,
                differentiable=differentiable, **kw)


# ---- reductions ----------------------------------------------------------------------------
@st.composite
def reduce_params(draw, nonempty=False, tuple_dims=True, min_dims=0):
    """A shape, a ``dim`` (None, an int, or a tuple of ints) and ``keepdim``."""
    shape = draw(shapes(min_dims=min_dims, min_side=1 if nonempty else 0))
    nd = len(shape)
    choices = [st.none()]
    if nd:
        choices.append(st.integers(-nd, nd - 1))
        if tuple_dims:
            choices.append(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd,
                                    unique=True).map(tuple))
    dim = draw(st.one_of(*choices))
    return {"shape": shape, "dim": dim, "keepdim": draw(st.booleans())}


def reduce_build(gen):
    def build(rng, shape, dim, keepdim):
        return Sample((gen(rng, shape),), {"dim": dim, "keepdim": keepdim})
    return build


REDUCE_EDGES = [dict(shape=(), dim=None, keepdim=False), dict(shape=(), dim=0, keepdim=True),
                dict(shape=(), dim=-1, keepdim=False),
                dict(shape=(2, 3), dim=1, keepdim=True), dict(shape=(2, 3, 2), dim=(0, 2),
                                                               keepdim=False),
                dict(shape=(1, 3), dim=-2, keepdim=False), dict(shape=(3,), dim=None,
                                                                 keepdim=True)]


# ---- PyTorch as the oracle -------------------------------------------------------------------
def _to_torch(a):
    import torch
    if isinstance(a, np.ndarray):
        # C order, 0-d kept; an empty array's strides as PyTorch makes them (NumPy's are 0,
        # which view_as_complex refuses)
        t = torch.from_numpy(a.copy())
        return t.clone(memory_format=torch.contiguous_format) if a.size == 0 else t
    if isinstance(a, (list, tuple)) and a and all(isinstance(x, np.ndarray) for x in a):
        return type(a)(_to_torch(x) for x in a)
    return a


def _from_torch(out):
    import torch
    if isinstance(out, torch.Tensor):
        return out.detach().numpy().copy()
    if isinstance(out, (tuple, list)):
        return tuple(_from_torch(o) for o in out)
    return np.asarray(out)


def torch_ref(fn):
    """An oracle computed by PyTorch: ``fn(*torch_tensors_or_scalars, **kwargs)`` returns a
    tensor or a tuple of them (namedtuples too); NumPy arrays in, NumPy arrays out. The case's
    gradients are then compared with ``torch.autograd`` as well (``test_ops``)."""
    def ref(*args, **kwargs):
        return _from_torch(fn(*[_to_torch(a) for a in args], **kwargs))
    ref.torch_fn = fn
    ref.__name__ = getattr(fn, "__name__", "torch_ref")
    return ref


def torch_gradients(fn, args, positions, cotangent, kwargs):
    """PyTorch's gradients of ``<fn(*args), cotangent>`` with respect to ``args[positions]``
    (NumPy arrays; zeros where PyTorch's graph does not reach an input)."""
    import torch
    targs = [_to_torch(a) for a in args]
    for p in positions:
        targs[p] = targs[p].clone().requires_grad_(True)
    out = fn(*targs, **kwargs)
    if isinstance(out, (tuple, list)):
        out = torch.cat([o.reshape(-1) for o in out])     # as test_ops._combine does
    if not out.requires_grad:
        return [np.zeros(args[p].shape, args[p].dtype) for p in positions]
    try:
        grads = torch.autograd.grad(out, [targs[p] for p in positions],
                                    _to_torch(np.asarray(cotangent, out.detach().numpy().dtype)
                                              .reshape(out.shape)),
                                    allow_unused=True)
    except RuntimeError as exc:        # older PyTorch releases lack some (aminmax before 2.13)
        if "is not implemented" not in str(exc):
            raise
        pytest.skip(f"PyTorch {torch.__version__} has no gradient to compare with: {exc}")
    # (a gradient through a conjugate may carry PyTorch's lazy negation bit)
    return [np.zeros(args[p].shape, args[p].dtype) if g is None else
            g.detach().resolve_conj().resolve_neg().numpy() for p, g in zip(positions, grads)]


# ---- errors ------------------------------------------------------------------------------------
def assert_clear_error(kind, call, name, shape_text, device):
    """``call()`` raises the labkit error ``kind`` naming the op ``name``, showing
    ``shape_text``, a dtype (``lk.``) and the device: what every error of an op says. Returns
    the message, for further checks."""
    import pytest

    import labkit as lk
    with pytest.raises(kind) as info:
        call()
    msg = str(info.value)
    dev = lk.devices.get_device(device).name
    assert name in msg, f"error does not name the op {name!r}: {msg}"
    assert shape_text in msg, f"{name}: error does not show the shape {shape_text}: {msg}"
    assert "lk." in msg and dev in msg, f"{name}: error lacks dtype or device: {msg}"
    assert isinstance(info.value, lk.LabkitError)
    return msg


# ---- lk.vmap's refusals ---------------------------------------------------------------------------
# Ops whose result's size depends on each example's values: lk.vmap refuses them (as PyTorch's
# vmap does) when such a value differs between the examples, with a DataDependentShapeError
# naming the op. A refusal by any other op is a failure.
DATA_DEPENDENT = {
    "nonzero": "how many elements are nonzero",
    "unique": "how many values are distinct",
    "repeat_interleave": "the sum of the repeats (a tensor)",
    "one_hot": "the largest class index, without num_classes",
    "getitem": "a boolean mask (x[mask], masked_select)",
    "index_add": "a boolean mask (x[mask] += v)",
    "index_put": "a boolean mask (x[mask] = v)",
}


def assert_vmap_refusal(error):
    """``error`` (a DataDependentShapeError) is lk.vmap's refusal of an op in DATA_DEPENDENT,
    naming it and the remedy."""
    assert error.op in DATA_DEPENDENT, (
        f"lk.vmap refused op {error.op} as data-dependent, which it should batch: {error}")
    msg = str(error)
    assert error.op in msg and "lk.vmap" in msg and "PyTorch" in msg, msg
