"""Cases for sorting and selection, PyTorch as the oracle: sort, argsort, msort, topk, kthvalue,
median and nanmedian along a dim, mode, unique, unique_consecutive, searchsorted, bucketize.

Values and int64 indices are both compared (a case returns the named tuple). Inputs are
``distinct`` where indices must be unambiguous and gradients are checked; cases with ties use
the stable forms, or compare what PyTorch defines at ties.
"""
import numpy as np
from hypothesis import strategies as st

from ..case_kit import MAX_SIDE, Case, Sample, _arr, distinct, shapes, small_ints
from .reduce import SCAN_EDGES, both, case, one_dim, with_nans


def _sort(m, x, dim, descending):
    return m.sort(x, dim, descending)


def _sort_stable(m, x, dim, descending):
    return x.sort(dim=dim, descending=descending, stable=True)


def _argsort(m, x, dim, descending):
    return m.argsort(x, dim=dim, descending=descending, stable=True)


@st.composite
def _sort_params(draw):
    p = draw(one_dim(keepdim=False))
    p["descending"] = draw(st.booleans())
    return p


SORT_EDGES = [dict(p, descending=d) for p, d in zip(SCAN_EDGES, (False, True) * 3)]


@st.composite
def _k_params(draw, low):
    """one_dim with a ``k`` in ``low..n`` for the dimension's size n."""
    p = draw(one_dim(nonempty=low > 0))
    n = p["shape"][p["dim"]] if p["shape"] else 1
    p["k"] = draw(st.integers(low, n))
    return p


def _topk(m, x, k, dim, keepdim):
    # keepdim stands for topk's ``largest`` here (topk has no keepdim)
    return m.topk(x, k, dim, largest=keepdim)


def _kthvalue(m, x, k, dim, keepdim):
    return x.kthvalue(k, dim, keepdim)


def _median_dim(m, x, dim, keepdim):
    return m.median(x, dim, keepdim)


def _nanmedian_dim(m, x, dim, keepdim):
    return m.nanmedian(x, dim=dim, keepdim=keepdim)


def _mode(m, x, dim, keepdim):
    return x.mode(dim, keepdim)


SELECT_EDGES = [dict(shape=(4,), dim=0, keepdim=False), dict(shape=(3,), dim=-1, keepdim=True),
                dict(shape=(2, 3), dim=1, keepdim=False), dict(shape=(), dim=0, keepdim=False),
                dict(shape=(0, 2), dim=1, keepdim=True)]
K_EDGES = [dict(shape=(4,), dim=0, keepdim=True, k=2), dict(shape=(2, 3), dim=1, keepdim=False,
                                                            k=3),
           dict(shape=(), dim=0, keepdim=False, k=1), dict(shape=(3, 2), dim=0, keepdim=True, k=1)]


# ---- unique -----------------------------------------------------------------------------------
@st.composite
def _unique_params(draw, consecutive=False):
    shape = draw(shapes(max_dims=2))
    dim = None
    if shape and draw(st.booleans()):
        dim = draw(st.integers(-len(shape), len(shape) - 1))
        shape = tuple(max(s, 1) if i != dim % len(shape) else s for i, s in enumerate(shape))
    p = {"shape": shape, "dim": dim, "inverse": draw(st.booleans()),
         "counts": draw(st.booleans())}
    return p


def _unique(m, x, dim, inverse, counts):
    return m.unique(x, sorted=True, return_inverse=inverse, return_counts=counts, dim=dim)


def _unique_consecutive(m, x, dim, inverse, counts):
    return x.unique_consecutive(return_inverse=inverse, return_counts=counts, dim=dim)


def _tupled(f):
    """``f``'s result as a tuple always (unique returns a bare tensor when nothing more is
    asked), so the harness compares every part."""
    def g(*a, **k):
        out = f(*a, **k)
        return out if isinstance(out, tuple) else (out,)
    return g


UNIQUE_EDGES = [dict(shape=(5,), dim=None, inverse=True, counts=True),
                dict(shape=(), dim=None, inverse=True, counts=False),
                dict(shape=(0,), dim=None, inverse=False, counts=True),
                dict(shape=(3, 2), dim=0, inverse=True, counts=True),
                dict(shape=(2, 3), dim=-1, inverse=False, counts=True),
                dict(shape=(0, 2), dim=0, inverse=True, counts=True)]


def _few_values(rng, shape):
    return _arr(rng.integers(0, 2, shape))


# ---- searchsorted -----------------------------------------------------------------------------
@st.composite
def _search_params(draw):
    n = draw(st.integers(0, MAX_SIDE + 1))
    batch = draw(st.sampled_from([(), (2,), (2, 1)]))
    values = draw(shapes(max_dims=2)) if not batch else batch + (draw(st.integers(0, 3)),)
    return {"seq_shape": batch + (n,), "values_shape": values,
            "side": draw(st.sampled_from(["left", "right", "right_flag"])),
            "scalar": not batch and draw(st.booleans()),
            "sorter": draw(st.booleans())}


