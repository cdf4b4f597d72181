"""Cases for linear algebra: products (mm ... cdist), einsum, norms, inverses and decompositions.

PyTorch is the oracle. Inputs are well conditioned (a multiple of the identity added; matrices
built from chosen, well separated eigen- or singular values), symmetric where the op reads one
triangle (the case symmetrises its input, as PyTorch's tests do), and eigen- or singular vectors
are compared, and differentiated, only through sign-free quantities (V * V, U @ Vh).
"""
import math

import numpy as np
import torch
from hypothesis import strategies as st

import labkit as lk

from ..case_kit import (MAX_SIDE, Case, Sample, _arr, broadcast_shapes, distinct, normal,
                        shapes, torch_ref)

INF = math.inf


# ---- inputs -------------------------------------------------------------------------------------
def _eye(n):
    return np.eye(n)


def well_conditioned(rng, shape):
    """Square matrices (..., n, n): normal entries plus 3 I."""
    return normal(rng, shape) + 3.0 * _eye(shape[-1])


def _orthogonal(rng, batch, n):
    q, r = np.linalg.qr(rng.standard_normal(batch + (n, n)))
    return q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :] if n else q


def separated(rng, batch, k, low=0.5):
    """(..., k) values in random order, ascending pairs at least 0.5 apart."""
    base = low + 0.6 * np.arange(k) + rng.uniform(0, 0.1, batch + (k,))
    return np.take_along_axis(base, np.argsort(rng.random(batch + (k,)), axis=-1), axis=-1)


def with_singular_values(rng, batch, m, n):
    """(..., m, n) matrices with distinct singular values in [0.5, ~3]."""
    k = min(m, n)
    s = separated(rng, batch, k)
    u = _orthogonal(rng, batch, m)[..., :k]
    v = _orthogonal(rng, batch, n)[..., :k]
    return np.asarray((u * s[..., None, :]) @ np.swapaxes(v, -1, -2))


def with_eigenvalues(rng, batch, n, signed=True):
    """Symmetric (..., n, n) matrices with eigenvalues at least 0.5 apart (of both signs if
    ``signed``)."""
    lam = separated(rng, batch, n, low=-0.3 * n if signed else 0.5)
    q = _orthogonal(rng, batch, n)
    return np.asarray((q * lam[..., None, :]) @ np.swapaxes(q, -1, -2))


MATRICES = st.fixed_dictionaries({"batch": shapes(max_dims=2), "n": st.integers(0, MAX_SIDE)})
MATRIX_EDGES = [dict(batch=(), n=2), dict(batch=(), n=0), dict(batch=(2,), n=3),
                dict(batch=(0,), n=2), dict(batch=(1, 2), n=1), dict(batch=(), n=1)]
RECTANGLES = st.fixed_dictionaries({"batch": shapes(max_dims=1), "m": st.integers(1, 4),
                                    "n": st.integers(1, 4)})
RECT_EDGES = [dict(batch=(), m=3, n=2), dict(batch=(), m=2, n=3), dict(batch=(2,), m=3, n=3),
              dict(batch=(), m=1, n=1), dict(batch=(), m=4, n=1)]


def _mT(x):
    return lk.transpose(x, -2, -1)


def _sym(x):
    return (x + _mT(x)) * 0.5


def _tsym(x):
    return (x + x.mT) * 0.5


def _spd(x):
    """A symmetric positive-definite matrix from any square one."""
    return x @ _mT(x) + lk.tensor(np.eye(x.shape[-1]), dtype=x.dtype, device=x.device)


def _tspd(x):
    return x @ x.mT + torch.eye(x.shape[-1], dtype=x.dtype)


# ---- products -----------------------------------------------------------------------------------
@st.composite
def _product_params(draw, kind):
    m, k, n, b = (draw(st.integers(0, MAX_SIDE)) for _ in range(4))
    return {"kind": kind, "dims": (b, m, k, n)}


def _product_shapes(kind, dims):
    b, m, k, n = dims
    return {"mm": [(m, k), (k, n)], "bmm": [(b, m, k), (b, k, n)], "mv": [(m, k), (k,)],
            "dot": [(k,), (k,)], "outer": [(m,), (n,)]}[kind]


def _product_case(name, fn, tfn, kind):
    return Case(name, fn, torch_ref(tfn),
                lambda rng, kind, dims: Sample(tuple(normal(rng, s)
                                                     for s in _product_shapes(kind, dims))),
                _product_params(kind),
                [dict(kind=kind, dims=d) for d in ((2, 2, 3, 4), (1, 0, 2, 1), (0, 1, 0, 2),
                                                   (1, 1, 1, 1))])


