"""Products, normalisation, activations, losses and recurrent steps: matmul (with its
transposes), layer_norm (alone and with its weight and bias), batch_norm, leaky_relu,
smooth_l1, lstm_cell, lstm_sequence and lstm_layer."""
import numpy as np

from ..dims import OnnxExportError
from ..registry import converter


def _swap_last(b, x, ndim):
    perm = list(range(ndim))
    perm[-2:] = perm[-1], perm[-2]
    return b.emit("Transpose", [x], perm=perm)


@converter("matmul")
def _matmul(b, node, ins):
    a, c = node.inputs
    x, y = b.operands(node, node.dtype)
    if a.ndim == 2 and c.ndim == 2:      # x @ W.T of a linear layer: Gemm reads W as stored
        return b.emit("Gemm", [x, y], transA=int(bool(node.attrs.get("transpose_a"))),
                      transB=int(bool(node.attrs.get("transpose_b"))), name=node.name)
    if node.attrs.get("transpose_a") and a.ndim >= 2:
        x = _swap_last(b, x, a.ndim)
    if node.attrs.get("transpose_b") and c.ndim >= 2:
        y = _swap_last(b, y, c.ndim)
    return b.emit("MatMul", [x, y], name=node.name)


@converter("layer_norm")
def _layer_norm(b, node, ins):
    """Normalised over the last ``ndim`` dimensions (the affine part is separate ops)."""
    ndim, eps = int(node.attrs["ndim"]), float(node.attrs["eps"])
    (x,) = b.operands(node, node.dtype, node.inputs[:1])
    scale = b.const(np.ones(tuple(int(d) for d in b.dims(node)[-ndim:]), node.dtype.np),
                    name="ones")
    return b.emit("LayerNormalization", [x, scale], axis=-ndim, epsilon=eps, name=node.name)


@converter("layer_norm_affine")
def _layer_norm_affine(b, node, ins):
    """Normalised over the last ``ndim`` dimensions, then scaled (and shifted)."""
    ndim, eps = int(node.attrs["ndim"]), float(node.attrs["eps"])
    operands = b.operands(node, node.dtype)
    return b.emit("LayerNormalization", list(operands), axis=-ndim, epsilon=eps,
                  name=node.name)


@converter("batch_norm")
def _batch_norm(b, node, ins):
    """BatchNormalization in inference mode: the statistics are inputs (a model exported in
    evaluation reads its running statistics; the moments of a batch, in training, have no
    converter). A missing weight is ones, a missing bias zeros."""
    x, mean, var, *params = b.operands(node, node.dtype)
    c = int(b.dims(node)[1])                  # (N, C, ...): the rule's
    w = params[0] if node.attrs["weight"] else \
        b.const(np.ones(c, node.dtype.np), name="ones")
    bias = params[-1] if node.attrs["bias"] else \
        b.const(np.zeros(c, node.dtype.np), name="zeros")
    return b.emit("BatchNormalization", [x, w, bias, mean, var],
                  epsilon=float(node.attrs["eps"]), name=node.name)


@converter("lstm_cell")
def _lstm_cell(b, node, ins):
    """``stack([h', c', i, f, g, o])`` of one LSTM step (the activated gates last), in ONNX's
    elementwise ops."""
    xw, hw, c = b.operands(node, node.dtype)
    i, f, g, o = b.emit("Split", [b.emit("Add", [xw, hw])], axis=-1, outputs=4)  # equal parts
    i, f, o = (b.emit("Sigmoid", [v]) for v in (i, f, o))
    g = b.emit("Tanh", [g])
    c_new = b.emit("Add", [b.emit("Mul", [f, c]), b.emit("Mul", [i, g])])
    h_new = b.emit("Mul", [o, b.emit("Tanh", [c_new])])
    zero = b.const(np.asarray([0], np.int64), name="axis0")
    # c' has the step's whole shape; the gates may broadcast over c's leading dims
    shape = b.emit("Shape", [c_new])
    planes = [v if k < 2 else b.emit("Expand", [v, shape]) for k, v in
              enumerate((h_new, c_new, i, f, g, o))]
    return b.emit("Concat", [b.emit("Unsqueeze", [v, zero]) for v in planes], axis=0,
                  name=node.name)