def _search_build(rng, seq_shape, values_shape, side, scalar, sorter):
    seq = np.sort(small_ints(rng, seq_shape), axis=-1)
    values = float(small_ints(rng, ())) if scalar else small_ints(rng, values_shape)
    args = (seq, values)
    if sorter:     # an unsorted sequence and the order that sorts it
        order = _arr(rng.permutation(seq_shape[-1]) * np.ones(seq_shape, np.int64), np.int64)
        shuffled = np.empty_like(seq)
        np.put_along_axis(shuffled, order, seq, axis=-1)
        args = (shuffled, values, order)
    return Sample(args, {"side": side}, grad=())


def _searchsorted(m, seq, values, sorter=None, side="left"):
    if side == "right_flag":
        return m.searchsorted(seq, values, right=True, sorter=sorter)
    return m.searchsorted(seq, values, side=side, sorter=sorter)


SEARCH_EDGES = [dict(seq_shape=(4,), values_shape=(3,), side="left", scalar=False, sorter=False),
                dict(seq_shape=(4,), values_shape=(), side="right", scalar=True, sorter=False),
                dict(seq_shape=(2, 3), values_shape=(2, 2), side="right_flag", scalar=False,
                     sorter=True),
                dict(seq_shape=(0,), values_shape=(2,), side="left", scalar=False, sorter=False),
                dict(seq_shape=(3,), values_shape=(2, 0), side="right", scalar=False,
                     sorter=True)]


def _bucketize(m, x, boundaries, right):
    return m.bucketize(x, boundaries, right=right)


def _bucketize_build(rng, shape, n, right):
    return Sample((small_ints(rng, shape), np.sort(small_ints(rng, (n,)))), {"right": right},
                  grad=())


_search_fn, _search_ref = both(_searchsorted)
_bucketize_fn, _bucketize_ref = both(_bucketize)

PRIMITIVE_CASES = [
    case("argsort_stable", _argsort, with_nans, _sort_params(), SORT_EDGES, op="argsort",
         differentiable=False),
    case("sort", _sort, distinct, _sort_params(), SORT_EDGES, op="argsort"),
    case("sort_stable_ties", _sort_stable, with_nans, _sort_params(), SORT_EDGES, op="argsort",
         differentiable=False),
    case("msort", lambda m, x: m.msort(x), distinct,
         st.fixed_dictionaries({"shape": shapes(min_dims=1)}),
         [dict(shape=(3,)), dict(shape=(3, 2)), dict(shape=(0, 2))], op="argsort"),
    case("topk", _topk, distinct, _k_params(0), K_EDGES + [dict(shape=(0,), dim=0,
                                                               keepdim=True, k=0)],
         op="argsort"),
    case("kthvalue", _kthvalue, distinct, _k_params(1), K_EDGES, op="argsort"),
    case("median_dim", _median_dim, distinct, one_dim(nonempty=True), SELECT_EDGES,
         op="median_indices"),
    # NaN: the first NaN of a row is its median
    case("median_dim_nan", _median_dim, with_nans, one_dim(nonempty=True), SELECT_EDGES,
         op="median_indices", differentiable=False),
    case("nanmedian_dim", _nanmedian_dim, with_nans, one_dim(nonempty=True), SELECT_EDGES,
         op="median_indices", differentiable=False),
    case("mode", _mode, distinct, one_dim(nonempty=True), SELECT_EDGES, op="mode_indices"),
    case("mode_ties", _mode, small_ints, one_dim(nonempty=True), SELECT_EDGES,
         op="mode_indices", differentiable=False),
    case("unique", _tupled(_unique), small_ints, _unique_params(), UNIQUE_EDGES, op="unique",
         differentiable=False),
    # NaNs all distinct and last (along a dim, PyTorch's order of slices holding NaN is its own)
    case("unique_nan", _tupled(_unique), with_nans,
         _unique_params().map(lambda p: dict(p, dim=None)), UNIQUE_EDGES[:3],
         op="unique", differentiable=False),
    case("unique_consecutive", _tupled(_unique_consecutive), _few_values, _unique_params(),
         UNIQUE_EDGES, op="unique", differentiable=False),
    Case("searchsorted", _search_fn, _search_ref, _search_build, _search_params(), SEARCH_EDGES,
         op="searchsorted", differentiable=False),
    Case("bucketize", _bucketize_fn, _bucketize_ref, _bucketize_build,
         st.fixed_dictionaries({"shape": shapes(), "n": st.integers(0, 4),
                                "right": st.booleans()}),
         [dict(shape=(2, 3), n=3, right=False), dict(shape=(), n=2, right=True),
          dict(shape=(0,), n=0, right=False)], op="searchsorted", differentiable=False),
]
