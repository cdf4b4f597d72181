"""One test case per op: how to make its inputs, a NumPy oracle, and whether it has a gradient.

``PRIMITIVE_CASES`` must hold a case for every op in ``labkit.tensor.op.REGISTRY`` (the suite
fails otherwise, so adding a primitive without a test breaks it); ``COMPOSITE_CASES`` covers the
public ops written in primitives. test_ops.py derives the checks from these tables: values
against the oracle (on every device), shape/dtype rule against the kernel, float32 dtypes,
gradients against finite differences in float64, and second derivatives.

A case is a ``build`` function ``build(rng, **params) -> Sample``, a hypothesis strategy drawing
``params`` (random shapes, with broadcasting, size-0 and size-1 dimensions and 0-d tensors), and
``edges``: parameter sets that are always checked, whatever hypothesis draws. The pieces
cases are built from are in ``case_kit.py``; families of ops added later keep their cases in
modules of ``cases/``, gathered here.
"""
import math

import numpy as np
from hypothesis import strategies as st

import labkit as lk
from labkit.tensor.ops import conv as _conv
from labkit.tensor.ops import elementwise as _elementwise
from labkit.tensor.ops import index as _index
from labkit.tensor.ops import linalg as _linalg
from labkit.tensor.ops import nll as _nll
from labkit.tensor.ops import reduce as _reduce
from labkit.tensor.ops import shape as _shape
from labkit.tensor.ops import softmax as _softmax
from labkit.tensor.ops import state as _state

from .case_kit import (BINARY_EDGES, MAX_SIDE, REDUCE_EDGES, UNARY_EDGES, Case, Sample, _arr,
                       binary, broadcast_shapes, distinct, grid_minus, grid_plus, ints_below,
                       nonzero, normal, positive, reduce_build as _reduce_build,
                       reduce_params as _reduce_params, shapes, small_ints, torch_ref, unary)
from .cases import collected as _collected
from .cases.index import (fill, index_arrays, indexing_build, indexing_fn, torch_getitem,
                             torch_index_add, torch_indexed_shape)


def _stable_sigmoid(x):
    with np.errstate(over="ignore"):
        e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _sigmoid_big(rng, shape):
    return _arr(rng.choice([-1.0, 1.0], shape) * rng.uniform(0.0, 800.0, shape))


ELEMENTWISE = [
    unary("neg", lk.neg, np.negative),
    unary("exp", lk.exp, np.exp),
    unary("log", lk.log, np.log, gen=positive),
    unary("sqrt", lk.sqrt, np.sqrt, gen=positive),
    unary("abs", lk.abs, np.abs, gen=nonzero),
    unary("sign", lk.sign, np.sign, gen=small_ints, differentiable=False),
    unary("tanh", lk.tanh, np.tanh),
    binary("tanh_backward", _elementwise.tanh_backward, lambda g, y: g * (1 - y * y)),
    unary("sigmoid", lk.sigmoid, _stable_sigmoid),
    unary("sigmoid_large_inputs", lk.sigmoid, _stable_sigmoid, gen=_sigmoid_big, op="sigmoid",
          differentiable=False),
    unary("relu", lk.relu, lambda x: np.maximum(x, 0), gen=nonzero),
    unary("logical_not", lk.logical_not, np.logical_not, differentiable=False,
          gen=lambda rng, shape: _arr(rng.integers(0, 2, shape), bool)),
    binary("add", lk.add, np.add),
    binary("sub", lk.sub, np.subtract),
    binary("mul", lk.mul, np.multiply),
    binary("div", lk.div, np.true_divide, gen_b=nonzero),
    binary("pow", lk.pow, np.power, gen_a=positive),
    binary("maximum", lk.maximum, np.maximum, gen_a=grid_plus, gen_b=grid_minus),
    binary("minimum", lk.minimum, np.minimum, gen_a=grid_plus, gen_b=grid_minus),
    # operators, with the Python-int exponent and scalar base paths of pow's vjp
    unary("pow_int_exponent", lambda x: x ** 3, lambda x: x ** 3, op="pow"),
    unary("pow_half_exponent", lambda x: x ** 0.5, np.sqrt, gen=positive, op="pow"),
    unary("rpow_scalar_base", lambda x: 2.0 ** x, lambda x: 2.0 ** x, op="pow"),
    unary("rsub_scalar", lambda x: 1 - x, lambda x: 1 - x, op="sub"),
    unary("rdiv_scalar", lambda x: 2 / x, lambda x: 2 / x, gen=nonzero, op="div"),
]
for _name, _ufunc in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                      ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal)):
    ELEMENTWISE.append(binary(_name, getattr(lk, _name), _ufunc, gen_a=small_ints,
                              gen_b=small_ints, differentiable=False))


def _where_build(rng, shapes):
    c, a, b = shapes
    return Sample((_arr(rng.integers(0, 2, c), bool), normal(rng, a) if a is not None else 1.5,
                   normal(rng, b)))


WHERE = Case("where", lk.where, np.where, _where_build,
             st.fixed_dictionaries({"shapes": broadcast_shapes(3)}).map(
                 lambda p: {"shapes": (p["shapes"][0], p["shapes"][1], p["shapes"][2])}),
             [dict(shapes=((), (), ())), dict(shapes=((2, 3), (3,), ())),
              dict(shapes=((1,), (0,), (1,))), dict(shapes=((2, 1), None, (1, 3)))],
             op="where")


def _cast_build(rng, shape, dtype):
    return Sample((_arr(normal(rng, shape) * 3),), {"dtype": dtype})


def _cast_ref(x, dtype):
    return x.astype(lk.as_dtype(dtype).np)


CASTS = [
    Case("cast", lambda x, dtype: lk.cast(x, dtype=dtype), _cast_ref, _cast_build,
         st.fixed_dictionaries({"shape": shapes(),
                                "dtype": st.sampled_from(["int32", "int64", "bool_", "float16"])}),
         [dict(shape=(), dtype="int64"), dict(shape=(0, 2), dtype="bool_"),
          dict(shape=(2, 3), dtype="float16"), dict(shape=(3,), dtype="int32")],
         op="cast", differentiable=False, rtol=1e-3),
    # differentiable casts: float64 -> float32 -> float64 (a float32 round trip needs a wide eps)
    Case("cast_float", lambda x: lk.cast(lk.cast(x, dtype="float32"), dtype="float64"),
         lambda x: x.astype(np.float32).astype(np.float64),
         lambda rng, shape: Sample((normal(rng, shape),)),
         st.fixed_dictionaries({"shape": shapes()}), UNARY_EDGES, op="cast",
         grad_kw=dict(eps=1e-3, atol=1e-3, rtol=1e-3)),
]


def _to_device_fn(x):
    # over to cpu:0 and back: a real transfer when the test runs on a GPU
    home = x.device.name
    return lk.tensor(0.0, device=home) + (x.to("cpu:0") * 2.0).to(home)


TO_DEVICE = Case("to_device", _to_device_fn, lambda x: x * 2.0,
                 lambda rng, shape: Sample((normal(rng, shape),)),
                 st.fixed_dictionaries({"shape": shapes()}), UNARY_EDGES, op="to_device")


# ---- reductions ----------------------------------------------------------------------------
def _np_reduce(fn):
    def ref(x, dim, keepdim):
        return np.asarray(fn(x, axis=dim, keepdims=keepdim))
    return ref


def _argref(fn):
    def ref(x, dim, keepdim):
        if dim is None:
            i = fn(x)
            return np.asarray(i, np.int64).reshape((1,) * x.ndim if keepdim else ())
        return fn(x, axis=dim, keepdims=keepdim).astype(np.int64)
    return ref