def _unrolled_lstm(b, node, name, length, xw, w_hh, h, c):
    """An LSTM's time loop unrolled over its ``length`` (which must not follow a dynamic
    axis): each step's planes (h, c, i, f, g, o) in ONNX's elementwise ops, from the input's
    projection ``xw`` (L, ..., 4H)."""
    if not isinstance(length, int) or length == 0:
        raise OnnxExportError(
            f"lk.onnx.export: op '{name}' (node '{node.name}') runs an LSTM over "
            f"{'a sequence whose length follows a dynamic axis' if length else 'no steps'}; "
            f"labkit writes its loop unrolled, so export it with a fixed sequence length")
    w_t = b.emit("Transpose", [w_hh], perm=[1, 0])
    steps = []
    for t in range(length):
        x_t = b.emit("Gather", [xw, b.const(np.asarray(t, np.int64), name="step")], axis=0)
        i, f, g, o = b.emit("Split", [b.emit("Add", [x_t, b.emit("MatMul", [h, w_t])])],
                            axis=-1, outputs=4)
        i, f, o = (b.emit("Sigmoid", [v]) for v in (i, f, o))
        g = b.emit("Tanh", [g])
        c = b.emit("Add", [b.emit("Mul", [f, c]), b.emit("Mul", [i, g])])
        h = b.emit("Mul", [o, b.emit("Tanh", [c])])
        steps.append((h, c, i, f, g, o))
    return steps


@converter("lstm_sequence")
def _lstm_sequence(b, node, ins):
    """The unrolled loop's planes h, c, i, f, g, o stacked, (6, L, ..., H)."""
    xw, w_hh, h, c = b.operands(node, node.dtype)
    zero, one = (b.const(np.asarray([k], np.int64), name=f"axis{k}") for k in (0, 1))
    steps = [b.emit("Unsqueeze", [b.emit("Concat", [b.emit("Unsqueeze", [v, zero])
                                                    for v in planes], axis=0), one])
             for planes in _unrolled_lstm(b, node, "lstm_sequence", b.dims(node)[1], xw, w_hh,
                                          h, c)]
    return b.emit("Concat", steps, axis=1, name=node.name)


@converter("lstm_layer")
def _lstm_layer(b, node, ins):
    """The input's projection (MatMul and Add), the unrolled loop, then every step's h and the
    last step's c stacked, (L + 1, ..., H)."""
    x, w_ih, w_hh, h, c, *bias = b.operands(node, node.dtype)
    xw = b.emit("MatMul", [x, b.emit("Transpose", [w_ih], perm=[1, 0])])
    if bias:
        xw = b.emit("Add", [xw, bias[0]])
    zero = b.const(np.asarray([0], np.int64), name="axis0")
    length = b.dims(node)[0]
    steps = _unrolled_lstm(b, node, "lstm_layer", length - 1 if isinstance(length, int) else
                           length, xw, w_hh, h, c)
    rows = [b.emit("Unsqueeze", [planes[0], zero]) for planes in steps]
    # c' has the step's whole shape; h0 and c0 may broadcast over x's dims
    return b.emit("Concat", rows + [b.emit("Unsqueeze", [steps[-1][1], zero])], axis=0,
                  name=node.name)


@converter("leaky_relu")
def _leaky_relu(b, node, ins):
    (x,) = b.operands(node, node.dtype)
    return b.emit("LeakyRelu", [x], alpha=float(node.attrs.get("negative_slope", 0.01)),
                  name=node.name)


@converter("smooth_l1")
def _smooth_l1(b, node, ins):
    """``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta``."""
    (d,) = b.operands(node, node.dtype)
    beta = float(node.attrs["beta"])
    const = lambda v: b.const(np.asarray(v, node.dtype.np), name="scalar")  # noqa: E731
    a = b.emit("Abs", [d])
    quadratic = b.emit("Mul", [b.emit("Mul", [a, a]), const(0.5 / beta)])
    linear = b.emit("Sub", [a, const(0.5 * beta)])
    return b.emit("Where", [b.emit("Less", [a, const(beta)]), quadratic, linear], name=node.name)
