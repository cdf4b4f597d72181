"""Recurrent layers: ``RNN`` (Elman, tanh or relu) and ``LSTM``, with PyTorch's parameter names,
shapes, gate order, initialisation and return values.

The time loop runs in Python, one cell per step, so gradients flow through it like through any
other Python code (reverse-mode autodiff over define-by-run).
"""
import math

from ..errors import ShapeError, describe
from ..tensor.creation import zeros
from ..tensor.ops.composite import split, squeeze, stack, unsqueeze
from ..tensor.ops.elementwise import add, mul, relu, sigmoid, tanh
from ..tensor.ops.linalg import matmul
from ..tensor.ops.shape import permute
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


class _RecurrentBase(Module):
    """Parameters, argument checks and the time loop shared by RNN and LSTM."""

    _gates = 1            # how many blocks of hidden_size rows each weight has
    _has_cell = False     # LSTM carries a cell state c beside h

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, device=None, dtype=None):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"{type(self).__name__}: num_layers must be at least 1, got "
                             f"{num_layers}")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{type(self).__name__}: dropout must be between 0 and 1, got "
                             f"{dropout}")
        self.input_size = int(input_size)
        self.hidden_size = int(hidden_size)
        self.num_layers = int(num_layers)
        self.bias = bool(bias)
        self.batch_first = bool(batch_first)
        self.dropout = float(dropout)
        rows = self._gates * self.hidden_size
        for k in range(self.num_layers):
            cols = self.input_size if k == 0 else self.hidden_size
            setattr(self, f"weight_ih_l{k}", Parameter(zeros((rows, cols), dtype=dtype,
                                                             device=device)))
            setattr(self, f"weight_hh_l{k}", Parameter(zeros((rows, self.hidden_size),
                                                             dtype=dtype, device=device)))
            if self.bias:
                setattr(self, f"bias_ih_l{k}", Parameter(zeros((rows,), dtype=dtype,
                                                               device=device)))
                setattr(self, f"bias_hh_l{k}", Parameter(zeros((rows,), dtype=dtype,
                                                               device=device)))
        self.reset_parameters()

    def reset_parameters(self):
        """Draw every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size else 0.0
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        return s

    # ---- pieces of forward ------------------------------------------------------------------
    def _steps(self, input):
        """Check ``input`` and return (list of (N, input_size) tensors per time step, batched)."""
        name = type(self).__name__
        layout = "(N, L, input_size)" if self.batch_first else "(L, N, input_size)"
        if input.ndim not in (2, 3):
            raise ShapeError(f"{name} expects a 3-d input {layout} (or 2-d (L, input_size) for "
                             f"one sequence), got {describe(input)}")
        if input.shape[-1] != self.input_size:
            raise ShapeError(f"{name}(input_size={self.input_size}, ...) got {describe(input)}: "
                             f"its last dimension must be input_size={self.input_size} "
                             f"(layout {layout}{'; batch_first=True' if self.batch_first else ''})")
        batched = input.ndim == 3
        if not batched:
            return [unsqueeze(input[t], 0) for t in range(input.shape[0])], False
        if self.batch_first:
            return [input[:, t] for t in range(input.shape[1])], True
        return [input[t] for t in range(input.shape[0])], True

    def _initial(self, hx, what, batch, batched, like):
        """Per-layer initial states from ``hx`` (num_layers, N, H), or zeros."""
        if hx is None:
            z = zeros((batch, self.hidden_size), dtype=like.dtype, device=like.device)
            return [z] * self.num_layers
        want = (self.num_layers, batch, self.hidden_size) if batched else \
            (self.num_layers, self.hidden_size)
        if tuple(hx.shape) != want:
            raise ShapeError(f"{type(self).__name__}: initial {what} must have shape {want} "
                             f"(num_layers, batch, hidden_size), got {describe(hx)}")
        return [hx[k] if batched else unsqueeze(hx[k], 0) for k in range(self.num_layers)]

    def _layer(self, k):
        """(W_ih^T, W_hh^T, b_ih + b_hh or None) of layer ``k``, formed once per forward."""
        w_ih = permute(getattr(self, f"weight_ih_l{k}"), dims=(1, 0))
        w_hh = permute(getattr(self, f"weight_hh_l{k}"), dims=(1, 0))
        b = add(getattr(self, f"bias_ih_l{k}"), getattr(self, f"bias_hh_l{k}")) \
            if self.bias else None
        return w_ih, w_hh, b

    def _run(self, input, hx, cx):
        """The time loop over every layer; returns (output, h_n, c_n or None)."""
        steps, batched = self._steps(input)
        batch = steps[0].shape[0] if steps else (input.shape[1 if not self.batch_first else 0]
                                                 if batched else 1)
        hs = self._initial(hx, "hidden state h_0", batch, batched, input)
        cs = self._initial(cx, "cell state c_0", batch, batched, input) if self._has_cell \
            else [None] * self.num_layers
        last_h, last_c = [], []
        for k in range(self.num_layers):
            weights = self._layer(k)
            h, c = hs[k], cs[k]
            outputs = []
            for x in steps:
                h, c = self._cell(x, h, c, *weights)
                outputs.append(h)
            last_h.append(h)
            last_c.append(c)
            if self.dropout and self.training and k < self.num_layers - 1:
                outputs = [F.dropout(o, self.dropout, True) for o in outputs]
            steps = outputs
        if not steps:
            raise ShapeError(f"{type(self).__name__}: the input sequence is empty "
                             f"({describe(input)})")
        output = stack(steps, dim=1 if (self.batch_first and batched) else 0)
        h_n = stack(last_h, dim=0)
        c_n = stack(last_c, dim=0) if self._has_cell else None
        if not batched:
            output = squeeze(output, 1)
            h_n = squeeze(h_n, 1)
            c_n = squeeze(c_n, 1) if c_n is not None else None
        return output, h_n, c_n


class RNN(_RecurrentBase):
    """Elman RNN: ``h_t = tanh(x_t @ W_ih.T + b_ih + h_{t-1} @ W_hh.T + b_hh)`` per layer.

    Input (L, N, input_size), or (N, L, input_size) with ``batch_first=True``; returns
    ``(output, h_n)``: output holds the last layer's h_t for every t, h_n is
    (num_layers, N, hidden_size). ``nonlinearity='relu'`` uses relu instead of tanh.

    >>> import labkit as lk
    >>> rnn = lk.nn.RNN(3, 5, batch_first=True)
    >>> out, h = rnn(lk.ones(2, 7, 3))
    >>> out.shape, h.shape
    ((2, 7, 5), (1, 2, 5))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         device, dtype)

    def _cell(self, x, h, c, w_ih, w_hh, b):
        pre = add(matmul(x, w_ih), matmul(h, w_hh))
        if b is not None:
            pre = add(pre, b)
        return (tanh(pre) if self.nonlinearity == "tanh" else relu(pre)), None

    def forward(self, input, hx=None):
        output, h_n, _ = self._run(input, hx, None)
        return output, h_n

    def extra_repr(self):
        s = super().extra_repr()
        return s + (", nonlinearity='relu'" if self.nonlinearity == "relu" else "")


