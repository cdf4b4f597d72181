"""Sharded embedding tables: Part, Gather and Stitch, as in TensorFlow's sparse embeddings.

A table of ``num_rows`` rows is split by rows into ``num_shards`` contiguous ranges (the first
``num_rows % num_shards`` shards get one row more, like ``numpy.array_split``); shard ``s`` holds
rows ``bounds[s] .. bounds[s + 1] - 1``. A lookup of some indices is three steps:

- ``part(indices, bounds)``: route each index to its shard; for every shard, the *local* row
  numbers it must read and the positions in ``indices`` they came from;
- ``gather(shard, local)``: on each shard, read those rows;
- ``stitch(positions, pieces, n)``: put the pieces back in the order of ``indices``.

These are plain array functions (NumPy or CuPy arrays in, arrays out), not labkit ops: they run
on the parameter servers and on the workers around the messages, and carry no gradient. The
gradient of a lookup is taken on the worker with respect to the stitched rows only, so the
update sent back to a shard holds just the rows that were read (``combine_rows`` sums the
gradients of repeated rows first).

>>> import numpy as np
>>> table = np.arange(10.0).reshape(5, 2)
>>> bounds = row_bounds(5, 2)                      # shard 0: rows 0-2, shard 1: rows 3-4
>>> bounds.tolist()
[0, 3, 5]
>>> local, positions = part(np.array([4, 0, 3]), bounds)
>>> [l.tolist() for l in local], [p.tolist() for p in positions]
([[0], [1, 0]], [[1], [0, 2]])
>>> shards = [table[0:3], table[3:5]]
>>> pieces = [gather(shards[s], local[s]) for s in range(2)]
>>> stitch(positions, pieces, 3).tolist()         # rows 4, 0 and 3 of the table
[[8.0, 9.0], [0.0, 1.0], [6.0, 7.0]]
"""
import numpy as np


def row_bounds(num_rows, num_shards):
    """Row offsets of ``num_shards`` contiguous shards of a table of ``num_rows`` rows: an int64
    array of ``num_shards + 1`` offsets, starting at 0 and ending at ``num_rows``.

    >>> row_bounds(7, 3).tolist()
    [0, 3, 5, 7]
    """
    if num_shards < 1:
        raise ValueError(f"row_bounds: num_shards must be >= 1, got {num_shards}")
    base, extra = divmod(int(num_rows), int(num_shards))
    sizes = [base + (1 if s < extra else 0) for s in range(num_shards)]
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def shard_of(indices, bounds):
    """The shard number of each row index (an int64 array shaped like ``indices``).

    >>> shard_of(np.array([0, 2, 3, 6]), row_bounds(7, 3)).tolist()
    [0, 0, 1, 2]
    """
    indices = np.asarray(indices, dtype=np.int64)
    if indices.size and (indices.min() < 0 or indices.max() >= bounds[-1]):
        bad = int(indices.min() if indices.min() < 0 else indices.max())
        raise IndexError(f"sharded embedding: row {bad} is outside the table of {bounds[-1]} "
                         f"rows (valid: 0..{bounds[-1] - 1})")
    return np.searchsorted(bounds, indices, side="right") - 1


def part(indices, bounds):
    """Route ``indices`` (1-d) to the shards given by ``bounds``: returns ``(local, positions)``,
    two lists with one int64 array per shard: ``local[s]`` the row numbers within shard ``s``,
    ``positions[s]`` where in ``indices`` they stand (so ``indices[positions[s]] ==
    local[s] + bounds[s]``). A shard no index falls in gets empty arrays.

    >>> local, positions = part(np.array([5, 1, 6]), row_bounds(7, 2))
    >>> [l.tolist() for l in local], [p.tolist() for p in positions]
    ([[1], [1, 2]], [[1], [0, 2]])
    """
    indices = np.asarray(indices, dtype=np.int64).reshape(-1)
    shard = shard_of(indices, bounds)
    local, positions = [], []
    for s in range(len(bounds) - 1):
        where = np.flatnonzero(shard == s)
        positions.append(where)
        local.append(indices[where] - bounds[s])
    return local, positions


def gather(shard, local):
    """Rows ``local`` of one shard (an array of shape ``(len(local), *shard.shape[1:])``, a copy).

    >>> gather(np.arange(6.0).reshape(3, 2), np.array([2, 0])).tolist()
    [[4.0, 5.0], [0.0, 1.0]]
    """
    return shard[np.asarray(local, dtype=np.int64)]


def stitch(positions, pieces, n):
    """Reassemble the pieces gathered from each shard into one array of ``n`` rows, row
    ``positions[s][k]`` taken from ``pieces[s][k]`` (the inverse of ``part``).

    >>> stitch([np.array([1]), np.array([0])], [np.ones((1, 2)), np.zeros((1, 2))], 2).tolist()
    [[0.0, 0.0], [1.0, 1.0]]
    """
    first = next((p for p in pieces if p is not None), None)
    if first is None:
        raise ValueError("stitch needs at least one piece")
    out = np.empty((int(n),) + tuple(first.shape[1:]), dtype=first.dtype)
    for where, piece in zip(positions, pieces):
        if len(where):
            out[where] = piece
    return out


def combine_rows(indices, rows):
    """Sum rows that share an index: ``indices`` (a list of 1-d int arrays) and ``rows`` (the
    matching list of arrays) -> ``(unique sorted indices, summed rows)``. Used to merge the
    sparse gradients of several lookups or several workers before one update.

    >>> i, r = combine_rows([np.array([3, 1]), np.array([3])],
    ...                     [np.array([[1.0], [2.0]]), np.array([[10.0]])])
    >>> i.tolist(), r.tolist()
    ([1, 3], [[2.0], [11.0]])
    """
    indices = np.concatenate([np.asarray(i, dtype=np.int64).reshape(-1) for i in indices])
    rows = np.concatenate([np.asarray(r) for r in rows])
    unique, inverse = np.unique(indices, return_inverse=True)
    out = np.zeros((len(unique),) + rows.shape[1:], dtype=rows.dtype)
    np.add.at(out, inverse.reshape(-1), rows)
    return unique, out
