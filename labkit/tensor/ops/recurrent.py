"""One LSTM step as one op: ``lstm_cell(xw, hw, c) -> stack([h', c', i, f, g, o])``.

An LSTM step written in elementwise ops is about a dozen ops forward (add, sigmoid, tanh, three
column slices, four products and sums) and twice that backward, each a dispatch, a tape entry and
a pass over small arrays: in a 28-step sequence of batch 64 the step's dispatches cost more than
its arithmetic. Here the step after its two matrix products is one kernel (gates = xw + hw in
PyTorch's order i, f, g, o; c' = f c + i g; h' = o tanh(c')) and its vjp one more
(``lstm_cell_backward``, one step of ``lstm_sequence_backward``: it reads the gates the forward
kept rather than recomputing them). The backward op's own vjp is written in labkit ops, so
gradients of every order still come out; only the first one is fused.

Shapes: ``xw`` and ``hw`` are (..., 4H) (the input's and the hidden state's projections, biases
included), ``c`` is (..., H); leading dimensions broadcast. The result is (6, ..., H), one step
of ``lstm_sequence``'s: h' and c' (``hc[0]``, ``hc[1]``: the step's new state, two contiguous
views), then the activated gates i, f, g, o, which the backward reads.

>>> import labkit as lk
>>> from labkit.tensor.ops.recurrent import lstm_cell
>>> hc = lstm_cell(lk.zeros(1, 8), lk.zeros(1, 8), lk.ones(1, 2))
>>> hc.shape, [round(v, 4) for v in hc[0, 0].tolist()], hc[1, 0].tolist()
((6, 1, 2), [0.2311, 0.2311], [0.5, 0.5])
"""
import math

import numpy as np

from ...errors import DTypeError, ShapeError, describe
from ..op import needs_grad, op
from ..shape_rules import shape_of
from .elementwise import add, mul, sub, tanh
from .index import _FULL, _getitem, getitem_slices, zeros_like
from .linalg import matmul, matmul_t
from .shape import aligned, broadcast_to, concat, expand_dims, moved, reshape


# ---- the gate math, shared by lstm_cell and lstm_sequence (and their backward ops) -----------
def _sigmoid_by_tanh(xp, dtype):
    """(scale, shift), shaped (4, 1) for gates i, f, g, o along the axis before the features:
    sigmoid(x) = 0.5 tanh(0.5 x) + 0.5 and tanh(x) = 1 tanh(1 x) + 0, so that one tanh pass
    over all four gates activates them (tanh is NumPy's fastest of the two, and one pass over
    4H columns beats a pass per gate)."""
    scale = xp.asarray([[0.5], [0.5], [1.0], [0.5]], dtype=dtype)
    shift = xp.asarray([[0.5], [0.5], [0.0], [0.5]], dtype=dtype)
    return scale, shift


def _activate(xp, a, scale, shift):
    """The gates' pre-activations ``a`` (..., 4, ..., H), each gate already multiplied by its
    ``scale``, replaced in place by the activations: sigmoid for i, f, o, tanh for g."""
    xp.tanh(a, out=a)
    a *= scale
    a += shift
    return a


def _update(xp, i, f, g, o, c, h_out, c_out):
    """The cell update from the activated gates: ``c_out = f c + i g``, ``h_out = o
    tanh(c_out)``, written into the preallocated outputs."""
    xp.multiply(f, c, out=c_out)
    xp.multiply(i, g, out=h_out)
    c_out += h_out
    xp.tanh(c_out, out=h_out)
    h_out *= o


def _derivative(xp, s, k, out):
    """``out`` = the derivative of gate ``k``'s activation, from its value ``s``: 1 - s^2 for
    g (tanh), s (1 - s) for i, f, o (sigmoid)."""
    if k == 2:
        xp.multiply(s, s, out=out)
        return xp.subtract(1, out, out=out)
    xp.subtract(1, s, out=out)
    out *= s
    return out


def _partners(i, f, g, o, c_prev, tc):
    """Each gate with its partner in ``c' = f c + i g`` and ``h' = o tanh(c')``, in gate order."""
    return (i, g), (f, c_prev), (g, i), (o, tc)


