"""Cases of the ops that rearrange a tensor (padding, repeat / tile / repeat_interleave, flips
and roll, triangles and diagonals, narrow / select / unbind / unflatten, movedim / swapaxes,
meshgrid, atleast_Nd, block_diag, cartesian_prod), PyTorch as the oracle."""
import numpy as np
from hypothesis import strategies as st

import labkit as lk
import labkit.nn.functional as F

from ..case_kit import MAX_SIDE, Case, Sample, _arr, normal, shapes, torch_ref


def _tf():
    import torch.nn.functional as tf
    return tf


def _torch():
    import torch
    return torch


def case(name, fn, torch_fn, build, params, edges, **kw):
    """A case whose oracle is ``torch_fn`` (a function of torch tensors)."""
    return Case(name, fn, torch_ref(torch_fn), build, params, edges, **kw)


def one_input(gen=normal):
    """``build`` for cases of one array of ``shape`` and the other params as keywords."""
    def build(rng, shape, **kw):
        return Sample((gen(rng, shape),), kw)
    return build


def _dims(draw, nd, min_dims=0):
    return tuple(draw(st.lists(st.integers(0, nd - 1), min_size=min_dims, max_size=nd,
                               unique=True))) if nd else ()


# ---- padding --------------------------------------------------------------------------------
@st.composite
def _constant_pad_params(draw):
    shape = draw(shapes())
    pad = []
    for s in reversed(shape[len(shape) - draw(st.integers(0, len(shape))):]):
        lo = draw(st.integers(max(-s, -2), 2))
        hi = draw(st.integers(max(-(s + min(lo, 0)), -2), 2))
        pad += [lo, hi]
    return {"shape": shape, "pad": tuple(pad), "value": draw(st.sampled_from([None, 1.5]))}


@st.composite
def _mode_pad_params(draw):
    mode = draw(st.sampled_from(["reflect", "replicate", "circular"]))
    n = draw(st.integers(1, 3))
    batch = draw(st.booleans())
    shape = ((draw(st.integers(0, 2)),) if batch else ()) + tuple(
        draw(st.integers(1, MAX_SIDE)) for _ in range(n + 1))
    pad = []
    for s in reversed(shape[-n:]):
        top = {"reflect": s - 1, "replicate": 3, "circular": s}[mode]
        low = -1 if s > 2 else 0
        lo, hi = draw(st.integers(low, top)), draw(st.integers(low, top))
        if mode == "circular":          # wraps at most once around what cropping leaves
            kept = s + min(lo, 0) + min(hi, 0)
            lo, hi = min(lo, kept), min(hi, kept)
        pad += [lo, hi]
    return {"shape": shape, "pad": tuple(pad), "mode": mode}


PADS = [
    case("pad_constant", lambda x, pad, value: F.pad(x, pad, value=value),
         lambda x, pad, value: _tf().pad(x, pad, value=value), one_input(), _constant_pad_params(),
         [dict(shape=(), pad=(), value=None), dict(shape=(2, 3), pad=(1, 2), value=None),
          dict(shape=(2, 3), pad=(-1, 1, 1, -2), value=1.5), dict(shape=(0, 2), pad=(1, 0, 2, 1),
                                                                  value=None),
          dict(shape=(3,), pad=(-3, 0), value=None), dict(shape=(1, 2, 1), pad=(0, 0, 1, 1, 2, 0),
                                                          value=1.5)],
         op="pad"),
    case("pad_modes", lambda x, pad, mode: F.pad(x, pad, mode=mode),
         lambda x, pad, mode: _tf().pad(x, pad, mode=mode), one_input(), _mode_pad_params(),
         [dict(shape=(1, 3), pad=(2, 1), mode="reflect"),
          dict(shape=(2, 1, 3), pad=(1, 2), mode="replicate"),
          dict(shape=(2, 3), pad=(3, 1), mode="circular"),
          dict(shape=(0, 2, 3, 3), pad=(1, 1, 2, 0), mode="reflect"),
          dict(shape=(1, 2, 2, 3), pad=(-1, 2, 1, 1, 0, 1), mode="replicate"),
          dict(shape=(1, 1, 2, 2, 3), pad=(2, 2, 1, 0, 1, 1), mode="circular"),
          dict(shape=(2, 3, 3), pad=(-1, -1, 1, 1), mode="reflect")]),
]


