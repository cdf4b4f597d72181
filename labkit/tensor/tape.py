"""The tape entry that eager autodiff records: which op made a tensor, from what.

A tensor that needs a gradient holds its ``TapeNode``; the node holds the op's inputs (so they
stay alive exactly as long as something downstream may differentiate through them) and the output
array, but not the output Tensor: there are no reference cycles, so when the last tensor of a
computation is dropped its whole tape is freed at once by reference counting, as in PyTorch.
The backward engine (labkit.autodiff) walks these nodes.
"""

import itertools

from .tensor import Tensor
from .versions import epoch as _epoch

_sequence = itertools.count()   # the order entries are recorded in (backward runs it reversed)

_make = Tensor._make


class TapeNode:
    __slots__ = ("op", "inputs", "attrs", "out", "device", "epoch", "out_version", "seq",
                 "__weakref__")

    def __init__(self, op, inputs, attrs, out, device, out_version=None):
        self.op = op
        self.inputs = inputs   # tuple of Tensors / scalars as passed to the op; None once freed
        self.attrs = attrs
        self.out = out         # the output array (the vjp's ``out`` argument)
        self.device = device
        self.epoch = _epoch[0]            # in-place writes before this entry (versions.py)
        self.out_version = out_version    # the output tensor's version counter
        self.seq = next(_sequence)        # recorded after every entry it reads from

    def output_tensor(self, linked):
        """The output as a Tensor for the vjp rule; ``linked``: part of a recorded backward."""
        return _make(self.out, self.device, linked, self if linked else None)

    def free(self):
        """Drop what backward needed; a second backward through this node is then an error."""
        self.inputs = None
        self.out = None

    @property
    def freed(self):
        return self.inputs is None

    def __repr__(self):
        return f"<TapeNode {self.op.name}{' (freed)' if self.inputs is None else ''}>"
