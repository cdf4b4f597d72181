"""How a tensor prints: values like PyTorch, with dtype, device and grad info when not default."""
import numpy as np

from .dtypes import default_complex_dtype


def format_tensor(t):
    data = t.numpy() if t.device.type == "cpu" else t._data.get()
    if t.dtype.name == "bfloat16":     # ml_dtypes prints whole values as integers ([1 2])
        data = data.astype(np.float32)
    body = np.array2string(data, separator=", ", prefix="tensor(", threshold=200, edgeitems=3,
                           precision=4)
    extras = []
    # PyTorch's convention: default dtypes unsaid
    if t.dtype.name not in ("float32", "int64") and t.dtype is not default_complex_dtype():
        extras.append(f"dtype={t.dtype}")
    if t.device.name != "cpu:0":
        extras.append(f"device='{t.device.name}'")
    if t._node is not None:
        extras.append(f"grad_fn={t._node.op.name}")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"
