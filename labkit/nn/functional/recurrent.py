"""Recurrent math: one step of each cell (Elman tanh/relu, LSTM, GRU, PyTorch's equations and
gate order) and the loop over time that ``nn.RNN`` / ``nn.LSTM`` / ``nn.GRU`` run for every
layer and direction, over padded or packed sequences.

An LSTM layer over padded input (without ``proj_size``) is one op per layer and direction,
``lstm_layer``, as cuDNN and oneDNN run it: the input projection ``x @ W_ih.T + b`` one
product for the whole sequence, then the time loop inside the op's kernel (and its backward's);
on the CPU in float32 at one thread, oneDNN's fused LSTM kernels.
Elsewhere the input projection is one product per layer, direction and block of ``BLOCK``
steps; only ``h @ W_hh.T`` and the gates run per step.
A packed sequence's steps shrink as sequences end (its batch is sorted by length): a step runs
on the sequences still going, and each sequence's final state is its last real step's.
"""
from ...autodiff import is_grad_enabled
from ...errors import ShapeError, describe
from ...tensor.ops.composite import unsqueeze
from ...tensor.ops.elementwise import add, mul, relu, sigmoid, sub, tanh
from ...tensor.ops.index import _FULL, _getitem, getitem_slices
from ...tensor.ops.linalg import matmul_t
from ...tensor.ops.recurrent import lstm_cell as _lstm_cell_op
from ...tensor.ops.recurrent_layer import lstm_layer
from ...tensor.ops.shape import concat, moved, reshape
from .dropout import dropout as _dropout


def _linear(x, w, b=None):
    out = matmul_t(x, w, transpose_b=True)
    return out if b is None else add(out, b)


def _cols(x, start, stop):
    return getitem_slices(x, 1, start, stop)


# ---- one step of each cell, given the input's projection ----------------------------------------
def _rnn_step(act):
    def step(xw, state, w_hh, b_hh, w_hr):
        return (act(add(xw, matmul_t(state[0], w_hh, transpose_b=True))),)
    return step


def _lstm_step(xw, state, w_hh, b_hh, w_hr):
    h, c = state
    # gates, c' = f c + i g and h' = o tanh(c') in one op (labkit.tensor.ops.recurrent)
    hc = _lstm_cell_op(xw, matmul_t(h, w_hh, transpose_b=True), c)
    h, c = _getitem(hc, spec=(("i", 0),)), _getitem(hc, spec=(("i", 1),))
    if w_hr is not None:
        h = matmul_t(h, w_hr, transpose_b=True)
    return h, c


def _gru_step(xw, state, w_hh, b_hh, w_hr):
    h = state[0]
    hw = _linear(h, w_hh, b_hh)                 # b_hh stays inside r * (...), as PyTorch's
    n = hw.shape[1] // 3
    rz = sigmoid(add(_cols(xw, 0, 2 * n), _cols(hw, 0, 2 * n)))
    new = tanh(add(_cols(xw, 2 * n, 3 * n), mul(_cols(rz, 0, n), _cols(hw, 2 * n, 3 * n))))
    return (add(new, mul(_cols(rz, n, 2 * n), sub(h, new))),)     # (1 - z) * n + z * h


STEPS = {"RNN_TANH": _rnn_step(tanh), "RNN_RELU": _rnn_step(relu), "LSTM": _lstm_step,
         "GRU": _gru_step}


def _folds_bias(mode):
    """RNN and LSTM add b_hh next to b_ih, so both go into the sequence's projection; GRU's
    b_hh is inside the reset gate's product."""
    return mode != "GRU"


