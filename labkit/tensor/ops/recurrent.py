"""One LSTM step as one op: ``lstm_cell(xw, hw, c) -> stack([h', c'])``.

An LSTM step written in elementwise ops is about a dozen ops forward (add, sigmoid, tanh, three
column slices, four products and sums) and twice that backward, each a dispatch, a tape entry and
a pass over small arrays: in a 28-step sequence of batch 64 the step's dispatches cost more than
its arithmetic. Here the step after its two matrix products is one kernel (gates = xw + hw in
PyTorch's order i, f, g, o; c' = f c + i g; h' = o tanh(c')) and its vjp one more
(``lstm_cell_backward``, which recomputes the gates rather than keeping them). The backward op's
own vjp is written in labkit ops, so gradients of every order still come out; only the first
one is fused.

Shapes: ``xw`` and ``hw`` are (..., 4H) (the input's and the hidden state's projections, biases
included), ``c`` is (..., H); leading dimensions broadcast. The result is (2, ..., H): h' and c',
each a contiguous half (``hc[0]``, ``hc[1]``: the step's new state, two views).

>>> import labkit as lk
>>> from labkit.tensor.ops.recurrent import lstm_cell
>>> hc = lstm_cell(lk.zeros(1, 8), lk.zeros(1, 8), lk.ones(1, 2))
>>> hc.shape, [round(v, 4) for v in hc[0, 0].tolist()], hc[1, 0].tolist()
((2, 1, 2), [0.2311, 0.2311], [0.5, 0.5])
"""
import numpy as np

from ...errors import DTypeError, ShapeError, describe
from ..op import needs_grad, op
from ..shape_rules import shape_of
from .elementwise import add, mul, sigmoid, sub, tanh
from .index import _getitem, getitem_slices
from .shape import aligned, broadcast_to, concat, expand_dims, moved


def _sigmoid_into(xp, x):
    """``x`` replaced by sigmoid(x), in place: 1 / (1 + exp(-x)), which is exact at both ends
    (exp overflowing to inf gives 0)."""
    x *= -1         # not xp.negative(x, out=x): NumPy 2.4 reads a float32 column view wrongly

    if xp is np:
        with np.errstate(over="ignore"):
            np.exp(x, out=x)
    else:
        xp.exp(x, out=x)
    x += 1
    return xp.reciprocal(x, out=x)


def _gates(xp, xw, hw, n):
    """i, f, g, o of the step: i, f, o views of one new array, g an array of its own (whole
    arrays, not column views, go through NumPy's loops fastest: the sigmoid runs over g's
    columns too)."""
    a = xp.add(xw, hw)
    g = xp.tanh(a[..., 2 * n:3 * n])
    _sigmoid_into(xp, a)
    return a[..., :n], a[..., n:2 * n], g, a[..., 3 * n:]


def _rule(name, xw, hw, c, g=None):
    """(2, ..., H) for lstm_cell, (..., 5H) for its backward."""
    shapes = [shape_of(t) for t in (xw, hw, c)]
    if any(len(s) < 1 for s in shapes) or not shapes[0][-1] == shapes[1][-1] == 4 * shapes[2][-1]:
        raise ShapeError(f"{name}: expects xw and hw (..., 4H) and c (..., H); got "
                         f"{describe(xw)}, {describe(hw)}, {describe(c)}")
    try:
        lead = np.broadcast_shapes(*[s[:-1] for s in shapes])
    except ValueError:
        raise ShapeError(f"{name}: the leading dimensions of {describe(xw)}, {describe(hw)} and "
                         f"{describe(c)} do not broadcast") from None
    n = shapes[2][-1]
    tensors = (xw, hw, c) if g is None else (g, xw, hw, c)
    if g is not None and tuple(shape_of(g)) != (2,) + tuple(lead) + (n,):
        raise ShapeError(f"{name}: the gradient {describe(g)} must be shaped like "
                         f"lstm_cell's result, {(2,) + tuple(lead) + (n,)}")
    dtype = xw.dtype
    if not dtype.is_floating or any(t.dtype is not dtype for t in tensors):
        raise DTypeError(f"{name}: expects tensors of one floating dtype; got "
                         f"{', '.join(describe(t) for t in tensors)}")
    return ((2,) + tuple(lead) + (n,) if g is None else tuple(lead) + (5 * n,)), dtype


def _leading(inputs, bdims):
    """xw, hw, c batched as LEADING does: batch dimension first, each batched one given the
    example rank of the widest (so the leading dimensions broadcast as one example's do)."""
    nd = max(x.ndim - (d is not None) for x, d in zip(inputs, bdims))
    return [x if d is None else aligned(x, d, nd) for x, d in zip(inputs, bdims)]


def _lstm_cell_batch(inputs, bdims):
    return lstm_cell(*_leading(inputs, bdims)), 1       # (2, B, ..., H)


def _lstm_cell_backward_batch(inputs, bdims):
    (g, *rest), (dg, *drest) = inputs, bdims
    xw, hw, c = _leading(rest, drest)
    if dg is None:      # one cotangent for every example
        size = next(x.shape[d] for x, d in zip(rest, drest) if d is not None)
        g = broadcast_to(expand_dims(g, axes=(1,)), shape=(2, size) + tuple(g.shape[1:]))
    else:
        g = moved(g, dg, to=1)
    lead = np.broadcast_shapes(*[tuple(t.shape[:-1]) for t in (xw, hw, c)])
    if tuple(g.shape[1:-1]) != lead:    # the examples' leading dims as the others' broadcast
        g = broadcast_to(g, shape=(2,) + lead + tuple(g.shape[-1:]))
    return lstm_cell_backward(g, xw, hw, c), 0