@st.composite
def _addmm_params(draw, kind):
    p = draw(_product_params(kind))
    out = _add_out_shape(kind, p["dims"])
    # the input: the full output shape, a trailing part of it, or dims of 1
    cut = draw(st.integers(0, len(out)))
    p["input_shape"] = tuple(1 if draw(st.booleans()) else s for s in out[cut:])
    b, m, k, n = p["dims"]
    if kind == "addmv" and not m * k:     # PyTorch's addmv then returns input's own shape
        p["input_shape"] = out
    p["beta"] = draw(st.sampled_from([1, 0, 0.5]))
    p["alpha"] = draw(st.sampled_from([1, -2.0]))
    return p


def _add_out_shape(kind, dims):
    b, m, k, n = dims
    return {"addmm": (m, n), "addmv": (m,), "addr": (m, n), "baddbmm": (b, m, n),
            "addbmm": (m, n)}[kind]


def _add_operands(kind, dims):
    b, m, k, n = dims
    return {"addmm": [(m, k), (k, n)], "addmv": [(m, k), (k,)], "addr": [(m,), (n,)],
            "baddbmm": [(b, m, k), (b, k, n)], "addbmm": [(b, m, k), (b, k, n)]}[kind]


def _addmm_build(rng, kind, dims, input_shape, beta, alpha):
    args = (normal(rng, input_shape),) + tuple(normal(rng, s) for s in _add_operands(kind, dims))
    return Sample(args, {"beta": beta, "alpha": alpha})


def _addmm_case(kind):
    return Case(kind, getattr(lk, kind),
                torch_ref(lambda *a, **kw: getattr(torch, kind)(*a, **kw)), _addmm_build,
                _addmm_params(kind),
                [dict(kind=kind, dims=(2, 2, 3, 2), input_shape=(2,), beta=1, alpha=1),
                 dict(kind=kind, dims=(3, 2, 3, 1), input_shape=(1,), beta=0.5, alpha=-2.0),
                 dict(kind=kind, dims=(1, 0, 2, 3), input_shape=(), beta=0, alpha=1)])


@st.composite
def _tensordot_params(draw):
    a = draw(shapes(max_dims=3))
    n = draw(st.integers(0, len(a)))
    picked = draw(st.permutations(range(len(a))))[:n]
    rest = draw(shapes(max_dims=2))
    # b holds the contracted sizes (or 1, which broadcasts) at random positions among its own
    order = draw(st.permutations(range(n + len(rest))))
    sizes = [1 if a[d] and draw(st.integers(0, 4)) == 0 else a[d] for d in picked] + list(rest)
    b = tuple(sizes[i] for i in order)
    dims_b = [order.index(i) for i in range(n)]
    form = draw(st.sampled_from(["lists", "int"])) if picked == list(range(len(a) - n, len(a))) \
        and dims_b == list(range(n)) else "lists"
    dims = n if form == "int" else (list(picked), dims_b)
    return {"sa": a, "sb": b, "dims": dims}


def _kron_params():
    return st.fixed_dictionaries({"sa": shapes(max_dims=3), "sb": shapes(max_dims=3)})


@st.composite
def _cdist_params(draw):
    batch_a, batch_b = draw(broadcast_shapes(2, max_dims=1))
    p, r, m = (draw(st.integers(0, MAX_SIDE)) for _ in range(3))
    return {"sa": batch_a + (p, m), "sb": batch_b + (r, m),
            "p": draw(st.sampled_from([2.0, 1.0, 3.0, INF, 0.5]))}


@st.composite
def _cross_params(draw):
    a, b = draw(broadcast_shapes(2, min_dims=1, max_dims=3))
    nd = max(len(a), len(b))
    a, b = [1] * (nd - len(a)) + list(a), [1] * (nd - len(b)) + list(b)
    d = draw(st.integers(0, nd - 1))
    a[d] = b[d] = 3
    return {"sa": tuple(a), "sb": tuple(b), "dim": d - nd if draw(st.booleans()) else d}


def _two(gen_a=normal, gen_b=normal):
    def build(rng, sa, sb, **kw):
        return Sample((gen_a(rng, sa), gen_b(rng, sb)), kw)
    return build


def _matrix_power_build(rng, batch, n, power):
    return Sample((well_conditioned(rng, batch + (n, n)) / 3.0,), {"power": power})


