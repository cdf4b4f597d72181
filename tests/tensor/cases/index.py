"""Cases of indexing with PyTorch's rules and of the indexing family of ops (index_select,
masked_*, scatter*, index_*, put, nonzero, take_along_dim, one_hot), PyTorch as the oracle.

An index is a template: a tuple of ints, slices, None, Ellipsis, bools, Python lists and tuples,
and ``("arr", i)`` placeholders for index arrays passed as arguments (so they become tensors).
"""
import numpy as np
from hypothesis import strategies as st

import labkit as lk
import labkit.nn.functional as F

from ..case_kit import (MAX_SIDE, Case, Sample, _arr, broadcast_shapes, distinct, normal,
                        shapes, small_ints, torch_ref)


def fill(template, arrays):
    """The index of ``template`` with its ``("arr", i)`` placeholders replaced by ``arrays``."""
    return tuple(arrays[item[1]] if isinstance(item, tuple) and item[:1] == ("arr",) else item
                 for item in template)


def _consumed(item, ndim_left):
    """How many dimensions of the indexed tensor one index item stands for."""
    if item is None or isinstance(item, bool):
        return 0
    if item is Ellipsis:
        return ndim_left
    if isinstance(item, (list, tuple)):
        a = np.asarray(item)
        return a.ndim if a.dtype == bool else 1
    if hasattr(item, "dtype") and str(item.dtype) in ("torch.bool", "bool"):
        return item.ndim
    return 1


def torch_getitem(x, template, arrays):
    """``x[index]`` in PyTorch (``x`` and ``arrays`` torch tensors). PyTorch refuses negative
    slice steps, which labkit takes as NumPy does: such a slice is a flip and a positive step."""
    index = fill(template, arrays)
    sizes = [0 if item is Ellipsis else _consumed(item, 0) for item in index]
    left = x.ndim - sum(sizes)
    flips, items, dim = [], [], 0
    for item in index:
        if isinstance(item, slice) and item.step is not None and item.step < 0:
            n = x.shape[dim]
            r = range(n)[item]
            flips.append(dim)
            item = slice(n - 1 - r[0], n - r[-1], -item.step) if len(r) else slice(0, 0)
        items.append(item)
        dim += _consumed(item, left)
    if flips:
        x = x.flip(flips)
    return x[tuple(items)]


def torch_indexed_shape(x, template, arrays):
    """The shape of ``x[index]`` in PyTorch, for NumPy ``x`` and ``arrays``."""
    import torch
    return tuple(torch_getitem(torch.from_numpy(x), template,
                               [torch.from_numpy(a) for a in arrays]).shape)


def torch_index_add(base, values, *arrays, template):
    """``base`` with ``values`` added at the index (repeats accumulate): the vjp of PyTorch's
    indexing, so that the layout is PyTorch's."""
    import torch
    x = torch.zeros_like(base, requires_grad=True)
    with torch.enable_grad():
        picked = torch_getitem(x, template, arrays)
        added, = torch.autograd.grad(picked, x, values, create_graph=values.requires_grad)
    return base + added


# ---- the cases -----------------------------------------------------------------------------
def _torch():
    import torch
    return torch


def case(name, fn, torch_fn, build, params, edges, **kw):
    """A case whose oracle is ``torch_fn`` (a function of torch tensors)."""
    return Case(name, fn, torch_ref(torch_fn), build, params, edges, **kw)


def _ints(rng, shape, low, high):
    return _arr(rng.integers(low, max(high, low + 1), shape), np.int64)