def _reduction_size_ref(x, dim, keepdim):
    axes = range(x.ndim) if dim is None else ((dim,) if isinstance(dim, int) else dim)
    return np.asarray(math.prod(x.shape[a] for a in axes) if x.ndim else 1, x.dtype)


REDUCTIONS = [
    Case("sum", lambda x, dim, keepdim: lk.sum(x, dim=dim, keepdim=keepdim), _np_reduce(np.sum),
         _reduce_build(normal), _reduce_params(),
         REDUCE_EDGES + [dict(shape=(0, 3), dim=0, keepdim=False),
                         dict(shape=(2, 0), dim=None, keepdim=True)], op="sum"),
    Case("max", lambda x, dim, keepdim: _reduce.max(x, dim=dim, keepdim=keepdim), _np_reduce(np.max),
         _reduce_build(distinct), _reduce_params(nonempty=True), REDUCE_EDGES, op="max"),
    Case("min", lambda x, dim, keepdim: _reduce.min(x, dim=dim, keepdim=keepdim), _np_reduce(np.min),
         _reduce_build(distinct), _reduce_params(nonempty=True), REDUCE_EDGES, op="min"),
    Case("max_ties", lambda x, dim, keepdim: _reduce.max(x, dim=dim, keepdim=keepdim),
         _np_reduce(np.max), _reduce_build(small_ints), _reduce_params(nonempty=True),
         REDUCE_EDGES, op="max", differentiable=False),
    Case("argmax", lambda x, dim, keepdim: lk.argmax(x, dim=dim, keepdim=keepdim),
         _argref(np.argmax), _reduce_build(small_ints),
         _reduce_params(nonempty=True, tuple_dims=False), REDUCE_EDGES[:4],
         op="argmax", differentiable=False),
    Case("argmin", lambda x, dim, keepdim: lk.argmin(x, dim=dim, keepdim=keepdim),
         _argref(np.argmin), _reduce_build(small_ints),
         _reduce_params(nonempty=True, tuple_dims=False), REDUCE_EDGES[:4],
         op="argmin", differentiable=False),
    Case("reduction_size", lambda x, dim, keepdim: _reduce.reduction_size(x, dim=dim),
         _reduction_size_ref,
         _reduce_build(normal), _reduce_params(), REDUCE_EDGES, op="reduction_size",
         differentiable=False),
]


# ---- shape ops -----------------------------------------------------------------------------
@st.composite
def _reshape_params(draw):
    shape = draw(shapes())
    dims = list(shape)
    # merge neighbours, insert ones, maybe let one dimension be -1
    target = []
    for d in dims:
        if target and draw(st.booleans()):
            target[-1] *= d
        else:
            target.append(d)
    for _ in range(draw(st.integers(0, 2))):
        target.insert(draw(st.integers(0, len(target))), 1)
    if target and draw(st.booleans()):
        i = draw(st.integers(0, len(target) - 1))
        if math.prod(t for j, t in enumerate(target) if j != i):
            target[i] = -1
    return {"shape": shape, "target": tuple(target)}


@st.composite
def _permute_params(draw):
    shape = draw(shapes())
    perm = draw(st.permutations(range(len(shape))))
    neg = draw(st.booleans())
    nd = len(shape)
    return {"shape": shape, "dims": tuple(p - nd if neg else p for p in perm)}


@st.composite
def _broadcast_params(draw):
    shape = draw(shapes())
    lead = draw(st.lists(st.integers(0, MAX_SIDE), max_size=2))
    target = tuple(lead) + tuple(draw(st.integers(0, MAX_SIDE)) if s == 1 else s for s in shape)
    return {"shape": shape, "target": target}


@st.composite
def _concat_params(draw):
    shape = draw(shapes(min_dims=1))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    sizes = draw(st.lists(st.integers(0, MAX_SIDE), min_size=1, max_size=3))
    return {"shape": shape, "dim": dim, "sizes": tuple(sizes)}


def _concat_build(rng, shape, dim, sizes):
    d = dim % len(shape)
    return Sample(tuple(normal(rng, shape[:d] + (s,) + shape[d + 1:]) for s in sizes),
                  {"dim": dim})


@st.composite
def _expand_dims_params(draw):
    shape = draw(shapes(max_dims=2))
    n = len(shape) + draw(st.integers(1, 2))
    axes = draw(st.lists(st.integers(-n, n - 1), min_size=n - len(shape),
                         max_size=n - len(shape), unique_by=lambda a: a % n))
    return {"shape": shape, "axes": tuple(axes)}


SHAPE_OPS = [
    Case("reshape", lambda x, target: lk.reshape(x, shape=target),
         lambda x, target: x.reshape(target),
         lambda rng, shape, target: Sample((normal(rng, shape),), {"target": target}),
         _reshape_params(),
         [dict(shape=(), target=(1, 1)), dict(shape=(2, 3), target=(-1,)),
          dict(shape=(2, 0), target=(0, 5)), dict(shape=(1,), target=())], op="reshape"),
    Case("permute", lambda x, dims: lk.permute(x, dims=dims),
         lambda x, dims: np.transpose(x, dims),
         lambda rng, shape, dims: Sample((normal(rng, shape),), {"dims": dims}),
         _permute_params(),
         [dict(shape=(), dims=()), dict(shape=(2, 0, 3), dims=(2, 0, 1)),
          dict(shape=(2, 3), dims=(-1, -2))], op="permute"),
    Case("broadcast_to", lambda x, target: lk.broadcast_to(x, shape=target),
         lambda x, target: np.broadcast_to(x, target),
         lambda rng, shape, target: Sample((normal(rng, shape),), {"target": target}),
         _broadcast_params(),
         [dict(shape=(), target=(2, 3)), dict(shape=(1, 3), target=(0, 3)),
          dict(shape=(3, 1), target=(2, 3, 4)), dict(shape=(2,), target=(2,))],
         op="broadcast_to"),
    Case("broadcast_like", lambda x, like: _shape.broadcast_like(x, like),
         lambda x, like: np.broadcast_to(x, like.shape),
         lambda rng, shape, target: Sample((normal(rng, shape), normal(rng, target)),
                                           grad=(0,)),
         _broadcast_params(),
         [dict(shape=(), target=(2, 3)), dict(shape=(3, 1), target=(2, 3, 4)),
          dict(shape=(1, 3), target=(0, 3))], op="broadcast_like"),
    Case("expand_dims", lambda x, axes: _shape.expand_dims(x, axes=axes),
         lambda x, axes: np.expand_dims(x, axes),
         lambda rng, shape, axes: Sample((normal(rng, shape),), {"axes": axes}),
         _expand_dims_params(),
         [dict(shape=(), axes=(0,)), dict(shape=(2, 3), axes=(0, -1)),
          dict(shape=(2, 0), axes=(1,))], op="expand_dims"),
    Case("concat", lambda *xs, dim: lk.concat(*xs, dim=dim),
         lambda *xs, dim: np.concatenate(xs, axis=dim), _concat_build, _concat_params(),
         [dict(shape=(2, 3), dim=0, sizes=(1, 0, 2)), dict(shape=(2, 3), dim=-1, sizes=(3,)),
          dict(shape=(0,), dim=0, sizes=(0, 0))], op="concat"),
]


# ---- matmul --------------------------------------------------------------------------------
@st.composite
def _matmul_params(draw):
    m, k, n = (draw(st.integers(0, MAX_SIDE)) for _ in range(3))
    ra, rb = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    batch_a, batch_b = draw(broadcast_shapes(2, max_dims=2))
    # trailing parts of mutually broadcastable shapes still broadcast together
    sa = (k,) if ra == 1 else batch_a[len(batch_a) - min(ra - 2, len(batch_a)):] + (m, k)
    sb = (k,) if rb == 1 else batch_b[len(batch_b) - min(rb - 2, len(batch_b)):] + (k, n)
    return {"sa": sa, "sb": sb}