def _gate_slopes(xp, i, f, g, o, c_prev, tc, out):
    """What each gate's cotangent is per unit of the cotangent of c' (for i, f, g) or of h'
    (for o): the activation's derivative times the gate's partner, into ``out[k]`` for
    gate k."""
    for k, (s, other) in enumerate(_partners(i, f, g, o, c_prev, tc)):
        _derivative(xp, s, k, out[k])
        out[k] *= other
    return out


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


def _gates_into(xp, xw, hw, out):
    """The activated gates i, f, g, o of one step from its two projections (..., 4H), written
    into ``out``, planes (4, ..., H): one addition into all four planes, then sigmoid on i, f
    and o and tanh on g, each in place. (With the gates read from columns, a whole-array sigmoid
    beats _activate's tanh: a pass that scales gate columns broadcasts, which costs NumPy more
    than it saves, and in float64 its tanh is slower than exp.)"""
    n, rank = out.shape[-1], out.ndim

    def planes(x):              # (..., 4H) -> (..., 4, H), a view
        return x.reshape(x.shape[:-1] + (4, n))
    xp.add(planes(xw), planes(hw), out=out.transpose(tuple(range(1, rank - 1)) + (0, rank - 1)))
    _sigmoid_into(xp, out[:2])
    _sigmoid_into(xp, out[3])
    xp.tanh(out[2], out=out[2])
    return out


def _rule(xw, hw, c):
    """(6, ..., H) for lstm_cell."""
    shapes = [shape_of(t) for t in (xw, hw, c)]
    if any(len(s) < 1 for s in shapes) or not shapes[0][-1] == shapes[1][-1] == 4 * shapes[2][-1]:
        raise ShapeError(f"lstm_cell: expects xw and hw (..., 4H) and c (..., H); got "
                         f"{describe(xw)}, {describe(hw)}, {describe(c)}")
    try:
        lead = np.broadcast_shapes(*[s[:-1] for s in shapes])
    except ValueError:
        raise ShapeError(f"lstm_cell: the leading dimensions of {describe(xw)}, {describe(hw)} "
                         f"and {describe(c)} do not broadcast") from None
    _same_float("lstm_cell", xw, hw, c)
    return (PLANES,) + tuple(lead) + (shapes[2][-1],), xw.dtype


def _planes_rule(name, g, out, c0, steps):
    """The leading dims of g and out, lstm_cell's or lstm_sequence's result (6, [L,] ..., H)
    (``steps``: whether there is a time axis), checked with c0 (..., H), which must broadcast
    to them."""
    so, sg, sc = (shape_of(t) for t in (out, g, c0))
    first = 2 if steps else 1
    if len(so) < first + 1 or so[0] != PLANES or tuple(sg) != tuple(so) or len(sc) < 1 or \
            sc[-1] != so[-1]:
        what = "(6, L, ..., H)" if steps else "(6, ..., H)"
        raise ShapeError(f"{name}: expects g and out shaped as the forward's result {what} and "
                         f"c0 (..., H); got {describe(g)}, {describe(out)}, {describe(c0)}")
    lead = tuple(so[first:-1])
    try:
        ok = tuple(np.broadcast_shapes(lead, tuple(sc[:-1]))) == lead
    except ValueError:
        ok = False
    if not ok:
        raise ShapeError(f"{name}: c0 {describe(c0)} does not broadcast to the leading "
                         f"dimensions {lead}")
    return lead


def _cell_backward_rule(g, out, c):
    """(..., 5H) from the cotangent and result of lstm_cell (6, ..., H) and c (..., H)."""
    lead = _planes_rule("lstm_cell_backward", g, out, c, steps=False)
    _same_float("lstm_cell_backward", g, out, c)
    return lead + (5 * shape_of(out)[-1],), out.dtype


def _leading(inputs, bdims):
    """xw, hw, c batched as LEADING does: batch dimension first, each batched one given the
    example rank of the widest (so the leading dimensions broadcast as one example's do)."""
    nd = max(x.ndim - (d is not None) for x, d in zip(inputs, bdims))
    return [x if d is None else aligned(x, d, nd) for x, d in zip(inputs, bdims)]


def _lstm_cell_batch(inputs, bdims):
    return lstm_cell(*_leading(inputs, bdims)), 1       # (6, B, ..., H)


