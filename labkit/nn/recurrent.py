"""Recurrent layers as PyTorch's ``torch.nn.modules.rnn``: ``RNN`` (Elman, tanh or relu),
``LSTM`` (with ``proj_size``), ``GRU``, each with ``num_layers``, ``bidirectional``,
``batch_first``, ``dropout`` between layers, padded or packed input (``nn.utils.rnn``); and the
single-step cells ``RNNCell``, ``LSTMCell``, ``GRUCell``. Parameter names, shapes, gate order,
initialisation and return values are PyTorch's; the math is in ``nn.functional.recurrent``.

The time loop runs in Python, one cell per step, so gradients flow through it like through any
other Python code (reverse-mode autodiff over define-by-run), and a captured function unrolls it.
"""
import math
import numbers
import warnings

from ..errors import ShapeError, describe
from ..tensor.creation import zeros
from ..tensor.ops.composite import squeeze, unsqueeze
from ..tensor.ops.index import take
from . import init
from .functional import recurrent as R
from .module import Module
from .parameter import Parameter
from .utils.rnn import PackedSequence

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _param(shape, dtype, device):
    return Parameter(zeros(shape, dtype=dtype, device=device))


class RNNBase(Module):
    """What RNN, LSTM and GRU share: the parameters of every layer and direction, argument
    checks, and forward over padded or packed sequences. ``mode`` is 'RNN_TANH', 'RNN_RELU',
    'LSTM' or 'GRU'."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        if mode not in _GATES:
            raise ValueError(f"{name}: unrecognized RNN mode {mode!r}; use one of "
                             f"{', '.join(_GATES)}")
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or \
                not 0 <= dropout <= 1:
            raise ValueError(f"{name}: dropout should be a number in range [0, 1] "
                             f"representing the probability of an element being zeroed, got "
                             f"{dropout!r}")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=3)
        for what, v in (("input_size", input_size), ("hidden_size", hidden_size),
                        ("num_layers", num_layers), ("proj_size", proj_size)):
            if not isinstance(v, numbers.Integral) or isinstance(v, bool):
                raise TypeError(f"{name}: {what} should be of type int, got "
                                f"{type(v).__name__}")
        if hidden_size <= 0:
            raise ValueError(f"{name}: hidden_size must be greater than zero, got {hidden_size}")
        if num_layers <= 0:
            raise ValueError(f"{name}: num_layers must be greater than zero, got {num_layers}")
        if proj_size < 0:
            raise ValueError(f"{name}: proj_size should be a positive integer or zero to "
                             f"disable projections, got {proj_size}")
        if proj_size >= hidden_size:
            raise ValueError(f"{name}: proj_size has to be smaller than hidden_size "
                             f"(got proj_size={proj_size}, hidden_size={hidden_size})")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode = mode
        self.input_size = int(input_size)
        self.hidden_size = int(hidden_size)
        self.num_layers = int(num_layers)
        self.bias = bool(bias)
        self.batch_first = bool(batch_first)
        self.dropout = float(dropout)
        self.bidirectional = bool(bidirectional)
        self.proj_size = int(proj_size)
        directions = 2 if self.bidirectional else 1
        rows = _GATES[mode] * self.hidden_size
        out = self.proj_size or self.hidden_size
        self._flat_weights_names = []
        for layer in range(self.num_layers):
            for d in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if d else "")
                cols = self.input_size if layer == 0 else out * directions
                shapes = [("weight_ih", (rows, cols)), ("weight_hh", (rows, out))]
                if self.bias:
                    shapes += [("bias_ih", (rows,)), ("bias_hh", (rows,))]
                if self.proj_size:
                    shapes.append(("weight_hr", (self.proj_size, self.hidden_size)))
                for what, shape in shapes:
                    setattr(self, what + suffix, _param(shape, dtype, device))
                    self._flat_weights_names.append(what + suffix)
        self.reset_parameters()

    def reset_parameters(self):
        """Draw every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def flatten_parameters(self):
        """Nothing to do: PyTorch compacts the weights for cuDNN here; labkit's are used as
        they are. Kept so that models calling it run unchanged."""

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        """The parameters of each layer and direction, as lists in PyTorch's order."""
        per = len(self._flat_weights_names) // (self.num_layers * (2 if self.bidirectional
                                                                     else 1))
        flat = self._flat_weights
        return [flat[i:i + per] for i in range(0, len(flat), per)]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s

    # ---- forward --------------------------------------------------------------------------------
    def _weights(self):
        directions = 2 if self.bidirectional else 1
        out = []
        for layer in range(self.num_layers):
            for d in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if d else "")
                get = (lambda what: getattr(self, what + suffix, None))   # noqa: E731
                out.append((get("weight_ih"), get("weight_hh"), get("bias_ih"),
                            get("bias_hh"), get("weight_hr")))
        return out

    def _state(self, hx, what, size, batch, batched, like):
        """An initial state (layers * directions, N, size) from ``hx``, or zeros."""
        name = type(self).__name__
        layers = self.num_layers * (2 if self.bidirectional else 1)
        if hx is None:
            return zeros((layers, batch, size), dtype=like.dtype, device=like.device)
        if not batched:
            if hx.ndim != 2:
                raise ShapeError(f"{name}: for unbatched 2-D input, {what} should also be 2-D "
                                 f"(num_layers * num_directions, {size}), got {describe(hx)}")
            hx = unsqueeze(hx, 1)
        want = (layers, batch, size)
        if tuple(hx.shape) != want:
            size_name = "proj_size" if size == self.proj_size else "hidden_size"
            raise ShapeError(f"{name}: initial {what} must have shape {want} (num_layers * "
                             f"num_directions, batch, {size_name}), got {describe(hx)}")
        return hx

    def _layout(self):
        return "(N, L, input_size); batch_first=True" if self.batch_first else \
            "(L, N, input_size)"

    def _run(self, input, hx):
        """Forward for every mode: (output, tuple of final states); ``hx`` a tuple or None."""
        name = type(self).__name__
        packed = isinstance(input, PackedSequence)
        if packed:
            data, batched = input.data, True
            sizes = input._sizes()
            if not sizes:
                raise ShapeError(f"{name}: the packed sequence is empty")
            steps, batch = R.Steps(sizes, None), sizes[0]
            if data.ndim != 2:
                raise ShapeError(f"{name}: a packed sequence's data must be 2-D (steps, "
                                 f"input_size), got {describe(data)}")
        else:
            data = input
            if data.ndim not in (2, 3):
                raise ShapeError(f"{name}: expected input to be 2-D (L, input_size) or 3-D "
                                 f"{self._layout()}, got {describe(data)}")
            batched = data.ndim == 3
            if not batched:
                data = unsqueeze(data, 1)
            time_dim = 1 if self.batch_first and batched else 0
            length, batch = data.shape[time_dim], data.shape[1 - time_dim]
            if length == 0:
                raise ShapeError(f"{name}: the input sequence is empty ({describe(input)})")
            steps = R.Steps([batch] * length, time_dim)
        if data.shape[-1] != self.input_size:
            raise ShapeError(
                f"{name}(input_size={self.input_size}, ...) got "
                f"{describe(data if packed else input)}: input.size(-1) must be equal to "
                f"input_size={self.input_size}" + ("" if packed else
                                                   f" (layout {self._layout()})"))
        sizes_of = [self.proj_size or self.hidden_size, self.hidden_size]
        names = ["hidden state h_0", "cell state c_0"]
        hx = hx if hx is not None else (None,) * (2 if self.mode == "LSTM" else 1)
        state = tuple(self._state(h, names[i], sizes_of[i], batch, batched, data)
                      for i, h in enumerate(hx))
        if packed and input.sorted_indices is not None:
            state = tuple(take(s, input.sorted_indices, dim=1) for s in state)
        out, finals = R.recurrent(self.mode, data, state, self._weights(), self.num_layers,
                                  self.bidirectional, self.dropout, self.training, steps)
        if packed:
            if input.unsorted_indices is not None:
                finals = tuple(take(f, input.unsorted_indices, dim=1) for f in finals)
            return PackedSequence(out, input.batch_sizes, input.sorted_indices,
                                  input.unsorted_indices), finals
        if not batched:
            out = squeeze(out, 1)
            finals = tuple(squeeze(f, 1) for f in finals)
        return out, finals


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t @ W_ih.T + b_ih + h_{t-1} @ W_hh.T + b_hh)`` per layer
    (``nonlinearity='relu'``: relu instead of tanh).

    Input (L, N, input_size), or (N, L, input_size) with ``batch_first=True``, or (L,
    input_size) for one sequence, or a ``PackedSequence``; ``hx`` (num_layers * num_directions,
    N, hidden_size) or None for zeros. Returns ``(output, h_n)``: output holds the last layer's
    h_t for every t (both directions side by side when ``bidirectional``), h_n each layer's and
    direction's final state.

    >>> import labkit as lk
    >>> rnn = lk.nn.RNN(3, 5, batch_first=True)
    >>> out, h = rnn(lk.ones(2, 7, 3))
    >>> out.shape, h.shape
    ((2, 7, 5), (1, 2, 5))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity {nonlinearity!r}. Select from 'tanh' or "
                             f"'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)

    def forward(self, input, hx=None):
        out, (h_n,) = self._run(input, None if hx is None else (hx,))
        return out, h_n


