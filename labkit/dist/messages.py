"""labkit's own small messages between ranks (the arguments the ranks compare before a
collective, the seed of a script, NCCL's id): JSON text in MPI byte buffers, never pickled, so
what another process sends is only ever read as data (mpi4py's lower-case methods unpickle).

Values are what JSON holds: numbers, strings, None, lists and dicts with string keys; a tuple
arrives as a list (or, with ``tuples=True``, every list as a tuple).

>>> from mpi4py import MPI
>>> allgather(MPI.COMM_SELF, {"shape": (2, 3), "dtype": "float32"})
[{'shape': [2, 3], 'dtype': 'float32'}]
>>> bcast(MPI.COMM_SELF, 1234)
1234
"""
import json

import numpy as np


def _encode(value):
    return np.frombuffer(json.dumps(value, separators=(",", ":")).encode("utf-8"), np.uint8)


def _decode(buffer, tuples=False):
    value = json.loads(buffer.tobytes().decode("utf-8"))
    return _as_tuples(value) if tuples else value


def _as_tuples(value):
    if isinstance(value, list):
        return tuple(_as_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _as_tuples(v) for k, v in value.items()}
    return value


def allgather(comm, value, tuples=False):
    """Every rank's ``value``, in rank order (all ranks call it); ``tuples``: lists come back
    as tuples.

    >>> from mpi4py import MPI
    >>> allgather(MPI.COMM_SELF, [("w", (2, 3))], tuples=True)
    [(('w', (2, 3)),)]
    """
    from mpi4py import MPI
    mine = _encode(value)
    sizes = np.empty(comm.Get_size(), np.int64)
    comm.Allgather(np.array([mine.size], np.int64), sizes)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    everyone = np.empty(int(sizes.sum()), np.uint8)
    comm.Allgatherv(mine, [everyone, sizes.tolist(), starts.tolist(), MPI.BYTE])
    return [_decode(everyone[s:s + n], tuples) for s, n in zip(starts, sizes)]


def bcast(comm, value, root=0):
    """Rank ``root``'s ``value`` on every rank (the others' ``value`` is not read)."""
    mine = _encode(value) if comm.Get_rank() == root else None
    size = np.array([mine.size if mine is not None else 0], np.int64)
    comm.Bcast(size, root=root)
    buffer = mine if mine is not None else np.empty(int(size[0]), np.uint8)
    comm.Bcast(buffer, root=root)
    return _decode(buffer)
