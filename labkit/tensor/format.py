"""How a tensor prints: values like PyTorch, with dtype, device and grad info when not default."""
import numpy as np


def format_tensor(t):
    data = t.numpy(force=True) if t.device.type == "cpu" else t._data.get()
    body = np.array2string(data, separator=", ", prefix="tensor(", threshold=200, edgeitems=3,
                           precision=4)
    extras = []
    if t.dtype.name not in ("float32", "int64"):   # PyTorch's convention: defaults unsaid
        extras.append(f"dtype={t.dtype}")
    if t.device.name != "cpu:0":
        extras.append(f"device='{t.device}'")
    if t._node is not None:
        extras.append(f"grad_fn={t._node.op.name}")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"