class LSTM(RNNBase):
    """Long short-term memory, PyTorch's equations and gate order (input, forget, cell, output):

    ``i, f, g, o = split(x_t @ W_ih.T + b_ih + h @ W_hh.T + b_hh)``;
    ``c_t = sigmoid(f) * c + sigmoid(i) * tanh(g)``; ``h_t = sigmoid(o) * tanh(c_t)``
    (then ``h_t = h_t @ W_hr.T`` when ``proj_size > 0``).

    Input as for :class:`RNN`; ``hx`` is an optional ``(h_0, c_0)`` pair of
    (num_layers * num_directions, N, proj_size or hidden_size) and (..., hidden_size). Returns
    ``(output, (h_n, c_n))``.

    >>> import labkit as lk
    >>> lstm = lk.nn.LSTM(3, 4, num_layers=2)
    >>> out, (h, c) = lstm(lk.ones(6, 2, 3))
    >>> out.shape, h.shape, c.shape
    ((6, 2, 4), (2, 2, 4), (2, 2, 4))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)

    def forward(self, input, hx=None):
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError("LSTM: hx must be a pair (h_0, c_0) of tensors shaped "
                            "(num_layers * num_directions, N, hidden_size), or None for zeros")
        out, (h_n, c_n) = self._run(input, None if hx is None else tuple(hx))
        return out, (h_n, c_n)


class GRU(RNNBase):
    """Gated recurrent unit, PyTorch's equations and gate order (reset, update, new):

    ``r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)``, ``z = sigmoid(W_iz x + b_iz + W_hz h +
    b_hz)``, ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) * n + z * h``.

    Input, ``hx`` and outputs as for :class:`RNN`.

    >>> import labkit as lk
    >>> gru = lk.nn.GRU(3, 4, num_layers=2, bidirectional=True, batch_first=True)
    >>> out, h = gru(lk.ones(2, 5, 3))
    >>> out.shape, h.shape
    ((2, 5, 8), (4, 2, 4))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        out, (h_n,) = self._run(input, None if hx is None else (hx,))
        return out, h_n


