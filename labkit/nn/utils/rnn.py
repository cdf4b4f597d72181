"""Batches of sequences of different lengths, as PyTorch's ``torch.nn.utils.rnn``: padded
(``pad_sequence``) or packed (``PackedSequence``: the steps of every sequence interleaved in time
order, the batch sorted by length so each step's batch is a prefix of the previous one's).

Packing and unpacking are one gather each (an index computed from the lengths, which must be
known: a list, or a tensor holding values), so they are differentiable and capture like any
other op.

>>> import labkit as lk
>>> from labkit.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
>>> padded = pad_sequence([lk.tensor([1.0, 2.0, 3.0]), lk.tensor([4.0])], batch_first=True)
>>> padded.tolist()
[[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]]
>>> packed = pack_padded_sequence(padded, [3, 1], batch_first=True)
>>> packed.data.tolist(), packed.batch_sizes.tolist()
([1.0, 4.0, 2.0, 3.0], [2, 1, 1])
>>> out, lengths = pad_packed_sequence(packed, batch_first=True)
>>> out.tolist(), lengths.tolist()
([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]], [3, 1])
"""
from collections import namedtuple

import numpy as np

from ...errors import ShapeError, describe
from ...tensor.creation import full, tensor
from ...tensor.ops.index import getitem
from ...tensor.ops.shape import concat
from ...tensor.tensor import Tensor
from ...tensor.tensor import concrete

__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "pack_sequence", "unpad_sequence", "unpack_sequence", "invert_permutation"]


def _int64(values, device=None):
    return tensor(np.asarray(values, dtype=np.int64), device=device)


def _ints(name, values):
    """Python ints from a list, a NumPy array or a tensor that holds values."""
    if isinstance(values, Tensor):
        if concrete(values) is None:
            raise ShapeError(
                f"{name}: the lengths are a symbolic tensor ({describe(values)}), but packing "
                f"needs their values when the function is traced. Pass them as a Python list "
                f"(lengths.tolist() outside the captured function).")
        values = values.tolist()
    return [int(v) for v in np.asarray(values).reshape(-1)]


def invert_permutation(permutation):
    """The permutation that undoes ``permutation`` (None stays None)."""
    if permutation is None:
        return None
    order = np.asarray(_ints("invert_permutation", permutation))
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size)
    return _int64(inverse, getattr(permutation, "device", None))