def _lstm_cell_backward_batch(inputs, bdims):
    (g, out, c), (dg, do, dc) = inputs, bdims
    rank = _lead_rank((g, out, c), (dg, do, dc), (2, 2, 1))
    size = next(x.shape[d] for x, d in zip(inputs, bdims) if d is not None)
    g, out = _batched_planes((g, out), (dg, do), size, rank, 1)
    c = c if dc is None else aligned(c, dc, rank + 1)
    return lstm_cell_backward(g, out, c), 0


def _lstm_cell_vjp(g, out, xw, hw, c):
    d = lstm_cell_backward(g, out, c)
    n4, last = 4 * c.shape[-1], d.ndim - 1
    dgates = getitem_slices(d, last, 0, n4) if needs_grad(xw) or needs_grad(hw) else None
    return (dgates if needs_grad(xw) else None, dgates if needs_grad(hw) else None,
            getitem_slices(d, last, n4, None) if needs_grad(c) else None)


@op("lstm_cell", shape=_rule, vjp=_lstm_cell_vjp, batch=_lstm_cell_batch)
def lstm_cell(xp, xw, hw, c):
    """One LSTM step from the gates' two projections: ``stack([h', c', i, f, g, o])`` (see the
    module)."""
    lead = np.broadcast_shapes(xw.shape[:-1], hw.shape[:-1], c.shape[:-1])
    out = xp.empty((PLANES,) + lead + c.shape[-1:], dtype=c.dtype)
    _update(xp, *_gates_into(xp, xw, hw, out[2:]), c, out[0], out[1])
    return out


def _cols(x, start, stop):
    return getitem_slices(x, x.ndim - 1, start, stop)


def _lstm_cell_backward_vjp(u, r, g, out, c):
    # one step of lstm_sequence_backward's vjp: the time axis added, then taken away
    def step(x, axis):
        return expand_dims(x, axes=(axis,))

    def unstep(x):
        return None if x is None else _getitem(x, spec=(_FULL, ("i", 0)))
    dg, dout, _, dc = _sequence_backward_vjp(step(u, 0), step(r, 0), step(g, 1), step(out, 1),
                                             None, c, [needs_grad(g), needs_grad(out), False,
                                                       needs_grad(c)])
    return unstep(dg), unstep(dout), dc


@op("lstm_cell_backward", shape=_cell_backward_rule, vjp=_lstm_cell_backward_vjp,
    batch=_lstm_cell_backward_batch)
def lstm_cell_backward(xp, g, out, c):
    """lstm_cell's vjp: for the cotangent ``g`` of its result ``out`` (6, ..., H), from the
    cell state ``c`` the step started from, ``[d gates, d c]`` (..., 5H): one step of
    lstm_sequence_backward, in the same order of operations (so the same bits)."""
    n, lead = out.shape[-1], out.shape[1:-1]
    m = math.prod(lead)
    _, c_new, i, f, gt, o = out.reshape(PLANES, m, n)
    gs = g.reshape(PLANES, m, n)
    c_prev = xp.broadcast_to(c, lead + (n,)).reshape(m, n)
    r = xp.empty((m, 5 * n), dtype=out.dtype)
    tc = xp.tanh(c_new)
    gcn = _derivative(xp, tc, 2, xp.empty_like(tc))         # the cotangent of c':
    gcn *= o                                                # gh o (1 - tanh(c')^2) + gc
    gcn *= gs[0]
    gcn += gs[1]
    direct = _any_bits(xp, gs[2:])     # cotangents of the gates themselves (rare)
    slope = xp.empty_like(tc)
    for j, (s, other) in enumerate(_partners(i, f, gt, o, c_prev, tc)):
        d = r[:, j * n:(j + 1) * n]
        _derivative(xp, s, j, slope)
        if direct:
            xp.multiply(slope, gs[2 + j], out=d)
        slope *= other
        if direct:
            d += xp.multiply(gs[0] if j == 3 else gcn, slope)
        else:
            xp.multiply(gs[0] if j == 3 else gcn, slope, out=d)
    xp.multiply(gcn, f, out=r[:, 4 * n:])
    return r.reshape(lead + (5 * n,))


def _any_bits(xp, x):
    """Whether any element of the floating array ``x`` has a bit set (-0.0 counts, as in
    _nonzero_steps)."""
    bits = x.view(xp.dtype(f"i{x.dtype.itemsize}"))
    return bool(np.bitwise_or.reduce(bits, axis=None) if xp is np else bits.any())