PRODUCTS = [
    _product_case("mm", lk.mm, torch.mm, "mm"),
    _product_case("bmm", lk.bmm, torch.bmm, "bmm"),
    _product_case("mv", lk.mv, torch.mv, "mv"),
    _product_case("dot", lk.dot, torch.dot, "dot"),
    _product_case("vdot", lk.vdot, torch.vdot, "dot"),
    _product_case("outer", lk.outer, torch.outer, "outer"),
    _product_case("ger", lambda a, b: a.ger(b), torch.ger, "outer"),
    _product_case("tensor_mm_method", lambda a, b: a.mm(b), torch.mm, "mm"),
    Case("inner", lk.inner, torch_ref(torch.inner), _two(),
         st.fixed_dictionaries({"sa": shapes(max_dims=3), "sb": shapes(max_dims=2)}).map(
             lambda p: p if not p["sa"] or not p["sb"] else
             {"sa": p["sa"], "sb": p["sb"][:-1] + p["sa"][-1:]}),
         [dict(sa=(2, 3), sb=(4, 3)), dict(sa=(), sb=(2,)), dict(sa=(3,), sb=(3,)),
          dict(sa=(2, 0), sb=(0,))]),
    *[_addmm_case(k) for k in ("addmm", "addmv", "addr", "baddbmm", "addbmm")],
    Case("tensordot", lambda a, b, dims: lk.tensordot(a, b, dims=dims),
         torch_ref(lambda a, b, dims: torch.tensordot(a, b, dims=dims)), _two(),
         _tensordot_params(),
         [dict(sa=(2, 3, 4), sb=(4, 3, 5), dims=([1, 2], [1, 0])),
          dict(sa=(2, 3), sb=(3, 4), dims=1), dict(sa=(2, 3), sb=(2, 3), dims=2),
          dict(sa=(2,), sb=(3,), dims=0), dict(sa=(2, 1), sb=(3, 4), dims=([1], [0])),
          dict(sa=(0, 2), sb=(2, 0), dims=1)]),
    Case("kron", lk.kron, torch_ref(torch.kron), _two(), _kron_params(),
         [dict(sa=(2, 2), sb=(2, 3)), dict(sa=(), sb=(2,)), dict(sa=(2, 3), sb=(4,)),
          dict(sa=(0, 2), sb=(3, 1))]),
    Case("matrix_power", lambda a, power: lk.matrix_power(a, power),
         torch_ref(lambda a, power: torch.matrix_power(a, power)), _matrix_power_build,
         st.fixed_dictionaries({"batch": shapes(max_dims=1), "n": st.integers(0, MAX_SIDE),
                                "power": st.integers(-2, 4)}),
         [dict(batch=(), n=2, power=3), dict(batch=(2,), n=2, power=0),
          dict(batch=(), n=3, power=-2), dict(batch=(0,), n=2, power=2),
          dict(batch=(), n=0, power=1)]),
    Case("trace", lk.trace, torch_ref(torch.trace),
         lambda rng, shape: Sample((normal(rng, shape),)),
         st.fixed_dictionaries({"shape": shapes(min_dims=2, max_dims=2)}),
         [dict(shape=(3, 3)), dict(shape=(2, 4)), dict(shape=(0, 2)), dict(shape=(1, 1))]),
    Case("cross", lambda a, b, dim: lk.cross(a, b, dim=dim),
         torch_ref(lambda a, b, dim: torch.cross(a, b, dim=dim)), _two(), _cross_params(),
         [dict(sa=(3,), sb=(3,), dim=-1), dict(sa=(2, 3), sb=(1, 3), dim=-1),
          dict(sa=(3, 2), sb=(3, 1), dim=0), dict(sa=(0, 3), sb=(1, 3), dim=1)]),
    Case("linalg_cross", lambda a, b: lk.linalg.cross(a, b),
         torch_ref(lambda a, b: torch.linalg.cross(a, b)), _two(),
         st.just({"sa": (2, 3), "sb": (1, 3)}), [dict(sa=(4, 3), sb=(1, 3))]),
    Case("cdist", lambda a, b, p: lk.cdist(a, b, p=p),
         torch_ref(lambda a, b, p: torch.cdist(a, b, p=p)), _two(distinct, distinct),
         _cdist_params(),
         [dict(sa=(2, 3), sb=(4, 3), p=2.0), dict(sa=(2, 1, 2), sb=(3, 2), p=1.0),
          dict(sa=(0, 2), sb=(3, 2), p=INF), dict(sa=(3, 2), sb=(2, 2), p=0.5)],
         rtol=1e-6, atol=1e-8),
]


# ---- einsum ----------------------------------------------------------------------------------
EQUATIONS = ["ij,jk->ik", "bij,bjk->bik", "ii->i", "ii->", "ij->ji", "i,i->", "i,j->ij",
             "ijk,ikl->jl", "ij,jk,kl->il", "ij->", "ab,cd->abcd", "ij,ij->i", "ii,i->i",
             "iji->j", "bhqd,bhkd->bhqk", "ij,j", "ij,jk", "ba", "ii", "i,i,i->", "ijk,j->ki",
             "ab,b->a", "Ab,bA->", "...ij,...jk->...ik", "...ij->...ji", "i...->...",
             "...i,...i->...", "...,...->..."]