class LSTM(_RecurrentBase):
    """Long short-term memory, PyTorch's equations and gate order (input, forget, cell, output):

    ``i, f, g, o = split(x_t @ W_ih.T + b_ih + h @ W_hh.T + b_hh)``;
    ``c_t = sigmoid(f) * c + sigmoid(i) * tanh(g)``; ``h_t = sigmoid(o) * tanh(c_t)``.

    Input (L, N, input_size), or (N, L, input_size) with ``batch_first=True``; ``hx`` is an
    optional ``(h_0, c_0)`` pair of (num_layers, N, hidden_size). Returns
    ``(output, (h_n, c_n))``.

    >>> import labkit as lk
    >>> lstm = lk.nn.LSTM(3, 4, num_layers=2)
    >>> out, (h, c) = lstm(lk.ones(6, 2, 3))
    >>> out.shape, h.shape, c.shape
    ((6, 2, 4), (2, 2, 4), (2, 2, 4))
    """

    _gates = 4
    _has_cell = True

    def _cell(self, x, h, c, w_ih, w_hh, b):
        gates = add(matmul(x, w_ih), matmul(h, w_hh))
        if b is not None:
            gates = add(gates, b)
        i, f, g, o = split(gates, self.hidden_size, dim=1)
        c = add(mul(sigmoid(f), c), mul(sigmoid(i), tanh(g)))
        return mul(sigmoid(o), tanh(c)), c

    def forward(self, input, hx=None):
        if hx is None:
            h0 = c0 = None
        else:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError("LSTM: hx must be a pair (h_0, c_0) of tensors shaped "
                                "(num_layers, N, hidden_size), or None for zeros")
            h0, c0 = hx
        output, h_n, c_n = self._run(input, h0, c0)
        return output, (h_n, c_n)
