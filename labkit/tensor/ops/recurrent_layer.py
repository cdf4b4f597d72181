"""A whole LSTM layer as one op each way: ``lstm_layer(x, w_ih, w_hh, h0, c0[, b])`` and its
backward ``lstm_layer_backward``.

``lstm_sequence`` runs an LSTM's time loop given the input's projection ``x @ w_ih.T + b``.
Here the projection is inside the op too, so that on the CPU (float32, one OpenMP thread) the
whole layer is oneDNN's fused LSTM kernel (``host_dnnl.lstm``), as PyTorch's CPU LSTM is: the
projection one GEMM for every step, then per step the hidden state's GEMM and the gates in one
pass; its backward gives the gradients of the input, both weights, the bias and the initial
state from one kernel. Elsewhere (other dtypes, threads, CuPy, batch shapes oneDNN does not
take) the same values come from NumPy: the projection's GEMM, then lstm_sequence's kernels.

Shapes: ``x`` (L, ..., C), ``w_ih`` (4H, C), ``w_hh`` (4H, H), ``h0`` and ``c0`` (..., H)
broadcasting to x's dimensions between time and features, the bias ``b`` (4H,) (PyTorch's
``b_ih + b_hh``). The result (L + 1, ..., H) is every step's h, then the last step's c:
``out[:L]`` is the layer's output, ``out[L - 1]`` and ``out[L]`` its final state.

``lstm_layer_backward(g, out, x, ...)`` takes the forward's result too: oneDNN's forward, told
that a backward follows (``keep=True``, what ``nn.LSTM`` passes when a gradient is wanted),
keeps the gates of every step (its workspace) with that result, and the backward reads them
there instead of running the forward again; elsewhere it recomputes them. Its result is one flat
array of the gradients of x, w_ih, w_hh, h0, c0 (and b), each in its input's shape, in that
order; the forward's vjp hands them out as views. The backward op's own vjp (for gradients of
gradients) is written in labkit ops over lstm_sequence and its backward.

>>> import labkit as lk
>>> from labkit.tensor.ops.recurrent_layer import lstm_layer
>>> out = lstm_layer(lk.zeros(3, 1, 4), lk.zeros(8, 4), lk.zeros(8, 2), lk.zeros(1, 2),
...                  lk.ones(1, 2))
>>> out.shape, [round(v, 4) for v in out[:, 0, 0].tolist()]    # h of each step, then c
((4, 1, 2), [0.2311, 0.1225, 0.0622, 0.125])
"""
import math

import numpy as np

from ...devices import host_dnnl
from ...errors import ShapeError, describe
from ..op import needs_grad, op
from ..shape_rules import shape_of
from .elementwise import add
from .index import getitem_slices, zeros_like
from .linalg import _product, matmul, matmul_t
from .reduce import sum as _reduce_sum
from .recurrent import (PLANES, _cols, _each_example, _plane, _rows, _same_float,
                        _sequence_backward, _sequence_backward_vjp, _sequence_vjp, _shifted,
                        lstm_sequence, lstm_sequence_backward)
from .shape import (batch_size, broadcast_to, concat, expand_dims, materialized, moved,
                    reshape)


def _rule(x, w_ih, w_hh, h0, c0, *b, keep=False, name="lstm_layer"):
    """(L + 1, ..., H) from x (L, ..., C), w_ih (4H, C), w_hh (4H, H), h0 and c0 (..., H) and
    the optional b (4H,)."""
    sx, si, sw, sh, sc = (tuple(shape_of(t)) for t in (x, w_ih, w_hh, h0, c0))
    sb = [tuple(shape_of(t)) for t in b]
    if len(sx) < 2 or len(sw) != 2 or sw[0] != 4 * sw[1] or si != (sw[0], sx[-1]) or \
            len(sh) < 1 or len(sc) < 1 or not sh[-1] == sc[-1] == sw[1] or len(b) > 1 or \
            any(s != (sw[0],) for s in sb):
        raise ShapeError(f"{name}: expects x (L, ..., C), w_ih (4H, C), w_hh (4H, H), h0 and c0 "
                         f"(..., H) and an optional bias (4H,); got "
                         f"{', '.join(describe(t) for t in (x, w_ih, w_hh, h0, c0) + b)}")
    lead = sx[1:-1]
    for s, what in ((sh, "h0"), (sc, "c0")):
        try:
            ok = tuple(np.broadcast_shapes(lead, s[:-1])) == lead
        except ValueError:
            ok = False
        if not ok:
            raise ShapeError(f"{name}: {what} {s} does not broadcast to the dimensions {lead} "
                             f"between x's time and features ({describe(x)})")
    _same_float(name, x, w_ih, w_hh, h0, c0, *b)
    return (sx[0] + 1,) + lead + (sw[1],), x.dtype