@st.composite
def _einsum_params(draw):
    equation = draw(st.sampled_from(EQUATIONS))
    lhs = equation.split("->")[0].split(",")
    labels = sorted(set("".join(lhs).replace(".", "")))
    sizes = {c: draw(st.integers(0, MAX_SIDE)) for c in labels}
    ellipsis = draw(broadcast_shapes(len(lhs), max_dims=2))
    shapes_ = []
    for term, ell in zip(lhs, ellipsis):
        shape = []
        for c in term.replace("...", "."):
            if c == ".":
                shape.extend(ell)
            else:       # a label that appears once in this term may be 1 (it broadcasts)
                once = term.count(c) == 1 and draw(st.integers(0, 5)) == 0
                shape.append(1 if once else sizes[c])
        shapes_.append(tuple(shape))
    return {"equation": equation, "shapes": tuple(shapes_)}


def _einsum_build(rng, equation, shapes):
    return Sample(tuple(normal(rng, s) for s in shapes), {"equation": equation})


EINSUM_EDGES = [dict(equation="ij,jk->ik", shapes=((2, 3), (3, 4))),
                dict(equation="ii->", shapes=((3, 3),)),
                dict(equation="iji->j", shapes=((2, 3, 2),)),
                dict(equation="ij,jk->ik", shapes=((2, 1), (3, 4))),
                dict(equation="bij,bjk->bik", shapes=((1, 2, 3), (4, 3, 2))),
                dict(equation="...ij,...jk->...ik", shapes=((2, 1, 2, 3), (4, 3, 2))),
                dict(equation="i...->...", shapes=((2, 3, 1),)),
                dict(equation="ij,jk,kl->il", shapes=((2, 3), (3, 0), (0, 2))),
                dict(equation="ab,b->a", shapes=((0, 2), (2,))),
                dict(equation="...,...->...", shapes=((), ()))]
EINSUM = [
    Case("einsum", lambda *ops, equation: lk.einsum(equation, *ops),
         torch_ref(lambda *ops, equation: torch.einsum(equation, *ops)), _einsum_build,
         _einsum_params(), EINSUM_EDGES, op="einsum"),
    Case("einsum_list_form", lambda *ops, equation: lk.einsum(equation, list(ops)),
         torch_ref(lambda *ops, equation: torch.einsum(equation, list(ops))), _einsum_build,
         st.just(EINSUM_EDGES[0]), EINSUM_EDGES[:2]),
    Case("einsum_sublists", lambda a, b: lk.einsum(a, [0, Ellipsis, 1], b, [1, 2], [0, 2]),
         torch_ref(lambda a, b: torch.einsum(a, [0, Ellipsis, 1], b, [1, 2], [0, 2])),
         _two(), st.just({"sa": (2, 3, 4), "sb": (4, 5)}), [dict(sa=(2, 1, 3), sb=(3, 2))]),
]


# ---- norms --------------------------------------------------------------------------------------
ORDS = [2.0, 1.0, INF, -INF, 0.0, 3.0, 0.5, -1.0, 1.5]


@st.composite
def _norm_params(draw, ords=ORDS, nonempty=False):
    shape = draw(shapes(min_side=1 if nonempty else 0))
    nd = len(shape)
    dims = [st.none()]
    if nd:
        dims += [st.integers(-nd, nd - 1),
                 st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True)
                 .map(tuple)]
    ord_ = draw(st.sampled_from(ords))
    dim = draw(st.one_of(*dims))
    if isinstance(ord_, float) and math.isinf(ord_):
        # the inf norms of nothing are undefined: the reduced dimensions are kept non-empty
        axes = range(nd) if dim is None else ([dim] if isinstance(dim, int) else dim)
        shape = tuple(max(s, 1) if i in [a % max(nd, 1) for a in axes] else s
                      for i, s in enumerate(shape))
    return {"shape": shape, "ord": ord_, "dim": dim, "keepdim": draw(st.booleans())}


def _norm_build(rng, shape, **kw):
    return Sample((_arr(distinct(rng, shape) + 0.01),), kw)


NORM_EDGES = [dict(shape=(), ord=2.0, dim=None, keepdim=False),
              dict(shape=(2, 3), ord=INF, dim=1, keepdim=True),
              dict(shape=(2, 3), ord=0.0, dim=None, keepdim=False),
              dict(shape=(0, 3), ord=2.0, dim=0, keepdim=False),
              dict(shape=(2, 3, 2), ord=0.5, dim=(0, 2), keepdim=False),
              dict(shape=(3,), ord=-INF, dim=0, keepdim=False),
              dict(shape=(3,), ord=-1.0, dim=None, keepdim=True)]


