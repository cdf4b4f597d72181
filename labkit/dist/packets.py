"""Packets: named arrays laid out in one byte buffer behind a small header of int64 slots, so
that a group of tensors travels as one MPI message of raw memory (``Send``/``Irecv`` of the
buffer), never pickled.

Both ends build the same ``Packing`` from the same shapes and dtypes (the parameter server
and its workers do, from the model), so nothing but the bytes has to travel. The arrays are
views into the buffer: a server's parameters can *be* the views of the buffer it sends, and a
worker's the views of the buffer it receives into, with no copy on either side.

>>> import numpy as np
>>> packing = Packing([("w", (2, 3), "float32"), ("b", (3,), "float64")], header=2)
>>> buf = packing.empty()
>>> views = packing.views(buf)
>>> views["w"][...] = 1.0; packing.header(buf)[:] = [7, 0]
>>> copy = np.frombuffer(buf.tobytes(), np.uint8)           # what a receiver would get
>>> float(packing.views(copy)["w"].sum()), packing.header(copy).tolist()
(6.0, [7, 0])
"""
import numpy as np

ALIGN = 64                   # each array starts on a cache line


class Packing:
    """The layout of ``specs`` (``(name, shape, dtype)``, in order) after ``header`` int64
    slots; ``nbytes`` is the size of a buffer holding them all."""

    def __init__(self, specs, header):
        self.header_slots = int(header)
        self.specs = [(name, tuple(int(s) for s in shape), np.dtype(dtype))
                      for name, shape, dtype in specs]
        self.offsets = {}
        offset = -(-8 * self.header_slots // ALIGN) * ALIGN
        for name, shape, dtype in self.specs:
            self.offsets[name] = offset
            size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            offset += -(-size // ALIGN) * ALIGN
        self.nbytes = max(offset, 8 * self.header_slots)

    def empty(self):
        """A zeroed buffer for this layout (uint8, starting on a cache line)."""
        raw = np.zeros(self.nbytes + ALIGN, np.uint8)
        skip = -raw.ctypes.data % ALIGN
        return raw[skip:skip + self.nbytes]

    def header(self, buf):
        """The header slots of ``buf`` (an int64 view)."""
        return buf[:8 * self.header_slots].view(np.int64)

    def views(self, buf):
        """``{name: array}``: each array a view into ``buf``."""
        out = {}
        for name, shape, dtype in self.specs:
            lo = self.offsets[name]
            size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            out[name] = buf[lo:lo + size].view(dtype).reshape(shape)
        return out


def put_float(slots, i, value):
    """Store a float64 in int64 header slot ``i`` (its bits)."""
    slots[i:i + 1].view(np.float64)[0] = value


def get_float(slots, i):
    """The float64 stored by ``put_float`` in slot ``i``."""
    return float(slots[i:i + 1].view(np.float64)[0])