# ---- cells ------------------------------------------------------------------------------------
class RNNCellBase(Module):
    """What the cells share: ``weight_ih`` (gates * hidden, input), ``weight_hh``, ``bias_ih``,
    ``bias_hh``, PyTorch's initialisation, and input checks."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = int(input_size)
        self.hidden_size = int(hidden_size)
        self.bias = bool(bias)
        rows = num_chunks * self.hidden_size
        self.weight_ih = _param((rows, self.input_size), dtype, device)
        self.weight_hh = _param((rows, self.hidden_size), dtype, device)
        if self.bias:
            self.bias_ih = _param((rows,), dtype, device)
            self.bias_hh = _param((rows,), dtype, device)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    reset_parameters = RNNBase.reset_parameters

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _inputs(self, input, states):
        """(input (N, in), states each (N, hidden) or zeros, batched) with PyTorch's checks."""
        name = type(self).__name__
        if input.ndim not in (1, 2):
            raise ShapeError(f"{name}: expected input to be 1-D (input_size,) or 2-D (N, "
                             f"input_size), got {describe(input)}")
        if input.shape[-1] != self.input_size:
            raise ShapeError(f"{name}(input_size={self.input_size}, ...) got "
                             f"{describe(input)}: input.size(-1) must be equal to input_size="
                             f"{self.input_size}")
        batched = input.ndim == 2
        if not batched:
            input = unsqueeze(input, 0)
        out = []
        for s in states:
            if s is None:
                s = zeros((input.shape[0], self.hidden_size), dtype=input.dtype,
                          device=input.device)
            else:
                if s.ndim != (2 if batched else 1):
                    want = "2-D (N, hidden_size)" if batched else "1-D (hidden_size,)"
                    raise ShapeError(f"{name}: the state {describe(s)} must be {want} like the "
                                     f"input")
                s = s if batched else unsqueeze(s, 0)
                if tuple(s.shape) != (input.shape[0], self.hidden_size):
                    raise ShapeError(f"{name}: the state must have shape "
                                     f"{(input.shape[0], self.hidden_size)} (batch, "
                                     f"hidden_size), got {describe(s)}")
            out.append(s)
        return input, out, batched

    def _cell(self, fn, input, states):
        x, states, batched = self._inputs(input, states)
        out = fn(x, states[0] if len(states) == 1 else tuple(states), self.weight_ih,
                 self.weight_hh, self.bias_ih, self.bias_hh)
        if batched:
            return out
        return tuple(squeeze(o, 0) for o in out) if isinstance(out, tuple) else squeeze(out, 0)