@st.composite
def _matrix_norm_params(draw):
    batch = draw(shapes(max_dims=1))
    m, n = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    order = draw(st.sampled_from(["fro", "nuc", 1, -1, 2, -2, INF, -INF]))
    dim = draw(st.sampled_from([(-2, -1), (-1, -2)]))
    return {"shape": batch + (m, n), "ord": order, "dim": dim, "keepdim": draw(st.booleans())}


def _matrix_norm_build(rng, shape, ord, dim, keepdim):
    batch, (m, n) = shape[:-2], shape[-2:]
    x = with_singular_values(rng, batch, m, n) + rng.uniform(-0.01, 0.01, shape)
    return Sample((x,), {"ord": ord, "dim": dim, "keepdim": keepdim})


@st.composite
def _linalg_norm_params(draw):
    """A vector norm (ord and one dim, or a 1-D tensor), a matrix norm (two dims, or a 2-D
    tensor), or the 2-norm of everything (no ord)."""
    p = draw(_norm_params(ords=[None, 2.0, 1.0, INF], nonempty=True))
    nd, dim = len(p["shape"]), p["dim"]
    if isinstance(dim, tuple) and len(dim) > 2:
        dim = dim[:2]
    if dim is None and p["ord"] is not None and nd not in (1, 2):
        dim = -1 if nd else None
        if not nd:                      # a 0-d tensor: only the 2-norm of everything
            p["ord"] = None
    p["dim"] = dim
    return p


@st.composite
def _torch_norm_params(draw):
    p = draw(_norm_params(ords=["fro", 2.0, 1.0, INF, 3.0]))
    if p["ord"] == "fro" and isinstance(p["dim"], tuple) and len(p["dim"]) > 2:
        p["dim"] = p["dim"][:2]
    if draw(st.integers(0, 3)) == 0:
        p.update(shape=(draw(st.integers(1, 3)), draw(st.integers(1, 3))), ord="nuc",
                 dim=draw(st.sampled_from([None, (0, 1), (1, 0)])))
    return p


def _torch_norm_build(rng, shape, ord, dim, keepdim):
    if ord == "nuc":
        return Sample((with_singular_values(rng, (), *shape),),
                      dict(ord=ord, dim=dim, keepdim=keepdim))
    return _norm_build(rng, shape, ord=ord, dim=dim, keepdim=keepdim)


NORMS = [
    Case("vector_norm", lambda x, **kw: lk.linalg.vector_norm(x, **kw),
         torch_ref(lambda x, **kw: torch.linalg.vector_norm(x, **kw)), _norm_build,
         _norm_params(), NORM_EDGES, op="vector_norm", rtol=1e-6),
    Case("linalg_norm", lambda x, **kw: lk.linalg.norm(x, **kw),
         torch_ref(lambda x, **kw: torch.linalg.norm(x, **kw)), _norm_build,
         _linalg_norm_params(),
         [dict(shape=(2, 3), ord=None, dim=None, keepdim=False),
          dict(shape=(2, 3), ord=1.0, dim=None, keepdim=True),
          dict(shape=(3,), ord=INF, dim=None, keepdim=False),
          dict(shape=(2, 3), ord=2.0, dim=(0, 1), keepdim=False)], rtol=1e-6),
    Case("matrix_norm", lambda x, **kw: lk.linalg.matrix_norm(x, **kw),
         torch_ref(lambda x, **kw: torch.linalg.matrix_norm(x, **kw)), _matrix_norm_build,
         _matrix_norm_params(),
         [dict(shape=(2, 3), ord=o, dim=(-2, -1), keepdim=k)
          for o, k in (("fro", False), ("nuc", True), (1, False), (-1, True), (2, False),
                       (-2, False), (INF, True), (-INF, False))]
         + [dict(shape=(2, 3, 2), ord=2, dim=(-1, -2), keepdim=True)], rtol=1e-6),
    Case("torch_norm", lambda x, ord, dim, keepdim: lk.norm(x, p=ord, dim=dim, keepdim=keepdim),
         torch_ref(lambda x, ord, dim, keepdim: torch.norm(x, p=ord, dim=dim, keepdim=keepdim)),
         _torch_norm_build, _torch_norm_params(),
         [dict(shape=(2, 3), ord="fro", dim=None, keepdim=False),
          dict(shape=(2, 3), ord="fro", dim=1, keepdim=True),
          dict(shape=(2, 3), ord="nuc", dim=None, keepdim=False),
          dict(shape=(2, 3, 2), ord=3.0, dim=(0, 2), keepdim=False)], rtol=1e-6),
    Case("tensor_norm_method", lambda x: x.norm(), torch_ref(lambda x: x.norm()),
         lambda rng, shape: Sample((normal(rng, shape),)), st.just({"shape": (2, 3)}),
         [dict(shape=(3,))]),
]


# ---- inverses and determinants -----------------------------------------------------------------
def _square_build(gen=well_conditioned):
    def build(rng, batch, n, **kw):
        return Sample((gen(rng, batch + (n, n)),), kw)
    return build