# ---- x[index] with PyTorch's rules ------------------------------------------------------------
@st.composite
def _torch_index_params(draw):
    """Indices that mix ints (and 0-d integer tensors) with integer arrays, lists and tuples
    apart from each other (where PyTorch's layout differs from NumPy's), slices with any step,
    None, Ellipsis, Python bools, and boolean masks."""
    shape = draw(shapes(min_dims=1, max_dims=4, max_side=3))
    if draw(st.integers(0, 5)) == 0:     # a mask, ints and slices
        j = draw(st.integers(0, len(shape) - 1))
        k = draw(st.integers(1, len(shape) - j))
        lead = [draw(st.integers(-s, s - 1)) if s and draw(st.booleans()) else slice(None)
                for s in shape[:j]]
        return {"shape": shape, "template": tuple(lead) + (("arr", 0),),
                "arrays": (("mask", shape[j:j + k]),)}
    length = draw(st.integers(0, 3))
    template, arrays, ellipsis, dim = [], [], False, 0
    while dim < len(shape):
        s = shape[dim]
        kinds = ["full", "slice", "none", "true"] + (["ellipsis"] if not ellipsis else [])
        if s:
            kinds += ["int", "int", "int0d", "array", "array", "list", "tuple"]
        kind = draw(st.sampled_from(kinds))
        if kind in ("none", "true"):
            template.append(None if kind == "none" else True)
            continue
        if kind == "ellipsis":
            template.append(Ellipsis)
            ellipsis = True
            dim = len(shape) - draw(st.integers(0, len(shape) - dim))
            continue
        if kind == "full":
            if not ellipsis and draw(st.booleans()):
                break
            template.append(slice(None))
        elif kind == "slice":
            template.append(slice(draw(st.one_of(st.none(), st.integers(-s - 1, s + 1))),
                                  draw(st.one_of(st.none(), st.integers(-s - 1, s + 1))),
                                  draw(st.sampled_from([None, 1, 2, -1, -2]))))
        elif kind == "int":
            template.append(draw(st.integers(-s, s - 1)))
        elif kind in ("list", "tuple"):
            values = draw(st.lists(st.integers(-s, s - 1), min_size=length, max_size=length))
            template.append(values if kind == "list" else tuple(values))
        else:
            template.append(("arr", len(arrays)))
            arrays.append(("ints", () if kind == "int0d" else (length,), s))
        dim += 1
    return {"shape": shape, "template": tuple(template), "arrays": tuple(arrays)}


def index_arrays(rng, arrays):
    """The arrays of ``arrays`` specs: ('mask', shape) or ('ints', shape, size of the dim)."""
    out = []
    for spec in arrays:
        if spec[0] == "mask":
            out.append(_arr(rng.integers(0, 2, spec[1]), bool))
        else:
            out.append(_ints(rng, spec[1], -spec[2], spec[2]))    # repeats and negatives
    return out


def indexing_build(rng, shape, template, arrays):
    return Sample((normal(rng, shape),) + tuple(index_arrays(rng, arrays)),
                  {"template": template}, grad=(0,))


def indexing_fn(x, *arrays, template):
    return x[fill(template, arrays)]


TORCH_INDEX_EDGES = [
    dict(shape=(2, 3, 4), template=(0, slice(None), [0, 1]), arrays=()),
    dict(shape=(2, 3, 4), template=(None, 0, slice(None), ("arr", 0)),
         arrays=(("ints", (2,), 4),)),
    dict(shape=(2, 3, 4), template=(("arr", 0), slice(None), ("arr", 1)),
         arrays=(("ints", (), 2), ("ints", (3,), 4))),
    dict(shape=(2, 3, 4), template=(1, Ellipsis, (0, 1)), arrays=()),
    dict(shape=(2, 3), template=((0, 1),), arrays=()),
    dict(shape=(2, 3), template=([[0, 1], [1, 0]], 2), arrays=()),
    dict(shape=(2, 3), template=(True,), arrays=()),
    dict(shape=(2, 3), template=(False, 0), arrays=()),
    dict(shape=(2, 3, 4), template=(0, slice(None), True), arrays=()),
    dict(shape=(2, 3, 4), template=(1, ("arr", 0)), arrays=(("mask", (3, 4)),)),
    dict(shape=(2, 0, 4), template=(0, slice(None), [1, 1]), arrays=()),
    dict(shape=(3, 2), template=([], slice(None)), arrays=()),
    # an Ellipsis standing for no dimension keeps nothing apart in PyTorch (NumPy: apart)
    dict(shape=(3, 2, 4), template=(slice(None), [0], Ellipsis, [0, 1]), arrays=()),
]

INDEXING = [
    case("indexing_torch_rules", indexing_fn,
         lambda x, *arrays, template: torch_getitem(x, template, arrays), indexing_build,
         _torch_index_params(), TORCH_INDEX_EDGES),
]


# ---- along one dimension ----------------------------------------------------------------------
@st.composite
def _along_params(draw, repeats=True):
    shape = draw(shapes(min_dims=0))
    dim = draw(st.integers(-len(shape), len(shape) - 1)) if shape else 0
    n = shape[dim] if shape else 1
    if not shape:               # a 0-d tensor takes one index
        index_shape = draw(st.sampled_from([(), (1,)]))
    elif repeats:
        index_shape = draw(st.sampled_from([(), (0,), (1,), (2,), (4,)])) if n else (0,)
    else:
        index_shape = (draw(st.integers(0, n)),) if shape else draw(st.sampled_from([(), (1,)]))
    return {"shape": shape, "dim": dim, "index_shape": index_shape}