# ---- a whole sequence: lstm_sequence and its backward -------------------------------------------
# The time loop of one LSTM layer and direction as one op, as cuDNN and oneDNN run it: each step
# is one GEMM (h @ W_hh.T) and a few whole-array passes, with no dispatch, tape entry or slice
# per step; the backward op runs the loop in reverse the same way and leaves the weight's
# gradient to one GEMM over every step. The forward keeps each step's gate activations in its
# result (as cuDNN's workspace), so the backward recomputes nothing.
PLANES = 6      # lstm_sequence's result: h, c, then the activations of gates i, f, g, o


def _lead(name, sx, sh, sc):
    try:
        return tuple(np.broadcast_shapes(tuple(sx[1:-1]), tuple(sh[:-1]), tuple(sc[:-1])))
    except ValueError:
        raise ShapeError(f"{name}: the dimensions between time and features of xw {tuple(sx)}, "
                         f"and the leading dimensions of h0 {tuple(sh)} and c0 {tuple(sc)}, do "
                         f"not broadcast") from None


def _sequence_rule(xw, w_hh, h0, c0):
    """(6, L, ..., H) from xw (L, ..., 4H), w_hh (4H, H), h0 and c0 (..., H)."""
    sx, sw, sh, sc = (shape_of(t) for t in (xw, w_hh, h0, c0))
    if len(sx) < 2 or len(sw) != 2 or len(sh) < 1 or len(sc) < 1 or \
            not sx[-1] == sw[0] == 4 * sw[1] or not sh[-1] == sc[-1] == sw[1]:
        raise ShapeError(f"lstm_sequence: expects xw (L, ..., 4H), w_hh (4H, H), h0 and c0 "
                         f"(..., H); got {describe(xw)}, {describe(w_hh)}, {describe(h0)}, "
                         f"{describe(c0)}")
    lead = _lead("lstm_sequence", sx, sh, sc)
    _same_float("lstm_sequence", xw, w_hh, h0, c0)
    return (PLANES, sx[0]) + lead + (sw[1],), xw.dtype


def _same_float(name, *tensors):
    dtype = tensors[0].dtype
    if not dtype.is_floating or any(t.dtype is not dtype for t in tensors):
        raise DTypeError(f"{name}: expects tensors of one floating dtype; got "
                         f"{', '.join(describe(t) for t in tensors)}")


def _state(xp, s, lead, m):
    """A state (..., H) broadcast to the sequence's leading dims, as rows (m, H)."""
    return xp.ascontiguousarray(xp.broadcast_to(s, lead + s.shape[-1:]).reshape(m, s.shape[-1]))


@op("lstm_sequence", shape=_sequence_rule, vjp=lambda *a: _lstm_sequence_vjp(*a),
    batch=lambda inputs, bdims: _lstm_sequence_batch(inputs, bdims), amp="low")