def _negative_det(rng, shape):
    x = well_conditioned(rng, shape)
    if shape[-1]:
        x[..., 0, :] *= -1               # odd number of row flips: det < 0
    return x


@st.composite
def _solve_params(draw):
    batch_a, batch_b = draw(broadcast_shapes(2, max_dims=2))
    return {"sa": batch_a + (draw(st.integers(0, MAX_SIDE)),) * 2, "sb": batch_b,
            "k": draw(st.integers(0, MAX_SIDE))}


def _solve_build(rng, sa, sb, k, **kw):
    return Sample((well_conditioned(rng, sa), normal(rng, sb + (sa[-1], k))), kw)


def _solve_vector_build(rng, sa, **kw):
    return Sample((well_conditioned(rng, sa), normal(rng, sa[:-1])), kw)


INVERSES = [
    Case("inv", lk.linalg.inv, torch_ref(torch.linalg.inv), _square_build(), MATRICES,
         MATRIX_EDGES, op="inv", rtol=1e-6),
    Case("inverse", lk.inverse, torch_ref(torch.inverse), _square_build(), MATRICES,
         MATRIX_EDGES[:3]),
    Case("solve", lk.linalg.solve, torch_ref(torch.linalg.solve), _solve_build, _solve_params(),
         [dict(sa=(2, 2), sb=(), k=3), dict(sa=(3, 3), sb=(2,), k=1),
          dict(sa=(2, 1, 2, 2), sb=(3,), k=2), dict(sa=(0, 0), sb=(), k=2),
          dict(sa=(2, 2), sb=(), k=0)], op="solve", rtol=1e-6),
    Case("solve_vector", lk.linalg.solve, torch_ref(torch.linalg.solve), _solve_vector_build,
         st.fixed_dictionaries({"sa": shapes(min_dims=2, max_dims=3, min_side=1).map(
             lambda s: s[:-1] + s[-2:-1])}),
         [dict(sa=(3, 3)), dict(sa=(2, 2, 2))], rtol=1e-6),
    Case("solve_left_false", lambda a, b: lk.linalg.solve(a, b, left=False),
         torch_ref(lambda a, b: torch.linalg.solve(a, b, left=False)),
         lambda rng, n, k: Sample((well_conditioned(rng, (n, n)), normal(rng, (k, n)))),
         st.fixed_dictionaries({"n": st.integers(1, 3), "k": st.integers(1, 3)}),
         [dict(n=2, k=3)], rtol=1e-6),
    Case("det", lk.linalg.det, torch_ref(torch.linalg.det), _square_build(), MATRICES,
         MATRIX_EDGES, op="det", rtol=1e-6),
    Case("slogdet", lk.linalg.slogdet, torch_ref(torch.linalg.slogdet),
         _square_build(_negative_det), MATRICES, MATRIX_EDGES, op="slogdet", rtol=1e-6),
    Case("torch_slogdet", lk.slogdet, torch_ref(torch.slogdet), _square_build(), MATRICES,
         MATRIX_EDGES[:2]),
    Case("logdet", lk.logdet, torch_ref(torch.logdet), _square_build(), MATRICES,
         MATRIX_EDGES, rtol=1e-6),
    Case("logdet_negative", lk.logdet, torch_ref(torch.logdet), _square_build(_negative_det),
         st.just(dict(batch=(2,), n=3)), [dict(batch=(), n=1)], differentiable=False),
    Case("pinv", lambda a, **kw: lk.linalg.pinv(a, **kw),
         torch_ref(lambda a, **kw: torch.linalg.pinv(a, **kw)),
         lambda rng, batch, m, n: Sample((with_singular_values(rng, batch, m, n),)),
         RECTANGLES, RECT_EDGES + [dict(batch=(0,), m=2, n=3)], op="pinv", rtol=1e-6),
    Case("pinv_hermitian", lambda a: lk.linalg.pinv(_sym(a), hermitian=True),
         torch_ref(lambda a: torch.linalg.pinv(_tsym(a), hermitian=True)),
         lambda rng, batch, n: Sample((with_eigenvalues(rng, batch, n),)), MATRICES,
         MATRIX_EDGES, op="pinv", rtol=1e-6),
    Case("pinv_rank_deficient", lambda a: lk.linalg.pinv(a, atol=0.1),
         torch_ref(lambda a: torch.linalg.pinv(a, atol=0.1)),
         lambda rng, m: Sample((np.outer(normal(rng, (m,)), normal(rng, (m,))) + 0.0,)),
         st.fixed_dictionaries({"m": st.integers(2, 4)}), [dict(m=3)], differentiable=False),
    Case("pinverse", lk.pinverse, torch_ref(torch.pinverse),
         lambda rng, batch, m, n: Sample((with_singular_values(rng, batch, m, n),)),
         RECTANGLES, RECT_EDGES[:2], rtol=1e-6),
    Case("matrix_rank", lambda a: lk.linalg.matrix_rank(a), torch_ref(torch.linalg.matrix_rank),
         lambda rng, batch, m, n: Sample((with_singular_values(rng, batch, m, n) @
                                          np.diag([1.0] * (n - 1) + [0.0]),)),
         RECTANGLES, RECT_EDGES, differentiable=False),
    Case("matrix_rank_hermitian", lambda a: lk.linalg.matrix_rank(a, hermitian=True),
         torch_ref(lambda a: torch.linalg.matrix_rank(a, hermitian=True)),
         lambda rng, batch, n: Sample((with_eigenvalues(rng, batch, n),)), MATRICES,
         MATRIX_EDGES, differentiable=False),
    Case("multi_dot", lambda *ts: lk.linalg.multi_dot(list(ts)),
         torch_ref(lambda *ts: torch.linalg.multi_dot(list(ts))),
         lambda rng, dims, first, last: Sample(tuple(
             normal(rng, (dims[i + 1],) if (i == 0 and first) else
                    (dims[i],) if (i == len(dims) - 2 and last) else (dims[i], dims[i + 1]))
             for i in range(len(dims) - 1))),
         st.fixed_dictionaries({"dims": st.lists(st.integers(1, 4), min_size=3, max_size=6),
                                "first": st.booleans(), "last": st.booleans()}),
         [dict(dims=[2, 3, 4, 1], first=False, last=False), dict(dims=[3, 2, 3], first=True,
                                                                 last=True),
          dict(dims=[1, 4, 2, 3, 2], first=True, last=False)]),
    Case("chain_matmul", lambda *ts: lk.chain_matmul(*ts),
         torch_ref(lambda *ts: torch.linalg.multi_dot(list(ts))),
         lambda rng, dims: Sample(tuple(normal(rng, (dims[i], dims[i + 1]))
                                        for i in range(len(dims) - 1))),
         st.just({"dims": [2, 3, 4]}), [dict(dims=[2, 1, 2, 3])]),
    Case("vecdot", lambda a, b: lk.linalg.vecdot(a, b),
         torch_ref(lambda a, b: torch.linalg.vecdot(a, b)), _two(),
         st.just({"sa": (2, 3), "sb": (3,)}), [dict(sa=(1, 4), sb=(2, 4))]),
]