def _along_index(rng, shape, dim, index_shape, unique):
    n = shape[dim] if shape else 1
    if unique:
        return _arr(rng.permutation(n)[:max(index_shape, default=1)].reshape(index_shape),
                    np.int64)
    return _ints(rng, index_shape, 0, n)      # PyTorch takes no negative index here


def _along_build(source, unique=False):
    def build(rng, shape, dim, index_shape):
        index = _along_index(rng, shape, dim, index_shape, unique)
        args = (normal(rng, shape), index)
        if source:
            picked = shape[:dim % len(shape)] + (index.size,) + shape[dim % len(shape) + 1:] \
                if shape else ()
            args += (normal(rng, picked),)
        return Sample(args, {"dim": dim})
    return build


ALONG_EDGES = [dict(shape=(2, 3), dim=1, index_shape=(4,)),
               dict(shape=(2, 3), dim=0, index_shape=()),
               dict(shape=(), dim=0, index_shape=(1,)),
               dict(shape=(3, 0), dim=-1, index_shape=(0,)),
               dict(shape=(1, 2, 2), dim=-2, index_shape=(2,))]
UNIQUE_EDGES = [dict(shape=(2, 3), dim=1, index_shape=(2,)),
                dict(shape=(3,), dim=0, index_shape=()),
                dict(shape=(), dim=0, index_shape=()),
                dict(shape=(3, 0), dim=0, index_shape=(0,))]


def _fill_value_build(rng, shape, dim, index_shape, tensor_value):
    index = _along_index(rng, shape, dim, index_shape, unique=False)
    value = normal(rng, ()) if tensor_value else 1.5
    return Sample((normal(rng, shape), index, value), {"dim": dim})


ALONG = [
    case("index_select", lambda x, index, dim: lk.index_select(x, dim, index),
         lambda x, index, dim: _torch().index_select(x, dim, index), _along_build(False),
         _along_params(), ALONG_EDGES),
    case("index_add_along_dim",
         lambda x, index, source, dim: x.index_add(dim, index, source, alpha=2),
         lambda x, index, source, dim: x.index_add(dim, index, source, alpha=2),
         _along_build(True), _along_params().filter(lambda p: len(p["index_shape"]) == 1),
         [e for e in ALONG_EDGES if len(e["index_shape"]) == 1]),
    case("index_copy", lambda x, index, source, dim: lk.index_copy(x, dim, index, source),
         lambda x, index, source, dim: _torch().index_copy(x, dim, index, source),
         _along_build(True, unique=True),
         _along_params(repeats=False).filter(lambda p: p["shape"]),
         [e for e in UNIQUE_EDGES if e["shape"]]),
    case("index_fill", lambda x, index, value, dim: x.index_fill(dim, index, value),
         lambda x, index, value, dim: x.index_fill(dim, index, value), _fill_value_build,
         _along_params().map(lambda p: dict(p, tensor_value=len(p["shape"]) != 1)),
         [dict(e, tensor_value=t) for e, t in zip(ALONG_EDGES, (True, False, True, False, True))]),
]


# ---- masks ----------------------------------------------------------------------------------
@st.composite
def _mask_params(draw):
    shape_x, shape_m = draw(broadcast_shapes(2))
    return {"shape": shape_x, "mask_shape": shape_m, "tensor_value": draw(st.booleans())}


def _mask_build(rng, shape, mask_shape, tensor_value):
    value = normal(rng, ()) if tensor_value else -1.5
    return Sample((normal(rng, shape), _arr(rng.integers(0, 2, mask_shape), bool), value))


MASK_EDGES = [dict(shape=(2, 3), mask_shape=(2, 3), tensor_value=False),
              dict(shape=(3,), mask_shape=(2, 3), tensor_value=True),
              dict(shape=(), mask_shape=(), tensor_value=True),
              dict(shape=(2, 1), mask_shape=(0, 1, 3), tensor_value=False)]

MASKS = [
    case("masked_fill", lambda x, mask, value: x.masked_fill(mask, value),
         lambda x, mask, value: x.masked_fill(mask, value), _mask_build, _mask_params(),
         MASK_EDGES),
    case("masked_select", lambda x, mask, value: lk.masked_select(x, mask),
         lambda x, mask, value: _torch().masked_select(x, mask), _mask_build, _mask_params(),
         MASK_EDGES),
]