def _project(xp, x, w_ih, b):
    """``x @ w_ih.T (+ b)`` for every step: (L, ..., 4H), one GEMM over all the rows."""
    xw = _product(xp, xp.ascontiguousarray(x), w_ih.T)
    if b:
        xw += b[0]
    return xw


def _served(xp, x):
    return x.ndim == 3 and host_dnnl.serves(xp, x)


def _layer_batch(inputs, bdims, keep=False):
    """Shared weights: the examples become more sequences of one layer (each example's
    dimensions between time and features after the batch's), one op; a weight per example:
    one op per example."""
    if any(d is not None for d in bdims[1:3] + bdims[5:]):
        return _each_example(lambda *a: lstm_layer(*a, keep=keep), inputs, bdims)
    x, w_ih, w_hh, h0, c0, *b = inputs
    size = batch_size(inputs, bdims)
    rank = max(t.ndim - (d is not None) - k
               for t, d, k in zip((x, h0, c0), bdims[:1] + bdims[3:5], (2, 1, 1)))
    xs = moved(materialized(x, bdims[0], size), 0, to=1)         # (L, B, ..., C)
    if rank > xs.ndim - 3:
        xs = expand_dims(xs, axes=tuple(range(2, 2 + rank - (xs.ndim - 3))))
    states = [s if d is None else _aligned_state(s, d, rank) for s, d in zip((h0, c0),
                                                                            bdims[3:5])]
    lead = tuple(np.broadcast_shapes(tuple(xs.shape[1:-1]), *[tuple(s.shape[:-1])
                                                               for s in states]))
    if tuple(xs.shape[1:-1]) != lead:
        xs = broadcast_to(xs, shape=(xs.shape[0],) + lead + (xs.shape[-1],))
    return lstm_layer(xs, w_ih, w_hh, *states, *b, keep=keep), 1


def _aligned_state(s, d, rank):
    """A batched state with its batch dimension first and size-1 dimensions after it, each
    example's leading dimensions ``rank`` long."""
    s = moved(s, d)
    extra = rank - (s.ndim - 2)
    return expand_dims(s, axes=tuple(range(1, 1 + extra))) if extra > 0 else s


def _unpack(packed, inputs):
    """lstm_layer_backward's flat result as views in the shapes of ``inputs``."""
    parts, start = [], 0
    for t in inputs:
        k = math.prod(t.shape)
        parts.append(reshape(getitem_slices(packed, 0, start, start + k), shape=tuple(t.shape)))
        start += k
    return parts


def _layer_vjp(g, out, x, w_ih, w_hh, h0, c0, *b, keep=False):
    inputs = (x, w_ih, w_hh, h0, c0) + b
    if not any(needs_grad(t) for t in inputs):
        return (None,) * len(inputs)
    parts = _unpack(lstm_layer_backward(g, out, x, w_ih, w_hh, h0, c0, *b), inputs)
    return tuple(p if needs_grad(t) else None for p, t in zip(parts, inputs))


@op("lstm_layer", shape=_rule, vjp=_layer_vjp, batch=_layer_batch, amp="low")
def lstm_layer(xp, x, w_ih, w_hh, h0, c0, *b, keep=False):
    """One LSTM layer over a sequence, input projection included (see the module): for t =
    0..L-1, gates = x[t] @ w_ih.T + b + h @ w_hh.T (PyTorch's order i, f, g, o), c = f c + i g,
    h = o tanh(c), from h0, c0. The result (L + 1, ..., H): every step's h, then the last c.
    ``keep``: a backward will follow (oneDNN's forward then keeps the gates it computed, in its
    workspace, for lstm_layer_backward with this result, until the result is freed)."""
    out = host_dnnl.lstm(x, w_ih, w_hh, h0, c0, *b, keep=keep) if _served(xp, x) else None
    if out is not None:
        return out
    length = x.shape[0]
    planes = lstm_sequence.kernel(xp, _project(xp, x, w_ih, b), w_hh, h0, c0)
    out = xp.empty((length + 1,) + planes.shape[2:], dtype=planes.dtype)
    out[:length] = planes[0]
    out[length] = planes[1, length - 1] if length else xp.broadcast_to(c0, planes.shape[2:])
    return out


def _summed_to(xp, a, shape):
    """``a`` summed down to ``shape``, which it broadcasts from."""
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and a.shape[lead + i] != 1)
    return a.sum(axis=axes, keepdims=True).reshape(shape) if axes else a