def lstm_sequence(xp, xw, w_hh, h0, c0):
    """One LSTM layer over a sequence: for t = 0..L-1, gates = xw[t] + h @ w_hh.T (PyTorch's
    order i, f, g, o), c = f c + i g, h = o tanh(c), from h0, c0. ``xw`` is the input's
    projection x @ W_ih.T + b_ih + b_hh for every step, (L, ..., 4H). The result (6, L, ..., H)
    holds h, c and the activated gates i, f, g, o of every step: ``out[0]`` is the layer's
    output, ``out[0, -1]`` and ``out[1, -1]`` its final state.

    >>> import labkit as lk
    >>> from labkit.tensor.ops.recurrent import lstm_sequence
    >>> out = lstm_sequence(lk.zeros(3, 1, 8), lk.zeros(8, 2), lk.zeros(1, 2), lk.ones(1, 2))
    >>> out.shape, out[1, :, 0, 0].tolist()
    ((6, 3, 1, 2), [0.5, 0.25, 0.125])
    """
    n, length = w_hh.shape[-1], xw.shape[0]
    lead = tuple(np.broadcast_shapes(xw.shape[1:-1], h0.shape[:-1], c0.shape[:-1]))
    m = math.prod(lead)
    scale, shift = (v.reshape(4, 1, 1) for v in _sigmoid_by_tanh(xp, xw.dtype))
    # the gates as planes (4, m, H): the input's projection is scaled and laid out as planes
    # straight into the result (one pass over all steps), then each step adds its one batched
    # GEMM, with each gate's scale folded into the weight, from a scratch that stays in cache
    w4 = xp.ascontiguousarray((w_hh.reshape(4, n, n) * scale).transpose(0, 2, 1))
    x = xw.reshape(xw.shape[:1] + (1,) * (len(lead) + 2 - xw.ndim) + xw.shape[1:])
    x = xp.broadcast_to(x, (length,) + lead + (4 * n,)).reshape(length, m, 4, n)
    out = xp.empty((PLANES, length, m, n), dtype=xw.dtype)
    xp.multiply(x.transpose(2, 0, 1, 3), scale.reshape(4, 1, 1, 1), out=out[2:])
    h, c = _state(xp, h0, lead, m), _state(xp, c0, lead, m)
    hw = xp.empty((4, m, n), dtype=xw.dtype)
    for t in range(length):
        gates = out[2:, t]
        xp.matmul(h, w4, out=hw)
        gates += hw
        i, f, g, o = _activate(xp, gates, scale, shift)
        h_new, c_new = out[0, t], out[1, t]
        _update(xp, i, f, g, o, c, h_new, c_new)
        h, c = h_new, c_new
    return out.reshape((PLANES, length) + lead + (n,))


def _sequence_backward_rule(g, out, w_hh, c0):
    """(L, ..., 5H) from the cotangent and result of lstm_sequence (6, L, ..., H)."""
    so, sw = shape_of(out), shape_of(w_hh)
    lead = _planes_rule("lstm_sequence_backward", g, out, c0, steps=True)
    if len(sw) != 2 or not sw[0] == 4 * sw[1] == 4 * so[-1]:
        raise ShapeError(f"lstm_sequence_backward: expects w_hh (4H, H) for H = {so[-1]}; got "
                         f"{describe(w_hh)}")
    _same_float("lstm_sequence_backward", g, out, w_hh, c0)
    return (so[1],) + lead + (5 * so[-1],), out.dtype


def _nonzero_steps(xp, g):
    """[plane][step] -> whether any of the cotangent ``g`` (6, L, m, H) there is nonzero (its
    bits, one pass: -0.0 counts as nonzero, which only costs an addition)."""
    bits = g.view(xp.dtype(f"i{g.dtype.itemsize}")).reshape(g.shape[0], g.shape[1], -1)
    if xp is np:
        return (np.bitwise_or.reduce(bits, axis=2) != 0).tolist()
    return bits.any(axis=2).tolist()


@op("lstm_sequence_backward", shape=_sequence_backward_rule,
    vjp=lambda *a: _lstm_sequence_backward_vjp(*a),
    batch=lambda inputs, bdims: _lstm_sequence_backward_batch(inputs, bdims))
def lstm_sequence_backward(xp, g, out, w_hh, c0):
    """lstm_sequence's vjp before its products: for the cotangent ``g`` of its result, per step
    ``[d gates, d c_prev]`` (L, ..., 5H), where d gates is the cotangent of ``xw[t]`` (and of
    ``h_prev @ w_hh.T``) and d c_prev that of the cell state the step started from (at t = 0,
    of c0)."""
    return _sequence_backward(xp, g, out, w_hh, c0)