# ---- scatter --------------------------------------------------------------------------------
@st.composite
def _scatter_params(draw, unique=False, bigger=False):
    """x's shape, dim, and an index no larger than x outside dim (along dim: up to x's size if
    ``unique``, each line then naming distinct positions; else up to 3, with repeats); ``bigger``
    makes src larger than index (PyTorch reads only index's extent of it)."""
    shape = draw(shapes(min_dims=1, min_side=1))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    d = dim % len(shape)
    index_shape = tuple(draw(st.integers(0, s if unique else MAX_SIDE)) if i == d else
                        draw(st.integers(0, s)) for i, s in enumerate(shape))
    return {"shape": shape, "dim": dim, "index_shape": index_shape,
            "bigger": bigger and draw(st.booleans())}


def _scatter_index(rng, shape, dim, index_shape, unique):
    d = dim % len(shape)
    if not unique:
        return _ints(rng, index_shape, 0, shape[d])
    lines = index_shape[:d] + (shape[d],) + index_shape[d + 1:]
    order = np.argsort(rng.random(lines), axis=d)
    return _arr(np.take(order, np.arange(index_shape[d]), axis=d), np.int64)


def _scatter_build(gen=normal, unique=False, **extra):
    def build(rng, shape, dim, index_shape, bigger, **kw):
        index = _scatter_index(rng, shape, dim, index_shape, unique)
        src_shape = tuple(n + 1 for n in index_shape) if bigger else index_shape
        return Sample((gen(rng, shape), index, gen(rng, src_shape)), dict(dim=dim, **kw, **extra))
    return build


SCATTER_EDGES = [dict(shape=(3, 4), dim=1, index_shape=(3, 2), bigger=False),
                 dict(shape=(3, 4), dim=0, index_shape=(1, 2), bigger=False),
                 dict(shape=(3, 4), dim=-1, index_shape=(0, 4), bigger=False),
                 dict(shape=(2,), dim=0, index_shape=(2,), bigger=False),
                 dict(shape=(2, 1, 3), dim=2, index_shape=(2, 1, 3), bigger=False)]
REDUCE_EDGES = [dict(shape=(3, 4), dim=1, index_shape=(3, 5), bigger=False),
                dict(shape=(3, 4), dim=0, index_shape=(1, 2), bigger=False),
                dict(shape=(2,), dim=0, index_shape=(6,), bigger=False),
                dict(shape=(3, 4), dim=-1, index_shape=(0, 4), bigger=False)]
LARGER_SRC_EDGES = [dict(shape=(3, 4), dim=0, index_shape=(1, 2), bigger=True),
                    dict(shape=(2, 1, 3), dim=2, index_shape=(2, 1, 3), bigger=True)]


def values_from_torch(torch_fn):
    """PyTorch as the oracle of values only (the gradients then go to finite differences
    alone): for inputs where PyTorch's own backward fails."""
    ref = torch_ref(torch_fn)
    return lambda *args, **kwargs: ref(*args, **kwargs)


def _scatter_value_build(rng, shape, dim, index_shape, bigger):
    index = _scatter_index(rng, shape, dim, index_shape, unique=True)
    return Sample((normal(rng, shape), index), {"dim": dim, "value": 2.5})


def _reduce_cases():
    out = []
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            # distinct values: amax/amin have one winner (ties are checked in
            # test_indexing_ops); prod's values nonzero but small enough for float32
            gen = distinct if reduce in ("amax", "amin") else normal
            out.append(case(
                f"scatter_reduce_{reduce}{'' if include_self else '_without_self'}",
                lambda x, index, src, **kw: x.scatter_reduce(kw.pop("dim"), index, src, **kw),
                lambda x, index, src, **kw: x.scatter_reduce(kw.pop("dim"), index, src, **kw),
                _scatter_build(gen, reduce=reduce, include_self=include_self),
                _scatter_params(), REDUCE_EDGES, op="scatter_reduce"))
    return out