# ---- decompositions -----------------------------------------------------------------------------
def _signs_of_diag(r):
    """Signs making the diagonal of R positive (QR is unique up to them)."""
    k = min(r.shape[-2:])
    return r[..., range(k), range(k)].sign() if isinstance(r, torch.Tensor) else \
        lk.sign(lk.einsum("...ii->...i", r[..., :k, :k]))


def _qr_fn(lib, qr):
    def fn(a, mode):
        q, r = qr(a, mode=mode)
        s = _signs_of_diag(r)
        k = s.shape[-1]
        r = r[..., :k, :] * s[..., :, None]
        if mode == "r":
            return q, r
        return q[..., :, :k] * s[..., None, :], r
    return fn


@st.composite
def _qr_params(draw):
    p = draw(RECTANGLES)
    p["mode"] = draw(st.sampled_from(["reduced", "complete"] if p["m"] <= p["n"]
                                     else ["reduced"]))
    return p


def _qr_build(rng, batch, m, n, mode):
    return Sample((with_singular_values(rng, batch, m, n),), {"mode": mode})


def _svd_fn(svd, matmul, full_matrices):
    """(S, U @ Vh, U * U, Vh * Vh), the parts of U and Vh the SVD determines (up to sign)."""
    def fn(a):
        u, s, vh = svd(a, full_matrices=full_matrices)
        k = s.shape[-1]
        u, vh = u[..., :, :k], vh[..., :k, :]
        return s, matmul(u, vh), u * u, vh * vh
    return fn


def _svd_case(name, full_matrices):
    return Case(name, _svd_fn(lk.linalg.svd, lk.matmul, full_matrices),
                torch_ref(_svd_fn(torch.linalg.svd, torch.matmul, full_matrices)),
                lambda rng, batch, m, n: Sample((with_singular_values(rng, batch, m, n),)),
                RECTANGLES, RECT_EDGES + [dict(batch=(0,), m=2, n=3)], op="svd", rtol=1e-6)


def _eigh_fn(eigh, sym, uplo="L"):
    def fn(a):
        w, v = eigh(sym(a), UPLO=uplo)
        return w, v * v
    return fn


def _eigh_build(rng, batch, n):
    return Sample((with_eigenvalues(rng, batch, n),))