MATMUL = Case("matmul", lk.matmul, np.matmul,
              lambda rng, sa, sb: Sample((normal(rng, sa), normal(rng, sb))), _matmul_params(),
              [dict(sa=(3,), sb=(3,)), dict(sa=(2, 3), sb=(3,)), dict(sa=(3,), sb=(2, 3, 2)),
               dict(sa=(2, 1, 2, 3), sb=(4, 3, 2)), dict(sa=(0, 3), sb=(3, 2)),
               dict(sa=(2, 0), sb=(0, 3)), dict(sa=(1, 1), sb=(1, 1))], op="matmul")


def _swap(shape):
    return shape[:-2] + (shape[-1], shape[-2]) if len(shape) > 1 else shape


@st.composite
def _matmul_t_params(draw):
    """matmul's operands with 2+ dimensions, stored transposed where a flag says so."""
    p = draw(_matmul_params().filter(lambda p: len(p["sa"]) > 1 and len(p["sb"]) > 1))
    ta, tb = draw(st.booleans()), draw(st.booleans())
    return {"sa": _swap(p["sa"]) if ta else p["sa"], "sb": _swap(p["sb"]) if tb else p["sb"],
            "transpose_a": ta, "transpose_b": tb}


def _ref_matmul_t(a, b, transpose_a, transpose_b):
    return np.matmul(np.swapaxes(a, -1, -2) if transpose_a else a,
                     np.swapaxes(b, -1, -2) if transpose_b else b)


MATMUL_T = Case("matmul_transposed", lambda a, b, **kw: _linalg.matmul(a, b, **kw), _ref_matmul_t,
                lambda rng, sa, sb, **kw: Sample((normal(rng, sa), normal(rng, sb)), kw),
                _matmul_t_params(),
                [dict(sa=(3, 2), sb=(3, 4), transpose_a=True, transpose_b=False),
                 dict(sa=(2, 3), sb=(4, 3), transpose_a=False, transpose_b=True),
                 dict(sa=(2, 3, 2), sb=(4, 3), transpose_a=True, transpose_b=True),
                 dict(sa=(0, 2), sb=(3, 0), transpose_a=True, transpose_b=True)], op="matmul")


# ---- indexing ------------------------------------------------------------------------------
# An index is a template: a tuple of ints, slices, None, Ellipsis, Python lists, and ("arr", i)
# placeholders for index arrays passed as arguments (so they become tensors).
_fill = fill


@st.composite
def _index_params(draw):
    shape = draw(shapes(min_dims=1, max_dims=3, max_side=4))
    if draw(st.integers(0, 4)) == 0:      # a boolean mask over leading dimensions
        j = draw(st.integers(1, len(shape)))
        rest = [slice(None)] * draw(st.integers(0, len(shape) - j))
        return {"shape": shape, "template": (("arr", 0),) + tuple(rest),
                "arrays": (("mask", shape[:j]),)}
    template, arrays, ellipsis = [], [], False
    dim = 0
    while dim < len(shape):
        s = shape[dim]
        kinds = ["full", "slice", "none"]
        if s:
            kinds += ["int", "array"]
            if not any(isinstance(t, list) for t in template):
                kinds.append("list")     # a second list would have to match its length
        if not ellipsis:
            kinds.append("ellipsis")
        kind = draw(st.sampled_from(kinds))
        if kind == "full":
            # stopping early leaves the rest implicit; after an Ellipsis the items left are
            # aligned to the last dimensions, so they must run to the end
            if not ellipsis and draw(st.booleans()):
                break
            template.append(slice(None))
        elif kind == "slice":
            start = draw(st.one_of(st.none(), st.integers(-s - 1, s + 1)))
            stop = draw(st.one_of(st.none(), st.integers(-s - 1, s + 1)))
            step = draw(st.sampled_from([None, 1, 2, -1, -2]))
            template.append(slice(start, stop, step))
        elif kind == "none":
            template.append(None)
            continue
        elif kind == "int":
            template.append(draw(st.integers(-s, s - 1)))
        elif kind == "list":
            template.append(draw(st.lists(st.integers(-s, s - 1), min_size=1, max_size=3)))
        elif kind == "array":
            if any(a[0] == "ints" for a in arrays):   # two advanced indices: same length
                n = arrays[0][1][0]
            else:
                n = draw(st.integers(0, 4))
            template.append(("arr", len(arrays)))
            arrays.append(("ints", (n,), s))
        else:
            template.append(Ellipsis)
            ellipsis = True
            dim = len(shape) - draw(st.integers(0, len(shape) - dim))
            continue
        dim += 1
    if any(isinstance(t, list) for t in template) and arrays:
        template = [slice(None) if isinstance(t, list) else t for t in template]
    return {"shape": shape, "template": tuple(template), "arrays": tuple(arrays)}


# PyTorch's layout: x[0, :, idx] is (x.shape[1], len(idx)), where NumPy gives the transpose
_getitem_ref = torch_ref(lambda x, *arrays, template: torch_getitem(x, template, arrays))


GETITEM_EDGES = [
    dict(shape=(3,), template=(1,), arrays=()),
    dict(shape=(2, 3), template=(-1, slice(None, None, -1)), arrays=()),
    dict(shape=(2, 3), template=(None, Ellipsis, None), arrays=()),
    dict(shape=(2, 3), template=(Ellipsis, 0), arrays=()),
    dict(shape=(4, 3), template=(("arr", 0),), arrays=(("ints", (5,), 4),)),
    dict(shape=(4, 3), template=(slice(None), ("arr", 0)), arrays=(("ints", (0,), 3),)),
    dict(shape=(3, 4, 2), template=(("arr", 0), slice(1, None), ("arr", 1)),
         arrays=(("ints", (4,), 3), ("ints", (4,), 2))),
    dict(shape=(2, 3), template=(("arr", 0),), arrays=(("mask", (2, 3)),)),
    dict(shape=(2, 3), template=(("arr", 0), slice(None)), arrays=(("mask", (2,)),)),
    dict(shape=(2, 3), template=([0, 0, 1],), arrays=()),
    dict(shape=(0, 3), template=(slice(None), 1), arrays=()),
    dict(shape=(3,), template=(slice(5, 1, -2),), arrays=()),
]


def _index_add_build(rng, shape, template, arrays):
    x = normal(rng, shape)
    idx = index_arrays(rng, arrays)
    values = normal(rng, torch_indexed_shape(x, template, idx))
    return Sample((x, values) + tuple(idx), {"template": template}, grad=(0, 1))


def _index_add_fn(base, values, *arrays, template):
    spec, tensors = _index.split_index(base, _fill(template, arrays))
    return _index.index_add(base, values, *tensors, spec=spec)


_index_add_ref = torch_ref(torch_index_add)


INDEXING = [
    Case("getitem", indexing_fn, _getitem_ref, indexing_build, _index_params(), GETITEM_EDGES,
         op="getitem"),
    Case("index_add", _index_add_fn, _index_add_ref, _index_add_build, _index_params(),
         GETITEM_EDGES, op="index_add"),
    Case("zeros_like", _index.zeros_like, np.zeros_like,
         lambda rng, shape: Sample((normal(rng, shape),)), st.fixed_dictionaries(
             {"shape": shapes()}), UNARY_EDGES, op="zeros_like", differentiable=False),
]


@st.composite
def _gather_params(draw):
    shape = draw(shapes(min_dims=1, min_side=1))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    d = dim % len(shape)
    index_shape = tuple(draw(st.integers(0, MAX_SIDE)) if i == d else
                        draw(st.integers(0, s)) for i, s in enumerate(shape))
    return {"shape": shape, "dim": dim, "index_shape": index_shape}


