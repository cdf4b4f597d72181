"""Cases of the fused LSTM step (``lstm_cell``), the whole-sequence LSTM (``lstm_sequence``) and
their backward ops, with PyTorch as the oracle: the step and the sequence written in PyTorch's
ops (gates i, f, g, o of ``xw + hw``), and the backward ops as their reverse loop written out in
PyTorch's ops (their inputs include the saved gates, which autograd of the forward would not
treat as inputs; lstm_cell's is one step of lstm_sequence's), so that the harness's
second-order checks compare with PyTorch's double backward too."""
import torch
import numpy as np
from hypothesis import strategies as st

from labkit.tensor.ops import recurrent as R
from labkit.tensor.ops import recurrent_layer as R_layer

from ..case_kit import Case, Sample, normal, torch_ref


def _step(xw, hw, c):
    i, f, g, o = (xw + hw).chunk(4, dim=-1)
    i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
    c_new = f * c + i * g
    h_new = o * torch.tanh(c_new)
    return torch.stack(torch.broadcast_tensors(h_new, c_new, i, f, g, o))


def _backward(g, out, c):
    return _sequence_backward(g[:, None], out[:, None], None, c)[0]


def _backward_inputs(rng, lead, hidden, broadcast_hw):
    # the cotangent and result of one step (gates in range), and a c that broadcasts now and then
    g, planes, _, _ = _sequence_backward_inputs(rng, 1, lead, hidden, "same")
    c_lead = tuple(1 for _ in lead) if broadcast_hw else lead
    return g[:, 0], planes[:, 0], normal(rng, c_lead + (hidden,))


@st.composite
def _params(draw):
    lead = draw(st.lists(st.integers(0, 3), max_size=2).map(tuple))
    hidden = draw(st.integers(1, 3))
    # hw shared by every example (a hidden state broadcast over the batch) now and then
    return {"lead": lead, "hidden": hidden, "broadcast_hw": draw(st.booleans())}


_EDGES = [dict(lead=(2,), hidden=3, broadcast_hw=False), dict(lead=(), hidden=1,
                                                               broadcast_hw=False),
          dict(lead=(0,), hidden=2, broadcast_hw=False), dict(lead=(2, 3), hidden=2,
                                                              broadcast_hw=True)]


def _inputs(rng, lead, hidden, broadcast_hw):
    hw_lead = tuple(1 for _ in lead) if broadcast_hw else lead
    return (normal(rng, lead + (4 * hidden,)) * 2, normal(rng, hw_lead + (4 * hidden,)),
            normal(rng, lead + (hidden,)))


PRIMITIVE_CASES = [
    Case("lstm_cell", R.lstm_cell, torch_ref(_step),
         lambda rng, **p: Sample(_inputs(rng, **p)), _params(), _EDGES, op="lstm_cell"),
    Case("lstm_cell_backward", R.lstm_cell_backward, torch_ref(_backward),
         lambda rng, **p: Sample(_backward_inputs(rng, **p)), _params(), _EDGES,
         op="lstm_cell_backward"),
]


# ---- lstm_sequence and lstm_sequence_backward -----------------------------------------------
def _sequence(xw, w_hh, h0, c0):
    lead = torch.broadcast_shapes(xw.shape[1:-1], h0.shape[:-1], c0.shape[:-1])
    n = w_hh.shape[1]
    xw = xw.reshape(xw.shape[:1] + (1,) * (len(lead) + 2 - xw.dim()) + xw.shape[1:])
    xw = xw.expand((xw.shape[0],) + tuple(lead) + (4 * n,))
    h, c = h0.expand(tuple(lead) + (n,)), c0.expand(tuple(lead) + (n,))
    steps = []
    for t in range(xw.shape[0]):
        i, f, g, o = (xw[t] + h @ w_hh.T).chunk(4, dim=-1)
        i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
        c = f * c + i * g
        h = o * torch.tanh(c)
        steps.append(torch.stack([h, c, i, f, g, o]))
    if not steps:
        return xw.new_zeros((6, 0) + tuple(lead) + (n,))
    return torch.stack(steps, dim=1)


def _sequence_backward(g, out, w_hh, c0):
    h, c, i, f, gt, o = out
    n, length = out.shape[-1], out.shape[1]
    if length == 0:
        return out.new_zeros((0,) + tuple(out.shape[2:-1]) + (5 * n,))
    tc = torch.tanh(c)
    c_prev = torch.cat([c0.expand(c.shape[1:])[None], c[:-1]])
    dh = dc = 0
    steps = []
    for t in range(length - 1, -1, -1):
        gh = g[0, t] + dh
        gcn = g[1, t] + dc + gh * o[t] * (1 - tc[t] ** 2)
        d = torch.cat([(gcn * gt[t] + g[2, t]) * i[t] * (1 - i[t]),
                       (gcn * c_prev[t] + g[3, t]) * f[t] * (1 - f[t]),
                       (gcn * i[t] + g[4, t]) * (1 - gt[t] ** 2),
                       (gh * tc[t] + g[5, t]) * o[t] * (1 - o[t])], dim=-1)
        dc = gcn * f[t]
        dh = d @ w_hh if w_hh is not None else None     # (None: one step, lstm_cell's)
        steps.append(torch.cat([d, dc], dim=-1))
    return torch.stack(steps[::-1])


@st.composite
def _sequence_params(draw):
    lead = draw(st.lists(st.integers(0, 3), max_size=2).map(tuple))
    return {"length": draw(st.integers(0, 3)), "lead": lead, "hidden": draw(st.integers(1, 2)),
            "state_lead": draw(st.sampled_from(["same", "none", "ones"]))}


