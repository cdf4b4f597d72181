"""Cases of the fused LSTM step (``lstm_cell``) and its backward op, with PyTorch as the
oracle: the step written in PyTorch's ops (gates i, f, g, o of ``xw + hw``), and its gradient by
``torch.autograd`` with ``create_graph=True`` for the backward op, so that the harness's
second-order checks compare with PyTorch's double backward too."""
import torch
from hypothesis import strategies as st

from labkit.tensor.ops import recurrent as R

from ..case_kit import Case, Sample, normal, torch_ref


def _step(xw, hw, c):
    i, f, g, o = (xw + hw).chunk(4, dim=-1)
    c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.stack([torch.sigmoid(o) * torch.tanh(c_new), c_new])


def _backward(g, xw, hw, c):
    leaves = [t if t.requires_grad else t.detach().requires_grad_() for t in (xw, c)]
    dxw, dc = torch.autograd.grad(_step(leaves[0], hw, leaves[1]), leaves, g, create_graph=True)
    return torch.cat([dxw, dc], dim=-1)


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
         lambda rng, lead, hidden, broadcast_hw: Sample(
             (normal(rng, (2,) + lead + (hidden,)),) + _inputs(rng, lead, hidden, broadcast_hw)),
         _params(), _EDGES, op="lstm_cell_backward"),
]