def _gather_build(rng, shape, dim, index_shape):
    index = ints_below(rng, index_shape, shape[dim])
    return Sample((normal(rng, shape), index), {"dim": dim})


def _gather_ref(x, index, dim):
    grid = list(np.indices(index.shape, sparse=True))
    grid[dim % x.ndim] = index
    return x[tuple(grid)]


def _scatter_build(rng, shape, dim, index_shape):
    index = ints_below(rng, index_shape, shape[dim])
    return Sample((normal(rng, shape), index, normal(rng, index_shape)), {"dim": dim})


def _scatter_ref(x, index, src, dim):
    out = x.copy()
    d = dim % x.ndim
    for pos in np.ndindex(*index.shape):
        target = list(pos)
        target[d] = index[pos]
        out[tuple(target)] += src[pos]
    return out


GATHER_EDGES = [dict(shape=(3, 4), dim=1, index_shape=(3, 5)),
                dict(shape=(3, 4), dim=0, index_shape=(1, 2)),
                dict(shape=(3, 4), dim=-1, index_shape=(0, 4)),
                dict(shape=(2,), dim=0, index_shape=(6,)),
                dict(shape=(2, 1, 3), dim=2, index_shape=(2, 1, 3))]
GATHER = [
    Case("gather", lambda x, index, dim: lk.gather(x, dim, index), _gather_ref, _gather_build,
         _gather_params(), GATHER_EDGES, op="gather"),
    Case("scatter_add", lambda x, index, src, dim: lk.scatter_add(x, dim, index, src),
         _scatter_ref, _scatter_build, _gather_params(), GATHER_EDGES, op="scatter_add"),
]


# ---- windows: unfold / fold -----------------------------------------------------------------
@st.composite
def _window_params(draw, dilation=True, pool_padding=False):
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sh, sw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    if pool_padding:
        ph, pw = draw(st.integers(0, kh // 2)), draw(st.integers(0, kw // 2))
    else:
        ph, pw = draw(st.integers(0, 1)), draw(st.integers(0, 1))
    dh, dw = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) if dilation else (1, 1)
    h = max(dh * (kh - 1) + 1 - 2 * ph, 1) + draw(st.integers(0, 3))
    w = max(dw * (kw - 1) + 1 - 2 * pw, 1) + draw(st.integers(0, 3))
    n, c = draw(st.integers(0, 2)), draw(st.integers(1, 2))
    return {"shape": (n, c, h, w), "kernel_size": (kh, kw), "stride": (sh, sw),
            "padding": (ph, pw), "dilation": (dh, dw)}


def _out_hw(shape, kernel_size, stride, padding, dilation):
    return tuple((shape[2 + i] + 2 * padding[i] - dilation[i] * (kernel_size[i] - 1) - 1)
                 // stride[i] + 1 for i in range(2))


def _ref_unfold(x, kernel_size, stride, padding, dilation, pad_value=0.0):
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    oh, ow = _out_hw(x.shape, kernel_size, stride, padding, dilation)
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=pad_value)
    out = np.empty(x.shape[:2] + (kh, kw, oh, ow), x.dtype)
    for i in range(kh):
        for j in range(kw):
            for a in range(oh):
                for b in range(ow):
                    out[:, :, i, j, a, b] = xp[:, :, a * sh + i * dh, b * sw + j * dw]
    return out


def _ref_fold(cols, image_shape, kernel_size, stride, padding, dilation):
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    n, c, h, w = image_shape
    out = np.zeros((n, c, h + 2 * ph, w + 2 * pw), cols.dtype)
    oh, ow = cols.shape[-2:]
    for i in range(kh):
        for j in range(kw):
            for a in range(oh):
                for b in range(ow):
                    out[:, :, a * sh + i * dh, b * sw + j * dw] += cols[:, :, i, j, a, b]
    return out[:, :, ph:ph + h, pw:pw + w]


def _geo(p):
    return {k: p[k] for k in ("kernel_size", "stride", "padding", "dilation")}


def _unfold_build(rng, shape, **geo):
    return Sample((normal(rng, shape),), geo)


def _fold_build(rng, shape, **geo):
    oh, ow = _out_hw(shape, **geo)
    cols = normal(rng, shape[:2] + tuple(geo["kernel_size"]) + (oh, ow))
    return Sample((cols,), dict(geo, image_shape=shape))


WINDOW_EDGES = [dict(shape=(1, 1, 3, 3), kernel_size=(3, 3), stride=(1, 1), padding=(0, 0),
                     dilation=(1, 1)),
                dict(shape=(2, 2, 5, 4), kernel_size=(2, 3), stride=(2, 1), padding=(1, 0),
                     dilation=(2, 1)),
                dict(shape=(0, 1, 2, 2), kernel_size=(1, 1), stride=(1, 1), padding=(0, 0),
                     dilation=(1, 1)),
                dict(shape=(1, 2, 1, 1), kernel_size=(3, 3), stride=(2, 2), padding=(1, 1),
                     dilation=(1, 1))]
WINDOWS = [
    Case("unfold", lambda x, **geo: _conv.unfold(x, **geo), _ref_unfold, _unfold_build,
         _window_params(), WINDOW_EDGES, op="unfold"),
    Case("unfold_pad_value", lambda x, **geo: _conv.unfold(x, pad_value=-7.0, **geo),
         lambda x, **geo: _ref_unfold(x, pad_value=-7.0, **geo), _unfold_build,
         _window_params(), WINDOW_EDGES, op="unfold"),
    Case("fold", lambda cols, **kw: _conv.fold(cols, **kw), _ref_fold, _fold_build,
         _window_params(), WINDOW_EDGES, op="fold"),
]


# ---- state: in-place updates (the result is the target, updated) ---------------------------
@st.composite
def _assign_params(draw):
    shape = draw(shapes())
    if draw(st.integers(0, 4)) == 0:          # a Python number
        return {"shape": shape, "value_shape": None}
    k = draw(st.integers(0, len(shape)))      # a trailing part of the shape, some dims 1
    value = tuple(1 if draw(st.booleans()) else s for s in shape[len(shape) - k:])
    return {"shape": shape, "value_shape": value}


def _assign_build(rng, shape, value_shape):
    return Sample((normal(rng, shape), 1.5 if value_shape is None else normal(rng, value_shape)))


def _assign_ref(update):
    def ref(target, *args, **kwargs):
        out = np.array(target)
        out[...] = update(target, *args, **kwargs)
        return out
    return ref


def _axpby_build(rng, shape, value_shape):
    base = _assign_build(rng, shape, value_shape)
    return Sample(base.args + (0.9, -0.25))


def _lerp_build(rng, shape, value_shape):
    base = _assign_build(rng, shape, value_shape)
    return Sample(base.args + (0.125,), {"square_end": bool(rng.integers(2))})


def _adam_build(rng, shape):
    return Sample((normal(rng, shape), normal(rng, shape), positive(rng, shape), 0.01, 0.75,
                   1e-8))


def _adadelta_build(rng, shape):
    return Sample((normal(rng, shape), positive(rng, shape), positive(rng, shape), 1e-6))


@st.composite
def _addmm_params(draw):
    return dict(draw(_matmul_params()), alpha=draw(st.sampled_from([1.0, -1.0, 0.25])))


def _addmm_build(rng, sa, sb, alpha):
    out = np.matmul(np.empty(sa), np.empty(sb)).shape
    return Sample((normal(rng, out), normal(rng, sa), normal(rng, sb)), {"alpha": alpha})


ASSIGN_EDGES = [dict(shape=(), value_shape=()), dict(shape=(2, 3), value_shape=(3,)),
                dict(shape=(2, 3), value_shape=None), dict(shape=(0, 2), value_shape=(1, 2)),
                dict(shape=(2, 1), value_shape=(2, 1))]
STATE = [
    Case("assign", lambda t, v: _state.assign(t, v), _assign_ref(lambda t, v: v),
         _assign_build, _assign_params(), ASSIGN_EDGES, op="assign", differentiable=False),
    Case("assign_add", lambda t, v: _state.assign_add(t, v), _assign_ref(lambda t, v: t + v),
         _assign_build, _assign_params(), ASSIGN_EDGES, op="assign_add", differentiable=False),
    Case("assign_sub", lambda t, v: _state.assign_sub(t, v), _assign_ref(lambda t, v: t - v),
         _assign_build, _assign_params(), ASSIGN_EDGES, op="assign_sub", differentiable=False),
    Case("assign_add_matmul", lambda t, a, b, **kw: _state.assign_add_matmul(t, a, b, **kw),
         lambda t, a, b, alpha: t + alpha * np.matmul(a, b), _addmm_build, _addmm_params(),
         [dict(sa=(2, 3), sb=(3, 2), alpha=-0.5), dict(sa=(2, 0), sb=(0, 3), alpha=1.0),
          dict(sa=(1, 1), sb=(1, 1), alpha=-1.0), dict(sa=(2, 1, 3), sb=(3, 2), alpha=2.0)],
         op="assign_add_matmul", differentiable=False),
    Case("assign_axpby", lambda t, v, a, b: _state.assign_axpby(t, v, a, b),
         _assign_ref(lambda t, v, a, b: a * t + b * v), _axpby_build, _assign_params(),
         ASSIGN_EDGES, op="assign_axpby", differentiable=False),
    Case("assign_lerp", lambda t, v, w, **kw: _state.assign_lerp(t, v, w, **kw),
         _assign_ref(lambda t, v, w, square_end: t + ((v * v if square_end else v) - t) * w),
         _lerp_build, _assign_params(), ASSIGN_EDGES, op="assign_lerp", differentiable=False),
    Case("adam_update", lambda p, m, v, *scalars: _state.adam_update(p, m, v, *scalars),
         _assign_ref(lambda p, m, v, s, b, e: p - m / (np.sqrt(v) / b + e) * s), _adam_build,
         st.fixed_dictionaries({"shape": shapes()}), [dict(shape=()), dict(shape=(2, 3)),
                                                      dict(shape=(0,))],
         op="adam_update", differentiable=False),
    Case("adadelta_delta", lambda g, sq, acc, eps: _state.adadelta_delta(g, sq, acc, eps),
         lambda g, sq, acc, eps: np.sqrt(acc + eps) / np.sqrt(sq + eps) * g, _adadelta_build,
         st.fixed_dictionaries({"shape": shapes()}), [dict(shape=()), dict(shape=(2, 3)),
                                                      dict(shape=(0,))],
         op="adadelta_delta", differentiable=False),
    unary("stop_gradient", _elementwise.stop_gradient, lambda x: x.copy(),
          differentiable=False),
    unary("clone", _elementwise.clone, lambda x: x.copy()),
]


@st.composite
def _softmax_params(draw, keepdim=False):
    shape = list(draw(shapes()))
    nd = len(shape)
    dim = draw(st.integers(-max(nd, 1), max(nd, 1) - 1))
    if nd:
        shape[dim] = max(shape[dim], 1)
    p = {"shape": tuple(shape), "dim": dim}
    if keepdim:
        p["keepdim"] = draw(st.booleans())
    return p


def _ref_logsumexp(x, dim, keepdim=False):
    if x.ndim == 0:
        return x.copy()
    m = np.max(x, axis=dim, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=dim, keepdims=True)) + m
    return out if keepdim else np.squeeze(out, axis=dim)