# ---- repeating -----------------------------------------------------------------------------------
@st.composite
def _repeat_params(draw, at_least_ndim=True):
    shape = draw(shapes())
    low = max(len(shape), 1) if at_least_ndim else 0
    reps = draw(st.lists(st.integers(0, 2), min_size=low, max_size=len(shape) + 1))
    return {"shape": shape, "reps": tuple(reps)}


@st.composite
def _interleave_params(draw):
    shape = draw(shapes())
    dim = draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1))) if shape else None
    return {"shape": shape, "repeats": draw(st.integers(0, 3)), "dim": dim}


@st.composite
def _interleave_tensor_params(draw):
    shape = draw(shapes(min_dims=1))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[dim] if draw(st.booleans()) else 1
    return {"shape": shape, "dim": dim, "n": n, "sized": draw(st.booleans())}


def _interleave_tensor_build(rng, shape, dim, n, sized):
    repeats = _arr(rng.integers(0, 3, n), np.int64)
    total = int(repeats.sum()) * (shape[dim] if n == 1 else 1)
    return Sample((normal(rng, shape), repeats), {"dim": dim, "output_size": total if sized
                                                  else None}, grad=(0,))


def _index_of_counts(rng, n, sized):
    counts = _arr(rng.integers(0, 3, n), np.int64)
    return Sample((counts,), {"output_size": int(counts.sum()) if sized else None})


REPEATS = [
    case("repeat", lambda x, reps: x.repeat(*reps), lambda x, reps: x.repeat(*reps),
         one_input(), _repeat_params(),
         [dict(shape=(2, 3), reps=(2, 1, 2)), dict(shape=(), reps=(3,)),
          dict(shape=(2, 0), reps=(0, 2)), dict(shape=(1,), reps=(2,))]),
    case("tile", lambda x, reps: lk.tile(x, reps), lambda x, reps: _torch().tile(x, reps),
         one_input(), _repeat_params(at_least_ndim=False),
         [dict(shape=(2, 3), reps=(2,)), dict(shape=(), reps=()), dict(shape=(3,), reps=(2, 2))]),
    case("repeat_interleave_int",
         lambda x, repeats, dim: x.repeat_interleave(repeats, dim=dim),
         lambda x, repeats, dim: x.repeat_interleave(repeats, dim=dim), one_input(),
         _interleave_params(),
         [dict(shape=(2, 3), repeats=2, dim=1), dict(shape=(2, 3), repeats=2, dim=None),
          dict(shape=(), repeats=3, dim=None), dict(shape=(2, 0), repeats=0, dim=-1)]),
    case("repeat_interleave_tensor",
         lambda x, r, dim, output_size: lk.repeat_interleave(x, r, dim, output_size=output_size),
         lambda x, r, dim, output_size: _torch().repeat_interleave(x, r, dim,
                                                                   output_size=output_size),
         _interleave_tensor_build, _interleave_tensor_params(),
         [dict(shape=(3, 2), dim=0, n=3, sized=False), dict(shape=(2, 3), dim=-1, n=1, sized=True),
          dict(shape=(0, 2), dim=0, n=0, sized=True)]),
    case("repeat_interleave", lambda r, output_size: lk.repeat_interleave(r,
                                                                          output_size=output_size),
         lambda r, output_size: _torch().repeat_interleave(r, output_size=output_size),
         lambda rng, n, sized: _index_of_counts(rng, n, sized),
         st.fixed_dictionaries({"n": st.integers(0, 4), "sized": st.booleans()}),
         [dict(n=3, sized=False), dict(n=0, sized=True), dict(n=2, sized=True)],
         op="repeat_interleave", differentiable=False),
]


# ---- flips and roll ---------------------------------------------------------------------------
@st.composite
def _flip_params(draw):
    shape = draw(shapes())
    return {"shape": shape, "dims": _dims(draw, len(shape))}


@st.composite
def _roll_params(draw):
    shape = draw(shapes())
    if not shape or draw(st.integers(0, 3)) == 0:
        return {"shape": shape, "shifts": draw(st.integers(-4, 4)), "dims": None}
    dims = draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1, max_size=3))
    shifts = draw(st.lists(st.integers(-4, 4), min_size=len(dims), max_size=len(dims)))
    return {"shape": shape, "shifts": tuple(shifts), "dims": tuple(dims)}