SCATTERS = [
    case("scatter", lambda x, index, src, dim: lk.scatter(x, dim, index, src),
         lambda x, index, src, dim: _torch().scatter(x, dim, index, src),
         _scatter_build(unique=True), _scatter_params(unique=True), SCATTER_EDGES, op="scatter"),
    case("scatter_value", lambda x, index, dim, value: x.scatter(dim, index, value=value),
         lambda x, index, dim, value: x.scatter(dim, index, value=value), _scatter_value_build,
         _scatter_params(unique=True), SCATTER_EDGES),
    case("scatter_reduce_add", lambda x, index, src, dim: x.scatter(dim, index, src, reduce="add"),
         lambda x, index, src, dim: x.scatter_add(dim, index, src), _scatter_build(),
         _scatter_params(), REDUCE_EDGES),
    # a src larger than index: PyTorch's backward gives its gradient index's shape and fails
    Case("scatter_larger_src", lambda x, index, src, dim: x.scatter(dim, index, src),
         values_from_torch(lambda x, index, src, dim: x.scatter(dim, index, src)),
         _scatter_build(unique=True), _scatter_params(unique=True, bigger=True),
         LARGER_SRC_EDGES),
    Case("scatter_reduce_larger_src",
         lambda x, index, src, dim: x.scatter_reduce(dim, index, src, "mean"),
         values_from_torch(lambda x, index, src, dim: x.scatter_reduce(dim, index, src, "mean")),
         _scatter_build(), _scatter_params(bigger=True), LARGER_SRC_EDGES),
    # PyTorch has no gradient for scatter(reduce=...): the oracle is scatter_reduce's
    case("scatter_reduce_multiply",
         lambda x, index, src, dim: x.scatter(dim, index, src, reduce="multiply"),
         lambda x, index, src, dim: x.scatter_reduce(dim, index, src, "prod"), _scatter_build(),
         _scatter_params(), REDUCE_EDGES),
] + _reduce_cases()


# ---- index tuples, put ----------------------------------------------------------------------
@st.composite
def _index_put_params(draw, unique=True):
    shape = draw(shapes(min_dims=1, min_side=1))
    k = draw(st.integers(1, len(shape)))
    room = int(np.prod(shape[:k]))
    count = draw(st.integers(0, room if unique else 4))
    mask = draw(st.integers(0, 3)) == 0
    values = draw(st.sampled_from(["full", "row", "scalar"]))
    return {"shape": shape, "k": k, "count": count, "mask": mask, "values": values}


def _index_put_build(unique):
    def build(rng, shape, k, count, mask, values):
        x = normal(rng, shape)
        if mask:
            indices = (_arr(rng.integers(0, 2, shape[:k]), bool),)
            count = int(indices[0].sum())
        else:
            flat = rng.permutation(int(np.prod(shape[:k])))[:count] if unique else \
                rng.integers(0, int(np.prod(shape[:k])), count)
            indices = tuple(_arr(i, np.int64) for i in np.unravel_index(flat, shape[:k]))
        vshape = {"full": (count,) + shape[k:], "row": shape[k:], "scalar": (1,)}[values]
        return Sample((x, normal(rng, vshape)) + indices)
    return build


INDEX_PUT_EDGES = [dict(shape=(3, 4), k=2, count=3, mask=False, values="full"),
                   dict(shape=(3, 4), k=1, count=2, mask=False, values="row"),
                   dict(shape=(3, 4), k=2, count=0, mask=True, values="scalar"),
                   dict(shape=(2, 3, 2), k=2, count=4, mask=False, values="full"),
                   dict(shape=(2, 3), k=1, count=0, mask=True, values="row")]


def _put_build(rng, shape, count, accumulate):
    n = int(np.prod(shape))
    index = _ints(rng, (count,), -n, n) if accumulate else \
        _arr(rng.permutation(n)[:count] - rng.integers(0, 2) * n, np.int64)
    return Sample((normal(rng, shape), index, normal(rng, (count,))),
                  {"accumulate": accumulate})


@st.composite
def _put_params(draw):
    shape = draw(shapes(min_side=1))
    accumulate = draw(st.booleans())
    n = int(np.prod(shape))
    return {"shape": shape, "accumulate": accumulate,
            "count": draw(st.integers(0, 4 if accumulate else n))}


INDEX_PUTS = [
    case("index_put", lambda x, values, *indices: lk.index_put(x, indices, values),
         lambda x, values, *indices: _torch().index_put(x, indices, values),
         _index_put_build(unique=True), _index_put_params(), INDEX_PUT_EDGES, op="index_put"),
    case("index_put_accumulate",
         lambda x, values, *indices: x.index_put(indices, values, accumulate=True),
         lambda x, values, *indices: x.index_put(indices, values, accumulate=True),
         _index_put_build(unique=False), _index_put_params(unique=False), INDEX_PUT_EDGES),
    case("put", lambda x, index, source, accumulate: x.put(index, source, accumulate),
         lambda x, index, source, accumulate: x.put(index, source, accumulate), _put_build,
         _put_params(), [dict(shape=(2, 3), count=4, accumulate=True),
                         dict(shape=(2, 3), count=3, accumulate=False),
                         dict(shape=(), count=1, accumulate=False)]),
]