def _lstm_cell_vjp(g, out, xw, hw, c):
    d = lstm_cell_backward(g, xw, hw, c)
    n4, last = 4 * c.shape[-1], d.ndim - 1
    dgates = getitem_slices(d, last, 0, n4) if needs_grad(xw) or needs_grad(hw) else None
    return (dgates if needs_grad(xw) else None, dgates if needs_grad(hw) else None,
            getitem_slices(d, last, n4, None) if needs_grad(c) else None)


@op("lstm_cell", shape=lambda xw, hw, c: _rule("lstm_cell", xw, hw, c), vjp=_lstm_cell_vjp,
    batch=_lstm_cell_batch)
def lstm_cell(xp, xw, hw, c):
    """One LSTM step from the gates' two projections: ``stack([h', c'])`` (see the module)."""
    n = c.shape[-1]
    i, f, g, o = _gates(xp, xw, hw, n)
    out = xp.empty((2,) + np.broadcast_shapes(i.shape, c.shape), dtype=i.dtype)
    h_new, c_new = out[0], out[1]
    xp.multiply(f, c, out=c_new)
    g *= i
    c_new += g
    xp.tanh(c_new, out=h_new)
    h_new *= o
    return out


def _cols(x, start, stop):
    return getitem_slices(x, x.ndim - 1, start, stop)


def _lstm_cell_backward_vjp(u, out, g, xw, hw, c):
    # the derivative of the backward kernel below, in ops (for gradients of gradients)
    n = c.shape[-1]
    a = add(xw, hw)
    i, f, o = (sigmoid(_cols(a, k * n, (k + 1) * n)) for k in (0, 1, 3))
    gg = tanh(_cols(a, 2 * n, 3 * n))
    t = tanh(add(mul(f, c), mul(i, gg)))
    gh, gc = _getitem(g, spec=(("i", 0),)), _getitem(g, spec=(("i", 1),))
    ui, uf, ug, uo, uc = (_cols(u, k * n, (k + 1) * n) for k in range(5))
    si, sf, so = (mul(s, sub(1, s)) for s in (i, f, o))
    gp, tp = sub(1, mul(gg, gg)), sub(1, mul(t, t))
    q = mul(o, tp)
    dcn = add(gc, mul(gh, q))
    w = add(add(mul(ui, mul(gg, si)), mul(uf, mul(c, sf))), add(mul(ug, mul(i, gp)), mul(uc, f)))
    d_gh = add(mul(w, q), mul(uo, mul(t, so)))
    l_o = add(mul(w, mul(gh, tp)), mul(uo, mul(mul(gh, t), sub(1, mul(o, 2.0)))))
    l_t = sub(mul(uo, mul(gh, so)), mul(mul(w, gh), mul(mul(o, t), 2.0)))
    l_cn = mul(l_t, tp)
    l_i = add(add(mul(ug, mul(dcn, gp)), mul(ui, mul(mul(dcn, gg), sub(1, mul(i, 2.0))))),
              mul(l_cn, gg))
    l_f = add(add(mul(uf, mul(mul(dcn, c), sub(1, mul(f, 2.0)))), mul(uc, dcn)), mul(l_cn, c))
    l_g = add(sub(mul(ui, mul(dcn, si)), mul(mul(ug, dcn), mul(mul(i, gg), 2.0))),
              mul(l_cn, i))
    l_c = add(mul(uf, mul(dcn, sf)), mul(l_cn, f))
    last = a.ndim - 1
    da = concat(mul(l_i, si), mul(l_f, sf), mul(l_g, gp), mul(l_o, so), dim=last) \
        if needs_grad(xw) or needs_grad(hw) else None
    return (concat(expand_dims(d_gh, axes=(0,)), expand_dims(w, axes=(0,)), dim=0)
            if needs_grad(g) else None,
            da if needs_grad(xw) else None, da if needs_grad(hw) else None,
            l_c if needs_grad(c) else None)


@op("lstm_cell_backward",
    shape=lambda g, xw, hw, c: _rule("lstm_cell_backward", xw, hw, c, g),
    vjp=_lstm_cell_backward_vjp, batch=_lstm_cell_backward_batch)
def lstm_cell_backward(xp, g, xw, hw, c):
    """lstm_cell's vjp: for the cotangent ``g`` of ``stack([h', c'])``, ``[d gates, d c]``
    (..., 5H), the gates recomputed from ``xw + hw``."""
    n = c.shape[-1]
    i, f, gt, o = _gates(xp, xw, hw, n)
    gh, gc = g[0], g[1]
    t = xp.multiply(f, c)
    t += i * gt
    xp.tanh(t, out=t)
    out = xp.empty(np.broadcast_shapes(i.shape, c.shape, gh.shape)[:-1] + (5 * n,),
                   dtype=i.dtype)
    di, df, dg, do, dc = (out[..., k * n:(k + 1) * n] for k in range(5))
    xp.multiply(gh, t, out=do)                  # d o = gh t, times o (1 - o) below
    dcn = xp.multiply(t, t)                      # dc' = gc + gh o (1 - t^2)
    xp.subtract(1, dcn, out=dcn)
    dcn *= o
    dcn *= gh
    dcn += gc
    xp.multiply(dcn, f, out=dc)
    xp.multiply(dcn, gt, out=di)
    xp.multiply(dcn, c, out=df)
    xp.multiply(dcn, i, out=dg)
    for d, s in ((di, i), (df, f), (do, o)):     # times the sigmoid's derivative s (1 - s)
        d *= s
        xp.subtract(1, s, out=s)
        d *= s
    xp.multiply(gt, gt, out=gt)                  # tanh's derivative 1 - g^2
    xp.subtract(1, gt, out=gt)
    dg *= gt
    return out
