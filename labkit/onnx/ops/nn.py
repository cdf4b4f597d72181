"""Products and normalisation: matmul (with its transposes) and layer_norm."""
import numpy as np

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