# ---- where the values are; take_along_dim; one_hot ------------------------------------------
def _zeros_build(rng, shape):
    return Sample((small_ints(rng, shape),))


_ANY_SHAPE = st.fixed_dictionaries({"shape": shapes()})
_SHAPE_EDGES = [dict(shape=()), dict(shape=(0,)), dict(shape=(2, 3)), dict(shape=(2, 0, 3)),
                dict(shape=(1, 1))]


@st.composite
def _take_along_params(draw):
    shape = draw(shapes(min_dims=1))
    dim = draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    d = 0 if dim is None else dim % len(shape)
    x_shape = tuple(max(s, 1) if i == d else (1 if draw(st.booleans()) else s)
                    for i, s in enumerate(shape))
    i_shape = tuple(draw(st.integers(0, MAX_SIDE)) if i == d else
                    (s if x_shape[i] == 1 or draw(st.booleans()) else
                     (1 if draw(st.booleans()) else s)) for i, s in enumerate(shape))
    if dim is None:
        x_shape, i_shape = tuple(max(s, 1) for s in x_shape), draw(shapes(max_dims=2))
    return {"shape": x_shape, "dim": dim, "index_shape": i_shape}


def _take_along_build(rng, shape, dim, index_shape):
    n = int(np.prod(shape)) if dim is None else shape[dim]
    return Sample((normal(rng, shape), _ints(rng, index_shape, -n if dim is not None else 0, n)),
                  {"dim": dim})


def _one_hot_build(rng, shape, num_classes):
    top = num_classes if num_classes > 0 else 4
    return Sample((_ints(rng, shape, 0, top),), {"num_classes": num_classes})


WHERE = [
    case("nonzero", lk.nonzero, lambda x: _torch().nonzero(x), _zeros_build, _ANY_SHAPE,
         _SHAPE_EDGES, op="nonzero", differentiable=False),
    case("nonzero_as_tuple", lambda x: x.nonzero(as_tuple=True),
         lambda x: x.nonzero(as_tuple=True), _zeros_build, _ANY_SHAPE, _SHAPE_EDGES,
         differentiable=False),
    case("argwhere", lk.argwhere, lambda x: _torch().argwhere(x), _zeros_build, _ANY_SHAPE,
         _SHAPE_EDGES, differentiable=False),
    case("where_condition", lambda x: lk.where(x > 0), lambda x: _torch().where(x > 0),
         _zeros_build, _ANY_SHAPE, _SHAPE_EDGES, differentiable=False),
    case("where_method", lambda x, y: x.where(x > 0, y), lambda x, y: x.where(x > 0, y),
         lambda rng, shape: Sample((_arr(small_ints(rng, shape) + 0.25), normal(rng, shape[1:]))),
         _ANY_SHAPE, _SHAPE_EDGES),
    case("take_along_dim", lambda x, index, dim: lk.take_along_dim(x, index, dim),
         lambda x, index, dim: _torch().take_along_dim(x, index, dim), _take_along_build,
         _take_along_params(),
         [dict(shape=(2, 3), dim=1, index_shape=(2, 1)), dict(shape=(1, 3), dim=1,
                                                              index_shape=(2, 4)),
          dict(shape=(2, 3), dim=None, index_shape=(2, 2)), dict(shape=(2, 1), dim=0,
                                                                 index_shape=(0, 3))]),
    case("one_hot", lambda x, num_classes: F.one_hot(x, num_classes),
         lambda x, num_classes: _torch().nn.functional.one_hot(x, num_classes), _one_hot_build,
         st.fixed_dictionaries({"shape": shapes(min_side=1),
                                "num_classes": st.sampled_from([-1, 4, 5])}),
         [dict(shape=(3,), num_classes=-1), dict(shape=(), num_classes=4),
          dict(shape=(2, 3), num_classes=5), dict(shape=(0, 2), num_classes=3)],
         op="one_hot", differentiable=False),
]

_ALL = INDEXING + ALONG + MASKS + SCATTERS + INDEX_PUTS + WHERE
PRIMITIVE_CASES = [c for c in _ALL if c.op]
COMPOSITE_CASES = [c for c in _ALL if not c.op]