_SEQUENCE_EDGES = [dict(length=3, lead=(2,), hidden=2, state_lead="same"),
                   dict(length=1, lead=(), hidden=1, state_lead="same"),
                   dict(length=0, lead=(2,), hidden=2, state_lead="same"),
                   dict(length=2, lead=(0,), hidden=1, state_lead="same"),
                   dict(length=2, lead=(2, 3), hidden=2, state_lead="ones"),
                   dict(length=3, lead=(2,), hidden=1, state_lead="none")]


def _states(rng, lead, hidden, state_lead):
    s = {"same": lead, "none": (), "ones": tuple(1 for _ in lead)}[state_lead]
    return normal(rng, s + (hidden,)), normal(rng, s + (hidden,))


def _sequence_inputs(rng, length, lead, hidden, state_lead):
    return (normal(rng, (length,) + lead + (4 * hidden,)), normal(rng, (4 * hidden, hidden)) * 0.7,
            *_states(rng, lead, hidden, state_lead))


def _sequence_backward_inputs(rng, length, lead, hidden, state_lead):
    planes = normal(rng, (6, length) + lead + (hidden,))
    planes[2:] = 1 / (1 + np.exp(-planes[2:]))       # gates in (0, 1), as the forward's
    planes[4] = planes[4] * 2 - 1                    # g in (-1, 1)
    return (normal(rng, (6, length) + lead + (hidden,)), planes,
            normal(rng, (4 * hidden, hidden)) * 0.7, _states(rng, lead, hidden, state_lead)[1])


PRIMITIVE_CASES += [
    Case("lstm_sequence", R.lstm_sequence, torch_ref(_sequence),
         lambda rng, **p: Sample(_sequence_inputs(rng, **p)), _sequence_params(),
         _SEQUENCE_EDGES, op="lstm_sequence"),
    Case("lstm_sequence_backward", R.lstm_sequence_backward, torch_ref(_sequence_backward),
         lambda rng, **p: Sample(_sequence_backward_inputs(rng, **p)), _sequence_params(),
         _SEQUENCE_EDGES, op="lstm_sequence_backward"),
]


# ---- lstm_layer and lstm_layer_backward ------------------------------------------------------
def _layer(x, w_ih, w_hh, h0, c0, *b):
    xw = x @ w_ih.T + (b[0] if b else 0)
    lead, n = tuple(x.shape[1:-1]), w_hh.shape[1]
    if x.shape[0] == 0:
        return c0.expand(lead + (n,))[None] + 0 * h0.sum() + 0 * xw.sum()
    planes = _sequence(xw, w_hh, h0, c0)
    return torch.cat([planes[0], planes[1, -1:]])


def _layer_backward(g, out, *inputs):
    # PyTorch's first-order gradients, made with create_graph so that the harness's
    # second-order checks compare with its double backward (``out``, the forward's result, is
    # where oneDNN's kernel finds the gates its forward kept: the values do not depend on it)
    with torch.enable_grad():
        ins = [t if t.requires_grad else t.detach().requires_grad_(True) for t in inputs]
        grads = torch.autograd.grad(_layer(*ins), ins, g, create_graph=True, allow_unused=True)
    return torch.cat([(d if d is not None else torch.zeros_like(t)).reshape(-1)
                      for d, t in zip(grads, ins)])


@st.composite
def _layer_params(draw):
    lead = draw(st.lists(st.integers(0, 3), max_size=2).map(tuple))
    return {"length": draw(st.integers(0, 3)), "lead": lead, "hidden": draw(st.integers(1, 2)),
            "features": draw(st.integers(1, 3)), "bias": draw(st.booleans()),
            "state_lead": draw(st.sampled_from(["same", "none", "ones"]))}


_LAYER_EDGES = [dict(length=3, lead=(2,), hidden=2, features=3, bias=True, state_lead="same"),
                dict(length=1, lead=(1,), hidden=1, features=1, bias=False, state_lead="same"),
                dict(length=0, lead=(2,), hidden=2, features=2, bias=True, state_lead="same"),
                dict(length=2, lead=(0,), hidden=1, features=2, bias=True, state_lead="same"),
                dict(length=2, lead=(2, 3), hidden=2, features=1, bias=True, state_lead="ones"),
                dict(length=3, lead=(2,), hidden=1, features=2, bias=False, state_lead="none"),
                dict(length=2, lead=(), hidden=2, features=2, bias=True, state_lead="same")]


def _layer_inputs(rng, length, lead, hidden, features, bias, state_lead):
    b = (normal(rng, (4 * hidden,)) * 0.5,) if bias else ()
    return (normal(rng, (length,) + lead + (features,)),
            normal(rng, (4 * hidden, features)) * 0.7, normal(rng, (4 * hidden, hidden)) * 0.7,
            *_states(rng, lead, hidden, state_lead), *b)


def _layer_backward_inputs(rng, length, lead, hidden, **p):
    inputs = _layer_inputs(rng, length, lead, hidden, **p)
    return (normal(rng, (length + 1,) + lead + (hidden,)),
            R_layer.lstm_layer.kernel(np, *inputs), *inputs)


PRIMITIVE_CASES += [
    Case("lstm_layer", R_layer.lstm_layer, torch_ref(_layer),
         lambda rng, **p: Sample(_layer_inputs(rng, **p)), _layer_params(), _LAYER_EDGES,
         op="lstm_layer"),
    # (not differentiated by the forward's result, whose values the gradients do not read)
    Case("lstm_layer_backward", R_layer.lstm_layer_backward, torch_ref(_layer_backward),
         lambda rng, **p: Sample(_layer_backward_inputs(rng, **p),
                                 grad=(0,) + tuple(range(2, 7 + p["bias"]))), _layer_params(),
         _LAYER_EDGES, op="lstm_layer_backward"),
]