class PackedSequence(namedtuple("PackedSequence",
                                ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """A packed batch of sequences, as PyTorch's: ``data`` (sum of lengths, *) holds step 0 of
    every sequence, then step 1 of those still going, ...; ``batch_sizes[t]`` (int64, on the
    CPU) is how many sequences have a step ``t``; ``sorted_indices`` orders the original batch
    by decreasing length (None when it was sorted already) and ``unsorted_indices`` undoes it.

    Make one with :func:`pack_padded_sequence` or :func:`pack_sequence`; the recurrent layers
    take it as input and return one.
    """
    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if batch_sizes is None:
            raise TypeError("PackedSequence(data, batch_sizes, ...): batch_sizes is required; "
                            "make packed sequences with pack_padded_sequence or pack_sequence")
        if not isinstance(batch_sizes, Tensor):
            batch_sizes = _int64(_ints("PackedSequence", batch_sizes))
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _sizes(self):
        """``batch_sizes`` as a list of Python ints."""
        return _ints("PackedSequence", self.batch_sizes)

    def to(self, *args, **kwargs):
        """The same packed sequence with ``data`` moved or cast (``data.to(...)``); the indices
        follow the data's device, ``batch_sizes`` stays on the CPU, as in PyTorch."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        move = (lambda t: None if t is None else t.to(data.device))
        return type(self)(data, self.batch_sizes, move(self.sorted_indices),
                          move(self.unsorted_indices))

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("gpu" if device is None else device)

    def double(self):
        return self.to(dtype="float64")

    def float(self):
        return self.to(dtype="float32")

    def half(self):
        return self.to(dtype="float16")

    def bfloat16(self):
        return self.to(dtype="bfloat16")

    @property
    def is_cuda(self):
        return self.data.device.type == "gpu"

    def is_pinned(self):
        return False


def _batch_dims(batch_first):
    return (1, 0) if batch_first else (0, 1)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch ``input`` (L, B, *) (or (B, L, *) with ``batch_first``) whose
    sequence ``b`` has ``lengths[b]`` real steps.

    With ``enforce_sorted=True`` the lengths must be in decreasing order; with False the batch
    is sorted here and ``unsorted_indices`` remembers the original order (the recurrent layers
    and :func:`pad_packed_sequence` restore it).

    >>> import labkit as lk
    >>> x = lk.tensor([[1.0, 4.0], [0.0, 5.0], [0.0, 6.0]])       # (L=3, B=2)
    >>> p = lk.nn.utils.rnn.pack_padded_sequence(x, [1, 3], enforce_sorted=False)
    >>> p.data.tolist(), p.batch_sizes.tolist(), p.sorted_indices.tolist()
    ([4.0, 1.0, 5.0, 6.0], [2, 1, 1], [1, 0])
    """
    name = "pack_padded_sequence"
    lengths = _ints(name, lengths)
    time_dim, batch_dim = _batch_dims(batch_first)
    if input.ndim < 2:
        raise ShapeError(f"{name}: input must be a padded batch (L, B, *) (or (B, L, *) with "
                         f"batch_first=True), got {describe(input)}")
    batch, steps = input.shape[batch_dim], input.shape[time_dim]
    if len(lengths) != batch:
        raise ShapeError(f"{name}: expected len(lengths) to be equal to batch_size, but got "
                         f"{len(lengths)} (batch_size={batch}) for input {describe(input)}"
                         + ("" if batch_first else
                            "; is the input batch-first (pass batch_first=True)?"))
    if lengths and min(lengths) <= 0:
        raise ShapeError(f"{name}: length of all samples has to be greater than 0, but found "
                         f"an element in 'lengths' that is <= 0: {lengths}")
    if lengths and max(lengths) > steps:
        raise ShapeError(f"{name}: a length of {max(lengths)} does not fit input "
                         f"{describe(input)}, whose {'second' if batch_first else 'first'} "
                         f"dimension holds {steps} steps")
    if enforce_sorted:
        if any(a < b for a, b in zip(lengths, lengths[1:])):
            raise ShapeError(
                f"{name}: `lengths` array must be sorted in decreasing order when "
                f"`enforce_sorted` is True (got {lengths}). You can pass "
                f"`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                f"sidestep this requirement.")
        order = np.arange(batch)
        sorted_indices = None
    else:
        order = np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")
        sorted_indices = _int64(order, input.device)
    ordered = np.asarray(lengths, dtype=np.int64)[order]
    sizes = [int((ordered > t).sum()) for t in range(int(ordered[0]) if batch else 0)]
    t_idx = np.concatenate([np.full(n, t) for t, n in enumerate(sizes)]) if sizes else \
        np.zeros(0, np.int64)
    b_idx = np.concatenate([order[:n] for n in sizes]) if sizes else np.zeros(0, np.int64)
    pair = (b_idx, t_idx) if batch_first else (t_idx, b_idx)
    data = getitem(input, tuple(_int64(i, input.device) for i in pair))
    return PackedSequence(data, _int64(sizes), sorted_indices,
                          invert_permutation(sorted_indices))


def _positions(sizes):
    """For a packed sequence's ``sizes``: (lengths in sorted order, start row of each step)."""
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if sizes else \
        np.zeros(0, np.int64)
    lengths = np.array([sum(1 for n in sizes if n > j) for j in range(sizes[0] if sizes else 0)],
                       dtype=np.int64)
    return lengths, starts


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Undo :func:`pack_padded_sequence`: (padded batch (L, B, *) or (B, L, *), lengths).

    The batch comes back in its original order, positions past each length hold
    ``padding_value``; ``total_length`` pads to that many steps (at least the longest).
    ``lengths`` is an int64 tensor on the CPU, as in PyTorch.
    """
    data = sequence.data
    sizes = sequence._sizes()
    lengths, starts = _positions(sizes)
    steps = len(sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"pad_packed_sequence: expected total_length to be at least the "
                             f"length of the longest sequence in input, but got "
                             f"total_length={total_length} and max sequence length being "
                             f"{steps}")
        steps = int(total_length)
    batch = len(lengths)
    # index into data with one extra row of padding_value at its end
    index = np.full((steps, batch), data.shape[0], dtype=np.int64)
    for t, (n, s) in enumerate(zip(sizes, starts)):
        index[t, :n] = s + np.arange(n)
    if sequence.unsorted_indices is not None:
        unsorted = np.asarray(_ints("pad_packed_sequence", sequence.unsorted_indices))
        index, lengths = index[:, unsorted], lengths[unsorted]
    if batch_first:
        index = index.T
    pad_row = full((1,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype,
                   device=data.device)
    padded = getitem(concat(data, pad_row, dim=0), _int64(index, data.device))
    return padded, _int64(lengths)


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack sequences (L_i, *) of different lengths into one padded batch (L, B, *) (or
    (B, L, *) with ``batch_first``), filling with ``padding_value`` on ``padding_side``
    ('right' or 'left').

    >>> import labkit as lk
    >>> lk.nn.utils.rnn.pad_sequence([lk.ones(2), lk.ones(1)], padding_side="left").tolist()
    [[1.0, 0.0], [1.0, 1.0]]
    """
    if isinstance(sequences, Tensor):
        sequences = [getitem(sequences, i) for i in range(sequences.shape[0])]
    sequences = list(sequences)
    if not sequences:
        raise ShapeError("pad_sequence: received an empty list of sequences; pass at least one "
                         "tensor (L_i, *)")
    if padding_side not in ("right", "left"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got "
                         f"{padding_side!r}")
    first = sequences[0]
    if any(s.ndim == 0 or tuple(s.shape[1:]) != tuple(first.shape[1:]) for s in sequences):
        raise ShapeError(f"pad_sequence: every sequence must be (L_i, *) with the same trailing "
                         f"dimensions; got {', '.join(describe(s) for s in sequences)}")
    lengths = [s.shape[0] for s in sequences]
    steps, total = max(lengths), sum(lengths)
    index = np.full((steps, len(sequences)), total, dtype=np.int64)
    start = 0
    for b, n in enumerate(lengths):
        rows = np.arange(n) if padding_side == "right" else np.arange(steps - n, steps)
        index[rows, b] = start + np.arange(n)
        start += n
    if batch_first:
        index = index.T
    pad_row = full((1,) + tuple(first.shape[1:]), padding_value, dtype=first.dtype,
                   device=first.device)
    return getitem(concat(*sequences, pad_row, dim=0), _int64(index, first.device))


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of sequences (L_i, *) (decreasing lengths unless ``enforce_sorted=False``).

    >>> import labkit as lk
    >>> p = lk.nn.utils.rnn.pack_sequence([lk.tensor([1.0, 2.0]), lk.tensor([3.0])])
    >>> p.data.tolist(), p.batch_sizes.tolist()
    ([1.0, 3.0, 2.0], [2, 1])
    """
    sequences = list(sequences)
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences in a padded batch, each cut to its length."""
    lengths = _ints("unpad_sequence", lengths)
    if batch_first:
        return [getitem(padded_sequences, (b, slice(0, n))) for b, n in enumerate(lengths)]
    return [getitem(padded_sequences, (slice(0, n), b)) for b, n in enumerate(lengths)]


def unpack_sequence(packed_sequences):
    """The list of sequences in a packed batch, in the original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