def _ref_softmax(x, dim):
    if x.ndim == 0:
        return np.ones_like(x)
    e = np.exp(x - np.max(x, axis=dim, keepdims=True))
    return e / np.sum(e, axis=dim, keepdims=True)


def _ref_log_softmax(x, dim):
    if x.ndim == 0:
        return np.zeros_like(x)
    return x - _ref_logsumexp(x, dim, keepdim=True)


SOFTMAX = [
    Case("softmax", lambda x, dim: lk.softmax(x, dim=dim), _ref_softmax,
         lambda rng, shape, dim: Sample((_big_normal(rng, shape),), {"dim": dim}),
         _softmax_params(), [dict(shape=(2, 3), dim=-1), dict(shape=(3,), dim=0),
                             dict(shape=(0, 2), dim=1), dict(shape=(), dim=-1)],
         op="softmax", grad_kw=dict(atol=1e-4)),
    Case("log_softmax", lambda x, dim: lk.log_softmax(x, dim=dim), _ref_log_softmax,
         lambda rng, shape, dim: Sample((_big_normal(rng, shape),), {"dim": dim}),
         _softmax_params(), [dict(shape=(2, 3), dim=0), dict(shape=(1,), dim=-1),
                             dict(shape=(), dim=0)], op="log_softmax", grad_kw=dict(atol=1e-4)),
    # the vjps as ops of their own: g, and the forward's result at a random input (the
    # formulas, and PyTorch's double backward through them, hold for any out)
    Case("softmax_backward", lambda g, out, dim: _softmax.softmax_backward(g, out, dim=dim),
         torch_ref(lambda g, out, dim: out * (g - (g * out).sum(dim, keepdim=True))),
         lambda rng, shape, dim: Sample((normal(rng, shape),
                                         _ref_softmax(_big_normal(rng, shape), dim)),
                                        {"dim": dim}),
         _softmax_params(), [dict(shape=(2, 3), dim=-1), dict(shape=(3,), dim=0),
                             dict(shape=(0, 2), dim=1), dict(shape=(), dim=-1)],
         op="softmax_backward"),
    Case("log_softmax_backward",
         lambda g, out, dim: _softmax.log_softmax_backward(g, out, dim=dim),
         torch_ref(lambda g, out, dim: g - out.exp() * g.sum(dim, keepdim=True)),
         lambda rng, shape, dim: Sample((normal(rng, shape),
                                         _ref_log_softmax(_big_normal(rng, shape), dim)),
                                        {"dim": dim}),
         _softmax_params(), [dict(shape=(2, 3), dim=0), dict(shape=(1,), dim=-1),
                             dict(shape=(), dim=0)], op="log_softmax_backward"),
]


# ---- nll_loss and its adjoint ---------------------------------------------------------------
@st.composite
def _nll_params(draw):
    classes = draw(st.integers(1, MAX_SIDE))
    if draw(st.booleans()):
        target_shape = ()
    else:
        target_shape = draw(shapes(min_dims=1, max_dims=2, min_side=1))
    return {"target_shape": target_shape, "classes": classes,
            "reduction": draw(st.sampled_from(["mean", "sum", "none"]))}


def _scores_shape(target_shape, classes):
    return (classes,) + tuple(target_shape[1:]) if not target_shape else \
        target_shape[:1] + (classes,) + tuple(target_shape[1:])


def _nll_build(rng, target_shape, classes, reduction):
    lp = normal(rng, _scores_shape(target_shape, classes))
    return Sample((lp, ints_below(rng, target_shape, classes)), {"reduction": reduction})


def _nll_picked(lp, target):
    if lp.ndim == 1:
        return lp[target]
    return np.take_along_axis(lp, np.expand_dims(target, 1), axis=1).squeeze(1)


def _nll_ref(lp, target, reduction):
    loss = -_nll_picked(lp, target)
    return loss if reduction == "none" else np.asarray(
        loss.sum() if reduction == "sum" else loss.mean())


def _nll_backward_build(rng, target_shape, classes, reduction):
    g = normal(rng, target_shape if reduction == "none" else ())
    return Sample((g, ints_below(rng, target_shape, classes)),
                  {"classes": classes, "reduction": reduction})