def _backward_rule(g, out, x, w_ih, w_hh, h0, c0, *b):
    """(the inputs' sizes summed,) from the cotangent and result (L + 1, ..., H) of lstm_layer
    and its inputs."""
    want, dtype = _rule(x, w_ih, w_hh, h0, c0, *b, name="lstm_layer_backward")
    for t, what in ((g, "cotangent"), (out, "result")):
        if tuple(shape_of(t)) != want:
            raise ShapeError(f"lstm_layer_backward: expects the {what} of lstm_layer's result "
                             f"{want}; got {describe(t)}")
    _same_float("lstm_layer_backward", g, out, x)
    return (sum(math.prod(shape_of(t)) for t in (x, w_ih, w_hh, h0, c0) + b),), dtype


def _backward_batch(inputs, bdims):
    # each example's weight gradients are sums over its own sequences: one op per example
    return _each_example(lstm_layer_backward, inputs, bdims)


@op("lstm_layer_backward", shape=_backward_rule, vjp=lambda *a: _backward_vjp(*a),
    batch=_backward_batch)
def lstm_layer_backward(xp, g, out, x, w_ih, w_hh, h0, c0, *b):
    """lstm_layer's vjp: for the cotangent ``g`` of its result ``out``, the gradients of x,
    w_ih, w_hh, h0, c0 (and b) as one flat array, each in its input's shape. (``out`` must be
    lstm_layer's result for these inputs: the values do not depend on it, but oneDNN's kernel
    reads the gates its forward kept with it, where it kept them.)"""
    packed = host_dnnl.lstm_backward(g, x, w_ih, w_hh, h0, c0, *b, out=out) \
        if _served(xp, x) else None
    if packed is not None:
        return packed
    length, n = x.shape[0], w_hh.shape[1]
    planes = lstm_sequence.kernel(xp, _project(xp, x, w_ih, b), w_hh, h0, c0)
    lead = planes.shape[2:-1]
    rows = length * math.prod(lead)
    g6 = xp.zeros_like(planes)
    g6[0] = g[:length]
    if length:
        g6[1, length - 1] = g[length]
    d = _sequence_backward(xp, g6, planes, w_hh, c0)                 # (L, ..., 5H)
    d_gates = xp.ascontiguousarray(d[..., :4 * n]).reshape(rows, 4 * n)
    h_prev = xp.concatenate([xp.broadcast_to(h0, lead + (n,))[None], planes[0, :-1]])
    dh0 = _product(xp, d_gates[:rows // length], w_hh).reshape(lead + (n,)) if length else \
        xp.zeros(lead + (n,), d.dtype)
    grads = [
        _product(xp, d_gates, w_ih).reshape(x.shape),
        _product(xp, d_gates.T, xp.ascontiguousarray(x).reshape(rows, x.shape[-1])),
        _product(xp, d_gates.T, h_prev[:length].reshape(rows, n)),
        _summed_to(xp, dh0, h0.shape),
        _summed_to(xp, d[0, ..., 4 * n:] if length else g[0], c0.shape)]
    if b:
        grads.append(d_gates.sum(axis=0))
    return xp.concatenate([p.reshape(-1) for p in grads]).astype(x.dtype, copy=False)


# ---- the backward op's vjp -------------------------------------------------------------------
def _at_first_step(v, length):
    """(L, ...) zeros but for ``v`` at step 0."""
    first = expand_dims(v, axes=(0,))
    if length == 1:
        return first
    rest = zeros_like(broadcast_to(first, shape=(length - 1,) + tuple(v.shape)))
    return concat(first, rest, dim=0)


def _backward_vjp(u, r, g, out, x, w_ih, w_hh, h0, c0, *b):
    """The derivative of lstm_layer_backward: its result is, from the gates' cotangents D (L,
    ..., 4H) and the cell's at step 0 (lstm_sequence_backward's), dx = D w_ih, dw_ih = D^T x,
    dw_hh = D^T h_prev, dh0 = D[0] w_hh, dc0 and db = sum D; the cotangent ``u`` of that flows
    back through those products, lstm_sequence_backward and lstm_sequence."""
    inputs = (x, w_ih, w_hh, h0, c0) + b
    length, n = x.shape[0], w_hh.shape[1]
    lead = tuple(x.shape[1:-1])
    u_dx, u_dwih, u_dwhh, u_dh0, u_dc0, *u_db = _unpack(u, inputs)
    u_dh0, u_dc0 = (broadcast_to(v, shape=lead + (n,)) for v in (u_dh0, u_dc0))
    if length == 0:     # dc0 = g[0] summed to c0's shape, the rest zeros
        return (expand_dims(u_dc0, axes=(0,)) if needs_grad(g) else None, None) + \
            tuple(zeros_like(t) if needs_grad(t) else None for t in inputs)
    xw = matmul_t(x, w_ih, transpose_b=True)
    if b:
        xw = add(xw, b[0])
    planes = lstm_sequence(xw, w_hh, h0, c0)
    g6 = concat(*[expand_dims(p, axes=(0,)) for p in _cotangent_planes(g, length)], dim=0)
    d = lstm_sequence_backward(g6, planes, w_hh, c0)                  # (L, ..., 5H)
    gates = _cols(d, 0, 4 * n)
    h_prev = _shifted(broadcast_to(h0, shape=lead + (n,)), _plane(planes, 0))
    # the cotangent of the gates' cotangents D, from dx, dw_ih, dw_hh, dh0 and db
    u_gates = add(add(matmul_t(u_dx, w_ih, transpose_b=True),
                      matmul_t(x, u_dwih, transpose_b=True)),
                  add(matmul_t(h_prev, u_dwhh, transpose_b=True),
                      _at_first_step(matmul_t(u_dh0, w_hh, transpose_b=True), length)))
    if b:
        u_gates = add(u_gates, u_db[0])
    u_d = concat(u_gates, _at_first_step(u_dc0, length), dim=d.ndim - 1)
    want_forward = any(needs_grad(t) for t in inputs)
    u_g6, u_planes, dw_hh, dc0 = _sequence_backward_vjp(
        u_d, d, g6, planes, w_hh, c0, [needs_grad(g), want_forward, needs_grad(w_hh),
                                       needs_grad(c0)])
    d_g = None
    if needs_grad(g):
        d_g = concat(_plane(u_g6, 0),
                     expand_dims(_plane(_plane(u_g6, 1), length - 1), axes=(0,)), dim=0)
    if not want_forward:
        return (d_g, None) + (None,) * len(inputs)
    # the products' other operands: x (in dw_ih), h_prev (in dw_hh), w_ih (in dx), w_hh (in dh0)
    u_h_prev = matmul(gates, u_dwhh)                                 # (L, ..., H)
    if length > 1:
        later = concat(getitem_slices(u_h_prev, 0, 1, length),
                       zeros_like(expand_dims(_plane(u_h_prev, 0), axes=(0,))), dim=0)
        u_planes = add(u_planes, concat(expand_dims(later, axes=(0,)),
                                        zeros_like(getitem_slices(u_planes, 0, 1, PLANES)),
                                        dim=0))
    # through lstm_sequence (xw, made here, wants its cotangent whatever its own flag says)
    d_xw, dw_hh_fwd, dh0, dc0_fwd = _sequence_vjp(
        u_planes, planes, w_hh, h0, c0, [True, needs_grad(w_hh), needs_grad(h0), needs_grad(c0)])
    d_x = matmul(gates, u_dwih)
    d_wih = matmul_t(_rows(gates), _rows(u_dx), transpose_a=True)
    dw_hh = _sum(dw_hh, dw_hh_fwd, matmul_t(_rows(_plane(gates, 0)), _rows(u_dh0),
                                            transpose_a=True))
    dh0 = _sum(dh0, _plane(u_h_prev, 0))
    dc0 = _sum(dc0, dc0_fwd)
    d_x = add(d_x, matmul(d_xw, w_ih))
    d_wih = add(d_wih, matmul_t(_rows(d_xw), _rows(x), transpose_a=True))
    grads = [d_x, d_wih, dw_hh, dh0, dc0]
    if b:
        grads.append(_reduce_sum(_rows(d_xw), dim=(0,)))
    return (d_g, None) + tuple(v if needs_grad(t) else None for v, t in zip(grads, inputs))


def _cotangent_planes(g, length):
    """lstm_layer's cotangent (L + 1, ..., H) as lstm_sequence's six planes (L, ..., H): h's
    every step, c's at the last step, none of the gates'."""
    h = getitem_slices(g, 0, 0, length)
    last = expand_dims(_plane(g, length), axes=(0,))
    zero = zeros_like(h)
    c = last if length == 1 else concat(getitem_slices(zero, 0, 1, length), last, dim=0)
    return [h, c] + [zero] * (PLANES - 2)


def _sum(*terms):
    terms = [t for t in terms if t is not None]
    total = terms[0]
    for t in terms[1:]:
        total = add(total, t)
    return total