FLIPS = [
    case("flip", lambda x, dims: lk.flip(x, dims), lambda x, dims: _torch().flip(x, dims),
         one_input(), _flip_params(),
         [dict(shape=(2, 3), dims=(0, 1)), dict(shape=(), dims=(0,)), dict(shape=(2, 0, 3),
                                                                              dims=(2,)),
          dict(shape=(3,), dims=())]),
    case("flip_method", lambda x, dims: x.flip(*dims), lambda x, dims: x.flip(*dims),
         one_input(), _flip_params().filter(lambda p: p["dims"]),
         [dict(shape=(2, 3), dims=(1,)), dict(shape=(2, 3, 2), dims=(0, 2))]),
    case("fliplr", lk.fliplr, lambda x: _torch().fliplr(x), one_input(),
         st.fixed_dictionaries({"shape": shapes(min_dims=2)}), [dict(shape=(2, 3)),
                                                                 dict(shape=(1, 0, 2))]),
    case("flipud", lk.flipud, lambda x: _torch().flipud(x), one_input(),
         st.fixed_dictionaries({"shape": shapes(min_dims=1)}), [dict(shape=(3,)),
                                                                 dict(shape=(0, 2))]),
    case("roll", lambda x, shifts, dims: lk.roll(x, shifts, dims),
         lambda x, shifts, dims: _torch().roll(x, shifts, dims), one_input(), _roll_params(),
         [dict(shape=(2, 3), shifts=1, dims=None), dict(shape=(2, 3), shifts=(1, -1), dims=(0, 1)),
          dict(shape=(), shifts=2, dims=None), dict(shape=(0, 3), shifts=(1,), dims=(0,)),
          dict(shape=(2, 3), shifts=(4, 2), dims=(1, 1))]),
]


# ---- triangles and diagonals --------------------------------------------------------------------
@st.composite
def _tri_params(draw):
    return {"shape": draw(shapes(min_dims=2)), "diagonal": draw(st.integers(-3, 3))}


@st.composite
def _diagonal_params(draw, extra=0, min_dims=2):
    shape = draw(shapes(min_dims=min_dims))
    n = len(shape) + extra
    d1, d2 = draw(st.lists(st.integers(-n, n - 1), min_size=2, max_size=2,
                           unique_by=lambda d: d % n))
    return {"shape": shape, "offset": draw(st.integers(-3, 3)), "dim1": d1, "dim2": d2}


def _diagonal_scatter_build(rng, shape, offset, dim1, dim2):
    x = normal(rng, shape)
    src = normal(rng, np.diagonal(x, offset, dim1, dim2).shape)
    return Sample((x, src), dict(offset=offset, dim1=dim1, dim2=dim2))


@st.composite
def _diag_params(draw):
    return {"shape": draw(shapes(min_dims=1, max_dims=2)), "diagonal": draw(st.integers(-3, 3))}


DIAGONALS = [
    case("tril", lambda x, diagonal: lk.tril(x, diagonal),
         lambda x, diagonal: _torch().tril(x, diagonal), one_input(), _tri_params(),
         [dict(shape=(3, 3), diagonal=0), dict(shape=(2, 3, 2), diagonal=-1),
          dict(shape=(2, 0), diagonal=1)], op="tril"),
    case("triu", lambda x, diagonal: x.triu(diagonal=diagonal),
         lambda x, diagonal: x.triu(diagonal=diagonal), one_input(), _tri_params(),
         [dict(shape=(3, 3), diagonal=0), dict(shape=(2, 3, 2), diagonal=2),
          dict(shape=(1, 1), diagonal=-1)], op="triu"),
    case("diagonal", lambda x, **kw: lk.diagonal(x, **kw), lambda x, **kw: _torch().diagonal(x, **kw),
         one_input(), _diagonal_params(),
         [dict(shape=(3, 3), offset=0, dim1=0, dim2=1), dict(shape=(2, 3, 2), offset=1, dim1=2,
                                                             dim2=0),
          dict(shape=(2, 3), offset=-3, dim1=0, dim2=1), dict(shape=(0, 2), offset=0, dim1=-1,
                                                              dim2=-2)],
         op="diagonal"),
    case("diagonal_scatter", lambda x, src, **kw: lk.diagonal_scatter(x, src, **kw),
         lambda x, src, **kw: _torch().diagonal_scatter(x, src, **kw), _diagonal_scatter_build,
         _diagonal_params(),
         [dict(shape=(3, 3), offset=0, dim1=0, dim2=1), dict(shape=(2, 3, 2), offset=-1, dim1=2,
                                                             dim2=1),
          dict(shape=(2, 3), offset=4, dim1=0, dim2=1)], op="diagonal_scatter"),
    case("diag_embed", lambda x, **kw: lk.diag_embed(x, **kw),
         lambda x, **kw: _torch().diag_embed(x, **kw), one_input(),
         _diagonal_params(extra=1, min_dims=1),
         [dict(shape=(3,), offset=0, dim1=-2, dim2=-1), dict(shape=(2, 3), offset=1, dim1=0,
                                                             dim2=2),
          dict(shape=(2, 0), offset=-2, dim1=1, dim2=0), dict(shape=(1,), offset=0, dim1=0,
                                                              dim2=1)],
         op="diag_embed"),
    case("diag", lambda x, diagonal: lk.diag(x, diagonal),
         lambda x, diagonal: _torch().diag(x, diagonal), one_input(), _diag_params(),
         [dict(shape=(3,), diagonal=1), dict(shape=(2, 3), diagonal=-1), dict(shape=(0,),
                                                                              diagonal=0),
          dict(shape=(2, 3), diagonal=5)]),
]


