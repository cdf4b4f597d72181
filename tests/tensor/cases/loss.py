"""Cases for the loss primitives: ``nll_loss`` / ``nll_loss_backward`` with class weights and
ignored targets (their plain forms are in ``op_cases.py``), and ``binary_cross_entropy``.
PyTorch is the oracle where it has the op; the adjoint's oracle is written out in NumPy."""
import numpy as np
import torch.nn.functional as TF
from hypothesis import strategies as st

from labkit.tensor.ops import loss as _loss
from labkit.tensor.ops import nll as _nll

from ..case_kit import MAX_SIDE, Case, Sample, _arr, normal, shapes, torch_ref


# ---- nll_loss with weight and ignore_index ------------------------------------------------------
@st.composite
def _params(draw):
    classes = draw(st.integers(1, MAX_SIDE))
    target_shape = () if draw(st.booleans()) else draw(shapes(min_dims=1, max_dims=2,
                                                              min_side=1))
    return {"target_shape": target_shape, "classes": classes,
            "reduction": draw(st.sampled_from(["mean", "sum", "none"])),
            "ignore_index": draw(st.sampled_from([-100, 0])),
            "weighted": draw(st.booleans())}


EDGES = [dict(target_shape=(4,), classes=3, reduction="mean", ignore_index=-100, weighted=True),
         dict(target_shape=(2, 3), classes=2, reduction="sum", ignore_index=0, weighted=True),
         dict(target_shape=(), classes=3, reduction="none", ignore_index=1, weighted=True),
         dict(target_shape=(3,), classes=1, reduction="mean", ignore_index=-100,
              weighted=False),
         dict(target_shape=(0,), classes=2, reduction="sum", ignore_index=-100, weighted=True)]


def _scores_shape(target_shape, classes):
    t = tuple(target_shape)
    return (classes,) if not t else t[:1] + (classes,) + t[1:]


def _ignored(classes, ignore_index):
    """``ignore_index`` itself, or -100 where a class in range would leave no class to keep."""
    return -100 if ignore_index >= classes - 1 else ignore_index


def _targets(rng, target_shape, classes, reduction, ignore_index):
    """Class indices with about a third set to ``ignore_index``; for 'mean' one is always kept
    (every target ignored gives NaN, tested in tests/nn/test_losses.py)."""
    t = np.where(rng.random(target_shape) < 0.35, ignore_index,
                 rng.integers(0, classes, target_shape))
    t = _arr(t, np.int64)
    if reduction == "mean" and t.size and (t == ignore_index).all():
        t.reshape(-1)[0] = 0 if ignore_index != 0 else 1
    return t


def _weight(rng, classes, weighted):
    return (_arr(rng.uniform(0.5, 2.0, classes)),) if weighted else ()


def _nll_build(rng, target_shape, classes, reduction, ignore_index, weighted):
    ignore_index = _ignored(classes, ignore_index)
    lp = normal(rng, _scores_shape(target_shape, classes))
    t = _targets(rng, target_shape, classes, reduction, ignore_index)
    return Sample((lp, t) + _weight(rng, classes, weighted),
                  {"reduction": reduction, "ignore_index": ignore_index}, grad=(0,))


def _nll_torch(lp, t, *weight, reduction, ignore_index):
    return TF.nll_loss(lp, t, weight=weight[0] if weight else None, reduction=reduction,
                       ignore_index=ignore_index)


def _backward_build(rng, target_shape, classes, reduction, ignore_index, weighted):
    ignore_index = _ignored(classes, ignore_index)
    t = _targets(rng, target_shape, classes, reduction, ignore_index)
    g = normal(rng, target_shape if reduction == "none" else ())
    return Sample((g, t) + _weight(rng, classes, weighted),
                  {"classes": classes, "reduction": reduction, "ignore_index": ignore_index},
                  grad=(0,))


def _backward_ref(g, t, *weight, classes, reduction, ignore_index):
    out = np.zeros(_scores_shape(t.shape, classes), np.asarray(g).dtype)
    kept = t != ignore_index
    w = np.where(kept, weight[0][np.where(kept, t, 0)] if weight else 1.0, 0.0)
    total = w.sum()
    for pos in np.ndindex(*t.shape):
        if not kept[pos]:
            continue
        at = (t[pos],) if not pos else pos[:1] + (t[pos],) + pos[1:]
        value = g if reduction != "none" else g[pos]
        out[at] = -(value / total if reduction == "mean" else value) * w[pos]
    return out


# ---- binary_cross_entropy ----------------------------------------------------------------------
@st.composite
def _bce_params(draw):
    shape = draw(shapes())
    weight = draw(st.sampled_from(["none", "same", "last"]))
    return {"shape": shape, "weight": weight}


def _bce_build(rng, shape, weight):
    x = _arr(rng.uniform(0.05, 0.95, shape))
    t = _arr(rng.uniform(0.0, 1.0, shape))
    w = () if weight == "none" else \
        (_arr(rng.uniform(0.5, 2.0, shape if weight == "same" or not shape else shape[-1:])),)
    return Sample((x, t) + w, grad=(0, 1))


def _bce_torch(x, t, *weight):
    return TF.binary_cross_entropy(x, t, weight=weight[0] if weight else None, reduction="none")


PRIMITIVE_CASES = [
    Case("nll_loss_weighted_ignoring", lambda lp, t, *w, **kw: _nll.nll_loss(lp, t, *w, **kw),
         torch_ref(_nll_torch), _nll_build, _params(), EDGES, op="nll_loss"),
    Case("nll_loss_backward_weighted_ignoring",
         lambda g, t, *w, **kw: _nll.nll_loss_backward(g, t, *w, **kw), _backward_ref,
         _backward_build, _params(), EDGES, op="nll_loss_backward"),
    Case("binary_cross_entropy", lambda x, t, *w: _loss.binary_cross_entropy(x, t, *w),
         torch_ref(_bce_torch), _bce_build, _bce_params(),
         [dict(shape=(), weight="none"), dict(shape=(0,), weight="same"),
          dict(shape=(2, 3), weight="last"), dict(shape=(1, 1), weight="same")],
         op="binary_cross_entropy"),
]