def _sequence_backward(xp, g, out, w_hh, c0):
    """lstm_sequence_backward's kernel."""
    length, n = out.shape[1], out.shape[-1]
    lead = out.shape[2:-1]
    m = math.prod(lead)
    if length == 0:
        return xp.empty((0,) + lead + (5 * n,), dtype=out.dtype)
    h, c, i, f, gt, o = out.reshape(PLANES, length, m, n)
    gs = g.reshape(PLANES, length, m, n)
    if length == 1:
        c_prev = _state(xp, c0, lead, m)[None]
    else:
        c_prev = xp.empty_like(c)
        c_prev[0] = _state(xp, c0, lead, m)
        c_prev[1:] = c[:-1]
    tc = xp.tanh(c)
    q = _derivative(xp, tc, 2, xp.empty_like(c))    # gh's share of dc: o (1 - tanh(c)^2)
    q *= o
    k = _gate_slopes(xp, i, f, gt, o, c_prev, tc, [xp.empty_like(c) for _ in range(4)])
    r = xp.empty((length, m, 5 * n), dtype=out.dtype)
    d_gates = [r[:, :, j * n:(j + 1) * n] for j in range(4)]
    given = _nonzero_steps(xp, gs)               # which planes of which steps have a cotangent
    direct = None
    if any(any(p) for p in given[2:]):          # cotangents of the gates themselves (rare):
        direct = [_derivative(xp, s, j, xp.empty_like(c)) for j, s in enumerate((i, f, gt, o))]
        for j in range(4):                      # g_gate * activation'
            direct[j] *= gs[2 + j]
    dh = xp.empty((m, n), dtype=out.dtype)
    gcn = xp.empty((m, n), dtype=out.dtype)
    for t in range(length - 1, -1, -1):
        if t == length - 1:
            gh = gs[0, t]
        else:                                   # (the cotangent of h is often only the last)
            gh = xp.add(gs[0, t], dh) if given[0][t] else dh
        xp.multiply(gh, q[t], out=gcn)
        if given[1][t]:
            gcn += gs[1, t]
        if t < length - 1:
            gcn += r[t + 1, :, 4 * n:]
        for j in range(4):                      # (four products beat one that broadcasts)
            d = d_gates[j][t]
            xp.multiply(gh if j == 3 else gcn, k[j][t], out=d)
            if direct is not None:
                d += direct[j][t]
        xp.multiply(gcn, f[t], out=r[t, :, 4 * n:])
        if t:
            xp.matmul(r[t, :, :4 * n], w_hh, out=dh)
    return r.reshape((length,) + lead + (5 * n,))


def _plane(x, k):
    return _getitem(x, spec=(("i", k),))


def _steps(x, start, stop):
    return getitem_slices(x, 0, start, stop)


def _rows(x):
    return reshape(x, shape=(-1, x.shape[-1]))


def _lstm_sequence_vjp(g, out, xw, w_hh, h0, c0):
    if out.shape[1] == 0:
        return tuple(zeros_like(x) if needs_grad(x) else None for x in (xw, w_hh, h0, c0))
    return _sequence_vjp(g, out, w_hh, h0, c0, [needs_grad(x) for x in (xw, w_hh, h0, c0)])


def _sequence_vjp(g, out, w_hh, h0, c0, wanted):
    """lstm_sequence's vjp (of at least one step) for the inputs xw, w_hh, h0, c0 that
    ``wanted`` says want a cotangent (flags, so that a rule that made xw itself,
    lstm_layer_backward's, can pass its own)."""
    want_xw, want_w, want_h0, want_c0 = wanted
    n, length = w_hh.shape[-1], out.shape[1]
    r = lstm_sequence_backward(g, out, w_hh, c0)
    d_gates = _cols(r, 0, 4 * n)                                 # (L, ..., 4H)
    first = _getitem(d_gates, spec=(("i", 0),))
    dw = dh0 = None
    if want_w:
        lead = tuple(out.shape[2:-1])
        dw = matmul_t(_rows(first), _rows(broadcast_to(h0, shape=lead + (n,))),
                      transpose_a=True)
        if length > 1:
            dw = add(dw, matmul_t(_rows(_steps(d_gates, 1, None)),
                                  _rows(_steps(_plane(out, 0), 0, length - 1)), transpose_a=True))
    if want_h0:
        dh0 = matmul(first, w_hh)
    return (d_gates if want_xw else None, dw, dh0,
            _getitem(_cols(r, 4 * n, None), spec=(("i", 0),)) if want_c0 else None)


def _shifted(first, rest):
    """``first`` (..., H) then ``rest``'s steps but the last: the value each step started from."""
    return concat(expand_dims(first, axes=(0,)), _steps(rest, 0, rest.shape[0] - 1), dim=0)


def _lstm_sequence_backward_vjp(u, r, g, out, w_hh, c0):
    # The derivative of the backward kernel above, in ops (for gradients of gradients). The
    # kernel's loop carries gh (the cotangent of h, from the next step through w_hh) and dc
    # backwards in time; its adjoint carries theirs forwards in a small loop, and the rest is
    # elementwise over every step at once.
    return _sequence_backward_vjp(u, r, g, out, w_hh, c0,
                                  [needs_grad(x) for x in (g, out, w_hh, c0)])


