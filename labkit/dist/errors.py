"""Errors of ``labkit.dist``: a worker that failed, and misuse of the launcher or collectives."""
from ..errors import LabkitError


class DistError(LabkitError, RuntimeError):
    """Misuse or failure of the distributed layer: a missing MPI runtime, a bad ``n``, a collective
    called with tensors that do not fit, a cluster that is closed."""


class WorkerError(LabkitError, RuntimeError):
    """A worker raised an exception (or died) while running the launched function.

    Attributes: ``rank`` (the worker that failed first), ``world_size``, ``remote_type`` (the name
    of the exception's class on the worker), ``remote_message``, ``remote_traceback`` (the
    worker's traceback as text), ``exception`` (the worker's exception object when it could be
    sent back, else None) and ``failed_ranks`` (every rank that failed before the others were
    stopped).

    >>> import labkit as lk
    >>> e = lk.dist.WorkerError(1, 2, "ValueError", "bad input", "Traceback ...")
    >>> print(str(e).splitlines()[0])
    worker rank 1 (of 2) raised ValueError: bad input
    """

    def __init__(self, rank, world_size, remote_type, remote_message, remote_traceback,
                 exception=None, failed_ranks=None, note=None):
        self.rank = rank
        self.world_size = world_size
        self.remote_type = remote_type
        self.remote_message = remote_message
        self.remote_traceback = remote_traceback
        self.exception = exception
        self.failed_ranks = list(failed_ranks) if failed_ranks else [rank]
        self.note = note
        super().__init__(self._text())

    def _text(self):
        head = (f"worker rank {self.rank} (of {self.world_size}) raised "
                f"{self.remote_type}: {self.remote_message}")
        lines = [head]
        if self.remote_traceback:
            lines += ["", f"Traceback on rank {self.rank}:", self.remote_traceback.rstrip()]
        others = [r for r in self.failed_ranks if r != self.rank]
        if others:
            lines += ["", f"Ranks {', '.join(map(str, others))} failed too (only rank "
                          f"{self.rank}'s traceback is shown; see .failed_ranks)."]
        if self.note:
            lines += ["", self.note]
        return "\n".join(lines)

    def __reduce__(self):
        return (WorkerError, (self.rank, self.world_size, self.remote_type, self.remote_message,
                              self.remote_traceback, None, self.failed_ranks, self.note))


class WorkerTimeout(LabkitError, TimeoutError):
    """Workers had not returned within the ``timeout=`` of ``launch`` or ``Cluster.run``; they
    were stopped. Attributes: ``ranks`` (those still running), ``world_size``, ``timeout``.

    >>> import labkit as lk
    >>> print(lk.dist.WorkerTimeout([1], 2, 5.0, "They were stopped.").args[0])
    rank 1 (of 2) had not returned after 5 s (timeout=5.0). They were stopped.
    """

    def __init__(self, ranks, world_size, timeout, note=""):
        self.ranks = list(ranks)
        self.world_size = world_size
        self.timeout = timeout
        self.note = note
        which = "rank" if len(self.ranks) == 1 else "ranks"
        super().__init__(f"{which} {', '.join(map(str, self.ranks))} (of {world_size}) had not "
                         f"returned after {timeout:g} s (timeout={timeout!r}). {note}".rstrip())

    def __reduce__(self):
        return (WorkerTimeout, (self.ranks, self.world_size, self.timeout, self.note))