def _torch_svd_fn(svd, matmul, mT):
    def fn(a, some):
        u, s, v = svd(a, some=some)
        k = s.shape[-1]
        u, v = u[..., :, :k], v[..., :, :k]
        return s, matmul(u, mT(v))
    return fn


DECOMPOSITIONS = [
    Case("cholesky", lambda a: lk.linalg.cholesky(_spd(a)),
         torch_ref(lambda a: torch.linalg.cholesky(_tspd(a))), _square_build(normal), MATRICES,
         MATRIX_EDGES, op="cholesky", rtol=1e-6),
    Case("cholesky_upper", lambda a: lk.linalg.cholesky(_spd(a), upper=True),
         torch_ref(lambda a: torch.linalg.cholesky(_tspd(a), upper=True)), _square_build(normal),
         MATRICES, MATRIX_EDGES[:3], rtol=1e-6),
    Case("torch_cholesky", lambda a: lk.cholesky(_spd(a)),
         torch_ref(lambda a: torch.cholesky(_tspd(a))), _square_build(normal), MATRICES,
         MATRIX_EDGES[:2], rtol=1e-6),
    Case("qr", _qr_fn(lk, lk.linalg.qr), torch_ref(_qr_fn(torch, torch.linalg.qr)), _qr_build,
         _qr_params(), [dict(p, mode="reduced") for p in RECT_EDGES] +
         [dict(batch=(), m=2, n=4, mode="complete"), dict(batch=(0,), m=3, n=2, mode="reduced")],
         op="qr", rtol=1e-6),
    Case("qr_r_only", _qr_fn(lk, lk.linalg.qr), torch_ref(_qr_fn(torch, torch.linalg.qr)),
         _qr_build, _qr_params().map(lambda p: dict(p, mode="r")),
         [dict(batch=(), m=3, n=2, mode="r")], op="qr", differentiable=False),
    Case("torch_qr", lambda a: lk.qr(a)[1].abs(), torch_ref(lambda a: torch.qr(a)[1].abs()),
         lambda rng, batch, m, n: Sample((with_singular_values(rng, batch, m, n),)),
         RECTANGLES, RECT_EDGES[:2], rtol=1e-6),
    _svd_case("svd", False),
    _svd_case("svd_full_matrices", True),
    Case("torch_svd", _torch_svd_fn(lk.svd, lk.matmul, _mT),
         torch_ref(_torch_svd_fn(torch.svd, torch.matmul, lambda v: v.mT)),
         lambda rng, batch, m, n, some: Sample((with_singular_values(rng, batch, m, n),),
                                               {"some": some}),
         RECTANGLES.map(lambda p: dict(p, some=True)),
         [dict(batch=(), m=3, n=2, some=True), dict(batch=(), m=2, n=3, some=False)], rtol=1e-6),
    Case("svdvals", lk.linalg.svdvals, torch_ref(torch.linalg.svdvals),
         lambda rng, batch, m, n: Sample((with_singular_values(rng, batch, m, n),)),
         RECTANGLES, RECT_EDGES, rtol=1e-6),
    Case("svdvals_repeated", lk.linalg.svdvals, torch_ref(torch.linalg.svdvals),
         lambda rng, n: Sample((np.eye(n) * 2.0,)), st.just({"n": 3}), [dict(n=2)],
         differentiable=False),
    Case("eigh", _eigh_fn(lk.linalg.eigh, _sym), torch_ref(_eigh_fn(torch.linalg.eigh, _tsym)),
         _eigh_build, MATRICES, MATRIX_EDGES, op="eigh", rtol=1e-6),
    Case("eigh_upper", _eigh_fn(lk.linalg.eigh, _sym, "U"),
         torch_ref(_eigh_fn(torch.linalg.eigh, _tsym, "U")), _eigh_build, MATRICES,
         MATRIX_EDGES[:3], op="eigh", rtol=1e-6),
    Case("eigvalsh", lambda a: lk.linalg.eigvalsh(_sym(a)),
         torch_ref(lambda a: torch.linalg.eigvalsh(_tsym(a))), _eigh_build, MATRICES,
         MATRIX_EDGES, rtol=1e-6),
    Case("eigvalsh_repeated", lambda a: lk.linalg.eigvalsh(_sym(a)),
         torch_ref(lambda a: torch.linalg.eigvalsh(_tsym(a))),
         lambda rng, n: Sample((np.eye(n) * 2.0,)), st.just({"n": 3}), [dict(n=2)],
         differentiable=False),
]

PRIMITIVE_CASES = [c for c in PRODUCTS + EINSUM + NORMS + INVERSES + DECOMPOSITIONS if c.op]
COMPOSITE_CASES = [c for c in PRODUCTS + EINSUM + NORMS + INVERSES + DECOMPOSITIONS
                   if not c.op]