def _sequence_backward_vjp(u, r, g, out, w_hh, c0, wanted):
    """lstm_sequence_backward's vjp for the inputs ``wanted`` says want a cotangent (flags, so
    that lstm_cell_backward's can pass its own inputs' while it passes them reshaped)."""
    want_g, want_out, want_w, want_c0 = wanted
    n, length = out.shape[-1], out.shape[1]
    if length == 0:
        return tuple(zeros_like(x) if w else None for x, w in zip((g, out, w_hh, c0), wanted))
    lead = tuple(out.shape[2:-1])
    _, c, i, f, gt, o = (_plane(out, k) for k in range(PLANES))
    g_h, g_c, g_i, g_f, g_g, g_o = (_plane(g, k) for k in range(PLANES))
    c_prev = _shifted(broadcast_to(c0, shape=lead + (n,)), c)
    tc = tanh(c)
    tp = sub(1, mul(tc, tc))
    q = mul(o, tp)
    d_gates = _cols(r, 0, 4 * n)
    if length > 1:    # what the kernel carried into each step from the next one
        later = _steps(d_gates, 1, None)
        none = expand_dims(zeros_like(_plane(g_h, 0)), axes=(0,))
        gh = add(g_h, concat(matmul(later, w_hh), none, dim=0))
        gcn = add(add(g_c, concat(_steps(_cols(r, 4 * n, None), 1, None), none, dim=0)),
                  mul(gh, q))
    else:
        gh = g_h
        gcn = add(g_c, mul(gh, q))
    si, sf, so = (mul(s, sub(1, s)) for s in (i, f, o))
    sg = sub(1, mul(gt, gt))
    # the loop's adjoint, forwards in time: a (of d gates), b (of d c_prev), and the adjoints
    # of the carried gh and d c' they give
    u_gates, u_c = _cols(u, 0, 4 * n), _cols(u, 4 * n, None)
    parts = {k: [] for k in ("a", "b", "gcn", "gh", "i", "f", "g", "o")}
    carry_h = carry_c = None
    for t in range(length):
        a, b = _plane(u_gates, t), _plane(u_c, t)
        if carry_h is not None:
            a = add(a, matmul_t(carry_h, w_hh, transpose_b=True))
            b = add(b, carry_c)
        p = [mul(_cols(a, j * n, (j + 1) * n), _plane(s, t))
             for j, s in enumerate((si, sf, sg, so))]
        carry_c = add(add(mul(b, _plane(f, t)), mul(p[0], _plane(gt, t))),
                      add(mul(p[1], _plane(c_prev, t)), mul(p[2], _plane(i, t))))
        carry_h = add(mul(carry_c, _plane(q, t)), mul(p[3], _plane(tc, t)))
        for k, v in zip(parts, [a, b, carry_c, carry_h] + p):
            parts[k].append(expand_dims(v, axes=(0,)))
    adj = {k: concat(*v, dim=0) for k, v in parts.items()}
    dg = dout = dw = dc0 = None
    if want_g:
        dg = concat(*[expand_dims(adj[k], axes=(0,))
                      for k in ("gh", "gcn", "i", "f", "g", "o")], dim=0)
    if want_out or want_c0:
        a_i, a_f, a_g, a_o = (_cols(adj["a"], j * n, (j + 1) * n) for j in range(4))
        via_c_prev = mul(adj["f"], gcn)             # the adjoint of each step's c_prev
        if want_c0:
            dc0 = _plane(via_c_prev, 0)
        if want_out:
            adj_tc = sub(mul(adj["o"], gh), mul(mul(adj["gcn"], gh), mul(mul(o, tc), 2.0)))
            d_c = mul(adj_tc, tp)
            if length > 1:
                d_c = add(d_c, concat(_steps(via_c_prev, 1, None),
                                      expand_dims(zeros_like(_plane(c, 0)), axes=(0,)), dim=0))
            d_i = add(mul(mul(a_i, add(mul(gcn, gt), g_i)), sub(1, mul(i, 2.0))),
                      mul(adj["g"], gcn))
            d_f = add(mul(mul(a_f, add(mul(gcn, c_prev), g_f)), sub(1, mul(f, 2.0))),
                      mul(adj["b"], gcn))
            d_g = sub(mul(adj["i"], gcn), mul(mul(a_g, add(mul(gcn, i), g_g)), mul(gt, 2.0)))
            d_o = add(mul(mul(a_o, add(mul(gh, tc), g_o)), sub(1, mul(o, 2.0))),
                      mul(mul(adj["gcn"], gh), tp))
            dout = concat(*[expand_dims(x, axes=(0,))
                            for x in (zeros_like(c), d_c, d_i, d_f, d_g, d_o)], dim=0)
    if want_w and length > 1:
        dw = matmul_t(_rows(later), _rows(_steps(adj["gh"], 0, length - 1)), transpose_a=True)
    elif want_w:
        dw = zeros_like(w_hh)
    return dg, dout, dw, dc0