# ---- cells (one step on a batch; torch.rnn_tanh_cell, torch.lstm_cell...) ---------------------
def _cell_input(mode, input, w_ih, b_ih, b_hh):
    b = b_ih
    if _folds_bias(mode) and b_hh is not None:
        b = b_hh if b is None else add(b, b_hh)
    return _linear(input, w_ih, b)


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``tanh(input @ w_ih.T + b_ih + hx @ w_hh.T + b_hh)`` for a batch (N, input_size)."""
    return STEPS["RNN_TANH"](_cell_input("RNN_TANH", input, w_ih, b_ih, b_hh), (hx,), w_hh,
                             None, None)[0]


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``relu(input @ w_ih.T + b_ih + hx @ w_hh.T + b_hh)`` for a batch (N, input_size)."""
    return STEPS["RNN_RELU"](_cell_input("RNN_RELU", input, w_ih, b_ih, b_hh), (hx,), w_hh,
                             None, None)[0]


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One LSTM step: ``hx = (h, c)`` -> ``(h', c')`` (gates i, f, g, o as PyTorch's)."""
    return STEPS["LSTM"](_cell_input("LSTM", input, w_ih, b_ih, b_hh), tuple(hx), w_hh, None,
                         None)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One GRU step (gates r, z, n as PyTorch's): returns h'."""
    return STEPS["GRU"](_cell_input("GRU", input, w_ih, b_ih, b_hh), (hx,), w_hh, b_hh,
                        None)[0]


# ---- sequences --------------------------------------------------------------------------------
# How many steps share one input projection. One product for a block of steps is nearly as fast
# as one for the whole sequence; and a captured backward adds each step's cotangent into its
# block's (a zero-filled tensor per step, as a slice's vjp is), not into the whole sequence's,
# which would make it quadratic in the length.
BLOCK = 8


class Steps:
    """How one layer's input is cut into time steps and its outputs joined back.

    Padded: ``x`` is (L, N, F) (``time_dim=0``) or (N, L, F) (``time_dim=1``) and every step
    has the whole batch. Packed (``time_dim=None``): ``x`` is a PackedSequence's data (T, F),
    step ``t`` is the next ``sizes[t]`` rows.
    """

    def __init__(self, sizes, time_dim):
        self.sizes = sizes
        self.time_dim = time_dim
        self.starts = []
        start = 0
        for s in sizes:
            self.starts.append(start)
            start += s

    def project(self, x, w, b):
        """``x_t @ w.T + b`` for every step ``t``, as a list, one product per block of steps."""
        length, out = len(self.sizes), []
        for t0 in range(0, length, BLOCK):
            t1 = min(length, t0 + BLOCK)
            if self.time_dim is None:
                first, stop = self.starts[t0], self.starts[t1 - 1] + self.sizes[t1 - 1]
                xw = _linear(x if t0 == 0 and stop == x.shape[0] else
                             getitem_slices(x, 0, first, stop), w, b)
                out += [getitem_slices(xw, 0, self.starts[t] - first,
                                       self.starts[t] - first + self.sizes[t])
                        for t in range(t0, t1)]
                continue
            piece = x if t1 - t0 == length else getitem_slices(x, self.time_dim, t0, t1)
            xw = _linear(reshape(piece, shape=(-1, x.shape[-1])), w, b)
            xw = reshape(xw, shape=tuple(piece.shape[:2]) + (w.shape[0],))
            out += [_getitem(xw, spec=((_FULL,) * self.time_dim + (("i", t - t0),)))
                    for t in range(t0, t1)]
        return out

    def join(self, outs):
        """Per-step outputs (sizes[t], H) -> the layer's output in the input's layout."""
        if self.time_dim is None:
            return concat(*outs, dim=0)
        joined = concat(*outs, dim=self.time_dim)     # (L*N, H) or (N, L*H): a reshape away
        n = outs[0].shape[0]
        shape = (len(outs), n) if self.time_dim == 0 else (n, len(outs))
        return reshape(joined, shape=shape + (outs[0].shape[1],))


def _lstm_layer(x, time_dim, h0, weights, reverse):
    """One LSTM layer and direction over padded input ``x`` as one ``lstm_layer`` op: (its
    output, time-major (L, N, H), and its final (h, c))."""
    w_ih, w_hh, b_ih, b_hh, _ = weights
    if time_dim == 1:                     # (N, L, F): the layer runs time-major
        x = moved(x, 1)
    length = x.shape[0]
    if reverse:
        x = _getitem(x, spec=(("s", None, None, -1),))
    b = () if b_ih is None else (add(b_ih, b_hh),)
    inputs = (x, w_ih, w_hh) + tuple(h0) + b
    out = lstm_layer(*inputs, keep=is_grad_enabled() and any(t.requires_grad for t in inputs))
    h = getitem_slices(out, 0, 0, length)
    final = tuple(_getitem(out, spec=(("i", t),)) for t in (length - 1, length))
    if reverse:
        h = _getitem(h, spec=(("s", None, None, -1),))
    return h, final


def _rows(state, start, stop):
    return tuple(getitem_slices(s, 0, start, stop) for s in state)


def _direction(step, sizes, xs, h0, weights, reverse):
    """Run one direction of one layer on the per-step input projections ``xs``: (per-step
    outputs in time order, final state)."""
    order = range(len(sizes) - 1, -1, -1) if reverse else range(len(sizes))
    _, w_hh, _, b_hh, w_hr = weights
    rows = sizes[order[0]]
    state = h0 if rows == h0[0].shape[0] else _rows(h0, 0, rows)
    ended = []            # forward, packed: final states of sequences that stopped early
    outs = [None] * len(sizes)
    for t in order:
        n = sizes[t]
        if n < rows:          # sequences rows n..rows-1 ended at the previous step
            ended.append(_rows(state, n, rows))
            state = _rows(state, 0, n)
        elif n > rows:        # reverse, packed: sequences n..rows-1 start here, from h0
            state = tuple(concat(s, r, dim=0) for s, r in zip(state, _rows(h0, rows, n)))
        rows = n
        state = step(xs[t], state, w_hh, b_hh, w_hr)
        outs[t] = state[0]
    if ended:
        pieces = [state] + ended[::-1]
        state = tuple(concat(*parts, dim=0) for parts in zip(*pieces))
    return outs, state


def recurrent(mode, x, state, weights, num_layers, bidirectional, dropout, training, steps):
    """The stacked, optionally bidirectional recurrent network PyTorch's layers compute.

    ``x``: the first layer's input in the layout ``steps`` (a :class:`Steps`) describes;
    ``state``: a tuple of initial states (h, or h and c), each (layers * directions, N, size);
    ``weights[layer * directions + direction]``: (w_ih, w_hh, b_ih, b_hh, w_hr or None).
    Returns (the last layer's outputs in ``x``'s layout, the tuple of final states).
    """
    step = STEPS[mode]
    directions = 2 if bidirectional else 1
    finals = [[] for _ in state]
    # padded LSTM layers without projections: one op each, time-major between layers
    whole = mode == "LSTM" and steps.time_dim is not None and weights[0][4] is None
    time_dim = steps.time_dim
    for layer in range(num_layers):
        outputs = []
        for d in range(directions):
            k = layer * directions + d
            w_ih, w_hh, b_ih, b_hh, w_hr = weights[k]
            if x.shape[-1] != w_ih.shape[1]:
                raise ShapeError(f"{mode}: layer {layer} expects inputs of {w_ih.shape[1]} "
                                 f"features, got {describe(x)}")
            h0 = tuple(_getitem(s, spec=(("i", k),)) for s in state)
            if whole:
                out, last = _lstm_layer(x, time_dim, h0, weights[k], reverse=d == 1)
            else:
                b = add(b_ih, b_hh) if _folds_bias(mode) and b_ih is not None else b_ih
                xs = steps.project(x, w_ih, b)
                outs, last = _direction(step, steps.sizes, xs, h0, weights[k], reverse=d == 1)
                out = steps.join(outs)
            outputs.append(out)
            for f, s in zip(finals, last):
                f.append(unsqueeze(s, 0))
        x = outputs[0] if directions == 1 else concat(*outputs, dim=-1)
        if whole:
            time_dim = 0
        if dropout and training and layer < num_layers - 1:
            x = _dropout(x, dropout, True)
    if whole and steps.time_dim == 1:
        x = moved(x, 0, to=1)           # (N, L, H) as batch_first asks (a view)
    return x, tuple(f[0] if len(f) == 1 else concat(*f, dim=0) for f in finals)