class RNNCell(RNNCellBase):
    """One step of an Elman RNN: ``h' = tanh(x @ W_ih.T + b_ih + h @ W_hh.T + b_hh)``
    (``nonlinearity='relu'``: relu). Input (N, input_size) or (input_size,); ``hx`` the same
    layout with hidden_size, or None for zeros.

    >>> import labkit as lk
    >>> lk.nn.RNNCell(3, 4)(lk.ones(2, 3)).shape
    (2, 4)
    """

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: unknown nonlinearity {nonlinearity!r}; select from "
                             f"'tanh' or 'relu'")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)

    def forward(self, input, hx=None):
        fn = R.rnn_tanh_cell if self.nonlinearity == "tanh" else R.rnn_relu_cell
        return self._cell(fn, input, [hx])


class LSTMCell(RNNCellBase):
    """One LSTM step: ``(h', c') = cell(x, (h, c))`` (gates i, f, g, o as :class:`LSTM`).

    >>> import labkit as lk
    >>> h, c = lk.nn.LSTMCell(3, 4)(lk.ones(2, 3))
    >>> h.shape, c.shape
    ((2, 4), (2, 4))
    """

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError("LSTMCell: hx must be a pair (h, c) of tensors shaped (N, "
                            "hidden_size), or None for zeros")
        return self._cell(R.lstm_cell, input, [None, None] if hx is None else list(hx))


class GRUCell(RNNCellBase):
    """One GRU step: ``h' = cell(x, h)`` (gates r, z, n as :class:`GRU`).

    >>> import labkit as lk
    >>> lk.nn.GRUCell(3, 4)(lk.ones(3)).shape
    (4,)
    """

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        return self._cell(R.gru_cell, input, [hx])