def _nll_backward_ref(g, target, classes, reduction):
    out = np.zeros(_scores_shape(target.shape, classes), np.asarray(g).dtype)
    scale = 1.0 / max(target.size, 1) if reduction == "mean" else 1.0
    for pos in np.ndindex(*target.shape):
        where = (target[pos],) if not pos else pos[:1] + (target[pos],) + pos[1:]
        out[where] = -(g if reduction != "none" else g[pos]) * scale
    return out


NLL_EDGES = [dict(target_shape=(3,), classes=4, reduction="mean"),
             dict(target_shape=(), classes=1, reduction="none"),
             dict(target_shape=(2, 3), classes=2, reduction="sum"),
             dict(target_shape=(0,), classes=3, reduction="sum")]
NLL = [
    Case("nll_loss", lambda lp, target, reduction: _nll.nll_loss(lp, target, reduction=reduction),
         _nll_ref, _nll_build, _nll_params(), NLL_EDGES, op="nll_loss"),
    Case("nll_loss_backward",
         lambda g, target, classes, reduction: _nll.nll_loss_backward(
             g, target, classes=classes, reduction=reduction),
         _nll_backward_ref, _nll_backward_build, _nll_params(), NLL_EDGES,
         op="nll_loss_backward"),
]


PRIMITIVE_CASES = (ELEMENTWISE + [WHERE] + CASTS + [TO_DEVICE] + REDUCTIONS + SHAPE_OPS +
                   [MATMUL, MATMUL_T] + INDEXING + GATHER + WINDOWS + STATE + SOFTMAX + NLL)


# ---- composites ----------------------------------------------------------------------------
def _mean_ref(x, dim, keepdim):
    dim = None if x.ndim == 0 else dim
    with np.errstate(all="ignore"):
        return np.asarray(np.mean(x, axis=dim, keepdims=keepdim))


@st.composite
def _var_params(draw):
    """Corrections below the reduced count (at or above it the variance is inf/nan: a value
    test of its own, ``var_degenerate``)."""
    p = draw(_reduce_params())
    axes = range(len(p["shape"])) if p["dim"] is None else (
        (p["dim"],) if isinstance(p["dim"], int) else p["dim"])
    count = math.prod(p["shape"][a] for a in axes) if p["shape"] else 1
    p["correction"] = draw(st.integers(0, max(min(count - 1, 2), 0)))
    return p


def _var_ref(x, dim, keepdim, correction):
    dim = None if x.ndim == 0 else dim
    with np.errstate(all="ignore"):
        return np.asarray(np.var(x, axis=dim, keepdims=keepdim, ddof=correction))


def _big_normal(rng, shape):
    return _arr(normal(rng, shape) * 30.0)   # stability: exp would overflow without the max shift


@st.composite
def _two_dims(draw, min_dims=1):
    shape = draw(shapes(min_dims=min_dims))
    nd = len(shape)
    return {"shape": shape, "dim0": draw(st.integers(-nd, nd - 1)),
            "dim1": draw(st.integers(-nd, nd - 1))}


@st.composite
def _squeeze_params(draw):
    shape = draw(st.lists(st.sampled_from([0, 1, 1, 1, 2, 3]), max_size=4).map(tuple))
    nd = len(shape)
    choices = [st.none()]
    if nd:
        choices += [st.integers(-nd, nd - 1),
                    st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd,
                             unique=True).map(tuple)]
    return {"shape": shape, "dim": draw(st.one_of(*choices))}


def _squeeze_ref(x, dim):
    if dim is None:
        return np.squeeze(x)
    axes = (dim,) if isinstance(dim, int) else dim
    axes = tuple(a % x.ndim for a in axes if x.shape[a] == 1)
    return np.squeeze(x, axis=axes)


@st.composite
def _unsqueeze_params(draw):
    shape = draw(shapes())
    nd = len(shape)
    return {"shape": shape, "dim": draw(st.integers(-nd - 1, nd))}


@st.composite
def _flatten_params(draw):
    shape = draw(shapes())
    nd = len(shape)
    if nd == 0:
        return {"shape": shape, "start_dim": 0, "end_dim": -1}
    a, b = sorted((draw(st.integers(0, nd - 1)), draw(st.integers(0, nd - 1))))
    return {"shape": shape, "start_dim": a - nd if draw(st.booleans()) else a,
            "end_dim": b - nd if draw(st.booleans()) else b}


def _flatten_ref(x, start_dim, end_dim):
    if x.ndim == 0:
        return x.reshape(1)
    s, e = start_dim % x.ndim, end_dim % x.ndim
    return x.reshape(x.shape[:s] + (math.prod(x.shape[s:e + 1]),) + x.shape[e + 1:])


@st.composite
def _clip_params(draw):
    lo = draw(st.sampled_from([None, -1, 0]))
    hi = draw(st.sampled_from([1, 2] if lo is None else [None, 1, 2]))   # not both None
    return {"shape": draw(shapes()), "lo": lo, "hi": hi}


def _clip_ref(x, lo, hi):
    if lo is not None:
        x = np.maximum(x, lo)
    if hi is not None:
        x = np.minimum(x, hi)
    return x


@st.composite
def _stack_params(draw):
    shape = draw(shapes())
    nd = len(shape)
    return {"shape": shape, "n": draw(st.integers(1, 3)), "dim": draw(st.integers(-nd - 1, nd))}


@st.composite
def _split_params(draw):
    shape = draw(shapes(min_dims=1, max_side=5))
    nd = len(shape)
    dim = draw(st.integers(-nd, nd - 1))
    n = shape[dim]
    if draw(st.booleans()):
        sections = draw(st.integers(1, 4))
    else:
        cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
        bounds = [0] + cuts + [n]
        sections = [b - a for a, b in zip(bounds, bounds[1:])]
    return {"shape": shape, "sections": sections, "dim": dim}


def _split_ref(x, sections, dim):
    n = x.shape[dim]
    if isinstance(sections, int):
        cuts = list(range(sections, n, sections))
        if n == 0:
            return (x,)
    else:
        cuts = list(np.cumsum(sections)[:-1])
    return tuple(np.split(x, cuts, axis=dim))


@st.composite
def _take_params(draw):
    shape = draw(shapes())
    nd = len(shape)
    dim = draw(st.one_of(st.none(), st.integers(-nd, nd - 1))) if nd else None
    n = math.prod(shape) if dim is None else shape[dim]
    index_shape = draw(shapes(max_dims=2, max_side=4)) if n else (0,)
    return {"shape": shape, "dim": dim, "index_shape": index_shape}


def _take_build(rng, shape, dim, index_shape):
    n = math.prod(shape) if dim is None else shape[dim]
    index = _arr(rng.integers(-n, max(n, 1), index_shape), np.int64)
    return Sample((normal(rng, shape), index), {"dim": dim})


def _take_ref(x, index, dim):
    if dim is None:
        return x.reshape(-1)[index]
    return np.take(x, index, axis=dim)


def _conv_build(rng, shape, kernel_size, stride, padding, dilation, out_channels, bias):
    x = normal(rng, shape)
    w = normal(rng, (out_channels, shape[1]) + tuple(kernel_size))
    args = (x, w, normal(rng, (out_channels,))) if bias else (x, w)
    return Sample(args, {"stride": stride, "padding": padding, "dilation": dilation})


def _conv_ref(x, w, b=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1)):
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    o, c, kh, kw = w.shape
    oh, ow = _out_hw(x.shape, (kh, kw), stride, padding, dilation)
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    out = np.zeros((x.shape[0], o, oh, ow), np.result_type(x, w))
    for a in range(oh):
        for bb in range(ow):
            for i in range(kh):
                for j in range(kw):
                    out[:, :, a, bb] += np.einsum("nc,oc->no",
                                                  xp[:, :, a * sh + i * dh, bb * sw + j * dw],
                                                  w[:, :, i, j])
    if b is not None:
        out += b.reshape(1, o, 1, 1)
    return out