def _lead_rank(inputs, bdims, trailing):
    """The rank of one example's leading dims: the widest input's (``trailing``: each input's
    dims that are not leading ones)."""
    return max(x.ndim - (d is not None) - k for x, d, k in zip(inputs, bdims, trailing))


def _each_example(op, inputs, bdims):
    """``op`` over a batch whose weight differs between the examples: one call per example
    (each its own recurrence), stacked along a new first dim."""
    size = next(x.shape[d] for x, d in zip(inputs, bdims) if d is not None)
    _FULL = ("s", None, None, None)
    results = [op(*[x if d is None else _getitem(x, spec=(_FULL,) * d + (("i", k),))
                    for x, d in zip(inputs, bdims)]) for k in range(size)]
    return concat(*[expand_dims(x, axes=(0,)) for x in results], dim=0), 0


def _lstm_sequence_batch(inputs, bdims):
    if bdims[1] is not None:      # a weight per example
        return _each_example(lstm_sequence, inputs, bdims)
    (xw, w_hh, h0, c0), (dx, _, dh, dc) = inputs, bdims
    rank = _lead_rank((xw, h0, c0), (dx, dh, dc), (2, 1, 1))
    if dx is not None:
        xw = moved(xw, dx, to=1)
        extra = rank - (xw.ndim - 3)
        if extra > 0:
            xw = expand_dims(xw, axes=tuple(range(2, 2 + extra)))
    h0 = h0 if dh is None else aligned(h0, dh, rank + 1)
    c0 = c0 if dc is None else aligned(c0, dc, rank + 1)
    return lstm_sequence(xw, w_hh, h0, c0), 2


def _batched_planes(xs, dims, size, rank, axes):
    """A result of lstm_cell (``axes`` 1: its planes) or lstm_sequence (``axes`` 2: planes and
    steps) and its cotangent, batched along ``dims``: each one's batch dim moved after those
    axes (broadcast there when its dim is None), each example's leading dims padded to
    ``rank``, then both broadcast to their common leading dims."""
    out = []
    for x, d in zip(xs, dims):
        if d is None:        # the same for every example: broadcast over them
            x = expand_dims(x, axes=(axes,))
            x = broadcast_to(x, shape=tuple(x.shape[:axes]) + (size,) + tuple(x.shape[axes + 1:]))
        else:
            x = moved(x, d, to=axes)
            extra = rank - (x.ndim - axes - 2)
            if extra > 0:
                x = expand_dims(x, axes=tuple(range(axes + 1, axes + 1 + extra)))
        out.append(x)
    lead = np.broadcast_shapes(*[tuple(x.shape[axes:-1]) for x in out])
    return [x if tuple(x.shape[axes:-1]) == lead else
            broadcast_to(x, shape=tuple(x.shape[:axes]) + lead + tuple(x.shape[-1:]))
            for x in out]


def _lstm_sequence_backward_batch(inputs, bdims):
    if bdims[2] is not None:
        return _each_example(lstm_sequence_backward, inputs, bdims)
    (g, out, w_hh, c0), (dg, do, _, dc) = inputs, bdims
    rank = _lead_rank((g, out, c0), (dg, do, dc), (3, 3, 1))
    size = next(x.shape[d] for x, d in zip(inputs, bdims) if d is not None)
    g, out = _batched_planes((g, out), (dg, do), size, rank, 2)
    c0 = c0 if dc is None else aligned(c0, dc, rank + 1)
    return lstm_sequence_backward(g, out, w_hh, c0), 1