# ---- pieces ----------------------------------------------------------------------------------
@st.composite
def _narrow_params(draw):
    shape = draw(shapes(min_dims=1))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[dim]
    start = draw(st.integers(0, n))
    length = draw(st.integers(0, n - start))
    if start and draw(st.booleans()):
        start -= n
    return {"shape": shape, "dim": dim, "start": start, "length": length}


@st.composite
def _select_params(draw):
    shape = draw(shapes(min_dims=1, min_side=1))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    return {"shape": shape, "dim": dim, "index": draw(st.integers(-shape[dim], shape[dim] - 1))}


@st.composite
def _one_dim(draw, min_side=0):
    shape = draw(shapes(min_dims=1, min_side=min_side))
    return {"shape": shape, "dim": draw(st.integers(-len(shape), len(shape) - 1))}


@st.composite
def _unflatten_params(draw):
    p = draw(_one_dim(min_side=1))
    n = p["shape"][p["dim"]]
    a = draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
    sizes = [a, n // a] + [1] * draw(st.integers(0, 1))
    sizes = draw(st.permutations(sizes))
    if draw(st.booleans()):
        sizes[draw(st.integers(0, len(sizes) - 1))] = -1
    return dict(p, sizes=tuple(sizes))


@st.composite
def _movedim_params(draw):
    shape = draw(shapes())
    nd = len(shape)
    src = _dims(draw, nd)
    dst = tuple(draw(st.permutations(range(nd))))[:len(src)]
    if src and draw(st.booleans()):
        return {"shape": shape, "source": src[0], "destination": dst[0] - nd}
    return {"shape": shape, "source": src, "destination": dst}


@st.composite
def _two_dims(draw):
    shape = draw(shapes(min_dims=1))
    nd = len(shape)
    return {"shape": shape, "dim0": draw(st.integers(-nd, nd - 1)),
            "dim1": draw(st.integers(-nd, nd - 1))}


PIECES = [
    case("narrow", lambda x, dim, start, length: x.narrow(dim, start, length),
         lambda x, dim, start, length: x.narrow(dim, start, length), one_input(),
         _narrow_params(),
         [dict(shape=(2, 3), dim=1, start=1, length=2), dict(shape=(2, 3), dim=-1, start=-2,
                                                             length=2),
          dict(shape=(2, 3), dim=0, start=2, length=0)]),
    case("select", lambda x, dim, index: lk.select(x, dim, index),
         lambda x, dim, index: _torch().select(x, dim, index), one_input(), _select_params(),
         [dict(shape=(2, 3), dim=1, index=-1), dict(shape=(1,), dim=0, index=0)]),
    case("unbind", lambda x, dim: lk.unbind(x, dim), lambda x, dim: _torch().unbind(x, dim),
         # (the harness joins the pieces for gradients: none would leave nothing to join)
         one_input(), _one_dim().filter(lambda p: p["shape"][p["dim"]]),
         [dict(shape=(2, 3), dim=1), dict(shape=(0, 2), dim=1), dict(shape=(3,), dim=0)]),
    case("unflatten", lambda x, dim, sizes: x.unflatten(dim, sizes),
         lambda x, dim, sizes: x.unflatten(dim, sizes), one_input(), _unflatten_params(),
         [dict(shape=(2, 6), dim=1, sizes=(3, -1)), dict(shape=(2, 3), dim=0, sizes=(1, 2, 1))]),
    case("movedim", lambda x, source, destination: lk.movedim(x, source, destination),
         lambda x, source, destination: _torch().movedim(x, source, destination), one_input(),
         _movedim_params(),
         [dict(shape=(2, 3, 4), source=0, destination=-1), dict(shape=(2, 3, 4), source=(0, 1),
                                                                destination=(2, 0)),
          dict(shape=(), source=(), destination=())]),
    case("moveaxis", lambda x, source, destination: x.moveaxis(source, destination),
         lambda x, source, destination: x.moveaxis(source, destination), one_input(),
         _movedim_params(), [dict(shape=(2, 3, 1), source=(2,), destination=(0,))]),
    case("swapaxes", lambda x, dim0, dim1: lk.swapaxes(x, dim0, dim1),
         lambda x, dim0, dim1: _torch().swapaxes(x, dim0, dim1), one_input(),
         _two_dims(),
         [dict(shape=(2, 3), dim0=0, dim1=1), dict(shape=(2, 0, 3), dim0=-1, dim1=0)]),
    case("swapdims", lambda x, dim0, dim1: x.swapdims(dim0, dim1),
         lambda x, dim0, dim1: x.swapdims(dim0, dim1), one_input(),
         st.fixed_dictionaries({"shape": shapes(), "dim0": st.just(0), "dim1": st.just(-1)}),
         [dict(shape=(), dim0=0, dim1=-1), dict(shape=(2, 3, 4), dim0=0, dim1=-1)]),
]


# ---- building from several tensors ------------------------------------------------------------
def _vectors_build(rng, sizes, **kw):
    return Sample(tuple(normal(rng, (n,) if n is not None else ()) for n in sizes), kw)


_vector_sizes = st.lists(st.one_of(st.none(), st.integers(0, MAX_SIDE)), min_size=1, max_size=3)


@st.composite
def _atleast_params(draw):
    return {"shapes": tuple(draw(st.lists(shapes(), min_size=1, max_size=3))),
            "n": draw(st.integers(1, 3)), "listed": draw(st.booleans())}


def _atleast(n, listed, xs, lib):
    fn = getattr(lib, f"atleast_{n}d")
    return fn(list(xs)) if listed else fn(*xs)


@st.composite
def _block_params(draw):
    # no 1-d empty vector: PyTorch's block_diag makes it a row of its result, but its backward
    # takes it as no row (its gradients go to the wrong rows); finite differences check ours
    shape = shapes(max_dims=2).filter(lambda s: s != (0,))
    return {"shapes": tuple(draw(st.lists(shape, min_size=1, max_size=3)))}


SEVERAL = [
    case("meshgrid", lambda *xs, indexing: lk.meshgrid(*xs, indexing=indexing),
         lambda *xs, indexing: _torch().meshgrid(*xs, indexing=indexing), _vectors_build,
         st.fixed_dictionaries({"sizes": _vector_sizes,
                                "indexing": st.sampled_from(["ij", "xy"])}),
         [dict(sizes=(2, 3), indexing="xy"), dict(sizes=(2, None, 3), indexing="ij"),
          dict(sizes=(0,), indexing="xy"), dict(sizes=(1, 2, 3), indexing="xy")]),
    case("atleast_nd", lambda *xs, n, listed: _atleast(n, listed, xs, lk),
         lambda *xs, n, listed: _atleast(n, listed, xs, _torch()),
         lambda rng, shapes, n, listed: Sample(tuple(normal(rng, s) for s in shapes),
                                               {"n": n, "listed": listed}),
         _atleast_params(),
         [dict(shapes=((),), n=1, listed=False), dict(shapes=((3,),), n=3, listed=False),
          dict(shapes=((2, 3), ()), n=3, listed=True), dict(shapes=((2,), (2, 3)), n=2,
                                                            listed=False)]),
    case("block_diag", lambda *xs: lk.block_diag(*xs), lambda *xs: _torch().block_diag(*xs),
         lambda rng, shapes: Sample(tuple(normal(rng, s) for s in shapes)), _block_params(),
         [dict(shapes=((2, 2), (), (3,))), dict(shapes=((0, 2), (2, 0))), dict(shapes=((1, 3),))]),
    case("cartesian_prod", lambda *xs: lk.cartesian_prod(*xs),
         lambda *xs: _torch().cartesian_prod(*xs), _vectors_build,
         st.fixed_dictionaries({"sizes": st.lists(st.integers(0, MAX_SIDE), min_size=1,
                                                  max_size=3)}),
         [dict(sizes=(2, 3)), dict(sizes=(2,)), dict(sizes=(2, 0, 1))]),
]

PRIMITIVE_CASES = [c for c in PADS + REPEATS + DIAGONALS if c.op]
COMPOSITE_CASES = [c for c in PADS + REPEATS + FLIPS + DIAGONALS + PIECES + SEVERAL if not c.op]