@st.composite
def _conv_params(draw):
    p = draw(_window_params())
    p["out_channels"] = draw(st.integers(1, 2))
    p["bias"] = draw(st.booleans())
    return p


# ---- the convolution primitives (conv2d, and the two halves of its vjp), with groups ---------
@st.composite
def _conv_op_params(draw):
    p = draw(_window_params())
    groups = draw(st.sampled_from([1, 2])) if p["shape"][1] == 2 else 1
    p["groups"], p["out_channels"] = groups, groups * draw(st.integers(1, 2))
    return p


def _by_group(fn, groups, *pairs):
    """``fn`` on each group's slices of the channel-split ``pairs`` ((array, axis), ...): one
    result per group."""
    return [fn(*(np.split(a, groups, axis=ax)[i] for a, ax in pairs)) for i in range(groups)]


def _conv_op_ref(x, w, stride, padding, dilation, groups):
    parts = _by_group(lambda xg, wg: _conv_ref(xg, wg, stride=stride, padding=padding,
                                               dilation=dilation), groups, (x, 1), (w, 0))
    return np.concatenate(parts, axis=1)


def _input_grad_ref(g, w, image_shape, stride, padding, dilation, groups):
    geo = dict(kernel_size=w.shape[2:], stride=stride, padding=padding, dilation=dilation)
    n, c = image_shape[:2]
    parts = _by_group(lambda gg, wg: _ref_fold(np.einsum("nohw,ocij->ncijhw", gg, wg),
                                               (n, c // groups) + tuple(image_shape[2:]), **geo),
                      groups, (g, 1), (w, 0))
    return np.concatenate(parts, axis=1)


def _weight_grad_ref(g, x, weight_shape, stride, padding, dilation, groups):
    geo = dict(kernel_size=weight_shape[2:], stride=stride, padding=padding, dilation=dilation)
    parts = _by_group(lambda gg, xg: np.einsum("nohw,ncijhw->ocij", gg, _ref_unfold(xg, **geo)),
                      groups, (g, 1), (x, 1))
    return np.concatenate(parts, axis=0)


def _conv_op_geo(stride, padding, dilation, groups):
    return {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}


def _conv_op_build(rng, shape, kernel_size, stride, padding, dilation, groups, out_channels):
    w = normal(rng, (out_channels, shape[1] // groups) + tuple(kernel_size))
    return Sample((normal(rng, shape), w), _conv_op_geo(stride, padding, dilation, groups))


def _input_grad_build(rng, shape, kernel_size, stride, padding, dilation, groups, out_channels):
    oh, ow = _out_hw(shape, kernel_size, stride, padding, dilation)
    w = normal(rng, (out_channels, shape[1] // groups) + tuple(kernel_size))
    return Sample((normal(rng, (shape[0], out_channels, oh, ow)), w),
                  dict(_conv_op_geo(stride, padding, dilation, groups), image_shape=shape))


def _weight_grad_build(rng, shape, kernel_size, stride, padding, dilation, groups, out_channels):
    oh, ow = _out_hw(shape, kernel_size, stride, padding, dilation)
    weight_shape = (out_channels, shape[1] // groups) + tuple(kernel_size)
    return Sample((normal(rng, (shape[0], out_channels, oh, ow)), normal(rng, shape)),
                  dict(_conv_op_geo(stride, padding, dilation, groups),
                       weight_shape=weight_shape))


CONV_EDGES = [dict(p, groups=1, out_channels=2) for p in WINDOW_EDGES] + [
    dict(shape=(2, 2, 5, 4), kernel_size=(2, 3), stride=(2, 1), padding=(1, 0), dilation=(2, 1),
         groups=2, out_channels=4),
    # more output positions per image than _MIN_COLUMNS: the image-by-image products
    dict(shape=(2, 2, 17, 17), kernel_size=(3, 3), stride=(1, 1), padding=(1, 1),
         dilation=(1, 1), groups=2, out_channels=2)]
CONVOLUTION = [
    Case("convolution", lambda x, w, **kw: _conv.convolution(x, w, **kw), _conv_op_ref,
         _conv_op_build, _conv_op_params(), CONV_EDGES, op="conv2d", rtol=1e-6, atol=1e-8),
    Case("conv2d_input_grad", lambda g, w, **kw: _conv.conv2d_input_grad(g, w, **kw),
         _input_grad_ref, _input_grad_build, _conv_op_params(), CONV_EDGES,
         op="conv2d_input_grad", rtol=1e-6, atol=1e-8),
    Case("conv2d_weight_grad", lambda g, x, **kw: _conv.conv2d_weight_grad(g, x, **kw),
         _weight_grad_ref, _weight_grad_build, _conv_op_params(), CONV_EDGES,
         op="conv2d_weight_grad", rtol=1e-6, atol=1e-8),
]


def _pool_build(rng, shape, kernel_size, stride, padding, dilation=(1, 1)):
    kw = {"kernel_size": kernel_size, "stride": stride, "padding": padding}
    if dilation != (1, 1):
        kw["dilation"] = dilation
    return Sample((distinct(rng, shape),), kw)


def _max_pool_ref(x, kernel_size, stride, padding, dilation=(1, 1)):
    cols = _ref_unfold(x, kernel_size, stride, padding, dilation, pad_value=-np.inf)
    return cols.max(axis=(2, 3))


def _avg_pool_ref(x, kernel_size, stride, padding):
    cols = _ref_unfold(x, kernel_size, stride, padding, (1, 1))
    return cols.mean(axis=(2, 3))


POOL_EDGES = [dict(shape=(1, 1, 4, 4), kernel_size=(2, 2), stride=(2, 2), padding=(0, 0)),
              dict(shape=(2, 1, 3, 5), kernel_size=(3, 2), stride=(1, 2), padding=(1, 1)),
              dict(shape=(0, 2, 2, 2), kernel_size=(1, 1), stride=(1, 1), padding=(0, 0))]


def _pool_params(dilation):
    return _window_params(dilation=dilation, pool_padding=True)


COMPOSITE_CASES = [
    Case("mean", lambda x, dim, keepdim: lk.mean(x, dim=dim, keepdim=keepdim), _mean_ref,
         _reduce_build(normal), _reduce_params(),
         REDUCE_EDGES + [dict(shape=(0, 2), dim=0, keepdim=False)]),
    Case("var", lambda x, dim, keepdim, correction: lk.var(x, dim=dim, keepdim=keepdim,
                                                           correction=correction),
         _var_ref, lambda rng, shape, dim, keepdim, correction: Sample(
             (normal(rng, shape),), dict(dim=dim, keepdim=keepdim, correction=correction)),
         _var_params(), [dict(p, correction=1) for p in REDUCE_EDGES[3:]] +
         [dict(shape=(4, 3), dim=0, keepdim=True, correction=0),
          dict(shape=(), dim=None, keepdim=False, correction=0),
          dict(shape=(3,), dim=None, keepdim=False, correction=2)], rtol=1e-6),
    Case("var_degenerate", lambda x, dim, correction: lk.var(x, dim=dim, correction=correction),
         lambda x, dim, correction: _var_ref(x, dim, False, correction),
         lambda rng, shape, dim, correction: Sample((normal(rng, shape),),
                                                    dict(dim=dim, correction=correction)),
         st.fixed_dictionaries({"shape": shapes(min_dims=1, max_side=2), "dim": st.just(0),
                                "correction": st.integers(2, 3)}),
         [dict(shape=(2,), dim=0, correction=2), dict(shape=(1, 2), dim=0, correction=1),
          dict(shape=(0, 2), dim=0, correction=1), dict(shape=(), dim=None, correction=1)],
         differentiable=False),
    Case("logsumexp", lambda x, dim, keepdim: lk.logsumexp(x, dim=dim, keepdim=keepdim),
         _ref_logsumexp,
         lambda rng, shape, dim, keepdim: Sample((_big_normal(rng, shape),),
                                                 {"dim": dim, "keepdim": keepdim}),
         _softmax_params(keepdim=True),
         [dict(shape=(2, 3), dim=-1, keepdim=False), dict(shape=(2, 3), dim=0, keepdim=True),
          dict(shape=(), dim=-1, keepdim=False), dict(shape=(3, 0), dim=0, keepdim=False)],
         grad_kw=dict(atol=1e-4)),
    Case("transpose", lambda x, dim0, dim1: lk.transpose(x, dim0, dim1),
         lambda x, dim0, dim1: np.swapaxes(x, dim0, dim1),
         lambda rng, shape, dim0, dim1: Sample((normal(rng, shape),),
                                               {"dim0": dim0, "dim1": dim1}),
         _two_dims(), [dict(shape=(2, 3), dim0=-2, dim1=-1), dict(shape=(2, 0, 3), dim0=0,
                                                                  dim1=2),
                       dict(shape=(3,), dim0=0, dim1=-1)]),
    Case("squeeze", lambda x, dim: lk.squeeze(x, dim), _squeeze_ref,
         lambda rng, shape, dim: Sample((normal(rng, shape),), {"dim": dim}), _squeeze_params(),
         [dict(shape=(1, 2, 1), dim=None), dict(shape=(1, 2, 1), dim=0),
          dict(shape=(1, 2, 1), dim=(1, 2)), dict(shape=(), dim=None), dict(shape=(0, 1), dim=-1)]),
    Case("unsqueeze", lambda x, dim: lk.unsqueeze(x, dim),
         lambda x, dim: np.expand_dims(x, dim),
         lambda rng, shape, dim: Sample((normal(rng, shape),), {"dim": dim}),
         _unsqueeze_params(), [dict(shape=(), dim=0), dict(shape=(), dim=-1),
                               dict(shape=(2, 3), dim=-1), dict(shape=(0,), dim=1)]),
    Case("flatten", lambda x, start_dim, end_dim: lk.flatten(x, start_dim, end_dim), _flatten_ref,
         lambda rng, shape, start_dim, end_dim: Sample((normal(rng, shape),),
                                                       dict(start_dim=start_dim, end_dim=end_dim)),
         _flatten_params(), [dict(shape=(), start_dim=0, end_dim=-1),
                             dict(shape=(2, 3, 4), start_dim=1, end_dim=-1),
                             dict(shape=(2, 0, 4), start_dim=0, end_dim=1),
                             dict(shape=(2, 3), start_dim=1, end_dim=1)]),
    Case("clip", lambda x, lo, hi: lk.clip(x, lo, hi), _clip_ref,
         lambda rng, shape, lo, hi: Sample((grid_plus(rng, shape),), {"lo": lo, "hi": hi}),
         _clip_params(), [dict(shape=(2, 3), lo=-1, hi=1), dict(shape=(), lo=0, hi=None),
                          dict(shape=(0,), lo=None, hi=2), dict(shape=(3,), lo=2, hi=1)]),
    Case("clip_tensor_bounds", lambda x, lo, hi: lk.clip(x, lo, hi), np.clip,
         # x, lo and hi on three grids (k + .25, k + .75, k + .5): never equal, so no kinks
         lambda rng, shapes: Sample((grid_plus(rng, shapes[0]),
                                     _arr(grid_minus(rng, shapes[1]) - 1),
                                     _arr(rng.integers(-2, 3, shapes[2]) + 1.5))),
         st.fixed_dictionaries({"shapes": broadcast_shapes(3)}),
         [dict(shapes=((2, 3), (3,), ())), dict(shapes=((), (), ()))]),
    Case("stack", lambda *xs, dim: lk.stack(xs, dim=dim),
         lambda *xs, dim: np.stack(xs, axis=dim),
         lambda rng, shape, n, dim: Sample(tuple(normal(rng, shape) for _ in range(n)),
                                           {"dim": dim}),
         _stack_params(), [dict(shape=(), n=2, dim=0), dict(shape=(2, 3), n=3, dim=-1),
                           dict(shape=(0,), n=2, dim=1), dict(shape=(2,), n=1, dim=-2)]),
    Case("split", lambda x, sections, dim: lk.split(x, sections, dim=dim), _split_ref,
         lambda rng, shape, sections, dim: Sample((normal(rng, shape),),
                                                  {"sections": sections, "dim": dim}),
         _split_params(), [dict(shape=(5, 2), sections=2, dim=0),
                           dict(shape=(2, 4), sections=[1, 0, 3], dim=-1),
                           dict(shape=(0, 3), sections=1, dim=0),
                           dict(shape=(3,), sections=3, dim=0)]),
    Case("take", lambda x, index, dim: lk.take(x, index, dim), _take_ref, _take_build,
         _take_params(), [dict(shape=(2, 3), dim=None, index_shape=(4,)),
                          dict(shape=(2, 3), dim=1, index_shape=(2, 2)),
                          dict(shape=(4,), dim=0, index_shape=()),
                          dict(shape=(0, 3), dim=None, index_shape=(0,))]),
    Case("conv2d", lambda x, w, *b, **kw: lk.conv2d(x, w, *b, **kw), _conv_ref, _conv_build,
         _conv_params(),
         [dict(p, out_channels=2, bias=b) for p, b in zip(WINDOW_EDGES, (True, False, True,
                                                                         False))],
         rtol=1e-6, atol=1e-8),
    Case("max_pool2d", lambda x, **kw: lk.max_pool2d(x, **kw), _max_pool_ref, _pool_build,
         _pool_params(True), POOL_EDGES + [dict(shape=(1, 1, 5, 5), kernel_size=(2, 2),
                                                stride=(1, 1), padding=(1, 1),
                                                dilation=(2, 2))]),
    Case("avg_pool2d", lambda x, **kw: lk.avg_pool2d(x, **kw), _avg_pool_ref, _pool_build,
         _pool_params(False), POOL_EDGES),
    Case("composite_gather", lambda x, index, dim: x.gather(dim, index), _gather_ref,
         _gather_build, _gather_params(), GATHER_EDGES),
    Case("composite_scatter_add", lambda x, index, src, dim: x.scatter_add(dim, index, src),
         _scatter_ref, _scatter_build, _gather_params(), GATHER_EDGES),
    Case("tensor_indexing", indexing_fn, _getitem_ref, indexing_build, _index_params(),
         GETITEM_EDGES),
]
# The composite public ops that must have a case (the brief's list); checked by the suite.
COMPOSITE_NAMES = ("mean", "var", "logsumexp", "transpose", "squeeze",
                   "unsqueeze", "flatten", "clip", "stack", "split", "take", "conv2d",
                   "max_pool2d", "avg_pool2d", "composite_gather", "composite_scatter_add",
                   "tensor_indexing")

_MORE_PRIMITIVES, _MORE_COMPOSITES = _collected()
PRIMITIVE_CASES = PRIMITIVE_CASES + CONVOLUTION + _MORE_PRIMITIVES
COMPOSITE_CASES = COMPOSITE_CASES + _MORE_COMPOSITES
ALL_CASES = PRIMITIVE_CASES + COMPOSITE_CASES


def sample_strategy(case):
    """Hypothesis strategy of (params, seed) pairs for ``case``."""
    return st.tuples(case.params, st.integers(0, 2 ** 32 - 1))
