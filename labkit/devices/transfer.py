"""Moving arrays between devices: the one place that knows how (host<->GPU, GPU<->GPU)."""
import numpy as np

from ..errors import DTypeError
from .device import get_device


def transfer(array, src, dst):
    """Return ``array`` (living on device ``src``) as an array on device ``dst``.

    Same device: the array itself, no copy. CPU->GPU and GPU->CPU go through the host;
    GPU->GPU uses a peer copy where CUDA allows it (CuPy's ``copy`` under the target device).
    """
    src, dst = get_device(src), get_device(dst)
    if src is dst:
        return array
    if dst.type == "cpu":
        if src.type == "cpu":  # virtual CPU devices share the host's memory
            return array
        return array.get()
    with dst.activate():
        if src.type == "cpu":
            try:
                return dst.xp.asarray(np.asarray(array, order="C"))   # keeps 0-d arrays 0-d
            except (TypeError, ValueError) as exc:
                if array.dtype.name != "bfloat16":
                    raise
                raise DTypeError(
                    f"cannot move a bfloat16 array to {dst.name}: this CuPy has no bfloat16 "
                    f"({exc}). On a GPU use float16 (lk.autocast('cuda') runs in float16 by "
                    f"default), or convert first: x.float().to('{dst.name}').") from None
        return dst.xp.array(array, copy=True)
